#!/usr/bin/env bash
# Builds a release: the addon and `thread-ctx` with cargo's `dist` profile (fat LTO; binary stripped), laid out the way
# napi-rs lays out prebuilt platform packages, packed with `npm pack`:
#
#   DIR/otel-thread-ctx-V.tgz                the package with the platform package bundled in it:
#                                            installs from the file alone, offline, without Rust
#   DIR/otel-thread-ctx-linux-x64-gnu-V.tgz  the platform package: the addon and thread-ctx
#   DIR/registry/otel-thread-ctx-V.tgz       the package for a registry: bundles nothing, names the
#                                            platform package in optionalDependencies (publish the
#                                            platform package first, then this one)
#   DIR/thread-ctx-agent-V-linux-x64.tar.gz  the agent for a host (thread-ctx, its systemd unit and
#                                            installer) and the agent image's build input
#
#   scripts/release.sh [--out DIR] [--profile dist|release]   (DIR defaults to dist/)
#
# Needs what scripts/setup.sh installs (Rust, clang, libbpf headers, binutils, g++ and the Node
# 22/24/26 headers for the V8 addon) and nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

out="$root/dist"
# --profile release: the tests' packaging of the build they already have (no second, LTO build
# of every dependency); what ships is --profile dist, the default.
profile=dist
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
    --profile)
      case "${2:-}" in
        dist | release) profile="$2"; shift 2 ;;
        *) echo "release: --profile: expected dist or release, got '${2:-}'" >&2; exit 2 ;;
      esac ;;
    *) echo "release: unknown argument '$1' (expected --out DIR, --profile dist|release)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"

# The tuple napi-rs would name this target; the only one built so far.
tuple=linux-x64-gnu
platform_dir="npm/$tuple"
field() { node -p "require('./$1').$2"; }
name="$(field package.json name)"
version="$(field package.json version)"
platform_name="$(field "$platform_dir/package.json" name)"

# One version everywhere: the package, its platform package and the crates (every crate takes the
# workspace's version from Cargo.toml's [workspace.package]).
crate_version() { sed -n 's/^version = "\(.*\)"/\1/p' "$1" | head -1; }
if grep -L '^version.workspace = true' thread-ctx/*/Cargo.toml | grep -v fuzz | grep -q .; then
  echo "release: every crate under thread-ctx/ must say version.workspace = true" >&2
  exit 1
fi
for v in "$(field "$platform_dir/package.json" version)" "$(crate_version Cargo.toml)"; do
  if [[ "$v" != "$version" ]]; then
    echo "release: version mismatch: package.json says $version, but $platform_dir/package.json and" \
      "Cargo.toml's [workspace.package] must say it too (found $v)" >&2
    exit 1
  fi
done
if [[ "$platform_name" != "$name-$tuple" ]]; then
  echo "release: $platform_dir/package.json must be named $name-$tuple (napi-rs's naming), not $platform_name" >&2
  exit 1
fi

echo "release: building $name $version for $tuple (cargo build --profile $profile)"
cargo build --profile "$profile" --quiet -p otel-thread-ctx -p thread-ctx

stage="$(mktemp -d "${TMPDIR:-/tmp}/otel-thread-ctx-release.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

# The platform package: the addon (symbol table kept: .dynsym carries otel_thread_ctx_v1 either
# way, the rest names the addon's frames in profiles) and the stripped binary.
plat="$stage/$tuple"
mkdir -p "$plat"
cp "$platform_dir/package.json" "$platform_dir/README.md" LICENSE "$plat/"
cp "target/$profile/libotel_thread_ctx.so" "$plat/$name.$tuple.node"
strip --strip-debug "$plat/$name.$tuple.node"
cp "target/$profile/thread-ctx" "$plat/thread-ctx"
strip "$plat/thread-ctx"
chmod 755 "$plat/thread-ctx"
# The V8 part of schema 'nodejs', one file per Node ABI (22, 24, 26), loaded by js/nodejs/v8-addon.js.
bash scripts/build-v8-addon.sh
mkdir -p "$plat/v8-addon"
for f in prebuilds/v8-addon/node-abi*.node; do
  cp "$f" "$plat/v8-addon/"
  strip --strip-debug "$plat/v8-addon/$(basename "$f")"
done

# The main package: the files package.json lists, and a manifest for users (no dev scripts, no
# devDependencies) that names the platform package as napi-rs's prepublish step does.
main="$stage/main"
mkdir -p "$main"
node -p "require('./package.json').files.join('\n')" | while read -r f; do cp -r --parents "$f" "$main/"; done
manifest() { # BUNDLED(true|false): writes the main package's package.json
  node - "$main/package.json" "$platform_name" "$version" "$1" <<'EOF'
const fs = require('node:fs');
const [file, platformName, version, bundled] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
delete pkg.scripts;
delete pkg.devDependencies;
pkg.optionalDependencies = { ...pkg.optionalDependencies, [platformName]: version };
// Bundled, npm installs the platform package from this tarball and never asks a registry for it.
if (bundled === 'true') pkg.bundleDependencies = [platformName];
fs.writeFileSync(file, `${JSON.stringify(pkg, null, 2)}\n`);
EOF
}

pack() { # DIR DEST: npm pack DIR into DEST, prints the tarball's path
  mkdir -p "$2"
  local tgz
  tgz="$(cd "$1" && npm pack --silent --pack-destination "$2")"
  echo "$2/$tgz"
}

platform_tgz="$(pack "$plat" "$out")"
manifest false
registry_tgz="$(pack "$main" "$out/registry")"
# npm pack takes bundled dependencies from node_modules: the platform package as npm unpacks it.
manifest true
mkdir -p "$main/node_modules/$platform_name"
tar -xzf "$platform_tgz" -C "$main/node_modules/$platform_name" --strip-components=1
main_tgz="$(pack "$main" "$out")"

# The agent for hosts without Node: the binary with its systemd unit, settings and installer
# (deploy/systemd/), unpacking to thread-ctx-agent-V/; deploy/Dockerfile builds the agent image
# from it.
agent="$stage/thread-ctx-agent-$version"
mkdir -p "$agent"
cp "$plat/thread-ctx" deploy/systemd/thread-ctx-agent.service deploy/systemd/agent.env deploy/systemd/install.sh "$agent/"
chmod 755 "$agent/install.sh"
agent_tgz="$out/thread-ctx-agent-$version-linux-x64.tar.gz"
tar -czf "$agent_tgz" -C "$stage" --owner=0 --group=0 --numeric-owner "thread-ctx-agent-$version"

glibc="$(objdump -T "$plat/thread-ctx" "$plat/$name.$tuple.node" "$plat"/v8-addon/*.node | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
echo "release: needs $glibc or newer (the build machine's glibc); Node-API 6 (Node >= 18.19)"
for t in "$main_tgz" "$platform_tgz" "$registry_tgz" "$agent_tgz"; do
  echo "release: $t ($(du -k "$t" | cut -f1) KiB)"
  tar -tzvf "$t" | awk '{ printf "  %10s  %s\n", $3, $6 }'
done
