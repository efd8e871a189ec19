#!/usr/bin/env bash
# Builds the OpenTelemetry Collector that the OTLP tests and the demo stream profiles into
# (collector/: OTLP receiver, memory_limiter and batch processors, file exporter, one Collector
# release pinned in collector/go.mod and go.sum) into target/otelcol/otelcol-thread-ctx.
# Builds once: it rebuilds only when a file in collector/ changed since the last build.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT_DIR=target/otelcol
BIN="$OUT_DIR/otelcol-thread-ctx"
STAMP="$OUT_DIR/source.sha256"

# Go's own install location, for shells whose PATH lacks it.
[[ -x /usr/local/go/bin/go ]] && PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  echo "build-collector: Go is not installed (or not on PATH). The OTLP tests and the demo need an" >&2
  echo "OpenTelemetry Collector built from Go modules: install Go 1.26 or newer and rerun." >&2
  exit 1
fi
version=$(go env GOVERSION)           # e.g. go1.26.8
minor=$(sed -E 's/^go1\.([0-9]+).*/\1/' <<<"$version")
if [[ ! "$minor" =~ ^[0-9]+$ ]] || (( minor < 26 )); then
  echo "build-collector: $version is too old; collector/go.mod needs Go 1.26 or newer." >&2
  exit 1
fi

sum=$(cat collector/go.mod collector/go.sum collector/*.go | sha256sum | cut -d' ' -f1)
if [[ -x "$BIN" && -f "$STAMP" && "$(cat "$STAMP")" == "$sum" ]]; then
  echo "build-collector: $BIN is up to date"
  exit 0
fi

mkdir -p "$OUT_DIR"
echo "build-collector: building $BIN with $version (a cold build takes several minutes)"
start=$(date +%s)
# -mod=readonly: build exactly what go.mod and go.sum pin; never resolve anything newer.
GOFLAGS=-mod=readonly go build -C collector -trimpath -ldflags='-s -w' -o "$PWD/$BIN.tmp" .
mv "$BIN.tmp" "$BIN"
echo "$sum" >"$STAMP"
echo "build-collector: built $BIN in $(( $(date +%s) - start )) s"
