'use strict';
// Instructions per request of the service benchmark's server, per mode: the realistic service's
// figure at a resolution bench:service's CPU-time ratios (±5–10 % intervals here) cannot give.
// Run it on an otherwise idle machine: other work on the server's CPU starves the load generator,
// the server then finds fewer requests per event-loop turn, and each request carries more of the
// loop's fixed cost (with a CI run sharing the CPUs, Node 26's counts rose by 8 % (floor) to 20 %
// (full) within two rounds; one process disturbed by a benchmark on its CPU: +6 %).
// The same app, PostgreSQL, seed and load as run.js; the server runs under valgrind's callgrind
// and only its event-loop thread is counted (where the hooks and the manager run; what run.js
// measures in time). Its 'start' and 'stop' replies call os.getPriority(), which callgrind dumps
// its counters before: dump 2 is the measured window. Requests arrive over real sockets, so two
// processes of one mode still differ a little: --rounds 3 or more shows the spread.
//
//   node bench/service/instructions.js [--node 24|PATH] [--modes stock,floor,full,rev:REV]
//     [--rounds 1] [--warmup 3000] [--requests 1500] [--connections 20] [--server-cpu 0]
//     [--client-cpu 1] [--json FILE]      (the same CPU for both leaves the other to other work)
//   node bench/service/instructions.js --report FILE.json   (the table of a saved run again)
// With 3 or more rounds, each mode's ratio to stock and floor is also given per round (the modes
// of a round ran next to each other) as a median with a bootstrap 95 % interval.
// Needs valgrind (apt-get install valgrind). About 3 minutes per mode and round.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { modeByName } = require('./modes');
const { checkSelfCheck, spansPerRequest } = require('./checks');
const { startPostgres } = require('./postgres');
const { seedSql, CUSTOMERS, CATEGORIES } = require('./seed');
const { loadPaths } = require('./routes');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const { positiveInteger, cpuNumber } = require('../lib/args');
const { startServer, runLoad, cleanUpOnInterrupt } = require('../lib/processes');
const { checkLoad } = require('../lib/server-round');
const { requireValgrind, callgrindOptions, windowDump } = require('../lib/callgrind');
const { alternate } = require('../lib/rounds');
const { median, pairedRatio } = require('../lib/stats');
const { fixed, signed, interval, utcMinute } = require('../lib/format');
const { describeMachine, codeRevision } = require('../lib/machine');
const { packagesOrThrow, copiesDirectory, commandLine, measuredRevision } = require('../lib/package-copy');

const APP = path.join(__dirname, 'app.js');

function parse(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      node: { type: 'string' }, modes: { type: 'string', default: 'stock,floor,full' }, rounds: { type: 'string', default: '1' },
      warmup: { type: 'string', default: '3000' }, requests: { type: 'string', default: '1500' },
      connections: { type: 'string', default: '20' }, 'server-cpu': { type: 'string', default: '0' },
      'client-cpu': { type: 'string', default: '1' }, json: { type: 'string' }, report: { type: 'string' },
    },
  });
  if (values.report !== undefined) return { report: values.report };
  const modes = values.modes.split(',').filter(Boolean);
  for (const m of modes) modeByName(m);
  if (!modes.includes('stock')) throw new TypeError(`--modes: expected stock among the modes, got ${JSON.stringify(values.modes)}`);
  const config = {
    nodeBin: resolveNode(values.node), modes, rounds: positiveInteger('rounds', values.rounds),
    warmup: positiveInteger('warmup', values.warmup), requests: positiveInteger('requests', values.requests),
    connections: positiveInteger('connections', values.connections),
    serverCpu: cpuNumber('server-cpu', values['server-cpu']), clientCpu: cpuNumber('client-cpu', values['client-cpu']),
    json: values.json,
  };
  return config; // one CPU for both is fine, as long as nothing else runs on it (see the top)
}

