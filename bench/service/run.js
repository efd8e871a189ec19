'use strict';
// The realistic service benchmark (npm run bench:service): an Express shop service with NodeSDK,
// instrumentation-http, -express and -pg against a real PostgreSQL server that this script
// starts (Debian's package, installed when missing), seeds and stops. Each mode in its own
// server process pinned to one CPU; autocannon and PostgreSQL on the other; modes alternated
// round after round; the event-loop thread's CPU per request; ratios with bootstrap intervals.
//
//   node bench/service/run.js [--node 24|PATH] [--modes stock,floor,full,proto:PATCH,rev:REV] [--rounds 15]
//     [--duration 5] [--fast] [--connections 20] [--server-cpu 0] [--client-cpu 1]
//     (each server warms up with 3000 requests; --fast measures 2 s instead of 5)
//     [--json FILE] [--rounds-table] [--node-arg ARG]...
//   node bench/service/run.js --report FILE.json [--rounds-table]

const fs = require('node:fs');
const path = require('node:path');
const { DEFAULT_MODES, modeByName } = require('./modes');
const { checkSelfCheck, spansPerRequest } = require('./checks');
const { startPostgres } = require('./postgres');
const { seedSql, CUSTOMERS, CATEGORIES } = require('./seed');
const { loadPaths } = require('./routes');
const { nodeVersion } = require('../lib/node-binary');
const { parseServiceArgs } = require('../lib/args');
const { describeMachine, loadAverage, codeRevision } = require('../lib/machine');
const { measureServerRound } = require('../lib/server-round');
const { cleanUpOnInterrupt } = require('../lib/processes');
const { alternate } = require('../lib/rounds');
const { median, spread, pairedRatio, pairedDifference } = require('../lib/stats');
const { fixed, interval, utcMinute } = require('../lib/format');
const { packagesOrThrow, copiesDirectory, commandLine, measuredRevision } = require('../lib/package-copy');

const APP = path.join(__dirname, 'app.js');
const WARMUP_REQUESTS = 3000;

function parseConfig(argv) {
  const config = parseServiceArgs(argv, { connections: 20, modes: DEFAULT_MODES.join(',') });
  if (config.report !== undefined) return config;
  const modes = config.modes.split(',').filter(Boolean);
  for (const m of modes) modeByName(m);
  if (!modes.includes('stock')) throw new TypeError(`--modes: expected stock among the modes (ratios are taken against it), got ${JSON.stringify(config.modes)}`);
  if (new Set(modes).size !== modes.length) throw new TypeError(`--modes: expected each mode once, got ${JSON.stringify(config.modes)}`);
  return { ...config, modes };
}

