#!/usr/bin/env bash
# Builds the OpenTelemetry Collector that the OTLP tests and the demo stream profiles into
# (collector/: OTLP receiver, memory_limiter processor, file exporter, the spanprofiles
# connector from collector/spanprofilesconnector, contrib's spanmetrics connector and the OTLP
# exporter, the file_storage, health_check and bearertokenauth extensions, one Collector release pinned in collector/go.mod and go.sum) into
# target/otelcol/otelcol-thread-ctx. Builds once: it rebuilds only when a file it is built
# from changed since the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/go-build.sh
go_build_once build-collector target/otelcol/otelcol-thread-ctx collector . \
  collector/go.mod collector/go.sum collector/*.go \
  collector/spanprofilesconnector/go.mod collector/spanprofilesconnector/go.sum $(find collector/spanprofilesconnector -name '*.go' -not -name '*_test.go')
