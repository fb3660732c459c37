#!/usr/bin/env bash
# End-to-end check of the README quick start, safe beside a real cluster: scripts/up.sh in
# throwaway dirs with its own network namespace, host port and cgroup root, using already
# built binaries (CAIRN_BIN_DIR, default target/debug); then pods through kubectl on the
# host, their logs, an idempotent re-run, scripts/down.sh, and a check that nothing is left.
# Run as root. agent/tests/quickstart.rs runs it in `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

base=$(mktemp -d /tmp/cairn-quickstart-XXXXXX)
export CAIRN_HOME=$base/home CAIRN_RUN_DIR=$base/run CAIRN_LOG_DIR=$base/log
export CAIRN_NETNS=cairn-qs-$$
export CAIRN_CGROUP_ROOT=/cairn-qs-$$
export CAIRN_NODE_NAME=qs-node
export CAIRN_PORT=${CAIRN_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
bin_dir=${CAIRN_BIN_DIR:-$repo/target/debug}
export CAIRN_BIN_DIR=$(cd "$bin_dir" && pwd)
# shellcheck source=scripts/cluster-env.sh
. scripts/cluster-env.sh
export KUBECONFIG=$KUBECONFIG_PATH
WAIT=${CAIRN_TIMEOUT}s

step() { echo "quickstart: $*"; }
fail() {
    echo "quickstart: FAILED: $*" >&2
    exit 1
}

finish() {
    local rc=$?
    if [ "$rc" != 0 ]; then
        for f in agent control containerd registry forward; do
            echo "----- $CAIRN_LOG_DIR/$f.log (tail)" >&2
            tail -n 25 "$CAIRN_LOG_DIR/$f.log" >&2 2>/dev/null || true
        done
        kubectl get pods -o wide >&2 2>/dev/null || true
        kubectl get events >&2 2>/dev/null || true
        ./scripts/down.sh --quiet || true
    fi
    if [ -z "${CAIRN_KEEP:-}" ]; then rm -rf "$base"; else echo "quickstart: kept $base" >&2; fi
    exit "$rc"
}
trap finish EXIT

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# The host's own interfaces, addresses and routes, to compare after up.sh.
host_net() { ip -o link show | awk -F': ' '{print $2}' | sort; ip -o addr show | awk '{print $2, $4}' | sort; ip route show table all | sort; }
host_before=$(host_net)

step "up.sh (netns $CAIRN_NETNS, API on 127.0.0.1:$CAIRN_PORT, binaries from $CAIRN_BIN_DIR)"
t0=$(date +%s%N)
./scripts/up.sh >"$base/up.out" 2>&1 || { cat "$base/up.out" >&2; fail "up.sh failed"; }
up_ms=$(ms_since "$t0")
grep -q "export KUBECONFIG=$KUBECONFIG_PATH" "$base/up.out" || fail "up.sh did not say how to use kubectl"
grep -q "kubectl run bb --image=busybox" "$base/up.out" || fail "up.sh did not show how to run a pod"
step "up.sh took ${up_ms} ms"
host_after=$(host_net)
[ "$host_before" = "$host_after" ] ||
    fail "up.sh changed the host's network: $(diff <(echo "$host_before") <(echo "$host_after") || true)"

[ "$(kubectl get node "$CAIRN_NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ] ||
    fail "node $CAIRN_NODE_NAME is not Ready after up.sh"
[ "$(ip -n "$CAIRN_NETNS" -4 -o addr show dev cairn0 | awk '{print $4}')" = "$CAIRN_NODE_IP/24" ] ||
    fail "node address $CAIRN_NODE_IP/24 is not on cairn0 in netns $CAIRN_NETNS"

# bb: kubectl run's defaults (restartPolicy Always, pull policy Always for :latest), so the
# image comes through the docker.io mirror; bb-local: only the imported image may be used.
# Neither names a node: the scheduler embedded in cairn-control binds them.
t0=$(date +%s%N)
kubectl run bb --image=busybox -- sh -c 'echo hello from cairn; exec sleep 3600' >/dev/null
kubectl run bb-local --image=busybox --image-pull-policy=Never --restart=Never \
    -- sh -c 'echo imported image works; exec sleep 3600' >/dev/null
kubectl wait --for=condition=Ready --timeout="$WAIT" pod/bb pod/bb-local >/dev/null || fail "pods did not become Ready"
step "two pods Ready $(ms_since "$t0") ms after kubectl run"
for p in bb bb-local; do
    [ "$(kubectl get pod "$p" -o 'jsonpath={.status.phase}')" = Running ] || fail "pod $p is not Running"
    [ "$(kubectl get pod "$p" -o 'jsonpath={.spec.nodeName}')" = "$CAIRN_NODE_NAME" ] || fail "pod $p was not scheduled to $CAIRN_NODE_NAME"
    ip=$(kubectl get pod "$p" -o 'jsonpath={.status.podIP}')
    [[ "$ip" == 10.244.0.* ]] || fail "pod $p has IP '$ip', not one of $FIRST_POD_CIDR"
done

# wait_log POD TEXT: the container writes right after it starts; the logger may lag a little.
wait_log() {
    local deadline=$((SECONDS + CAIRN_TIMEOUT))
    until kubectl logs "$1" 2>/dev/null | grep -qx "$2"; do
        [ "$SECONDS" -lt "$deadline" ] || fail "kubectl logs $1 never showed '$2': $(kubectl logs "$1" 2>&1)"
        sleep 0.2
    done
}
wait_log bb "hello from cairn"
wait_log bb-local "imported image works"
step "kubectl logs through the forward shows both pods' output"

# The seed scenario: a Deployment's ReplicaSet creates the pods, the scheduler binds them,
# the agent runs them; a deleted pod is replaced.
kubectl create deployment httpd-app --image=busybox --replicas=2 -- \
    sh -c 'mkdir -p /www && hostname >/www/index.html && exec httpd -f -p 80 -h /www' >/dev/null
kubectl rollout status deployment/httpd-app --timeout="$WAIT" >/dev/null || fail "deployment httpd-app did not roll out"
[ "$(kubectl get deployment httpd-app -o 'jsonpath={.status.readyReplicas}')" = 2 ] || fail "deployment httpd-app is not 2/2"
running() {
    kubectl get pods -l app=httpd-app -o 'jsonpath={range .items[*]}{.metadata.deletionTimestamp}|{.status.containerStatuses[0].state.running.startedAt}{"\n"}{end}' |
        grep -c '^|.' || true
}
[ "$(running)" = 2 ] || fail "httpd-app does not have two running containers"
victim=$(kubectl get pods -l app=httpd-app -o 'jsonpath={.items[0].metadata.name}')
kubectl delete pod "$victim" --wait=false >/dev/null
deadline=$((SECONDS + CAIRN_TIMEOUT))
until [ "$(running)" = 2 ] && ! kubectl get pods -l app=httpd-app -o name | grep -q "/$victim\$"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "deleted pod $victim was not replaced: $(kubectl get pods -l app=httpd-app 2>&1)"
    sleep 0.5
done
step "seed scenario: deployment httpd-app 2/2 with two running containers; a deleted pod was replaced"

# ... reachable through a Service: cairn-proxy spreads the cluster IP over both pods.
kubectl expose deployment httpd-app --port=80 >/dev/null
vip=$(kubectl get service httpd-app -o 'jsonpath={.spec.clusterIP}')
pods=$(kubectl get pods -l app=httpd-app -o 'jsonpath={.items[*].metadata.name}')
deadline=$((SECONDS + CAIRN_TIMEOUT))
seen=""
until [ "$(echo "$seen" | wc -w)" = 2 ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "service httpd-app ($vip) answered only with '$seen' (pods: $pods)"
    who=$(nsenter --net="$NETNS_PATH" curl -fsS --max-time 2 "http://$vip/" 2>/dev/null || true)
    case " $pods " in *" $who "*) case " $seen " in *" $who "*) ;; *) seen="$seen $who" ;; esac ;; esac
    sleep 0.1
