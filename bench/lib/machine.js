'use strict';
// What the report says about the machine and how busy it was: CPU model and count, kernel,
// load average, and per-CPU busy time from /proc/stat (to show how much of the server's CPU
// other processes took during a measured window).

const fs = require('node:fs');
const os = require('node:os');

function cpuModel() {
  const match = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
  return match === null ? os.cpus()[0]?.model ?? 'unknown CPU' : match[1].trim();
}

function describeMachine() {
  return {
    nproc: os.availableParallelism ? os.availableParallelism() : os.cpus().length,
    cpuModel: cpuModel(),
    kernel: `${os.type()} ${os.release()}`,
  };
}

function loadAverage() {
  return os.loadavg().map((value) => Number(value.toFixed(2)));
}

// Busy and steal time of one CPU (or, with cpu null, of all CPUs together) so far, in
// microseconds (/proc/stat counts USER_HZ = 100 ticks).
const TICK_US = 10_000;
function cpuTimes(cpu) {
  const prefix = cpu === null ? 'cpu ' : `cpu${cpu} `;
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n').find((l) => l.startsWith(prefix));
  if (line === undefined) throw new Error(`/proc/stat: expected a line for ${prefix.trim()}, found none`);
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return { busyUs: (user + nice + system + irq + softirq) * TICK_US, stealUs: steal * TICK_US };
}

// Which code was measured: the tree's commit, and whether js/ (the context manager) differs from it.
function codeRevision(root) {
  const { execFileSync } = require('node:child_process');
  try {
    const commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['-C', root, 'status', '--porcelain', '--', 'js'], { encoding: 'utf8' }).trim() !== '';
    return dirty ? `${commit} + uncommitted js/ changes` : commit;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

module.exports = { describeMachine, loadAverage, cpuTimes, codeRevision };
