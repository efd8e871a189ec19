#!/usr/bin/env bash
# The spanprofiles connector's cost on one node's load (docs/benchmarks.md): 20 services x 200
# requests/s x 3 spans, thread-ctx agent at 99 Hz with 10 s windows, off-CPU and allocation
# profiles, SDKs exporting every 5 s. The load is generated in Go and fed to the connector built
# by its factory, on a virtual clock (collector/spanprofilesconnector/load_test.go says how the
# shape is made). Prints each round, then the medians. METRICS=1: the connector's metrics side
# on too (a metrics pipeline takes who-made-whom-wait), with the series it holds; METRICS=both:
# rounds alternate without and with it, side by side in one run, medians of each.
#   [METRICS=0|1|both] bash bench/spanprofiles.sh [ROUNDS=5] [SECONDS=60]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/go-build.sh
require_go bench-spanprofiles
rounds=${1:-5}
seconds=${2:-60}
modes=${METRICS:-0}
[[ "$modes" == both ]] && modes="0 1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for r in $(seq "$rounds"); do
  for m in $modes; do
    echo "== round $r of $rounds$([[ $m == 1 ]] && echo ', metrics on')"
    SPANPROFILES_LOAD_METRICS=$m SPANPROFILES_LOAD_SECONDS=$seconds go test -C collector/spanprofilesconnector -run '^TestLoadBenchmark$' -count 1 -v . |
      grep -E '^(load|spans|CPU|memory|size|metrics):' | tee -a "$dir/$m"
  done
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for m in $modes; do
  out="$dir/$m"
  echo "== medians of $rounds rounds$([[ $m == 1 ]] && echo ', metrics on' || echo ', metrics off')"
  echo "connector CPU per span: $(sed -nE 's/.*: ([0-9.]+) us per span.*/\1/p' "$out" | median) us (all less the generator), $(sed -nE 's/.*, ([0-9.]+) \(during its calls\).*/\1/p' "$out" | median) us (during its calls)"
  echo "live heap at the most: $(sed -nE 's/^memory: live heap ([0-9]+) MiB.*/\1/p' "$out" | median) MiB"
  echo "bytes added per span: $(sed -nE 's/.*\(\+([0-9]+)\)$/\1/p' "$out" | median)"
  if [[ $m == 1 ]]; then
    echo "metrics series at the default bounds: $(sed -nE 's/^metrics: ([0-9]+) series.*/\1/p' "$out" | median)"
  fi
done
