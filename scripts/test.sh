#!/usr/bin/env bash
# The whole test suite, as CI runs it: system deps, formatting, lints, unit and
# integration tests (real kubectl, the Python client, crash/restart tests, the e2e suite on
# fresh cairn-lab labs), then the container lane (scripts/test-in-container.sh;
# CAIRN_SKIP_CONTAINER_LANE=1 leaves it out). The container lane runs, inside a container
# made from the lab's node image, only the tests of the crates that touch the host
# (containerd, cgroups, netlink, nftables/iptables, the lab): fmt, clippy, the pure unit
# tests and the API server's kubectl suites do not change with nested cgroups and run once,
# here. Each stage's duration is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

# The crates whose tests run again in the container lane (CAIRN_HOST_PACKAGES overrides).
HOST_PACKAGES=${CAIRN_HOST_PACKAGES:-"cairn-agent cairn-cni cairn-proxy cairn-lab cairn-runtime cairn-netfilter cairn-netlink cairn-podlogs cairn-image"}
# Tests that run in one lane only: the docker-driver e2e tests need a Docker engine (plain
# lane); the churn soak and the qemu guest run the same code on the same kernel in both.
CONTAINER_SKIPS=(--skip docker_nodes --skip churn_soak --skip pod_cgroups_on_pure_cgroup_v2_in_a_guest)

stage_times=()
stage() {
    local name=$1 start=$SECONDS rc=0
    shift
    "$@" || rc=$?
    stage_times+=("$(printf '%-34s %5d s%s' "$name" $((SECONDS - start)) "$([ $rc = 0 ] || echo "  (failed: $rc)")")")
    return $rc
}
print_stage_times() {
    echo "test.sh stage times${CAIRN_IN_CONTAINER:+ (container lane)}:"
    printf '  %s\n' "${stage_times[@]}"
}
trap print_stage_times EXIT

# Runs the test binaries of HOST_PACKAGES, built as `cargo test --workspace` builds them
# (the same features, so nothing is rebuilt), each from its package's folder as cargo does.
host_tests() {
    local list=target/container-lane-tests.txt failed=0
    # `stage` runs this under `||`, where `set -e` does not apply: every failure is checked.
    cargo test --workspace --locked --no-run --message-format=json-render-diagnostics |
        python3 scripts/test-binaries.py $HOST_PACKAGES >"$list" || return 1
    [ -s "$list" ] || { echo "container lane: no test binaries found" >&2; return 1; }
    local binaries dir exe
    mapfile -t binaries <"$list"
    for line in "${binaries[@]}"; do
        read -r dir exe <<<"$line"
        echo "container lane: $exe"
        (cd "$dir" && "$exe" "${CONTAINER_SKIPS[@]}") || failed=1
    done
    return $failed
}

if [ -n "${CAIRN_IN_CONTAINER:-}" ]; then
    stage "install-deps" ./scripts/install-deps.sh
    stage "host tests" host_tests
    exit 0
fi
stage "install-deps" ./scripts/install-deps.sh
stage "fmt" cargo fmt --all -- --check
stage "clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
# Generated code must be what its generator makes from the locked crates' sources.
codegen_check() {
    python3 crates/proto/codegen/gen.py >/dev/null &&
        rustfmt --edition 2021 crates/proto/src/generated.rs &&
        git diff --exit-code --stat -- crates/proto/src/generated.rs
}
stage "codegen" codegen_check
stage "cargo test --workspace" cargo test --workspace --locked --no-fail-fast
if [ -z "${CAIRN_SKIP_CONTAINER_LANE:-}" ]; then
    stage "container lane" ./scripts/test-in-container.sh
fi
