#!/usr/bin/env bash
# Runs every cairn fuzz target for N seconds each (default 60) and
# exits non-zero if any target crashes (crash inputs land in fuzz/artifacts/<target>/).
#
#   fuzz/run.sh [seconds]
#
# Works on a stable toolchain: cargo-fuzz needs nightly-only -Z flags, which
# RUSTC_BOOTSTRAP=1 unlocks. Needs cargo-fuzz (`cargo install cargo-fuzz`) and a C++
# compiler (libfuzzer-sys builds libFuzzer). Environment:
#   SANITIZER=none|address   (default none: the code is safe Rust, so speed wins;
#                             address also works on stable)
#   TARGETS="a b"            (default: all six targets)
set -uo pipefail

secs="${1:-60}"
case "$secs" in
  '' | *[!0-9]*) echo "usage: $0 [seconds]" >&2; exit 2 ;;
esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here" || exit 2

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "cargo-fuzz is not installed: cargo install cargo-fuzz" >&2
  exit 2
fi

export RUSTC_BOOTSTRAP=1
sanitizer="${SANITIZER:-none}"
read -r -a targets <<< "${TARGETS:-label_selector field_selector strategic_merge_patch json_patch request_body credentials}"
logs="$here/target/fuzz-logs"
mkdir -p "$logs"

failed=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "seeds/$t"
  echo "== $t: ${secs}s, sanitizer=$sanitizer"
  cargo fuzz run -O --sanitizer "$sanitizer" "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    > "$logs/$t.log" 2>&1
  rc=$?
  grep -E '^Done [0-9]+ runs|^stat::number_of_executed_units|^stat::peak_rss_mb' "$logs/$t.log" | sed 's/^/   /'
  if [ "$rc" -ne 0 ]; then
    echo "   FAILED (exit $rc); log: $logs/$t.log" >&2
    grep -E 'panicked|ERROR|SUMMARY|Test unit written|deadly signal|timeout' "$logs/$t.log" | head -20 | sed 's/^/   /' >&2
    failed+=("$t")
  fi
done

if [ "${#failed[@]}" -ne 0 ]; then
  echo "crashed: ${failed[*]}" >&2
  exit 1
fi
echo "all fuzz targets ran ${secs}s without a crash"
