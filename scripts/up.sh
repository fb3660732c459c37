#!/usr/bin/env bash
# Brings up a local cairn cluster on this host: builds the binaries, starts
# cairn-control with its embedded store on 127.0.0.1:6443 and writes a kubeconfig.
# Stop it with: kill "$(cat "$CAIRN_HOME/control.pid")"
set -euo pipefail
cd "$(dirname "$0")/.."
CAIRN_HOME="${CAIRN_HOME:-/var/lib/cairn}"
BIND="${CAIRN_BIND:-127.0.0.1:6443}"
./scripts/install-deps.sh
cargo build --release --locked -p cairn-control
mkdir -p "$CAIRN_HOME/control"
if [ -f "$CAIRN_HOME/control.pid" ] && kill -0 "$(cat "$CAIRN_HOME/control.pid")" 2>/dev/null; then
    echo "cairn-control already running (pid $(cat "$CAIRN_HOME/control.pid"))"
else
    nohup ./target/release/cairn-control serve --data-dir "$CAIRN_HOME/control" --bind "$BIND" \
        >"$CAIRN_HOME/control.log" 2>&1 &
    echo $! >"$CAIRN_HOME/control.pid"
fi
for _ in $(seq 1 100); do
    curl -fsS "http://$BIND/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "http://$BIND/readyz" >/dev/null || { echo "cairn-control did not start; see $CAIRN_HOME/control.log" >&2; exit 1; }
./target/release/cairn-control kubeconfig --data-dir "$CAIRN_HOME/control" >"$CAIRN_HOME/kubeconfig"
echo "cairn-control is up at http://$BIND (log: $CAIRN_HOME/control.log)"
echo "Use it with: export KUBECONFIG=$CAIRN_HOME/kubeconfig; kubectl get ns"
