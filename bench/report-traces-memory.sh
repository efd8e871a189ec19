#!/usr/bin/env bash
# Peak RSS and wall time of `thread-ctx report --traces` on a large Collector traces file (the one
# report_cli.rs's memory test generates: ~160 MiB, 1,000 enriched spans per message), for each
# binary given (e.g. a build of an older commit beside this one), each run 3 times, side by side.
#   bash bench/report-traces-memory.sh target/release/thread-ctx /tmp/old/thread-ctx
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -gt 0 ]] || set -- target/release/thread-ctx
file=$(mktemp -d)/traces.pb
trap 'rm -rf "$(dirname "$file")"' EXIT
REPORT_TRACES_KEEP_FILE="$file" cargo test --release -q -p thread-ctx --test report_cli \
  traces_report_memory_stays_bounded_on_a_large_file >/dev/null
echo "file: $(du -m "$file" | cut -f1) MiB"
for round in 1 2 3; do
  for bin in "$@"; do
    /usr/bin/time -f "$bin round $round: %M KiB max RSS, %e s wall, %U s user" "$bin" report --traces "$file" >/dev/null
  done
done
