#!/usr/bin/env bash
# Stops the cluster scripts/up.sh started (same CAIRN_* knobs): the API forward, the
# agent, every container of the private containerd, containerd, cairn-control and the
# registry, each by the PID in $CAIRN_RUN_DIR/<name>.pid; then unmounts what is left under
# the runtime dirs (pinned pod namespaces, container root filesystems), deletes the
# network namespace and the pods' cgroups, and removes $CAIRN_RUN_DIR.
# Keeps the data in $CAIRN_HOME (store, images, containers' records) and the logs.
# --quiet: no progress lines (up.sh runs it first to clear a previous instance).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cluster-env.sh
. scripts/cluster-env.sh

quiet=
[ "${1:-}" = --quiet ] && quiet=1
say() { [ -n "$quiet" ] || echo "down: $*"; }
[ "$(id -u)" = 0 ] || die "run me as root"

cmdline() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null || true; }

# pid_of NAME EXPECT: the PID recorded for NAME if that process still runs and its command
# line contains EXPECT (a recycled PID is never signalled).
pid_of() {
    local pid
    pid=$(cat "$CAIRN_RUN_DIR/$1.pid" 2>/dev/null) || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [[ "$(cmdline "$pid")" == *"$2"* ]] || return 1
    echo "$pid"
}

# session_members SID: every process of that session (up.sh starts each daemon with setsid).
session_members() { ps -e -o pid=,sid= | awk -v s="$1" '$2 == s { print $1 }'; }

# alive PID: running (a zombie waiting for a slow reaper counts as gone).
alive() {
    local stat
    stat=$({ cat "/proc/$1/stat"; } 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

# terminate PIDS...: SIGTERM, up to 10 s to exit, then SIGKILL.
terminate() {
    local pids=("$@") left p
    [ "${#pids[@]}" -gt 0 ] || return 0
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 100); do
        left=()
        for p in "${pids[@]}"; do if alive "$p"; then left+=("$p"); fi; done
        [ "${#left[@]}" -eq 0 ] && return 0
        sleep 0.1
    done
    echo "down: ${left[*]} ignored SIGTERM for 10 s; SIGKILL" >&2
    kill -KILL "${left[@]}" 2>/dev/null || true
    for _ in $(seq 100); do
        left=()
        for p in "${pids[@]}"; do if alive "$p"; then left+=("$p"); fi; done
        [ "${#left[@]}" -eq 0 ] && return 0
        sleep 0.1
    done
}

# stop NAME EXPECT [session]: stops the recorded process (with its whole session).
stop() {
    local pid
    if pid=$(pid_of "$1" "$2"); then
        say "stopping $1 (pid $pid)"
        if [ "${3:-}" = session ]; then
            # shellcheck disable=SC2046
            terminate $(session_members "$pid")
        else
            terminate "$pid"
        fi
    fi
    rm -f "$CAIRN_RUN_DIR/$1.pid"
}

stop forward "$NETNS_PATH" session
stop proxy "$BIN/cairn-proxy"
stop agent "$BIN/cairn-agent"

# Containers go before containerd: a shim outlives its daemon by design. Their records go
# too: the pod sandboxes they belong to are pinned namespaces under $CAIRN_RUN_DIR, which do
# not survive this script, so the agent starts the pods afresh on the next up.sh. Images stay.
if pid_of containerd "$CAIRN_RUN_DIR/containerd/config.toml" >/dev/null &&
    ctr --address "$CONTAINERD_SOCKET" version >/dev/null 2>&1; then
    for ns in $(ctr --address "$CONTAINERD_SOCKET" namespaces ls -q); do
        c=(ctr --address "$CONTAINERD_SOCKET" -n "$ns")
        tasks=$("${c[@]}" tasks ls -q)
        if [ -n "$tasks" ]; then
            say "killing $(echo "$tasks" | wc -w) container(s) in containerd namespace $ns"
        fi
        for t in $tasks; do
            "${c[@]}" tasks rm -f "$t" >/dev/null 2>&1 || echo "down: could not remove task $t (namespace $ns)" >&2
        done
        for id in $("${c[@]}" containers ls -q); do
            "${c[@]}" containers rm "$id" >/dev/null 2>&1 || echo "down: could not remove container $id (namespace $ns)" >&2
        done
    done
fi
stop containerd "$CAIRN_RUN_DIR/containerd/config.toml"
# Shims (and loggers) left over, e.g. when containerd had already died: theirs name our socket
# or our pod log dir.
leftovers=()
for p in $(ls /proc | grep -E '^[0-9]+$'); do
    c=$(cmdline "$p")
    if [[ "$c" == *containerd-shim*"-address $CONTAINERD_SOCKET"* || "$c" == *cairn-logger*"path=$CAIRN_LOG_DIR/pods/"* ]]; then
        leftovers+=("$p")
    fi
done
if [ "${#leftovers[@]}" -gt 0 ]; then
    say "stopping ${#leftovers[@]} leftover shim/logger process(es)"
    terminate "${leftovers[@]}"
fi
stop control "$BIN/cairn-control"
stop registry "$CAIRN_RUN_DIR/registry.yml"

# Mounts left under the runtime and data dirs (pinned pod namespaces, root filesystems),
# deepest first.
mounts_under() {
    awk -v a="$CAIRN_RUN_DIR/" -v b="$CAIRN_HOME/" \
        'index($5, a) == 1 || index($5, b) == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
for m in $(mounts_under); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "down: could not unmount $m" >&2
done

if [ -e "$NETNS_PATH" ] || ip netns list | awk '{print $1}' | grep -qx "$CAIRN_NETNS"; then
    say "deleting network namespace $CAIRN_NETNS"
    ip netns delete "$CAIRN_NETNS"
fi

# The pods' cgroups (runc removes the containers' own; the agent's pod and QoS levels stay).
for hierarchy in /sys/fs/cgroup /sys/fs/cgroup/*/; do
    dir=${hierarchy%/}$CAIRN_CGROUP_ROOT
    if [ -d "$dir" ] && [ "$CAIRN_CGROUP_ROOT" != / ]; then
        find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
        if [ -d "$dir" ]; then echo "down: cgroup $dir is still in use" >&2; fi
    fi
done

# Runtime state only (PID files, sockets, CNI IPAM of pods that no longer exist), never
# while something is still mounted below it.
if [ -d "$CAIRN_RUN_DIR" ]; then
    if [ -n "$(mounts_under | grep -F "$CAIRN_RUN_DIR/" || true)" ]; then
        echo "down: mounts remain under $CAIRN_RUN_DIR; not removing it" >&2
    else
        rm -rf "$CAIRN_RUN_DIR"
    fi
fi
say "stopped; data kept in $CAIRN_HOME, logs in $CAIRN_LOG_DIR"
