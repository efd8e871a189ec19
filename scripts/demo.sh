#!/usr/bin/env bash
# The README's demo command: installs and builds what is needed (scripts/setup.sh), then runs the
# end-to-end demo (demo/run.js): an instrumented HTTP service under load, sampled from outside by
# `thread-ctx agent`, which streams span-linked profiles into the OpenTelemetry Collector setup
# built; `thread-ctx report` then shows what the Collector received. eBPF sampling needs root;
# without it the demo falls back to ptrace snapshots and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_FOR=demo bash scripts/setup.sh >&2
exec node demo/run.js "$@"
