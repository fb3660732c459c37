#!/bin/sh
# A host's state as cairn's packages may change it, in a form two listings compare: the
# root filesystem's paths (without logs, caches and the package databases), nft tables,
# iptables chains, network links and mounts. The Vagrant lab's before-install hook runs
# it on each machine (writing /cairn-shared/<hostname>.before, once: `vagrant provision`
# runs it again); the package tests run it again after the purge and compare.
set -eu
out=${1:-/cairn-shared/$(hostname).before}
if [ $# -eq 0 ] && [ -e "$out" ]; then
    exit 0
fi
{
    echo "# files"
    find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp \
        -o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/log -o -path /var/cache \) \
        -prune -o -print | sort
    echo "# nft tables"
    nft list tables | sort
    echo "# iptables chains"
    for table in filter nat mangle raw; do iptables -t "$table" -S | grep '^-N' || true; done | sort
    echo "# links"
    ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
    echo "# mounts"
    awk '{print $2}' /proc/self/mounts | sort
} > "$out.tmp"
mv "$out.tmp" "$out"
