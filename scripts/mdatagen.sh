#!/usr/bin/env bash
# Regenerates the spanprofiles connector's internal/metadata, documentation.md and
# generated_*_test.go from its metadata.yaml with mdatagen v0.161.0, the Collector release the
# connector is built against (run through `go generate` in collector/spanprofilesconnector).
#
# mdatagen v0.161.0 imports go.opentelemetry.io/collector/internal/schemagen v0.161.0, a module
# the Go module proxy reachable here does not serve. collector/tools/go.mod therefore replaces it
# with that folder of a checkout of open-telemetry/opentelemetry-collector, named by
# COLLECTOR_SRC (default: the collector repository's mirror, checked out into
# target/collector-src). The generated files are committed; CI does not regenerate them.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$PATH:/usr/local/go/bin"
src="${COLLECTOR_SRC:-}"
if [ -z "$src" ]; then
  mirror=/work/.mirror/open-telemetry+opentelemetry-collector/repo
  src="$here/target/collector-src"
  if [ ! -d "$src/internal/schemagen" ]; then
    [ -d "$mirror" ] || { echo "mdatagen.sh: set COLLECTOR_SRC to a checkout of open-telemetry/opentelemetry-collector (its internal/schemagen is needed)" >&2; exit 2; }
    mkdir -p "$src" && git -C "$mirror" archive HEAD internal/schemagen | tar -x -C "$src"
  fi
fi
[ -d "$src/internal/schemagen" ] || { echo "mdatagen.sh: $src/internal/schemagen not found (COLLECTOR_SRC must be a checkout of open-telemetry/opentelemetry-collector)" >&2; exit 2; }
tools="$here/collector/tools"
modfile="$(mktemp -d)/go.mod"
sed "s#^replace go.opentelemetry.io/collector/internal/schemagen => .*#replace go.opentelemetry.io/collector/internal/schemagen => $src/internal/schemagen#" "$tools/go.mod" > "$modfile"
cp "$tools/go.sum" "${modfile%.mod}.sum"
go tool -modfile="$modfile" mdatagen "${1:-metadata.yaml}"
# mdatagen v0.161.0's generated_component_test.go calls xconnector.Factory for a connector's
# profiles_to_* signals but imports xconnector only for a plain `profiles` one (which no
# connector has): add the import where the file uses it, so the lifecycle tests compile and run.
generated="$(dirname "${1:-metadata.yaml}")/generated_component_test.go"
if [ -f "$generated" ] && grep -q 'xconnector\.Factory' "$generated" && ! grep -q '"go.opentelemetry.io/collector/connector/xconnector"' "$generated"; then
  sed -i 's#^\t"go.opentelemetry.io/collector/connector/connectortest"$#&\n\t"go.opentelemetry.io/collector/connector/xconnector"#' "$generated"
fi
