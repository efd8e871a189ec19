#!/usr/bin/env bash
# Peak RSS and wall time of `thread-ctx report --traces` or `report --otlp` on a large Collector
# file (the one thread-ctx/cli/tests/report_cli.rs's memory test of that mode generates: traces,
# ~160 MiB of 1,000 enriched spans per message; profiles, 30 MiB of the agent's windows of four
# processes whose stacks and requests come back round after round, or, otlp-unique, whose every
# sample is a new (stack, trace) pair), for each binary given (e.g. a build of an older commit
# beside this one), each run 3 times, side by side.
#   bash bench/report-memory.sh traces target/release/thread-ctx /tmp/old/thread-ctx
#   bash bench/report-memory.sh otlp target/release/thread-ctx /tmp/old/thread-ctx
#   bash bench/report-memory.sh otlp-unique target/release/thread-ctx /tmp/old/thread-ctx
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
case "$mode" in
  traces) test_name=traces_report_memory_stays_bounded_on_a_large_file; keep_var=REPORT_TRACES_KEEP_FILE ;;
  otlp) test_name=otlp_report_memory_stays_bounded_on_a_large_file; keep_var=REPORT_OTLP_KEEP_FILE ;;
  otlp-unique) test_name=otlp_report_memory_stays_bounded_when_no_sample_repeats; keep_var=REPORT_OTLP_UNIQUE_KEEP_FILE ;;
  *) echo "usage: bash bench/report-memory.sh traces|otlp|otlp-unique [BINARY...] (got mode '${mode}')" >&2; exit 2 ;;
esac
flag="--${mode%-unique}"
shift
[[ $# -gt 0 ]] || set -- target/release/thread-ctx
file=$(mktemp -d)/$mode.pb
trap 'rm -rf "$(dirname "$file")"' EXIT
# The test's own bound may fail on an old build: the file is kept either way.
env "$keep_var=$file" cargo test --release -q -p thread-ctx --test report_cli "$test_name" >/dev/null || true
[[ -f "$file" ]] || { echo "the test $test_name kept no file at $file" >&2; exit 1; }
echo "file: $(du -m "$file" | cut -f1) MiB"
for round in 1 2 3; do
  for bin in "$@"; do
    /usr/bin/time -f "$bin round $round: %M KiB max RSS, %e s wall, %U s user" "$bin" report "$flag" "$file" >/dev/null
  done
done
