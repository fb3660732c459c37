#!/usr/bin/env bash
# Brings up a one-node cairn cluster on this host (Debian 12, as root), leaving the host's
# network untouched: everything runs inside the network namespace "cairn" (entered with
# `nsenter --net`, so the host's mounts and cgroups stay visible, see host-facts.md):
#
#   lo + veth pair cairn0/cairn0p with the node address 198.18.0.1/24
#   docker-registry   127.0.0.1:5000, holding docker.io/library/busybox:latest (a mirror
#                     for docker.io through the agent's hosts.toml)
#   containerd        private root/state/socket, no CRI plugin
#   cairn-control     127.0.0.1:6443, embedded store, node pod CIDRs from 10.244.0.0/16
#   cairn-agent       node address 198.18.0.1, logs server on :10250, cairn-cni bridge cni0
#   cairn-proxy       Services (nftables), health on 127.0.0.1:10256, metrics on :10249
#
# and one process on the host: socat listening on 127.0.0.1:6443 that forwards each
# connection into the namespace, so kubectl on the host just works.
#
# Re-running it stops the previous instance first (scripts/down.sh) and keeps the data.
# Knobs (environment), for tests and for several clusters on one host:
#   CAIRN_HOME=/var/lib/cairn      data (store, images, agent root, kubeconfig), kept by down.sh
#   CAIRN_RUN_DIR=/run/cairn       PID files, sockets, runtime state, CNI IPAM state
#   CAIRN_LOG_DIR=/var/log/cairn   daemon logs (<name>.log) and pod logs (pods/)
#   CAIRN_NETNS=cairn              network namespace name
#   CAIRN_PORT=6443                host loopback port of the API forward
#   CAIRN_NODE_NAME=<hostname>     CAIRN_NODE_IP=198.18.0.1
#   CAIRN_CGROUP_ROOT=/cairn       cgroup parent of the pods
#   CAIRN_BIN_DIR=DIR              use the binaries in DIR and skip `cargo build`
#   CAIRN_SKIP_DEPS=1              skip scripts/install-deps.sh
#   CAIRN_TIMEOUT=120              seconds to wait for each daemon to be ready
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cluster-env.sh
. scripts/cluster-env.sh

[ "$(id -u)" = 0 ] || die "run me as root (network namespaces, containerd, cgroups)"
# Whatever started stays up on failure, for its logs; down.sh stops it.
trap 'rc=$?; [ "$rc" = 0 ] || echo "up: failed; logs in $CAIRN_LOG_DIR, scripts/down.sh stops what was started" >&2' EXIT
started_ns=$(date +%s%N)

if [ -z "${CAIRN_SKIP_DEPS:-}" ]; then
    ./scripts/install-deps.sh
fi
if [ -z "${CAIRN_BIN_DIR:-}" ]; then
    echo "up: building release binaries"
    cargo build --release --locked -p cairn-control -p cairn-agent -p cairn-cni -p cairn-podlogs -p cairn-proxy --bins
    src_bin=target/release
else
    src_bin=$CAIRN_BIN_DIR
fi
for b in cairn-control cairn-agent cairn-cni cairn-logger cairn-proxy; do
    [ -x "$src_bin/$b" ] || die "$src_bin/$b is missing (build it, or unset CAIRN_BIN_DIR)"
done

# A previous instance (or the leftovers of a failed start) goes first; data stays.
./scripts/down.sh --quiet

mkdir -p "$CAIRN_HOME"/{bin,control,containerd/opt,agent,cni/bin,cni/net.d,certs.d/docker.io,manifests,registry,images} \
    "$CAIRN_RUN_DIR"/{containerd,agent,cni/networks} "$CAIRN_LOG_DIR/pods"

# Installed copies, so a later `cargo build` does not swap binaries under running daemons.
install_bin() { [ "$1" -ef "$2" ] || install -m 0755 "$1" "$2"; }
for b in cairn-control cairn-agent cairn-logger cairn-proxy; do
    install_bin "$src_bin/$b" "$BIN/$b"
done
install_bin "$src_bin/cairn-cni" "$CNI_BIN/cairn-cni"

echo "up: network namespace $CAIRN_NETNS (node address $CAIRN_NODE_IP/24)"
ip netns add "$CAIRN_NETNS"
ip -n "$CAIRN_NETNS" link set lo up
ip -n "$CAIRN_NETNS" link add cairn0 type veth peer name cairn0p
ip -n "$CAIRN_NETNS" addr add "$CAIRN_NODE_IP/24" dev cairn0
ip -n "$CAIRN_NETNS" link set cairn0p up
ip -n "$CAIRN_NETNS" link set cairn0 up
# The namespace has no default route; cluster IPs need one for the node's own connections
# to get as far as cairn-proxy's NAT hook (a real node's default route does this).
ip -n "$CAIRN_NETNS" route add "$SERVICE_CIDR" dev cairn0

