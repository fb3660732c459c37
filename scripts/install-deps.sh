#!/usr/bin/env bash
# Installs the system packages cairn's build and tests need (Debian 12, as root).
# Idempotent: apt runs only when something is missing.
set -euo pipefail

packages=(protobuf-compiler python3-kubernetes pkg-config containernetworking-plugins iproute2 iptables nftables conntrack ipset ipvsadm iputils-ping containerd runc docker-registry busybox-static socat openssl curl procps python3 qemu-system-x86 linux-image-amd64 cpio xz-utils debootstrap tmux)
# What the packaging tests run on this machine only (packaging/tests/): not baked into the
# container lane's image.
packaging_tools=(lintian rpm rpmlint binutils)
[ -z "${CAIRN_IN_CONTAINER:-}" ] || packaging_tools=()
# --list: the package names only (scripts/test-in-container.sh bakes them into its image).
if [ "${1:-}" = --list ]; then
    echo "${packages[*]}"
    exit 0
fi
missing=()
for p in "${packages[@]}" "${packaging_tools[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Vagrant, for the Vagrant lab (packaging/vagrant/; packaging/tests/vagrant.rs runs it on
# Vagrant's built-in docker provider): without the providers it recommends, since no
# hypervisor runs here. Host only, as the packaging tools.
if [ -z "${CAIRN_IN_CONTAINER:-}" ] && ! dpkg -s vagrant >/dev/null 2>&1; then
    echo "install-deps: installing vagrant (no providers)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends vagrant >/dev/null
fi

# Prometheus: the suite scrapes a lab with docs/monitoring/prometheus.yml. Only the
# binary is wanted: no node exporter, and the service the package starts is stopped.
# The container lane runs no lab and its image has no apt lists: not there.
if [ -z "${CAIRN_IN_CONTAINER:-}" ] && ! dpkg -s prometheus >/dev/null 2>&1; then
    echo "install-deps: installing prometheus (for the monitoring test; its service is disabled)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    if [ -d /run/systemd/system ]; then
        systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
fi

# nginx and wrk: the Ingress benchmark's peer (Debian's nginx as a reverse proxy to the
# same backends) and load generator (crates/ingress-proxy/benches/ingress_rate.rs). The
# benchmark starts its own nginx processes; the service the package starts is stopped.
if [ -z "${CAIRN_IN_CONTAINER:-}" ] && ! dpkg -s nginx-light wrk >/dev/null 2>&1; then
    echo "install-deps: installing nginx-light and wrk (the Ingress benchmark's peer; the service is disabled)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends nginx-light wrk >/dev/null
    if [ -d /run/systemd/system ]; then
        systemctl disable --now nginx >/dev/null 2>&1 || true
    else
        service nginx stop >/dev/null 2>&1 || true
    fi
fi

# etcd (Debian's etcd-server): the store's etcd backend is tested against real etcd, each
# test starting its own on loopback; the service the package starts is stopped. etcdctl
# (etcd-client) checks the snapshots cairn-control saves from etcd.
if [ -z "${CAIRN_IN_CONTAINER:-}" ] && ! dpkg -s etcd-server etcd-client >/dev/null 2>&1; then
    echo "install-deps: installing etcd-server and etcd-client (for the etcd store tests; the service is disabled)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends etcd-server etcd-client >/dev/null
    if [ -d /run/systemd/system ]; then
        systemctl disable --now etcd >/dev/null 2>&1 || true
    fi
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: cargo not found. Install a Rust toolchain (1.85 or newer, e.g. with rustup) and re-run." >&2
    exit 1
fi

# kubectl: the tests drive the real client. Debian 12's own kubernetes-client (1.20) is
# too old; the Kubernetes/Google apt repositories provide current ones (the machine images
# we test on ship kubectl 1.27-1.33 under /usr/lib/google-cloud-sdk/bin).
if ! command -v kubectl >/dev/null 2>&1; then
    if apt-cache policy kubectl 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        apt-get install -y -qq kubectl >/dev/null
    else
        echo "install-deps: kubectl not found and no apt repository offers it; add the Kubernetes apt repository (pkgs.k8s.io) and re-run." >&2
        exit 1
    fi
fi

# cargo-deny: scripts/test.sh checks licences and sources with it (crates.io only).
CARGO_DENY_VERSION=0.20.2
if [ -z "${CAIRN_IN_CONTAINER:-}" ] && ! cargo deny --version 2>/dev/null | grep -qx "cargo-deny $CARGO_DENY_VERSION"; then
    echo "install-deps: building cargo-deny $CARGO_DENY_VERSION"
    cargo install --locked --quiet cargo-deny --version "$CARGO_DENY_VERSION"
fi

# The official Python client's current PyPI release beside Debian's older one: the e2e
# suite drives both (the PyPI one speaks v5.channel.k8s.io and closes stdin). Best effort:
# without PyPI, or inside the container lane, the suite runs Debian's client alone.
PY_CLIENT=/opt/cairn-test/python-kubernetes
PY_CLIENT_VERSION=36.0.3
if [ -z "${CAIRN_IN_CONTAINER:-}" ] && ! "$PY_CLIENT/bin/python3" -c "import kubernetes, sys; sys.exit(kubernetes.__version__ != '$PY_CLIENT_VERSION')" 2>/dev/null; then
    rm -rf "$PY_CLIENT"
    if { /usr/bin/python3 -m venv "$PY_CLIENT" 2>/dev/null || python3 -m venv "$PY_CLIENT"; } &&
        "$PY_CLIENT/bin/pip" install -q "kubernetes==$PY_CLIENT_VERSION" >/dev/null 2>&1; then
        echo "install-deps: Python client kubernetes $PY_CLIENT_VERSION in $PY_CLIENT"
    else
        echo "install-deps: could not install kubernetes $PY_CLIENT_VERSION from PyPI; the suite uses Debian's client only" >&2
        rm -rf "$PY_CLIENT"
    fi
fi
