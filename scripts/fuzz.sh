#!/usr/bin/env bash
# Fuzzes every parser of target-controlled data (thread-ctx/fuzz: libFuzzer targets over
# thread-ctx/fuzz/src/lib.rs) on stable Rust, for SECONDS per target.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 60 s, every target)
#   FUZZ_KEEP=1 bash scripts/fuzz.sh ...           also merge new coverage into thread-ctx/fuzz/corpus/
#
# `cargo fuzz run` needs nightly only for -Zsanitizer; without a sanitizer, the coverage
# instrumentation libFuzzer needs is stable rustc flags (the ones cargo-fuzz passes), and
# libfuzzer-sys builds libFuzzer itself. Safe Rust needs no AddressSanitizer: what the
# fuzzers look for is panics (debug assertions and overflow checks are on), hangs, and
# allocations past libFuzzer's -rss_limit_mb. A crash is written to thread-ctx/fuzz/artifacts/TARGET/;
# keep it as a regression input under thread-ctx/fuzz/crashers/TARGET/ once fixed
# (`cargo test -p thread-ctx --test fuzz_corpus` replays corpus and crashers on stable).
set -euo pipefail
cd "$(dirname "$0")/../thread-ctx/fuzz"

seconds="${1:-60}"
shift || true
if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^thread-ctx-fuzz$')
fi

triple="$(rustc -vV | sed -n 's/^host: //p')"
# --target keeps these flags off build scripts and proc macros (they would not link).
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
cargo build --release --target "$triple" --bins
bin="target/$triple/release"

status=0
for t in "${targets[@]}"; do
  work="target/corpus/$t"
  mkdir -p "$work" "artifacts/$t"
  cp -n corpus/"$t"/* "$work"/ 2>/dev/null || true
  echo "== fuzzing $t for ${seconds}s =="
  if ! "$bin/$t" -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 -max_len=65536 \
      -artifact_prefix="artifacts/$t/" -print_final_stats=1 "$work" 2>"target/$t.log"; then
    echo "!! $t found a crash: see artifacts/$t/ and thread-ctx/fuzz/target/$t.log" >&2
    tail -30 "target/$t.log" >&2
    status=1
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|cov: .*corp:' "target/$t.log" | tail -3
  if [[ "${FUZZ_KEEP:-}" == "1" ]]; then
    "$bin/$t" -merge=1 -max_len=65536 "corpus/$t" "$work" 2>>"target/$t.log"
  fi
done
exit $status
