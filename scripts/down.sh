#!/usr/bin/env bash
# Takes the lab scripts/up.sh started down (`cairn-lab down`, arguments passed on, e.g.
# --name NAME or --purge-logs).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${CAIRN_BIN_DIR:-target/release}/cairn-lab" down "$@"
