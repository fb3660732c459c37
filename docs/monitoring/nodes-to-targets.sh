#!/bin/sh
# Writes Prometheus file_sd targets for every node of the cluster kubectl points at:
# each node is scraped through cairn-control (CONTROL, host:port) at its node proxy.
# Prometheus re-reads the file when it changes: re-run this when nodes come or go
# (e.g. from cron). Upstream Prometheus builds can use kubernetes_sd_configs (role
# node) instead; Debian's build has no Kubernetes discovery, hence this file.
set -eu
control=${1:?usage: nodes-to-targets.sh CONTROL_HOST:PORT [OUT]}
out=${2:-/etc/prometheus/cairn/nodes.json}
kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' |
    awk -v control="$control" '
        BEGIN { printf "[" }
        NF { printf "%s{\"targets\":[\"%s\"],\"labels\":{\"node\":\"%s\"}}", (n++ ? "," : ""), control, $1 }
        END { print "]" }' >"$out.tmp"
mv "$out.tmp" "$out"
