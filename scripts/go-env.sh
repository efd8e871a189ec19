# Sourced by the scripts that build Go programs (build-collector.sh, build-jaeger.sh): puts Go
# on PATH and stops with a message when it is missing or older than the go.mod files need.
# Go's own install location, for shells whose PATH lacks it.
[[ -x /usr/local/go/bin/go ]] && PATH="$PATH:/usr/local/go/bin"
require_go() { # $1: the script's name, for its messages
  if ! command -v go >/dev/null 2>&1; then
    echo "$1: Go is not installed (or not on PATH). The OTLP tests and the demo need an" >&2
    echo "OpenTelemetry Collector built from Go modules: install Go 1.26 or newer and rerun." >&2
    exit 1
  fi
  go_version=$(go env GOVERSION) # e.g. go1.26.8
  local minor
  minor=$(sed -E 's/^go1\.([0-9]+).*/\1/' <<<"$go_version")
  if [[ ! "$minor" =~ ^[0-9]+$ ]] || ((minor < 26)); then
    echo "$1: $go_version is too old; the go.mod files under collector/ need Go 1.26 or newer." >&2
    exit 1
  fi
}