# start NAME CMD...: runs CMD in its own session inside the namespace, log and PID file.
start() {
    local name=$1
    shift
    echo "=== $(date -u +%FT%TZ) up.sh: $*" >>"$CAIRN_LOG_DIR/$name.log"
    NO_COLOR=1 setsid nsenter --net="$NETNS_PATH" -- "$@" </dev/null >>"$CAIRN_LOG_DIR/$name.log" 2>&1 &
    echo $! >"$CAIRN_RUN_DIR/$name.pid"
}

# wait_for NAME WHAT CMD...: polls CMD until it succeeds; fails with NAME's log tail.
wait_for() {
    local name=$1 what=$2 pid
    shift 2
    pid=$(cat "$CAIRN_RUN_DIR/$name.pid" 2>/dev/null || true)
    local deadline=$((SECONDS + CAIRN_TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$CAIRN_LOG_DIR/$name.log" >&2 || true
            die "$name exited while waiting for $what (log: $CAIRN_LOG_DIR/$name.log)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 30 "$CAIRN_LOG_DIR/$name.log" >&2 || true
            die "$name: no $what after ${CAIRN_TIMEOUT}s (log: $CAIRN_LOG_DIR/$name.log)"
        fi
        sleep 0.2
    done
}

in_ns() { nsenter --net="$NETNS_PATH" -- "$@"; }

echo "up: docker-registry on 127.0.0.1:$REGISTRY_PORT (inside the namespace)"
cat >"$CAIRN_RUN_DIR/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $CAIRN_HOME/registry
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$REGISTRY_PORT
EOF
start registry /usr/bin/docker-registry serve "$CAIRN_RUN_DIR/registry.yml"

echo "up: containerd (socket $CONTAINERD_SOCKET)"
cat >"$CAIRN_RUN_DIR/containerd/config.toml" <<EOF
version = 2
root = "$CAIRN_HOME/containerd"
state = "$CAIRN_RUN_DIR/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CONTAINERD_SOCKET"
[ttrpc]
  address = "$CONTAINERD_SOCKET.ttrpc"
[debug]
  address = ""
  level = "info"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$CAIRN_HOME/containerd/opt"
[plugins."io.containerd.snapshotter.v1.overlayfs"]
  root_path = ""
EOF
start containerd /usr/bin/containerd --config "$CAIRN_RUN_DIR/containerd/config.toml"

echo "up: cairn-control on 127.0.0.1:6443 (inside the namespace)"
start control "$BIN/cairn-control" serve --data-dir "$CAIRN_HOME/control" --bind 127.0.0.1:6443 \
    --cluster-cidr "$CLUSTER_CIDR" --advertise-address "$CAIRN_NODE_IP"

wait_for registry "answer on /v2/" in_ns curl -fsS "http://127.0.0.1:$REGISTRY_PORT/v2/"
wait_for containerd "socket $CONTAINERD_SOCKET" test -S "$CONTAINERD_SOCKET"
wait_for containerd "answer on $CONTAINERD_SOCKET" ctr --address "$CONTAINERD_SOCKET" version
wait_for control "answer on /readyz" in_ns curl -fsS http://127.0.0.1:6443/readyz

# The agent reaches the API inside the namespace; kubectl on the host through the forward.
"$BIN/cairn-control" kubeconfig --data-dir "$CAIRN_HOME/control" --server http://127.0.0.1:6443 \
    >"$CAIRN_HOME/agent/kubeconfig"
"$BIN/cairn-control" kubeconfig --data-dir "$CAIRN_HOME/control" --server "http://127.0.0.1:$CAIRN_PORT" \
    >"$KUBECONFIG_PATH.tmp"
mv "$KUBECONFIG_PATH.tmp" "$KUBECONFIG_PATH"

echo "up: busybox image (imported into containerd, pushed to the local registry)"
image_tar=$CAIRN_HOME/images/busybox.tar
[ -s "$image_tar" ] || python3 scripts/busybox-image.py archive "$image_tar" >/dev/null
RUST_LOG=warn "$BIN/cairn-agent" --containerd-socket "$CONTAINERD_SOCKET" --containerd-namespace "$CONTAINERD_NAMESPACE" \
    import-image "$image_tar" >/dev/null
in_ns python3 scripts/busybox-image.py push "http://127.0.0.1:$REGISTRY_PORT" library/busybox:latest >/dev/null
# docker.io images come from the local registry first (kubectl run's default pull policy
# for :latest is Always), then from Docker Hub.
cat >"$CAIRN_HOME/certs.d/docker.io/hosts.toml" <<EOF
server = "https://registry-1.docker.io"

[host."http://127.0.0.1:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve"]
EOF

# The bridge network for this node's pod CIDR (allocated by cairn-control when the Node is
# created; the first node of a fresh store gets the first block).
write_conflist() {
    cat >"$CNI_CONF_DIR/10-cairn.conflist.tmp" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "cairn",
  "plugins": [
    {
      "type": "cairn-cni",
      "bridge": "cni0",
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$1"}]],
        "dataDir": "$CAIRN_RUN_DIR/cni/networks"
      }
    }
  ]
}
EOF
    mv "$CNI_CONF_DIR/10-cairn.conflist.tmp" "$CNI_CONF_DIR/10-cairn.conflist"
}
node_pod_cidr() {
    in_ns kubectl --kubeconfig "$CAIRN_HOME/agent/kubeconfig" get node "$CAIRN_NODE_NAME" \
        -o 'jsonpath={.spec.podCIDR}' 2>/dev/null
}
pod_cidr=$(node_pod_cidr || true)
write_conflist "${pod_cidr:-$FIRST_POD_CIDR}"

