'use strict';
// What the instruction-count benchmarks share (span-workload/instructions.js,
// service/instructions.js): valgrind's callgrind on one node process, its counters dumped before
// each uv_os_getpriority() call (the process calls os.getPriority() to open and close the window),
// so dump 2 of thread 1 (the event-loop thread) holds the window.

const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

function requireValgrind() {
  try {
    execFileSync('valgrind', ['--version']);
  } catch {
    throw new Error('valgrind: expected it on PATH (apt-get install valgrind)');
  }
}

/** callgrind's options, writing its dumps to DIR/MODE.PID.N-THREAD; returns { args, prefix }. */
function callgrindOptions(outDir, mode) {
  const prefix = path.join(outDir, `${mode.replace(/[^\w+-]/g, '_')}.%p`);
  return {
    prefix,
    args: ['--tool=callgrind', '--separate-threads=yes', '--dump-before=uv_os_getpriority', `--callgrind-out-file=${prefix}`],
  };
}

/** The window's dump of process `pid` and its total instructions; throws when it is missing. */
function windowDump(prefix, pid, what) {
  const file = `${prefix.replace('%p', String(pid))}.2-01`;
  if (!fs.existsSync(file)) throw new Error(`${what}: expected callgrind's dump of the window, ${file}, it is missing`);
  const total = Number(/^totals: (\d+)/m.exec(fs.readFileSync(file, 'utf8'))?.[1]);
  return { file, total };
}

module.exports = { requireValgrind, callgrindOptions, windowDump };
