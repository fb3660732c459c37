#!/usr/bin/env bash
# The whole test suite, as CI runs it: system deps, formatting, lints, unit and
# integration tests (real kubectl, the Python client, crash/restart tests, the e2e suite on
# fresh cairn-lab labs), then the container lane (scripts/test-in-container.sh;
# CAIRN_SKIP_CONTAINER_LANE=1 leaves it out and runs its tests here instead). Each test
# runs in one lane: the container lane runs, inside a container made from the lab's node
# image, the tests of the crates that touch the host (containerd, cgroups, netlink,
# nftables/iptables); the plain lane runs everything else, the lab's e2e suite included
# (its nodes run the agent on this host's own cgroups and network namespaces), and the qemu
# guest test. Each stage's duration is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

# The crates whose tests run in the container lane (CAIRN_HOST_PACKAGES overrides).
HOST_PACKAGES=${CAIRN_HOST_PACKAGES:-"cairn-agent cairn-cni cairn-proxy cairn-runtime cairn-netfilter cairn-netlink cairn-podlogs cairn-image"}
# The host-touching test that runs on this machine rather than in the container: the qemu
# guest boots Debian's stock kernel (IPVS, pure cgroup v2) from this machine's setup.
GUEST_TEST=pod_cgroups_on_pure_cgroup_v2_in_a_guest
CONTAINER_SKIPS=(--skip "$GUEST_TEST")

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
# Images a background `test-in-container.sh --prepare` made for a container lane that
# never ran (a stage before it failed) go too.
remove_unused_images() {
    local prepared=target/container-lane-images.txt
    [ -e "$prepared" ] || return 0
    xargs -r docker rmi <"$prepared" >/dev/null 2>&1 || true
    rm -f "$prepared" target/container-lane-made-node-image
}
on_exit() {
    [ -z "${container_prep:-}" ] || wait "$container_prep" 2>/dev/null || true
    [ -n "${CAIRN_IN_CONTAINER:-}" ] || remove_unused_images
    print_stage_times
}
trap on_exit EXIT

# Lists the test binaries `cargo test --workspace` builds (the same features, so nothing is
# rebuilt) of the packages test-binaries.py selects by its arguments, one
# `<package folder> <executable>` per line, into file $1.
list_binaries() {
    local list=$1
    shift
    cargo test --workspace --locked --no-run --message-format=json-render-diagnostics |
        python3 scripts/test-binaries.py "$@" >"$list" || return 1
    [ -s "$list" ] || { echo "test.sh: no test binaries found for $*" >&2; return 1; }
}

# Runs the binaries listed in file $1 one after another, each from its package's folder as
# cargo does, with the further arguments; fails if one did, after running all.
run_binaries() {
    local list=$1 failed=0 binaries dir exe
    shift
    mapfile -t binaries <"$list"
    for line in "${binaries[@]}"; do
        read -r dir exe <<<"$line"
        echo "test.sh: running $exe"
        (cd "$dir" && "$exe" "$@") || failed=1
    done
    return $failed
}

# The container lane: the test binaries of HOST_PACKAGES.
host_tests() {
    # `stage` runs this under `||`, where `set -e` does not apply: every failure is checked.
    local list=target/container-lane-tests.txt
    # shellcheck disable=SC2086
    list_binaries "$list" $HOST_PACKAGES || return 1
    run_binaries "$list" "${CONTAINER_SKIPS[@]}"
}

# The plain lane's tests. The lab's end-to-end binaries (mostly waiting on pods and nodes)
# run in the background while the packages that leave the host alone (the API server's
# suites, the unit tests) run in the foreground: 2 cores, and what one leaves idle the
# other uses. Then, alone: the qemu guest tests and the test harness's own (its containerd
# and qemu guest; or, without a container lane, all the host-touching tests), whose kernel
# deadlines are missed on a machine busy with three-node labs; and the packaging tests,
# whose Docker container the lab's seed scenario must not see appear beside it. Each
# queue runs its binaries one after another; the lab's output is printed after the
# others'. Then the doc tests.
plain_tests() {
    local lab=target/plain-lane-lab.txt api=target/plain-lane-api.txt
    local host=target/plain-lane-host.txt support=target/plain-lane-support.txt
    local lab_log=target/plain-lane-lab.log failed=0
    local host_args=("$GUEST_TEST")
    [ -z "${CAIRN_SKIP_CONTAINER_LANE:-}" ] || host_args=()
    # shellcheck disable=SC2086
    {
        list_binaries "$lab" cairn-lab &&
            list_binaries "$api" --except $HOST_PACKAGES cairn-lab cairn-testsupport cairn-packaging &&
            list_binaries "$host" $HOST_PACKAGES &&
            list_binaries "$support" cairn-testsupport cairn-packaging
    } || return 1
    run_binaries "$lab" >"$lab_log" 2>&1 &
    local lab_pid=$!
    run_binaries "$api" || failed=1
    wait "$lab_pid" || failed=1
    run_binaries "$host" "${host_args[@]}" || failed=1
    run_binaries "$support" || failed=1
    echo "test.sh: the lab's end-to-end tests (they ran alongside the API and unit tests):"
    cat "$lab_log"
    cargo test --workspace --locked --doc || failed=1
    return $failed
}

if [ -n "${CAIRN_IN_CONTAINER:-}" ]; then
    stage "install-deps" ./scripts/install-deps.sh
    stage "host tests" host_tests
    exit 0
fi
stage "install-deps" ./scripts/install-deps.sh
stage "fmt" cargo fmt --all -- --check
# The lab binary first, so the container lane's images (debootstrap, apt: mostly network
# and disk) are made in the background while clippy and the build run, ready before the
# docker-driver tests need them.
container_prep=
container_prep_log=target/container-lane-prepare.log
if [ -z "${CAIRN_SKIP_CONTAINER_LANE:-}" ]; then
    stage "build cairn-lab" cargo build --locked -p cairn-lab --bins
    mkdir -p target
    CAIRN_DEPS_INSTALLED=1 CAIRN_LAB_BUILT=1 ./scripts/test-in-container.sh --prepare \
        >"$container_prep_log" 2>&1 &
    container_prep=$!
fi
stage "clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
# Licences and sources of every dependency (advisories need GitHub: see deny.toml).
stage "cargo deny" cargo deny --locked check licenses bans sources
stage "build" cargo test --workspace --locked --no-run
# Generated code must be what its generator makes from the locked crates' sources.
codegen_check() {
    python3 crates/proto/codegen/gen.py >/dev/null &&
        rustfmt --edition 2021 crates/proto/src/generated.rs crates/proto/src/generated_schema.rs &&
        git diff --exit-code --stat -- crates/proto/src/generated.rs crates/proto/src/generated_schema.rs
}
stage "codegen" codegen_check
wait_for_images() {
    wait "$container_prep" || { cat "$container_prep_log" >&2; return 1; }
}
[ -z "$container_prep" ] || stage "container images (background)" wait_for_images
stage "tests (lab e2e alongside API and unit)" plain_tests
if [ -z "${CAIRN_SKIP_CONTAINER_LANE:-}" ]; then
    stage "container lane" env CAIRN_DEPS_INSTALLED=1 ./scripts/test-in-container.sh
fi
