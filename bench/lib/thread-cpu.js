'use strict';
// CPU time of the calling thread, in ns, and the time it spent runnable but waiting for a CPU.
// From /proc/thread-self/schedstat (the scheduler's sum_exec_runtime, the same clock as
// CLOCK_THREAD_CPUTIME_ID): the same source on every Node version, no addon needed. On a VM it
// excludes what the hypervisor steals (paravirtual steal accounting), unlike wall time, and unlike
// process.cpuUsage() it leaves out V8's and libuv's helper threads.

const fs = require('node:fs');

const SCHEDSTAT = '/proc/thread-self/schedstat';

function threadTimes() {
  const text = fs.readFileSync(SCHEDSTAT, 'utf8');
  const [runNs, waitNs] = text.trim().split(/\s+/).map(Number);
  if (!Number.isFinite(runNs) || !Number.isFinite(waitNs)) {
    throw new Error(`${SCHEDSTAT}: expected "run_ns wait_ns slices", got ${JSON.stringify(text)}`);
  }
  return { cpuNs: runNs, waitNs };
}

module.exports = { threadTimes };