async function measure(config, mode, db, paths, packageDir, outDir) {
  const { prefix, args: callgrindArgs } = callgrindOptions(outDir, mode);
  const server = await startServer({
    nodeBin: config.nodeBin, script: APP, modeKey: mode, cpu: config.serverCpu,
    args: [db.socketDir, String(db.port), db.database, db.user, packageDir],
    env: { OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none' },
    wrapper: ['valgrind', '-q', ...callgrindArgs],
    timeoutMs: 600_000,
  });
  try {
    checkSelfCheck(mode, server.ready);
    const load = { nodeBin: process.execPath, port: server.ready.port, connections: config.connections, cpu: config.clientCpu, paths, timeoutSeconds: 600 };
    checkLoad(await runLoad({ ...load, requests: config.warmup }), mode);
    await server.request('start', 'started');
    checkLoad(await runLoad({ ...load, requests: config.requests }), mode);
    const stopped = await server.request('stop', 'stopped');
    const { total } = windowDump(prefix, server.ready.pid, `mode ${mode}`);
    return { instructionsPerRequest: total / stopped.requests, requests: stopped.requests, spansPerRequest: spansPerRequest(mode, stopped), mechanism: server.ready.mechanism };
  } finally {
    await server.stop();
  }
}

function markdown(report) {
  const { samples, config, machine, node, revision, startedAt, command } = report;
  const per = new Map(config.modes.map((m) => [m, median(samples.filter((s) => s.mode === m).map((s) => s.instructionsPerRequest))]));
  const lines = [`### Service benchmark, instructions — Node ${node}, ${utcMinute(startedAt)}`, ''];
  lines.push(`Machine: ${machine.nproc} × ${machine.cpuModel}, ${machine.kernel}. The bench:service app under valgrind callgrind, its event-loop ` +
    `thread only; ${config.requests} requests counted after ${config.warmup} warm-up, ${config.connections} connections; median of ` +
    `${config.rounds} process(es) per mode, alternated.`, '');
  // Per-round ratios need enough rounds for an interval worth the name (stats.medianInterval).
  const perRound = config.rounds >= 3;
  const paired = (m, base) => (per.has(base) && m !== base ? interval(pairedRatio(samples, m, base, (s) => s.instructionsPerRequest)) : '–');
  lines.push('| mode | hook mechanism | spans/req | instructions/request | spread of runs | ÷ stock | ÷ floor | over stock |' +
    (perRound ? ' ÷ stock, per round [95 %] | ÷ floor, per round [95 %] |' : ''));
  lines.push('|---|---|---:|---:|---:|---:|---:|---:|' + (perRound ? '---:|---:|' : ''));
  for (const m of config.modes) {
    const own = samples.filter((s) => s.mode === m);
    const runs = own.map((s) => s.instructionsPerRequest);
    const ratio = (base) => (per.has(base) && m !== base ? fixed(per.get(m) / per.get(base), 3) : m === base ? '1' : '–');
    lines.push(`| ${m}: ${modeByName(m).label} | ${own[0].mechanism ?? '–'} | ${fixed(median(own.map((s) => s.spansPerRequest)), 1)} | ` +
      `${fixed(per.get(m), 0)} | ±${fixed((Math.max(...runs) - Math.min(...runs)) / 2, 0)} | ${ratio('stock')} | ${ratio('floor')} | ` +
      `${m === 'stock' ? '–' : signed(per.get(m) - per.get('stock'), 0)} |` +
      (perRound ? ` ${paired(m, 'stock')} | ${paired(m, 'floor')} |` : ''));
  }
  if (per.has('full+alloc') && per.has('full')) {
    lines.push('', `full+alloc ÷ full (allocation sampling's own cost): ${fixed(per.get('full+alloc') / per.get('full'), 3)}` +
      (perRound ? `, per round ${paired('full+alloc', 'full')}` : ''));
  }
  lines.push('', `Command: \`${command}\` at ${revision}.`);
  return lines.join('\n');
}

async function main() {
  const config = parse(process.argv.slice(2));
  if (config.report !== undefined) {
    process.stdout.write(markdown(JSON.parse(fs.readFileSync(config.report, 'utf8'))) + '\n');
    return;
  }
  requireValgrind();
  const log = (text) => process.stderr.write(`service instructions: ${text}\n`);
  const copies = copiesDirectory();
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'otel-thread-ctx-service-callgrind-'));
  const packages = packagesOrThrow(config.modes, (m) => modeByName(m).patches, copies.dir);
  const db = startPostgres({ cpus: String(config.clientCpu), seedSql: seedSql(), log });
  const cleanUp = () => {
    db.stop();
    copies.remove();
    fs.rmSync(outDir, { recursive: true, force: true });
  };
  cleanUpOnInterrupt(cleanUp);
  try {
    const revision = measuredRevision(codeRevision); // before the run: not a commit made during it
    const startedAt = new Date();
    const paths = loadPaths({ customers: CUSTOMERS, categories: CATEGORIES });
    const samples = await alternate({
      rounds: config.rounds,
      modes: config.modes,
      measure: (mode) => measure(config, mode, db, paths, packages.get(mode), outDir),
      onSample: (s) => log(`round ${s.round} ${s.mode}: ${fixed(s.instructionsPerRequest, 0)} instructions/request over ${s.requests} requests`),
    });
    const { nodeBin, ...shownConfig } = config;
    const report = {
      samples, config: shownConfig, machine: describeMachine(), node: nodeVersion(config.nodeBin), revision,
      startedAt, command: commandLine(`node bench/service/instructions.js ${process.argv.slice(2).join(' ')}`),
    };
    process.stdout.write(markdown(report) + '\n');
    if (config.json !== undefined) fs.writeFileSync(config.json, JSON.stringify(report, null, 2) + '\n');
  } finally {
    cleanUp();
  }
}

main().catch((err) => {
  process.stderr.write(`service instructions: ${err.message}\n`);
  process.exit(1);
});
