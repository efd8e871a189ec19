'use strict';
// Shared test helpers: the package under test, loaded so that a missing native addon fails loudly.
process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
const path = require('node:path');
const fs = require('node:fs');

const ROOT = path.join(__dirname, '..', '..');
const ADDON = path.join(ROOT, 'otel-thread-ctx.linux-x64-gnu.node');
if (!fs.existsSync(ADDON)) {
  throw new Error(`${ADDON} is missing: run "npm run build" first`);
}

const IDS = {
  traceA: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanA: '00f067aa0ba902b7',
  traceB: 'ABCDEF0123456789abcdef0123456789',
  spanB: 'FEDCBA9876543210',
};

/** A copy of the 640-byte record as it is in the page right now. */
function snapshot(api) {
  return Buffer.from(api.recordView()).toString('hex');
}

/** Whether this process is root (eBPF, gdb attach and capability tests need it). */
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

module.exports = { ROOT, ADDON, IDS, snapshot, isRoot, api: require(ROOT) };
