#!/bin/sh
# Makes this host a cairn control host from the packages, and leaves what nodes need to
# join in a shared directory: the Vagrant lab's control machine runs it (a VM, or a
# systemd-booted container with the docker provider, as packaging/tests/vagrant.rs does).
#
#   CAIRN_PACKAGES    directory holding cairn-control_*.deb
#   CAIRN_CONTROL_IP  the address nodes and kubectl reach the API at
#   CAIRN_SHARED      where the join token and an admin kubeconfig for that address go
set -eu
: "${CAIRN_PACKAGES:?}" "${CAIRN_CONTROL_IP:?}" "${CAIRN_SHARED:?}"

# dpkg, then apt for dependencies the host lacks; a config file written before the
# install is kept (--force-confold), not asked about.
install_debs() {
    DEBIAN_FRONTEND=noninteractive dpkg --force-confold -i "$@" || {
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q -f -o Dpkg::Options::=--force-confold
    }
}

mkdir -p /etc/cairn "$CAIRN_SHARED"
# Written before the package starts the service: the serving certificate is made on the
# first start, and must name the address nodes use.
if [ ! -e /etc/cairn/control.env ]; then
    printf 'CAIRN_CONTROL_ARGS="--tls-san %s --advertise-address %s"\n' \
        "$CAIRN_CONTROL_IP" "$CAIRN_CONTROL_IP" > /etc/cairn/control.env
fi
install_debs "$CAIRN_PACKAGES"/cairn-control_*.deb
systemctl is-active --quiet cairn-control

umask 077
# Each file appears whole (nodes provisioned in parallel wait for the token).
cairn-control kubeconfig --server "https://$CAIRN_CONTROL_IP:6443" > "$CAIRN_SHARED/kubeconfig.tmp"
mv "$CAIRN_SHARED/kubeconfig.tmp" "$CAIRN_SHARED/kubeconfig"
cairn-control token create --ttl 24h --description "cairn lab nodes" > "$CAIRN_SHARED/join-token.tmp"
mv "$CAIRN_SHARED/join-token.tmp" "$CAIRN_SHARED/join-token"
echo "cairn-control serves at https://$CAIRN_CONTROL_IP:6443; kubeconfig: $CAIRN_SHARED/kubeconfig"
