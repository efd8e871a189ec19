'use strict';
// Per-span cost of the manager, without async hooks in the way: in a tight loop, a span is
// started, activated once with with() (its entry is built, cached and published), and ended;
// CPU time of the thread per span, against the stock manager, each mode (and prototype patch) in
// its own process, rounds alternated. What the span workload's full − no-span-work difference is
// made of, at a resolution the whole workload cannot give on a busy machine.
//   node bench/span-workload/per-span.js [--node 24] [--modes stock,full,proto:cache-fast,...]
//     [--rounds 9] [--spans 200000]
// Instructions per span instead of time: instructions.js --workload per-span.

const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { execFile } = require('node:child_process');
const { modeByName, buildManager } = require('./modes');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const { positiveInteger } = require('../lib/args');
const { alternate } = require('../lib/rounds');
const { median, pairedDifference } = require('../lib/stats');
const { fixed, interval, utcMinute } = require('../lib/format');
const { packagesOrThrow, copiesDirectory, ROOT } = require('../lib/package-copy');
const { threadTimes } = require('../lib/thread-cpu');

function child(modeName, packageDir, spans) {
  const { trace, ROOT_CONTEXT } = require('@opentelemetry/api');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const { manager } = buildManager(modeByName(modeName), packageDir);
  manager.enable();
  const tracer = new BasicTracerProvider().getTracer('per-span');
  let sink = 0;
  const fn = () => { sink++; };
  const run = (n) => {
    for (let i = 0; i < n; i++) {
      const span = tracer.startSpan('s');
      manager.with(trace.setSpan(ROOT_CONTEXT, span), fn);
      span.end();
    }
  };
  run(spans);
  // Marks the window for instructions.js (callgrind dumps before uv_os_getpriority).
  if (typeof globalThis.gc === 'function') globalThis.gc();
  os.getPriority();
  const before = threadTimes().cpuNs;
  run(spans);
  const ns = (threadTimes().cpuNs - before) / spans;
  os.getPriority();
  if (sink !== 2 * spans) throw new Error('per-span: with() did not run its function');
  process.stdout.write(JSON.stringify({ nsPerSpan: ns }) + '\n');
}

function runChild(nodeBin, mode, dir, spans) {
  return new Promise((resolve, reject) => {
    execFile(nodeBin, [__filename, '--child', mode, '--package', dir, '--spans', String(spans)], { encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`per-span ${mode}: ${stderr.trim() || err.message}`));
      resolve(JSON.parse(stdout.trim().split('\n').pop()));
    });
  });
}

async function main() {
  const { values } = parseArgs({
    options: {
      node: { type: 'string' }, modes: { type: 'string', default: 'stock,full' }, rounds: { type: 'string', default: '9' },
      spans: { type: 'string', default: '200000' }, child: { type: 'string' }, package: { type: 'string', default: ROOT },
    },
  });
  const spans = positiveInteger('spans', values.spans);
  if (values.child !== undefined) return child(values.child, path.resolve(values.package), spans);
  const nodeBin = resolveNode(values.node);
  const modes = values.modes.split(',').filter(Boolean);
  for (const m of modes) modeByName(m);
  if (!modes.includes('stock')) throw new TypeError('--modes: expected stock among the modes');
  const copies = copiesDirectory();
  try {
    const dirs = packagesOrThrow(modes, (m) => modeByName(m).patches, copies.dir);
    const startedAt = new Date();
    const samples = await alternate({
      rounds: positiveInteger('rounds', values.rounds), modes,
      measure: (mode) => runChild(nodeBin, mode, dirs.get(mode), spans),
      onSample: (s) => process.stderr.write(`  round ${s.round} ${s.mode}: ${fixed(s.nsPerSpan, 0)} ns/span\n`),
    });
    const ns = (s) => s.nsPerSpan;
    const lines = [`### Per-span cost — Node ${nodeVersion(nodeBin)}, ${utcMinute(startedAt)}`, ''];
    lines.push(`startSpan + with() + end() in a loop, ${spans} spans per process, thread CPU; added ns per span, median [95 % CI].`, '');
    lines.push('| mode | ns/span | added over stock | vs full |', '|---|---:|---|---|');
    for (const m of modes) {
      const own = samples.filter((s) => s.mode === m).map(ns);
      const added = m === 'stock' ? null : pairedDifference(samples, m, 'stock', ns);
      const vsFull = m === 'full' || !modes.includes('full') ? null : pairedDifference(samples, m, 'full', ns);
      lines.push(`| ${m} | ${fixed(median(own), 0)} | ${interval(added, 0, { sign: true })} | ${interval(vsFull, 0, { sign: true })} |`);
    }
    lines.push('', `Command: \`node bench/span-workload/per-span.js ${process.argv.slice(2).join(' ')}\`.`);
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    copies.remove();
  }
}

main().catch((err) => {
  process.stderr.write(`per-span: ${err.message}\n`);
  process.exit(1);
});
