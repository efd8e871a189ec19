#!/usr/bin/env bash
# The Go programs, from Go modules, each rebuilt only when its inputs change: the project's
# Collector (target/otelcol/: the spanprofiles and spanmetrics connectors; the OTLP tests and the
# demo stream into it), Jaeger v2 (target/jaeger/: the trace backend the end-to-end tests and the
# demo read enriched spans back from) and Prometheus 3 (target/prometheus/: the metrics backend of
# the wait-metrics test and the demo). ~18 min of CPU on a cold machine: setup.sh and test.sh run
# it in the background of the Rust build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-collector.sh
bash scripts/build-jaeger.sh
bash scripts/build-prometheus.sh
