#!/bin/sh
# The seed scenario on the Vagrant lab, run by the last node's provisioning: once all
# CAIRN_NODES nodes are Ready, a Deployment of two httpd replicas runs one pod on each of
# two nodes, its Service answers through the ClusterIP from this node, served by both
# pods, and a pod reaches it by name. Run again, it checks the same Deployment again.
#
#   CAIRN_SHARED  where provision-control.sh left the admin kubeconfig
#   CAIRN_NODES   how many nodes the lab has
# kubectl: the one on PATH (the docker provider mounts the host's), else downloaded.
set -eu
: "${CAIRN_SHARED:?}" "${CAIRN_NODES:?}"

if ! command -v kubectl >/dev/null; then
    version=$(curl -fsSL https://dl.k8s.io/release/stable.txt)
    curl -fsSLo /usr/local/bin/kubectl "https://dl.k8s.io/release/$version/bin/linux/amd64/kubectl"
    chmod 755 /usr/local/bin/kubectl
fi
export KUBECONFIG="$CAIRN_SHARED/kubeconfig"

# until_true SECONDS WHAT COMMAND...: runs COMMAND every second until it succeeds.
until_true() {
    deadline=$(($(date +%s) + $1))
    what=$2
    shift 2
    until "$@"; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "seed scenario: gave up waiting for $what" >&2
            exit 1
        fi
        sleep 1
    done
}

all_nodes_ready() {
    ready=$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True) || true
    [ "$ready" -ge "$CAIRN_NODES" ]
}

# Each pod of the Deployment logged a 200 (busybox httpd -v logs every request): the
# Service spread requests over both.
both_pods_served() {
    curl -fs --max-time 3 "http://$cluster_ip/" | grep -q "It works!" || return 1
    for pod in $(kubectl get pods -l app=httpd-app -o name); do
        kubectl logs "$pod" | grep -q response:200 || return 1
    done
}

# From a pod, the Service's name resolves to its ClusterIP (cluster DNS, served by each
# node's agent) and the ClusterIP answers. busybox's nslookup (its own resolver) exits 1
# when the AAAA lookup finds nothing: its output is what counts. nc, as the image's static
# busybox wget crashes.
service_by_name_from_a_pod() {
    answer=$(kubectl exec deployment/httpd-app -- nslookup httpd-app.default.svc.cluster.local 2>&1) || true
    echo "$answer" | grep -qF "Address: $cluster_ip" || return 1
    kubectl exec deployment/httpd-app -- sh -c \
        "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 $cluster_ip 80" | grep -q "It works!"
}

until_true 600 "$CAIRN_NODES Ready nodes" all_nodes_ready
kubectl get deployment httpd-app >/dev/null 2>&1 ||
    kubectl create deployment httpd-app --image=httpd:2.4 --replicas=2
kubectl rollout status deployment/httpd-app --timeout=300s
nodes=$(kubectl get pods -l app=httpd-app -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u)
if [ "$(echo "$nodes" | wc -l)" -ne 2 ]; then
    echo "seed scenario: the two replicas share a node: $nodes" >&2
    kubectl get pods -o wide >&2
    exit 1
fi
kubectl get service httpd-app >/dev/null 2>&1 || kubectl expose deployment httpd-app --port=80
cluster_ip=$(kubectl get service httpd-app -o jsonpath='{.spec.clusterIP}')
until_true 120 "both pods to answer through $cluster_ip" both_pods_served
until_true 60 "a pod to resolve httpd-app and reach it" service_by_name_from_a_pod
kubectl get pods -o wide
echo "seed scenario passed: deployment httpd-app 2/2 on" $nodes"; service $cluster_ip served by both pods, resolved and reached from a pod"
