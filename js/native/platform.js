'use strict';
// Which prebuilt files fit this machine, named the way napi-rs names them: the platform tuple
// (`linux-x64-gnu`), the addon file `otel-thread-ctx.<tuple>.node` and the per-platform package
// `otel-thread-ctx-<tuple>` that holds the addon and the `thread-ctx` binary. Shared by the addon
// loader (native.js) and the `thread-ctx` command shim (bin/thread-ctx.js).

const fs = require('node:fs');
const path = require('node:path');

const PACKAGE_NAME = 'otel-thread-ctx';
const PACKAGE_ROOT = path.join(__dirname, '..', '..');
/** The tuples a prebuilt exists for. The addon and the reader read glibc's TLS layout. */
const SUPPORTED = ['linux-x64-gnu'];

// musl vs glibc, as napi-rs's generated loader decides it: /usr/bin/ldd first (cheap), then the
// process report's glibc version (costs a few ms, only when ldd is missing).
function isMusl() {
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  } catch {
    const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null;
    if (report?.header?.glibcVersionRuntime) return false;
    return Array.isArray(report?.sharedObjects) &&
      report.sharedObjects.some((f) => f.includes('libc.musl-') || f.includes('ld-musl-'));
  }
}

/** This machine's tuple (`linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`, ...). */
function platformTuple() {
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`;
  return `linux-${process.arch}-${isMusl() ? 'musl' : 'gnu'}`;
}

/**
 * Where the prebuilt files for this machine are, or why there are none. `candidates` lists, in
 * napi-rs's order, the local file next to the package (a build from a checkout) and then the
 * per-platform package (bundled in the release tarball, or installed from a registry).
 */
function prebuilt() {
  const tuple = platformTuple();
  const platformPackage = `${PACKAGE_NAME}-${tuple}`;
  if (!SUPPORTED.includes(tuple)) {
    return {
      tuple, platformPackage, supported: false,
      reason: `no prebuilt ${PACKAGE_NAME} for ${tuple} (prebuilt for: ${SUPPORTED.join(', ')})`,
    };
  }
  return {
    tuple, platformPackage, supported: true,
    localAddon: path.join(PACKAGE_ROOT, `${PACKAGE_NAME}.${tuple}.node`),
    platformPackageDir() {
      const manifest = require.resolve(`${platformPackage}/package.json`, { paths: [PACKAGE_ROOT] });
      return path.dirname(manifest);
    },
  };
}

module.exports = { PACKAGE_NAME, PACKAGE_ROOT, platformTuple, prebuilt };
