#!/bin/sh
# Run inside a lab node container (or the test container) as its first step: Docker mounts
# the container's cgroup tree read-only; fresh mounts inside the container's own cgroup
# namespace are writable and rooted at the container's cgroup (v2: one mount; v1: one per
# hierarchy), so the pods' cgroups nest under the container's, whether the host runs
# cgroup v1 or v2. Embedded in cairn-lab (docker driver) and used by
# scripts/test-in-container.sh.
set -e
mount -o remount,rw /sys
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    umount /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup
else
    for d in /sys/fs/cgroup/*; do
        [ -d "$d" ] && [ ! -L "$d" ] || continue
        c=${d##*/}
        opts=$c
        [ "$c" = systemd ] && opts=none,name=systemd
        if [ "$c" = unified ]; then
            umount "$d" && mount -t cgroup2 cgroup2 "$d"
            continue
        fi
        umount "$d" && mount -t cgroup -o "$opts" cgroup "$d"
    done
fi
