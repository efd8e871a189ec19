#!/usr/bin/env bash
# Builds Jaeger v2 (github.com/jaegertracing/jaeger/cmd/jaeger v1.75.0, pinned with everything
# it needs in collector/jaeger/go.mod and go.sum) into target/jaeger/jaeger: the trace backend
# the spanprofiles end-to-end test and the demo read enriched spans back from. Builds once: it
# rebuilds only when collector/jaeger/go.mod or go.sum changed since the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/go-build.sh
go_build_once build-jaeger target/jaeger/jaeger collector/jaeger github.com/jaegertracing/jaeger/cmd/jaeger \
  collector/jaeger/go.mod collector/jaeger/go.sum
