#!/usr/bin/env bash
# Builds Prometheus 3 (github.com/prometheus/prometheus/cmd/prometheus v0.316.0, i.e. 3.16.0,
# pinned with everything it needs in collector/prometheus/go.mod and go.sum) into
# target/prometheus/prometheus: the metrics backend the wait-metrics end-to-end test and the demo
# read the connector's metrics and spanmetrics' exemplars back from. Built with `remove_all_sd`:
# the tests push metrics over OTLP and scrape nothing, so no service discovery (AWS, Azure,
# Kubernetes, ...) is compiled in: a cold build takes 3.6 minutes of CPU instead of 10.7
# (CONTRIBUTING.md, "The test Collector"). Builds once: again only when collector/prometheus/go.mod or go.sum changed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/go-build.sh
GO_BUILD_TAGS=remove_all_sd go_build_once build-prometheus target/prometheus/prometheus collector/prometheus \
  github.com/prometheus/prometheus/cmd/prometheus collector/prometheus/go.mod collector/prometheus/go.sum
