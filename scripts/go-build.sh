# Sourced by the scripts that build Go programs (build-collector.sh, build-jaeger.sh) and by
# test.sh: puts Go on PATH; go_build_once builds a program unless its sources are unchanged.
# Go's own install location, for shells whose PATH lacks it.
[[ -x /usr/local/go/bin/go ]] && PATH="$PATH:/usr/local/go/bin"

# require_go NAME: stops with a message (naming the script NAME) when Go is missing or older
# than the go.mod files under collector/ need.
require_go() {
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

# go_build_once NAME BIN MODULE_DIR PACKAGE SOURCE...: `go build` of PACKAGE in MODULE_DIR into
# BIN, skipped when the SOURCE files (and GO_BUILD_TAGS, the build tags if any) hash as they did
# at BIN's last build (BIN.sha256).
go_build_once() {
  local name=$1 bin=$2 dir=$3 pkg=$4
  shift 4
  require_go "$name"
  local stamp="$bin.sha256" sum tags=${GO_BUILD_TAGS:-}
  sum=$( (cat "$@" && echo "tags: $tags") | sha256sum | cut -d' ' -f1)
  if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$sum" ]]; then
    echo "$name: $bin is up to date"
    return 0
  fi
  mkdir -p "$(dirname "$bin")"
  echo "$name: building $bin with $go_version (a cold build takes several minutes)"
  local start
  start=$(date +%s)
  # -mod=readonly: build exactly what go.mod and go.sum pin; never resolve anything newer.
  GOFLAGS=-mod=readonly go build -C "$dir" -trimpath ${tags:+-tags "$tags"} -ldflags='-s -w' -o "$PWD/$bin.tmp" "$pkg"
  mv "$bin.tmp" "$bin"
  echo "$sum" >"$stamp"
  echo "$name: built $bin in $(($(date +%s) - start)) s"
}
