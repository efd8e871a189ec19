#!/usr/bin/env bash
# Builds Jaeger v2 (github.com/jaegertracing/jaeger/cmd/jaeger v1.75.0, pinned with everything
# it needs in collector/jaeger/go.mod and go.sum) into target/jaeger/jaeger: the trace backend
# the spanprofiles end-to-end test and the demo read enriched spans back from. Builds once: it
# rebuilds only when collector/jaeger/go.mod or go.sum changed since the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/go-env.sh
require_go build-jaeger

OUT_DIR=target/jaeger
BIN="$OUT_DIR/jaeger"
STAMP="$OUT_DIR/source.sha256"

sum=$(cat collector/jaeger/go.mod collector/jaeger/go.sum | sha256sum | cut -d' ' -f1)
if [[ -x "$BIN" && -f "$STAMP" && "$(cat "$STAMP")" == "$sum" ]]; then
  echo "build-jaeger: $BIN is up to date"
  exit 0
fi

mkdir -p "$OUT_DIR"
echo "build-jaeger: building $BIN with $go_version (a cold build takes several minutes)"
start=$(date +%s)
GOFLAGS=-mod=readonly go build -C collector/jaeger -trimpath -ldflags='-s -w' -o "$PWD/$BIN.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
mv "$BIN.tmp" "$BIN"
echo "$sum" >"$STAMP"
echo "build-jaeger: built $BIN in $(($(date +%s) - start)) s"
