# Shared by up.sh, down.sh and test-quickstart.sh: the knobs (see up.sh) and the paths
# derived from them. Sourced, not run.
CAIRN_HOME=${CAIRN_HOME:-/var/lib/cairn}
CAIRN_RUN_DIR=${CAIRN_RUN_DIR:-/run/cairn}
CAIRN_LOG_DIR=${CAIRN_LOG_DIR:-/var/log/cairn}
CAIRN_NETNS=${CAIRN_NETNS:-cairn}
CAIRN_PORT=${CAIRN_PORT:-6443}
CAIRN_NODE_IP=${CAIRN_NODE_IP:-198.18.0.1}
CAIRN_CGROUP_ROOT=${CAIRN_CGROUP_ROOT:-/cairn}
CAIRN_TIMEOUT=${CAIRN_TIMEOUT:-120}
if [ -z "${CAIRN_NODE_NAME:-}" ]; then
    # The host name, as the kubelet does, when it is a valid DNS subdomain.
    CAIRN_NODE_NAME=$(hostname | tr '[:upper:]' '[:lower:]')
    [[ "$CAIRN_NODE_NAME" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || CAIRN_NODE_NAME=cairn-node
fi

NETNS_PATH=/run/netns/$CAIRN_NETNS
BIN=$CAIRN_HOME/bin
CNI_BIN=$CAIRN_HOME/cni/bin
CNI_CONF_DIR=$CAIRN_HOME/cni/net.d
KUBECONFIG_PATH=$CAIRN_HOME/kubeconfig
CONTAINERD_SOCKET=$CAIRN_RUN_DIR/containerd/containerd.sock
CONTAINERD_NAMESPACE=cairn
REGISTRY_PORT=5000
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/12
FIRST_POD_CIDR=10.244.0.0/24

die() {
    echo "${0##*/}: $*" >&2
    exit 1
}
