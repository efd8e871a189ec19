#!/usr/bin/env node
'use strict';
// `thread-ctx` for npm users: runs the native reader shipped in the per-platform package
// (otel-thread-ctx-linux-x64-gnu), or a checkout's own cargo build, with the same arguments,
// stdio, exit status and signals. Says plainly when no binary fits this machine.

const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { constants } = require('node:os');
const { PACKAGE_ROOT, prebuilt } = require('../js/native/platform');

// Exit code when there is nothing to run: the reader's "could not read" code.
const EXIT_NO_BINARY = 3;
// Signals passed on to the binary: the ones that ask a command to stop (agent and record end
// their window or recording and write it; the others end at once).
const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'];
// How often to look whether the package manager that started this shim is still there: a
// getppid() call, twice a second.
const PARENT_CHECK_MS = 500;

function fail(message) {
  process.stderr.write(`thread-ctx: ${message}\n`);
  process.exit(EXIT_NO_BINARY);
}

function findBinary() {
  const p = prebuilt();
  if (!p.supported) {
    fail(`${p.reason}. thread-ctx reads glibc's TLS layout and loads an x86-64 eBPF program; ` +
      'on other machines build it from a checkout with cargo (see CONTRIBUTING.md).');
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

const parent = process.ppid;
// THREAD_CTX_SHIM_PID: the binary asks for SIGTERM when this process dies (PR_SET_PDEATHSIG),
// so a shim killed with SIGKILL, which forwards nothing, leaves no binary running.
const child = spawn(findBinary(), process.argv.slice(2), { stdio: 'inherit', env: { ...process.env, THREAD_CTX_SHIM_PID: String(process.pid) } });

// Ctrl-C reaches the whole process group, the binary included; these handlers keep the shim alive
// until the binary has finished (agent and record send or write their last window) and pass on
// signals sent to the shim alone, e.g. by a supervisor that knows only the shim's pid.
for (const signal of FORWARDED) {
  process.on(signal, () => child.kill(signal));
}

// Under a package manager (npx, npm exec, npm run, and yarn's and pnpm's runners, which set
// npm_lifecycle_event) the shim runs under `sh -c` under npm. `kill -TERM` of npx ends npm and its
// shell, and nothing passes the signal on: the shim and the binary would go on, reparented,
// exporting profiles for nobody. Their parent going away is the only sign of it, so then the
// binary gets the SIGTERM that was meant for it. Started any other way (a shell, `nohup`,
// systemd) the shim outlives its parent if it is told to, like the binary itself.
if (process.env.npm_lifecycle_event !== undefined) {
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    child.kill('SIGTERM');
  }, PARENT_CHECK_MS);
  watch.unref();
}

child.on('error', (err) => fail(`could not run ${child.spawnfile}: ${err.message}`));
child.on('exit', (code, signal) => {
  if (signal === null) process.exit(code);
  // Die of the same signal, so the caller sees what the binary saw.
  for (const s of FORWARDED) process.removeAllListeners(s);
  process.kill(process.pid, signal);
  // A signal whose default action does not end a Node process (SIGPIPE, which Node ignores):
  // the shell's convention for "killed by this signal".
  process.exit(128 + constants.signals[signal]);
});
