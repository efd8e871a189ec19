#!/usr/bin/env bash
# The flame-graph component of `thread-ctx report --serve/--html`'s page, copied from the npm
# packages package.json pins (d3, d3-flame-graph; `npm ci` installs them) into the binary's
# assets, with their licenses: the binary includes them at build time (include_str!), so that a
# build needs no node_modules and the page fetches nothing. Run it after changing their versions.
set -euo pipefail
cd "$(dirname "$0")/.."
out=thread-ctx/cli/src/page/assets/vendor
mkdir -p "$out"
for pkg in d3 d3-flame-graph; do
  [[ -d node_modules/$pkg ]] || { echo "node_modules/$pkg missing: run npm ci first" >&2; exit 1; }
done
cp node_modules/d3/dist/d3.min.js "$out/d3.min.js"
cp node_modules/d3/LICENSE "$out/d3.LICENSE"
cp node_modules/d3-flame-graph/dist/d3-flamegraph.umd.min.js "$out/d3-flamegraph.min.js"
cp node_modules/d3-flame-graph/dist/d3-flamegraph.css "$out/d3-flamegraph.css"
cp node_modules/d3-flame-graph/LICENSE "$out/d3-flame-graph.LICENSE"
printf 'd3 %s\nd3-flame-graph %s\n' \
  "$(node -p "require('./node_modules/d3/package.json').version")" \
  "$(node -p "require('./node_modules/d3-flame-graph/package.json').version")" > "$out/VERSIONS"
echo "vendored into $out: $(tr '\n' ' ' < "$out/VERSIONS")"