echo "up: cairn-agent (node $CAIRN_NODE_NAME)"
start agent "$BIN/cairn-agent" \
    --kubeconfig "$CAIRN_HOME/agent/kubeconfig" \
    --node-name "$CAIRN_NODE_NAME" --node-ip "$CAIRN_NODE_IP" \
    --containerd-socket "$CONTAINERD_SOCKET" --containerd-namespace "$CONTAINERD_NAMESPACE" \
    --root-dir "$CAIRN_HOME/agent" --state-dir "$CAIRN_RUN_DIR/agent" \
    --cni-conf-dir "$CNI_CONF_DIR" --cni-bin-dir "$CNI_BIN,/usr/lib/cni" \
    --pod-log-dir "$CAIRN_LOG_DIR/pods" --cgroup-root "$CAIRN_CGROUP_ROOT" \
    --listen "$CAIRN_NODE_IP:10250" --static-pod-dir "$CAIRN_HOME/manifests" \
    --registry-config-dir "$CAIRN_HOME/certs.d" --logger-path "$BIN/cairn-logger" \
    --cluster-cidr "$CLUSTER_CIDR"

node_has_pod_cidr() { [ -n "$(node_pod_cidr)" ]; }
wait_for agent "Node $CAIRN_NODE_NAME with a pod CIDR" node_has_pod_cidr
pod_cidr=$(node_pod_cidr)
if ! grep -q "\"subnet\": \"$pod_cidr\"" "$CNI_CONF_DIR/10-cairn.conflist"; then
    write_conflist "$pod_cidr"
fi

echo "up: API forward 127.0.0.1:$CAIRN_PORT (host) -> 127.0.0.1:6443 (namespace $CAIRN_NETNS)"
echo "=== $(date -u +%FT%TZ) up.sh: socat 127.0.0.1:$CAIRN_PORT" >>"$CAIRN_LOG_DIR/forward.log"
setsid socat "TCP-LISTEN:$CAIRN_PORT,bind=127.0.0.1,fork,reuseaddr" \
    "EXEC:\"nsenter --net=$NETNS_PATH socat STDIO TCP:127.0.0.1:6443\"" \
    </dev/null >>"$CAIRN_LOG_DIR/forward.log" 2>&1 &
echo $! >"$CAIRN_RUN_DIR/forward.pid"
wait_for forward "API answer through 127.0.0.1:$CAIRN_PORT" \
    curl -fsS "http://127.0.0.1:$CAIRN_PORT/readyz"

node_ready() {
    kubectl --kubeconfig "$KUBECONFIG_PATH" get node "$CAIRN_NODE_NAME" \
        -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' | grep -qx True
}
wait_for agent "Ready condition on Node $CAIRN_NODE_NAME" node_ready

echo "up: cairn-proxy (Services through nftables)"
start proxy "$BIN/cairn-proxy" --kubeconfig "$CAIRN_HOME/agent/kubeconfig" \
    --hostname-override "$CAIRN_NODE_NAME" --cluster-cidr "$CLUSTER_CIDR" \
    --healthz-bind-address 127.0.0.1:10256 --metrics-bind-address 127.0.0.1:10249
wait_for proxy "a first sync (/healthz)" in_ns curl -fsS http://127.0.0.1:10256/healthz

elapsed_ms=$((($(date +%s%N) - started_ns) / 1000000))
elapsed=$((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100))
cat <<EOF

cairn is up (${elapsed}s): node $CAIRN_NODE_NAME ($CAIRN_NODE_IP, pods $pod_cidr) in network namespace $CAIRN_NETNS.

  export KUBECONFIG=$KUBECONFIG_PATH
  kubectl get nodes
  kubectl run bb --image=busybox --restart=Never -- sh -c 'echo hello; sleep 3600'
  kubectl get pod bb -o wide; kubectl logs bb

The seed scenario, reachable through a Service (cairn-proxy, nftables):
  kubectl create deployment httpd-app --image=busybox --replicas=2 -- \\
      sh -c 'mkdir -p /www && hostname >/www/index.html && exec httpd -f -p 80 -h /www'
  kubectl expose deployment httpd-app --port=80
  nsenter --net=$NETNS_PATH curl -s http://\$(kubectl get svc httpd-app -o jsonpath='{.spec.clusterIP}')/
docker.io/library/busybox is served by the registry at 127.0.0.1:$REGISTRY_PORT inside the
namespace (push more there: nsenter --net=$NETNS_PATH ...); other images need internet.
Daemon logs: $CAIRN_LOG_DIR/{control,agent,proxy,containerd,registry,forward}.log
Stop: scripts/down.sh (keeps the data in $CAIRN_HOME)
EOF
