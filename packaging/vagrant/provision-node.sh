#!/bin/sh
# Makes this host a cairn node from the packages and joins it with the token the control
# host left in the shared directory: the Vagrant lab's node VMs run it, and so does
# packaging/tests/systemd_host.rs. A node that already joined is left as it is, so
# provisioning again changes nothing.
#
#   CAIRN_PACKAGES  directory holding cairn-node_*.deb
#   CAIRN_SERVER    the API, https://CONTROL:6443
#   CAIRN_NODE_IP   this node's address on the cluster's network (hosts with a NAT
#                   interface first, as Vagrant's, would otherwise pick that one)
#   CAIRN_SHARED    where provision-control.sh left join-token
set -eu
: "${CAIRN_PACKAGES:?}" "${CAIRN_SERVER:?}" "${CAIRN_NODE_IP:?}" "${CAIRN_SHARED:?}"

install_debs() {
    DEBIAN_FRONTEND=noninteractive dpkg --force-confold -i "$@" || {
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q -f -o Dpkg::Options::=--force-confold
    }
}

mkdir -p /etc/cairn
if [ ! -e /etc/cairn/agent.env ]; then
    printf 'CAIRN_AGENT_ARGS="--root-dir /var/lib/cairn/agent --network-backend vxlan --node-ip %s"\n' \
        "$CAIRN_NODE_IP" > /etc/cairn/agent.env
fi
install_debs "$CAIRN_PACKAGES"/cairn-node_*.deb
if [ -e /etc/cairn/node/joined ]; then
    echo "already joined ($(tr '\n' ' ' < /etc/cairn/node/joined))"
    exit 0
fi
cairn-node join --server "$CAIRN_SERVER" --token-file "$CAIRN_SHARED/join-token"
