#!/usr/bin/env bash
# Runs every test: installs and builds what is needed, then Rust tests, Node tests, and the Node
# version matrix. eBPF tests skip when not root unless REQUIRE_EBPF=1 (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

SETUP_JAEGER=later bash scripts/setup.sh

# The Go side that only the end-to-end tests need (Jaeger's build: ~10 min of CPU on a cold
# machine, Prometheus's ~4 min; the connector's tests) runs in the background while the Rust
# tests run, which spend much of their time waiting for the processes they sample; the
# end-to-end tests wait for it.
mkdir -p target
go_log=target/go-side.log
(
  set -e
  bash scripts/build-jaeger.sh
  bash scripts/build-prometheus.sh
  source scripts/go-build.sh
  echo "== go test (the spanprofiles connector) =="
  go test -C collector/spanprofilesconnector -trimpath ./...
) >"$go_log" 2>&1 &
go_side=$!
# A failure below ends this script: the background build ends with it.
trap 'kill "$go_side" 2>/dev/null || true' EXIT

echo "== house style: rustfmt, clippy =="
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings

echo "== house style: gofmt, go vet (collector/) =="
source scripts/go-build.sh
unformatted=$(gofmt -l collector)
[[ -z "$unformatted" ]] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }
# -trimpath as scripts/build-collector.sh builds: the dependencies compiled there are reused, a
# cold machine does not compile them twice (~4 min of CPU).
go vet -C collector -trimpath ./...
go vet -C collector/spanprofilesconnector -trimpath ./...

echo "== types: index.d.ts against typed use of every export (tsc --noEmit, strict, nodenext) =="
node_modules/.bin/tsc -p __test__/types/tsconfig.json --noEmit

echo "== cargo test (addon unit tests, reader and sampler) =="
cargo test --profile test-release --workspace

echo "== node --test (Node $(node --version)) =="
npm test

echo "== the Go side: Jaeger's and Prometheus's builds and the connector's go test (run in the background) =="
go_status=0
wait "$go_side" || go_status=$?
cat "$go_log"
[[ $go_status -eq 0 ]] || { echo "the Go side failed (exit $go_status): see above" >&2; exit 1; }

echo "== thread-ctx without eBPF (cargo feature ebpf off), for the end-to-end test to report with =="
# Beside the test build (~1 min of CPU: the crates whose features differ without the sampler),
# copied out of target/test-release/, where the next cargo build or test puts its own back.
cargo build --profile test-release -p thread-ctx --no-default-features
mkdir -p target/no-ebpf
cp target/test-release/thread-ctx target/no-ebpf/thread-ctx

echo "== end to end: spanprofiles with a real service, agent, Collector, Jaeger and Prometheus (once, not per Node) =="
node --test __test__/e2e/

echo "== the same tests on the other supported Node versions =="
NODE_MATRIX="${NODE_MATRIX:-18 22 22acf 24 26}" bash scripts/node-matrix.sh
