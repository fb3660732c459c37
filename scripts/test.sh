#!/usr/bin/env bash
# The whole test suite, as CI runs it: system deps, formatting, lints, unit and
# integration tests (real kubectl, the Python client, crash/restart tests, the e2e suite on
# fresh cairn-lab labs), then the same suite inside a container made from the lab's node
# image (scripts/test-in-container.sh; CAIRN_SKIP_CONTAINER_LANE=1 leaves it out).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export CARGO_TERM_COLOR=never
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
if [ -z "${CAIRN_IN_CONTAINER:-}" ]; then
    # Generated code must be what its generator makes from the locked crates' sources.
    python3 crates/proto/codegen/gen.py >/dev/null
    rustfmt --edition 2021 crates/proto/src/generated.rs
    git diff --exit-code --stat -- crates/proto/src/generated.rs
fi
if [ -n "${CAIRN_IN_CONTAINER:-}" ]; then
    # Inside the container lane there is no Docker engine: the docker-driver e2e tests
    # run in the plain lane only. The churn soak (the same daemons on the same kernel)
    # runs once, in the plain lane, to keep CI in its time budget.
    cargo test --workspace --locked --no-fail-fast -- --skip docker_nodes --skip churn_soak
    exit 0
fi
cargo test --workspace --locked --no-fail-fast
if [ -z "${CAIRN_SKIP_CONTAINER_LANE:-}" ]; then
    ./scripts/test-in-container.sh
fi
