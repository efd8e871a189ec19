#!/usr/bin/env node
'use strict';
// `thread-ctx` for npm users: runs the native reader shipped in the per-platform package
// (otel-thread-ctx-linux-x64-gnu), or a checkout's own cargo build, with the same arguments,
// stdio, exit code and signals. Says plainly when no binary fits this machine.

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { PACKAGE_ROOT, prebuilt } = require('../js/platform');

// Exit code when there is nothing to run: the reader's "could not read" code.
const EXIT_NO_BINARY = 3;

function fail(message) {
  process.stderr.write(`thread-ctx: ${message}\n`);
  process.exit(EXIT_NO_BINARY);
}

function findBinary() {
  const p = prebuilt();
  if (!p.supported) {
    fail(`${p.reason}. thread-ctx reads glibc's TLS layout and loads an x86-64 eBPF program; ` +
      'on other machines build it from a checkout with cargo (see the README).');
  }
  // A checkout built with `bash scripts/setup.sh`: its cargo build, like the addon's local file.
  const local = path.join(PACKAGE_ROOT, 'target', 'release', 'thread-ctx');
  if (fs.existsSync(local)) return local;
  let dir;
  try {
    dir = p.platformPackageDir();
  } catch {
    fail(`the package ${p.platformPackage}, which carries the thread-ctx binary for ${p.tuple}, is not installed; ` +
      'install otel-thread-ctx from its release tarball (it bundles that package), or add the package itself.');
  }
  const bin = path.join(dir, 'thread-ctx');
  if (!fs.existsSync(bin)) fail(`${p.platformPackage} is installed at ${dir}, but has no thread-ctx binary in it`);
  return bin;
}

const child = spawn(findBinary(), process.argv.slice(2), { stdio: 'inherit' });
// Ctrl-C reaches the whole process group, the binary included; these handlers keep the shim alive
// until the binary has finished (record writes its outputs on SIGINT) and pass on signals sent to
// the shim alone.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => child.kill(signal));
}
child.on('error', (err) => fail(`could not run ${child.spawnfile}: ${err.message}`));
child.on('exit', (code, signal) => {
  if (signal) {
    // Die of the same signal, so the caller sees what the binary saw.
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.removeAllListeners(s);
    process.kill(process.pid, signal);
    process.exit(128 + require('node:os').constants.signals[signal]); // a signal node ignores (SIGPIPE)
  } else {
    process.exit(code);
  }
});
