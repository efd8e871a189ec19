'use strict';
// The span workload benchmark (npm run bench:span): CPU per request of the event-loop thread in
// each mode, every mode in its own process, modes alternated round after round, on one or more
// Node versions; prints markdown tables (per version, and a summary across versions).
//
//   node bench/span-workload/run.js [--node 20,22,24,26] [--modes stock,floor,lookup,full,no-span-work]
//     [--rounds 15] [--requests 60000] [--warmup 10000] [--in-flight 50] [--cpu 0|none]
//     [--json FILE] [--rounds-table] [--node-arg ARG]...
//   node bench/span-workload/run.js --report FILE.json [--rounds-table]
// Modes: see modes.js (also proto:PATCH for bench/prototypes/PATCH.patch applied to a copy of js/).

const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { execFile } = require('node:child_process');
const { DEFAULT_MODES, modeByName } = require('./modes');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const { positiveInteger, cpuOrNone } = require('../lib/args');
const { describeMachine, loadAverage, codeRevision } = require('../lib/machine');
const { alternate } = require('../lib/rounds');
const { packagesFor, copiesDirectory, commandLine, measuredRevision } = require('../lib/package-copy');
const { markdown, summaryTable, roundsTable } = require('./report');

const CHILD = path.join(__dirname, 'child.js');

function parseConfig(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      node: { type: 'string' },
      modes: { type: 'string', default: DEFAULT_MODES.join(',') },
      rounds: { type: 'string', default: '15' },
      requests: { type: 'string', default: '60000' },
      warmup: { type: 'string', default: '10000' },
      'in-flight': { type: 'string', default: '50' },
      cpu: { type: 'string', default: '0' },
      json: { type: 'string' },
      'rounds-table': { type: 'boolean', default: false },
      'node-arg': { type: 'string', multiple: true, default: [] },
      report: { type: 'string' },
    },
  });
  if (values.report !== undefined) return { report: values.report, roundsTable: values['rounds-table'] };
  const modes = values.modes.split(',').filter((m) => m !== '');
  for (const m of modes) modeByName(m);
  if (!modes.includes('stock') || !modes.includes('floor')) {
    throw new TypeError(`--modes: expected stock and floor among the modes (ratios are taken against them), got ${JSON.stringify(values.modes)}`);
  }
  if (new Set(modes).size !== modes.length) throw new TypeError(`--modes: expected each mode once, got ${JSON.stringify(values.modes)}`);
  const cpu = cpuOrNone('cpu', values.cpu);
  const nodes = (values.node ?? '').split(',').filter((n) => n !== '');
  return {
    nodeBins: nodes.length === 0 ? [resolveNode(undefined)] : nodes.map(resolveNode),
    modes,
    rounds: positiveInteger('rounds', values.rounds),
    requests: positiveInteger('requests', values.requests),
    warmup: positiveInteger('warmup', values.warmup),
    inFlight: positiveInteger('in-flight', values['in-flight']),
    cpu,
    nodeArgs: values['node-arg'],
    json: values.json,
    roundsTable: values['rounds-table'],
  };
}

function runChild(nodeBin, config, args) {
  const command = config.cpu === null ? nodeBin : 'taskset';
  const prefix = config.cpu === null ? [] : ['-c', String(config.cpu), nodeBin];
  return new Promise((resolve, reject) => {
    execFile(command, [...prefix, ...config.nodeArgs, CHILD, ...args], { encoding: 'utf8', maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`child ${args.join(' ')}: ${stderr.trim() || err.message}`));
      try {
        resolve(JSON.parse(stdout.trim().split('\n').pop()));
      } catch {
        reject(new Error(`child ${args.join(' ')}: expected one JSON line on stdout, got ${JSON.stringify(stdout.slice(0, 200))}`));
      }
    });
  });
}

async function runVersion(nodeBin, config, dirs) {
  const node = nodeVersion(nodeBin);
  const modes = config.modes.filter((m) => dirs.has(m));
  const startedAt = new Date();
  const loadBefore = loadAverage();
  process.stderr.write(`span workload on Node ${node}: ${config.rounds} rounds × ${modes.join(' ')}, ` +
    `${config.requests} requests each; load average ${loadBefore.join(' ')}\n`);
  const calibration = await runChild(nodeBin, config, ['--mode', 'stock', '--calibrate', '--requests', '2000', '--warmup', '500']);
  const common = ['--requests', String(config.requests), '--warmup', String(config.warmup), '--in-flight', String(config.inFlight)];
  if (config.cpu !== null) common.push('--cpu', String(config.cpu));
  const samples = await alternate({
    rounds: config.rounds,
    modes,
    measure: (mode) => runChild(nodeBin, config, ['--mode', mode, '--package', dirs.get(mode), ...common]),
    onSample: (s) => process.stderr.write(`  round ${s.round} ${s.mode}: ${(s.threadCpuNsPerRequest / 1000).toFixed(2)} µs/req thread CPU, ` +
      `steal ${s.stealPercent === null ? '?' : s.stealPercent.toFixed(1)} %, waited ${(s.threadWaitNsPerRequest / 1000).toFixed(1)} µs/req\n`),
  });
  return { node, modes, calibration, samples, startedAt, finishedAt: new Date(), loadBefore, loadAfter: loadAverage() };
}

async function main() {
  const config = parseConfig(process.argv.slice(2));
  if (config.report !== undefined) {
    const saved = JSON.parse(fs.readFileSync(config.report, 'utf8'));
    return print(saved, config.roundsTable);
  }
  // Read before the run: a commit made while it runs is not what it measured.
  const revision = measuredRevision(codeRevision);
  const copies = copiesDirectory();
  try {
    const { dirs, skipped } = packagesFor(config.modes, (m) => modeByName(m), copies.dir);
    for (const s of skipped) process.stderr.write(`skipping mode ${s.mode}: ${s.error}\n`);
    const runs = [];
    for (const nodeBin of config.nodeBins) runs.push(await runVersion(nodeBin, config, dirs));
    const command = commandLine(['npm run bench:span --', ...process.argv.slice(2)].join(' ').replace(/ --$/, ''));
    const { nodeBins, ...shown } = config;
    const result = { command, config: shown, machine: describeMachine(), revision, skipped, runs };
    if (config.json !== undefined) fs.writeFileSync(config.json, JSON.stringify(result, null, 2) + '\n');
    print(result, config.roundsTable);
  } finally {
    copies.remove();
  }
}

function print(result, withRounds) {
  for (const run of result.runs) {
    process.stdout.write(markdown(result, run) + '\n\n');
    if (withRounds) process.stdout.write(roundsTable(run) + '\n\n');
  }
  if (result.runs.length > 1) process.stdout.write(summaryTable(result) + '\n');
}

main().catch((err) => {
  process.stderr.write(`bench:span: ${err.message}\n`);
  process.exit(1);
});