function measure(config, modeName, db, paths, packageDir) {
  return measureServerRound({
    server: {
      nodeBin: config.nodeBin, nodeArgs: config.nodeArgs, script: APP, modeKey: modeName,
      args: [db.socketDir, String(db.port), db.database, db.user, packageDir], cpu: config.serverCpu,
      env: { OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none' },
    },
    load: { nodeBin: process.execPath, connections: config.connections, cpu: config.clientCpu, paths },
    // By count: at a few hundred requests per second (a busy machine) a 2 s warm-up left the JIT
    // cold and the CPU per request several times its warm value.
    warmup: { requests: WARMUP_REQUESTS },
    duration: config.duration,
    checkReady: (ready) => checkSelfCheck(modeName, ready),
    afterStop: (stopped) => ({ spansPerRequest: spansPerRequest(modeName, stopped) }),
  });
}

const cpu = (s) => s.cpuUsPerRequest;

function markdown(report) {
  const { samples, config, machine, node, revision, startedAt, finishedAt, loadBefore, loadAfter, command } = report;
  const steal = spread(samples.map((s) => s.stealPercent));
  const foreign = spread(samples.map((s) => s.foreignPercent));
  const lines = [`### Service benchmark — Node ${node}, ${utcMinute(startedAt)}`, ''];
  lines.push(`Machine: ${machine.nproc} × ${machine.cpuModel}, ${machine.kernel}. Express 5 + NodeSDK (instrumentation-http, -express, -pg; ` +
    `BatchSpanProcessor into a dropping exporter) against PostgreSQL on a unix socket; server pinned to CPU ${config.serverCpu}, ` +
    `autocannon and PostgreSQL to CPU ${config.clientCpu}; ${config.connections} connections, ${config.rounds} rounds × ${config.duration} s ` +
    `measured (after ${WARMUP_REQUESTS} warm-up requests), modes alternated (order rotating) in fresh processes ` +
    `(${((new Date(finishedAt) - new Date(startedAt)) / 60000).toFixed(1)} min). Load average ${loadBefore.join(' / ')} before, ` +
    `${loadAfter.join(' / ')} after; CPU ${config.serverCpu} time not charged to the server median ${fixed(foreign.median, 1)} % ` +
    `(max ${fixed(foreign.max, 1)} %), steal median ${fixed(steal.median, 1)} % (max ${fixed(steal.max, 1)} %).`);
  lines.push('');
  lines.push('| mode | hook mechanism | req/s | spans/req | server thread CPU µs/req | ÷ stock, median [95 % CI] | ÷ floor [95 % CI] | added µs/req over stock [95 % CI] |');
  lines.push('|---|---|---:|---:|---:|---|---|---|');
  for (const name of config.modes) {
    const own = samples.filter((s) => s.mode === name);
    const vsStock = name === 'stock' ? '1 (base)' : interval(pairedRatio(samples, name, 'stock', cpu));
    const vsFloor = !config.modes.includes('floor') || name === 'stock' ? '–' : name === 'floor' ? '1 (base)' : interval(pairedRatio(samples, name, 'floor', cpu));
    const added = name === 'stock' ? '–' : interval(pairedDifference(samples, name, 'stock', cpu), 2, { sign: true });
    lines.push(`| ${name}: ${modeByName(name).label} | ${own[0].mechanism ?? '–'} | ${fixed(median(own.map((s) => s.requestsPerSecond)), 0)} | ` +
      `${fixed(median(own.map((s) => s.spansPerRequest)), 1)} | ${fixed(median(own.map(cpu)), 1)} | ${vsStock} | ${vsFloor} | ${added} |`);
  }
  // Before/after in one run: the working tree's manager against another revision's.
  for (const name of config.modes.filter((m) => m.startsWith('rev:'))) {
    if (!config.modes.includes('full')) break;
    lines.push('', `full ÷ ${name} (after ÷ before, same rounds): ${interval(pairedRatio(samples, 'full', name, cpu))}`);
  }
  if (config.modes.includes('full+alloc') && config.modes.includes('full')) {
    lines.push('', `full+alloc ÷ full (allocation sampling's own cost, same rounds): ${interval(pairedRatio(samples, 'full+alloc', 'full', cpu))}`);
  }
  lines.push('');
  lines.push(`Command: \`${command}\` at ${revision}. CPU = the server's event-loop thread (scheduler run time, /proc/thread-self/schedstat) ` +
    'over the measured window / requests served in it; ratios per round, median over rounds, 95 % percentile-bootstrap interval; ' +
    '"(noise)": the interval contains 1 (or 0).');
  return lines.join('\n');
}

function roundsTable(samples) {
  const lines = ['| round | mode | req/s | thread CPU µs/req | process CPU µs/req | p99 ms | foreign CPU % | steal % |', '|---:|---|---:|---:|---:|---:|---:|---:|'];
  for (const s of samples) {
    lines.push(`| ${s.round} | ${s.mode} | ${fixed(s.requestsPerSecond, 0)} | ${fixed(s.cpuUsPerRequest, 1)} | ${fixed(s.processCpuUsPerRequest, 1)} | ` +
      `${fixed(s.latencyP99Ms, 0)} | ${fixed(s.foreignPercent, 1)} | ${fixed(s.stealPercent, 1)} |`);
  }
  return lines.join('\n');
}

async function main() {
  const config = parseConfig(process.argv.slice(2));
  if (config.report !== undefined) {
    const saved = JSON.parse(fs.readFileSync(config.report, 'utf8'));
    process.stdout.write(markdown(saved) + '\n');
    if (config.roundsTable) process.stdout.write('\n' + roundsTable(saved.samples) + '\n');
    return;
  }
  const log = (text) => process.stderr.write(`bench:service: ${text}\n`);
  const copies = copiesDirectory();
  const packages = packagesOrThrow(config.modes, (m) => modeByName(m).patches, copies.dir);
  const db = startPostgres({ cpus: String(config.clientCpu), seedSql: seedSql(), log });
  const cleanUp = () => {
    db.stop();
    copies.remove();
  };
  cleanUpOnInterrupt(cleanUp);
  try {
    const node = nodeVersion(config.nodeBin);
    const revision = measuredRevision(codeRevision); // before the run: not a commit made during it
    const startedAt = new Date();
    const loadBefore = loadAverage();
    log(`PostgreSQL up on ${db.socketDir}; Node ${node}, ${config.rounds} rounds × ${config.modes.join(' ')}; load average ${loadBefore.join(' ')}`);
    const paths = loadPaths({ customers: CUSTOMERS, categories: CATEGORIES });
    const samples = await alternate({
      rounds: config.rounds,
      modes: config.modes,
      measure: (mode) => measure(config, mode, db, paths, packages.get(mode)),
      onSample: (s) => log(`round ${s.round} ${s.mode}: ${fixed(s.requestsPerSecond, 0)} req/s, ${fixed(s.cpuUsPerRequest, 1)} µs thread CPU/req, ` +
        `${fixed(s.spansPerRequest, 1)} spans/req, steal ${fixed(s.stealPercent, 1)} %`),
    });
    const command = commandLine(['npm run bench:service --', ...process.argv.slice(2)].join(' ').replace(/ --$/, ''));
    const { nodeBin, ...shownConfig } = config;
    const report = {
      samples, config: shownConfig, machine: describeMachine(), node, revision, startedAt,
      finishedAt: new Date(), loadBefore, loadAfter: loadAverage(), command,
    };
    process.stdout.write(markdown(report) + '\n');
    if (config.roundsTable) process.stdout.write('\n' + roundsTable(samples) + '\n');
    if (config.json !== undefined) fs.writeFileSync(config.json, JSON.stringify(report, null, 2) + '\n');
  } finally {
    cleanUp();
  }
}

main().catch((err) => {
  process.stderr.write(`bench:service: ${err.message}\n`);
  process.exit(1);
});
