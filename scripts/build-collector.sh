#!/usr/bin/env bash
# Builds the OpenTelemetry Collector that the OTLP tests and the demo stream profiles into
# (collector/: OTLP receiver, memory_limiter processor, file exporter, the spanprofiles
# connector from collector/spanprofilesconnector, contrib's spanmetrics connector and the OTLP
# exporter, one Collector release pinned in collector/go.mod and go.sum) into
# target/otelcol/otelcol-thread-ctx. Builds once: it rebuilds only when a file it is built
# from changed since the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/go-env.sh
require_go build-collector

OUT_DIR=target/otelcol
BIN="$OUT_DIR/otelcol-thread-ctx"
STAMP="$OUT_DIR/source.sha256"

sum=$(cat collector/go.mod collector/go.sum collector/*.go \
  collector/spanprofilesconnector/go.mod collector/spanprofilesconnector/go.sum collector/spanprofilesconnector/*.go | sha256sum | cut -d' ' -f1)
if [[ -x "$BIN" && -f "$STAMP" && "$(cat "$STAMP")" == "$sum" ]]; then
  echo "build-collector: $BIN is up to date"
  exit 0
fi

mkdir -p "$OUT_DIR"
echo "build-collector: building $BIN with $go_version (a cold build takes several minutes)"
start=$(date +%s)
# -mod=readonly: build exactly what go.mod and go.sum pin; never resolve anything newer.
GOFLAGS=-mod=readonly go build -C collector -trimpath -ldflags='-s -w' -o "$PWD/$BIN.tmp" .
mv "$BIN.tmp" "$BIN"
echo "$sum" >"$STAMP"
echo "build-collector: built $BIN in $(($(date +%s) - start)) s"
