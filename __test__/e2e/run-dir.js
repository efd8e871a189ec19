'use strict';
// What an end-to-end test of the pipeline starts with: a directory for its logs and files, and
// the processes it starts, each stopped when the test ends (the last started first). The
// directory is kept when the test failed, or when asked (SPANPROFILES_E2E_KEEP=1), to look at.
// And the CPU time one of those processes used, for the tests that measure a part's cost.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const pipeline = require('../../demo/pipeline');

/** { dir, procs }: push each process started to procs. */
function runDir(t, name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
  const procs = [];
  t.after(async () => {
    for (const p of procs.reverse()) await pipeline.stop(p, 10_000);
    if (!t.passed || process.env.SPANPROFILES_E2E_KEEP === '1') t.diagnostic(`logs and files kept in ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dir, procs };
}

/** The CPU time the kernel gave process `pid` (utime + stime, in clock ticks of 10 ms), in seconds. */
function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

module.exports = { runDir, cpuSeconds };