done
step "service httpd-app: http://$vip reached both pods through cairn-proxy"

old_pids=$(cat "$CAIRN_RUN_DIR"/*.pid)
step "re-running up.sh"
./scripts/up.sh >"$base/up2.out" 2>&1 || { cat "$base/up2.out" >&2; fail "second up.sh failed"; }
for pid in $old_pids; do
    if [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
        fail "process $pid of the first up.sh still runs after the second: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
    fi
done
# The store survived; bb (restartPolicy Always) is started again on a fresh sandbox.
kubectl get pod bb-local >/dev/null || fail "pod bb-local is gone after re-running up.sh"
kubectl wait --for=condition=Ready --timeout="$WAIT" pod/bb >/dev/null || fail "pod bb did not come back after re-running up.sh"
step "re-run: old daemons stopped, data kept, bb Running again"

step "down.sh"
./scripts/down.sh >"$base/down.out" 2>&1 || { cat "$base/down.out" >&2; fail "down.sh failed"; }
if ip netns list | awk '{print $1}' | grep -qx "$CAIRN_NETNS"; then fail "netns $CAIRN_NETNS still exists"; fi
[ ! -e "$NETNS_PATH" ] || fail "$NETNS_PATH still exists"
left=()
for p in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$p" = $$ ] && continue
    c=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null || true)
    if [[ "$c" == *"$base/"* || "$c" == *"$NETNS_PATH"* ]] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null; then
        left+=("$p: $c")
    fi
done
[ "${#left[@]}" -eq 0 ] || fail "processes left after down.sh: $(printf '\n  %s' "${left[@]}")"
if grep -qF " $base/" /proc/self/mountinfo; then fail "mounts left under $base: $(grep -F " $base/" /proc/self/mountinfo)"; fi
if curl -fsS "http://127.0.0.1:$CAIRN_PORT/readyz" >/dev/null 2>&1; then fail "127.0.0.1:$CAIRN_PORT still answers"; fi
for d in /sys/fs/cgroup"$CAIRN_CGROUP_ROOT" /sys/fs/cgroup/*"$CAIRN_CGROUP_ROOT"; do
    [ ! -d "$d" ] || fail "cgroup $d left after down.sh"
done
[ ! -e "$CAIRN_RUN_DIR" ] || fail "$CAIRN_RUN_DIR left after down.sh"
[ -d "$CAIRN_HOME/control" ] && [ -s "$KUBECONFIG_PATH" ] || fail "down.sh removed data under $CAIRN_HOME"
step "down.sh left no netns, process, mount, port, cgroup or runtime dir; data kept"
step "OK (up.sh ${up_ms} ms)"
