#!/usr/bin/env bash
# Runs every test: installs and builds what is needed, then Rust tests, Node tests, and the Node
# version matrix. eBPF tests skip when not root unless REQUIRE_EBPF=1 (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's heading says when it began, so that a slow run shows where its time went.
phase() { echo "== $* (at $((SECONDS / 60)) min $((SECONDS % 60)) s) =="; }

# The Go programs (the Collector, Jaeger, Prometheus: ~18 min of CPU on a cold machine) build in
# the background from the start, beside setup's downloads and Rust build, clippy and the Rust test
# build; the Rust tests wait for them before they run (the OTLP tests need the Collector, the
# demo's test all three). The connector's go test then runs beside the Rust tests, which spend
# much of their time waiting for the processes they sample.
bash scripts/setup.sh packages
mkdir -p target
go_builds_log=target/go-builds.log
go_test_log=target/go-test.log
bash scripts/build-go.sh >"$go_builds_log" 2>&1 &
go_builds=$!
go_test=
# A failure below ends this script: the background jobs end with it.
trap 'kill $go_builds $go_test 2>/dev/null || true' EXIT
SETUP_PACKAGES_DONE=1 SETUP_GO=none bash scripts/setup.sh

phase "house style: rustfmt, clippy"
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings

phase "house style: gofmt, go vet (collector/)"
source scripts/go-build.sh
unformatted=$(gofmt -l collector)
[[ -z "$unformatted" ]] || { echo "gofmt: not formatted: $unformatted" >&2; exit 1; }
# -trimpath as scripts/build-collector.sh builds: the dependencies compiled there are reused, a
# cold machine does not compile them twice (~4 min of CPU).
go vet -C collector -trimpath ./...
go vet -C collector/spanprofilesconnector -trimpath ./...

phase "types: index.d.ts against typed use of every export (tsc --noEmit, strict, nodenext)"
node_modules/.bin/tsc -p __test__/types/tsconfig.json --noEmit

phase "cargo test (addon unit tests, reader and sampler)"
cargo test --release --workspace --no-run --message-format=json-render-diagnostics >target/rust-test-binaries.json
phase "the Collector's, Jaeger's and Prometheus's builds (run in the background)"
go_status=0
wait "$go_builds" || go_status=$?
cat "$go_builds_log"
[[ $go_status -eq 0 ]] || { echo "a Go build failed (exit $go_status): see above" >&2; exit 1; }
(
  set -e
  source scripts/go-build.sh
  go test -C collector/spanprofilesconnector -trimpath ./...
) >"$go_test_log" 2>&1 &
go_test=$!
# The test binaries two at a time (scripts/rust-test-lanes.js says why; RUST_TEST_LANES=1 runs
# them one after the other, as cargo test does), then the doc tests.
node scripts/rust-test-lanes.js target/rust-test-binaries.json
cargo test --release --workspace --doc

phase "the release tarballs, packed once for every test file and Node version that installs them"
rm -rf target/test-dist
mkdir -p target/test-dist
bash scripts/release.sh --profile release --out target/test-dist >target/test-dist/release.log
export OTEL_THREAD_CTX_TEST_DIST="$PWD/target/test-dist"

phase "node --test (Node $(node --version))"
npm test

phase "go test (the spanprofiles connector; run in the background)"
go_status=0
wait "$go_test" || go_status=$?
cat "$go_test_log"
[[ $go_status -eq 0 ]] || { echo "the connector's go test failed (exit $go_status): see above" >&2; exit 1; }

phase "thread-ctx without eBPF (cargo feature ebpf off), for the end-to-end test to report with"
# Beside the release build (~1 min of CPU: the crates whose features differ without the sampler),
# copied out of target/release/; the build after it puts the eBPF one back (a relink).
cargo build --release -p thread-ctx --no-default-features
mkdir -p target/no-ebpf
cp target/release/thread-ctx target/no-ebpf/thread-ctx
cargo build --release -p thread-ctx

# MATRIX_AFTER_E2E=0: the Node matrix runs in the background of the end-to-end tests, one version at a time: node
# --test runs one file at a time on this 2-vCPU machine (os.availableParallelism() - 1), and both
# mostly wait on the processes they start. Tried on the shared VM: all of __test__/e2e/ (432 s)
# beside Node 22 and 26 (112 s, 108 s alone), every test passing; the e2e tests that need the CPU
# run their service at a high priority and load it again, longer, when the machine was too busy.
# Not yet the default (MATRIX_AFTER_E2E=0 turns it on): it passed in one trial only, and the e2e
# tests' floors (1,000 requests/s) have failed before on a busy machine. By default the matrix runs
# after them, two versions at a time (NODE_MATRIX_JOBS).
matrix_log=target/node-matrix.log
matrix=
if [[ "${MATRIX_AFTER_E2E:-1}" != 1 ]]; then
  NODE_MATRIX="${NODE_MATRIX:-18 22 22acf 24 26}" NODE_MATRIX_JOBS="${NODE_MATRIX_JOBS:-1}" bash scripts/node-matrix.sh >"$matrix_log" 2>&1 &
  matrix=$!
  trap 'kill $go_builds $go_test $matrix 2>/dev/null || true' EXIT
fi

phase "end to end: spanprofiles with a real service, agent, Collector, Jaeger and Prometheus (once, not per Node)"
node --test __test__/e2e/

phase "the same tests on the other supported Node versions"
if [[ -n "$matrix" ]]; then
  matrix_status=0
  wait "$matrix" || matrix_status=$?
  cat "$matrix_log"
  [[ $matrix_status -eq 0 ]] || { echo "the Node matrix failed (exit $matrix_status): see above" >&2; exit 1; }
else
  # After the e2e tests, alone: two versions side by side use both CPUs (Node 22 and 26: 79 s
  # against 108 s one after the other).
  NODE_MATRIX="${NODE_MATRIX:-18 22 22acf 24 26}" NODE_MATRIX_JOBS="${NODE_MATRIX_JOBS:-2}" bash scripts/node-matrix.sh
fi
phase "all tests passed"
