#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets: each parser of bytes from disk) for a given time,
# one after another, and prints each one's executions and time. Not part of CI: run it by hand,
#   scripts/fuzz.sh [seconds per target, default 120] [target ...]
# Installs cargo-fuzz from crates.io if it is missing. libFuzzer's instrumentation wants a
# nightly compiler; RUSTC_BOOTSTRAP=1 lets the stable one build it. A crash leaves its input
# under fuzz/artifacts/<target>/ and stops this script with libFuzzer's status.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-120}"
shift || true
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
export RUSTC_BOOTSTRAP=1
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
mkdir -p fuzz/logs
for t in "${targets[@]}"; do
  echo "== $t, ${secs}s"
  mkdir -p "fuzz/corpus/$t"
  status=0
  # New finds go to fuzz/corpus/<target> (ignored by git); fuzz/seeds/<target> holds the
  # committed starting inputs (a valid entry of each kind, slices of real databases).
  cargo fuzz run "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- -max_total_time="$secs" -print_final_stats=1 \
    > "fuzz/logs/$t.log" 2>&1 || status=$?
  grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb|SUMMARY)' \
    "fuzz/logs/$t.log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "fuzz/logs/$t.log" >&2
    echo "fuzz: $t failed (status $status); its input is under fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
