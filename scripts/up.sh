#!/usr/bin/env bash
# The README's first command: a 2-node cairn lab on this host (Debian 12, as root).
# Installs the system packages, builds the release binaries and runs `cairn-lab up`
# with the arguments given (e.g. --nodes 3 --proxy-mode iptables --network vxlan).
# Everything runs in network namespaces the lab creates; see README.md for the plan.
#   CAIRN_BIN_DIR=DIR   use the binaries in DIR and skip `cargo build`
#   CAIRN_SKIP_DEPS=1   skip scripts/install-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "up.sh: run me as root (network namespaces, containerd, cgroups)" >&2; exit 1; }
[ -n "${CAIRN_SKIP_DEPS:-}" ] || ./scripts/install-deps.sh
if [ -z "${CAIRN_BIN_DIR:-}" ]; then
    echo "up.sh: building release binaries"
    cargo build --release --locked -p cairn-control -p cairn-agent -p cairn-cni -p cairn-podlogs \
        -p cairn-proxy -p cairn-lab --bins
    CAIRN_BIN_DIR=target/release
fi
exec "$CAIRN_BIN_DIR/cairn-lab" up --bin-dir "$CAIRN_BIN_DIR" "$@"
