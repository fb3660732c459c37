# cairn_link_cni: /opt/cni/bin/cairn-cni, where container runtimes look for plugins,
# pointing at the plugin in /usr/lib/cni. Made by the install script rather than shipped:
# a package holding a path under /opt owns /opt and would take it from the host on purge.
cairn_link_cni() {
    mkdir -p /opt/cni/bin
    ln -sfn /usr/lib/cni/cairn-cni /opt/cni/bin/cairn-cni
}

# cairn_unlink_cni: that link, and the directories if it was all they held.
cairn_unlink_cni() {
    if [ -L /opt/cni/bin/cairn-cni ]; then
        rm -f /opt/cni/bin/cairn-cni
        rmdir /opt/cni/bin /opt/cni 2>/dev/null || true
    fi
}

# cairn_forget_network: removes the network state cairn-node made on this host, and
# nothing else: nftables tables named cairn-* (the proxy's, its shards, its network
# policy table and IPVS helper table, the CNI plugin's and the network controller's
# masquerading), iptables chains
# named CAIRN-* with the rules that jump to them, the vxlan devices cairn.<VNI>, the IPVS
# dummy link cairn-ipvs0, the bridge named in cairn's own CNI config (only if that config
# is cairn's), that config, cairn's subnet file and its IPAM state. Run by the packages'
# purge (postrm purge, %postun on erase) once the binaries are gone, so plain tools only;
# each step tolerates what is already gone. Inlined into the scripts by packaging/build.
cairn_forget_network() {
    if command -v nft >/dev/null 2>&1; then
        nft list tables 2>/dev/null | while read -r _ family name; do
            case "$name" in
                cairn-*) nft delete table "$family" "$name" 2>/dev/null || true ;;
            esac
        done
    fi
    for ipt in iptables ip6tables; do
        command -v "$ipt" >/dev/null 2>&1 || continue
        for table in nat filter mangle; do
            # Rules of built-in chains that jump to ours, then our chains.
            "$ipt" -t "$table" -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j CAIRN-' |
                grep -vE '^-A CAIRN-' | sed 's/^-A /-D /' | while read -r rule; do
                    eval "$ipt -t $table $rule" 2>/dev/null || true
                done
            chains=$("$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(CAIRN-[^ ]*\)$/\1/p')
            for chain in $chains; do "$ipt" -t "$table" -F "$chain" 2>/dev/null || true; done
            for chain in $chains; do "$ipt" -t "$table" -X "$chain" 2>/dev/null || true; done
        done
    done
    if command -v ip >/dev/null 2>&1; then
        for link in $(ip -o link show 2>/dev/null | sed -n 's/^[0-9]*: \(cairn\.[0-9]*\)[@:].*/\1/p'); do
            ip link delete "$link" 2>/dev/null || true
        done
        ip link delete cairn-ipvs0 2>/dev/null || true
        for conf in /etc/cni/net.d/*cairn*.conflist; do
            [ -f "$conf" ] || continue
            bridge=$(sed -n 's/.*"bridge" *: *"\([^"]*\)".*/\1/p' "$conf" | head -n 1)
            if [ -n "$bridge" ] && [ -d "/sys/class/net/$bridge/bridge" ]; then
                ip link delete "$bridge" 2>/dev/null || true
            fi
            network=$(sed -n 's/.*"name" *: *"\([^"]*\)".*/\1/p' "$conf" | head -n 1)
            [ -n "$network" ] && rm -rf "/var/lib/cni/networks/$network"
            rm -f "$conf"
        done
    fi
    rm -rf /run/cairn
}

# cairn_forget_pods: the pods' containers outlive the agent (containerd's shims own
# them): kill and delete those of cairn's containerd namespace, its images, the pod
# network namespaces the agent pinned, and the pods' cgroups.
cairn_forget_pods() {
    if command -v ctr >/dev/null 2>&1 && [ -S /run/containerd/containerd.sock ]; then
        for container in $(ctr -n cairn containers ls -q 2>/dev/null); do
            ctr -n cairn tasks delete --force "$container" >/dev/null 2>&1 || true
            ctr -n cairn containers delete "$container" >/dev/null 2>&1 || true
        done
        for image in $(ctr -n cairn images ls -q 2>/dev/null); do
            ctr -n cairn images rm "$image" >/dev/null 2>&1 || true
        done
        ctr namespaces remove cairn >/dev/null 2>&1 || true
    fi
    if [ -d /run/cairn-agent ]; then
        awk '$2 ~ "^/run/cairn-agent/" { print $2 }' /proc/mounts | sort -r |
            while read -r mount; do umount "$mount" 2>/dev/null || umount -l "$mount" 2>/dev/null || true; done
        rm -rf /run/cairn-agent
    fi
    for cgroup in /sys/fs/cgroup/cairn /sys/fs/cgroup/*/cairn; do
        [ -d "$cgroup" ] && find "$cgroup" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
}

# cairn_forget_files: the node's data, logs and what `cairn-node join` wrote.
cairn_forget_files() {
    rm -rf /var/lib/cairn/agent /var/lib/cairn-agent /var/log/pods
    rm -rf /etc/cairn/node
    rmdir /etc/cairn/manifests /etc/cairn/certs.d /var/lib/cairn /etc/cairn 2>/dev/null || true
}
