'use strict';
// What a sampler sees, per mode, from outside the process: the span workload runs while
// `thread-ctx record` (the eBPF sampler, root) samples it; per mode, the share of the event-loop
// thread's CPU samples whose record carries a span. Used to judge a lazier restore (no `after`
// hooks): the extra share it shows a span for is CPU spent between callbacks (event loop,
// microtask machinery, GC), which the exact manager shows as none and a lazy one attributes to
// whichever span ran last.
//   node bench/span-workload/attribution.js [--node 20] [--modes full,proto:lazy-restore]
//     [--rounds 3] [--seconds 3] [--hz 999]

const path = require('node:path');
const { parseArgs } = require('node:util');
const { spawn, execFile } = require('node:child_process');
const { modeByName } = require('./modes');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const { positiveInteger } = require('../lib/args');
const { alternate } = require('../lib/rounds');
const { medianInterval } = require('../lib/stats');
const { fixed, utcMinute } = require('../lib/format');
const { packagesOrThrow, copiesDirectory, ROOT } = require('../lib/package-copy');

const CHILD = path.join(__dirname, 'child.js');
const READER = path.join(ROOT, 'target', 'release', 'thread-ctx');
const WARM_MS = 3000;

function parse() {
  const { values } = parseArgs({
    options: {
      node: { type: 'string' },
      modes: { type: 'string', default: 'full,proto:lazy-restore' },
      rounds: { type: 'string', default: '3' },
      seconds: { type: 'string', default: '3' },
      hz: { type: 'string', default: '999' },
    },
  });
  const modes = values.modes.split(',').filter(Boolean);
  for (const m of modes) {
    if (modeByName(m).kind !== 'manager') throw new TypeError(`--modes: expected manager modes (full, proto:...), got ${m}`);
  }
  return {
    nodeBin: resolveNode(values.node), modes, rounds: positiveInteger('rounds', values.rounds),
    seconds: positiveInteger('seconds', values.seconds), hz: positiveInteger('hz', values.hz),
  };
}

function record(pid, config) {
  return new Promise((resolve, reject) => {
    execFile(READER, ['record', String(pid), '--hz', String(config.hz), '--duration', `${config.seconds}s`, '--format', 'jsonl', '--no-user-stacks'],
      { encoding: 'utf8', maxBuffer: 1 << 28 }, (err, stdout, stderr) => {
        if (err) return reject(new Error(`thread-ctx record: ${stderr.trim() || err.message}`));
        const samples = stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((s) => s.kind === 'cpu' && s.tid === pid);
        resolve(samples);
      });
  });
}

async function measure(config, mode, packageDir) {
  const child = spawn(config.nodeBin, [CHILD, '--mode', mode, '--package', packageDir, '--requests', '10000000', '--warmup', '1000'], { stdio: 'ignore' });
  try {
    await new Promise((resolve) => setTimeout(resolve, WARM_MS));
    if (child.exitCode !== null) throw new Error(`mode ${mode}: the workload exited early (code ${child.exitCode})`);
    const samples = await record(child.pid, config);
    if (samples.length < 100) throw new Error(`mode ${mode}: expected at least 100 samples of the event-loop thread, got ${samples.length}`);
    return { samples: samples.length, withSpan: samples.filter((s) => s.state === 'valid').length / samples.length };
  } finally {
    child.kill('SIGKILL');
  }
}

async function main() {
  const config = parse();
  if (process.getuid() !== 0) throw new Error('the eBPF sampler needs root');
  const copies = copiesDirectory();
  try {
    const dirs = packagesOrThrow(config.modes, (m) => modeByName(m).patches, copies.dir);
    const startedAt = new Date();
    const samples = await alternate({
      rounds: config.rounds, modes: config.modes,
      measure: (mode) => measure(config, mode, dirs.get(mode)),
      onSample: (s) => process.stderr.write(`  round ${s.round} ${s.mode}: ${s.samples} samples, ${fixed(100 * s.withSpan, 1)} % with a span\n`),
    });
    const lines = [`### Span workload, what the sampler sees — Node ${nodeVersion(config.nodeBin)}, ${utcMinute(startedAt)}`, ''];
    lines.push(`\`thread-ctx record --hz ${config.hz}\` for ${config.seconds} s per process, event-loop thread only, ${config.rounds} rounds alternated.`, '');
    lines.push('| mode | samples per run | share of samples with a span, median [95 % CI] |', '|---|---:|---|');
    for (const m of config.modes) {
      const own = samples.filter((s) => s.mode === m);
      const share = medianInterval(own.map((s) => 100 * s.withSpan));
      lines.push(`| ${m} | ${Math.round(own.reduce((a, s) => a + s.samples, 0) / own.length)} | ${fixed(share.median, 1)} % [${fixed(share.lo, 1)} … ${fixed(share.hi, 1)}] |`);
    }
    lines.push('', `Command: \`node bench/span-workload/attribution.js ${process.argv.slice(2).join(' ')}\`.`);
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    copies.remove();
  }
}

main().catch((err) => {
  process.stderr.write(`attribution: ${err.message}\n`);
  process.exit(1);
});
