#!/usr/bin/env bash
# The whole test suite, as CI runs it: system deps, formatting, lints, unit and
# integration tests (real kubectl, the Python client, crash/restart tests).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export CARGO_TERM_COLOR=never
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked --no-fail-fast
