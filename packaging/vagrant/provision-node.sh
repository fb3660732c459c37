#!/bin/sh
# Makes this host a cairn node from the packages and joins it with the token the control
# host left in the shared directory: the Vagrant lab's node machines run it (VMs, or
# systemd-booted containers with the docker provider, as packaging/tests/vagrant.rs
# does). A node that already joined is left as it is, so provisioning again changes
# nothing.
#
#   CAIRN_PACKAGES  directory holding cairn-node_*.deb (Debian) or cairn-node-*.rpm
#                   (RHEL family: containerd comes from Docker's repository there)
#   CAIRN_SERVER    the API, https://CONTROL:6443
#   CAIRN_NODE_IP   this node's address on the cluster's network (hosts with a NAT
#                   interface first, as Vagrant's, would otherwise pick that one)
#   CAIRN_SHARED    where provision-control.sh leaves join-token (waited for: machines
#                   may come up in parallel); image archives in its images/ are imported
#                   before the join, for nodes without a registry (as k3s's air-gap images)
#   CAIRN_AGENT_EXTRA_ARGS  optional flags added to the agent's in /etc/cairn/agent.env
set -eu
: "${CAIRN_PACKAGES:?}" "${CAIRN_SERVER:?}" "${CAIRN_NODE_IP:?}" "${CAIRN_SHARED:?}"

install_debs() {
    DEBIAN_FRONTEND=noninteractive dpkg --force-confold -i "$@" || {
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q -f -o Dpkg::Options::=--force-confold
    }
}

install_rpms() {
    if ! rpm -q --whatprovides containerd >/dev/null 2>&1; then
        dnf install -y -q dnf-plugins-core
        dnf config-manager --add-repo https://download.docker.com/linux/centos/docker-ce.repo
    fi
    dnf install -y -q "$@"
}

if command -v dpkg >/dev/null; then
    install_debs "$CAIRN_PACKAGES"/cairn-node_*.deb
else
    install_rpms "$CAIRN_PACKAGES"/cairn-node-*.x86_64.rpm
fi
if [ -e /etc/cairn/node/joined ]; then
    echo "already joined ($(tr '\n' ' ' < /etc/cairn/node/joined))"
    exit 0
fi
for image in "$CAIRN_SHARED"/images/*.tar; do
    if [ -e "$image" ]; then
        cairn-agent --root-dir /var/lib/cairn/agent import-image "$image"
    fi
done
if [ -n "${CAIRN_AGENT_EXTRA_ARGS:-}" ]; then
    sed -i "s|^CAIRN_AGENT_ARGS=\"\(.*\)\"\$|CAIRN_AGENT_ARGS=\"\1 $CAIRN_AGENT_EXTRA_ARGS\"|" /etc/cairn/agent.env
fi
echo "waiting for $CAIRN_SHARED/join-token"
timeout 600 sh -c "until [ -s '$CAIRN_SHARED/join-token' ]; do sleep 1; done"
cairn-node join --server "$CAIRN_SERVER" --token-file "$CAIRN_SHARED/join-token" \
    --node-ip "$CAIRN_NODE_IP"
