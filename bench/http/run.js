'use strict';
// HTTP overhead benchmark (npm run bench:http): the same instrumented service in four modes,
// each in its own server process, alternated round after round under the same autocannon load;
// prints a markdown table (and the per-round samples with --rounds-table).
//
//   node bench/http/run.js [--node 24|PATH] [--rounds 15] [--duration 5] [--warmup 2] [--fast]
//     [--connections 50] [--modes abcde] [--server-cpu 0] [--client-cpu 1] [--json FILE]
//     [--rounds-table] [--node-arg ARG]...
// --fast: 2 s measured after 1 s warm-up per round (same 15 rounds, half the time, wider intervals).
//   node bench/http/run.js --report FILE.json [--rounds-table]   (the report of an earlier --json run)

const fs = require('node:fs');
const os = require('node:os');
const { parseArgs } = require('node:util');
const { execFileSync } = require('node:child_process');
const { MODES } = require('./modes');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const path = require('node:path');
const { describeMachine, loadAverage, cpuTimes, codeRevision } = require('../lib/machine');
const { alternate } = require('../lib/rounds');
const { startServer, runLoad } = require('./processes');
const { summarise, markdown, roundsTable } = require('./report');

function positive(name, text, { integer = true } = {}) {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new TypeError(`--${name}: expected a positive ${integer ? 'integer' : 'number'}, got ${JSON.stringify(text)}`);
  }
  return value;
}

function parseConfig(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      node: { type: 'string' },
      'node-arg': { type: 'string', multiple: true, default: [] },
      rounds: { type: 'string', default: '15' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      fast: { type: 'boolean', default: false },
      connections: { type: 'string', default: '50' },
      modes: { type: 'string', default: 'abcde' },
      'server-cpu': { type: 'string', default: '0' },
      'client-cpu': { type: 'string', default: '1' },
      json: { type: 'string' },
      'rounds-table': { type: 'boolean', default: false },
      report: { type: 'string' },
    },
  });
  if (values.report !== undefined) return { report: values.report, roundsTable: values['rounds-table'] };
  const modes = [...values.modes];
  for (const key of modes) {
    if (MODES[key] === undefined) {
      throw new TypeError(`--modes: expected letters from ${Object.keys(MODES).join('')}, got ${JSON.stringify(values.modes)}`);
    }
  }
  if (new Set(modes).size !== modes.length) throw new TypeError(`--modes: expected each mode once, got ${JSON.stringify(values.modes)}`);
  const config = {
    nodeBin: resolveNode(values.node),
    nodeArgs: values['node-arg'],
    rounds: positive('rounds', values.rounds),
    duration: positive('duration', values.duration ?? (values.fast ? '2' : '5')),
    warmup: positive('warmup', values.warmup ?? (values.fast ? '1' : '2')),
    connections: positive('connections', values.connections),
    modes,
    serverCpu: Number(values['server-cpu']),
    clientCpu: Number(values['client-cpu']),
    json: values.json,
    roundsTable: values['rounds-table'],
  };
  const cpus = os.cpus().length;
  for (const name of ['serverCpu', 'clientCpu']) {
    if (!Number.isInteger(config[name]) || config[name] < 0 || config[name] >= cpus) {
      throw new TypeError(`--${name === 'serverCpu' ? 'server' : 'client'}-cpu: expected a CPU number 0-${cpus - 1}, got ${config[name]}`);
    }
  }
  if (config.serverCpu === config.clientCpu) throw new TypeError('--server-cpu and --client-cpu: expected two different CPUs');
  return config;
}

function checkTaskset() {
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
  } catch (err) {
    throw new Error(`taskset: expected it on PATH (util-linux) to pin the processes, ${err.message}`);
  }
}

function checkServerState(ready, modeName) {
  if (ready.selfCheck !== null && ready.selfCheck.mismatches.length > 0) {
    throw new Error(`mode ${modeName}: the record self-check failed: ${ready.selfCheck.mismatches.join('; ')}`);
  }
}

function checkLoad(load, modeKey) {
  if (load.errors > 0 || load.timeouts > 0 || load.non2xx > 0) {
    throw new Error(`mode ${modeKey}: expected no errors, timeouts or non-2xx responses, got ` +
      `${load.errors} errors, ${load.timeouts} timeouts, ${load.non2xx} non-2xx`);
  }
}

// One measured round of one mode in a fresh server process.
async function measure(config, modeKey, round, clientNode) {
  const server = await startServer({ nodeBin: config.nodeBin, nodeArgs: config.nodeArgs, modeKey, cpu: config.serverCpu });
  try {
    checkServerState(server.ready, modeKey);
    const loadOptions = { nodeBin: clientNode, port: server.ready.port, connections: config.connections, cpu: config.clientCpu };
    checkLoad(await runLoad({ ...loadOptions, seconds: config.warmup }), modeKey);
    const cpuBefore = cpuTimes(config.serverCpu);
    await server.request('start', 'started');
    const load = await runLoad({ ...loadOptions, seconds: config.duration });
    const stopped = await server.request('stop', 'stopped');
    const cpuAfter = cpuTimes(config.serverCpu);
    checkLoad(load, modeKey);
    if (stopped.requests === 0) throw new Error(`mode ${modeKey}: expected requests in the measured window, got 0`);
    const serverUs = stopped.userUs + stopped.systemUs;
    const windowUs = stopped.elapsedNs / 1000;
    const spansPerRequest = stopped.spansExported / stopped.totalRequests;
    const wantSpans = MODES[modeKey].name === 'none' ? 0 : 2;
    if (Math.abs(spansPerRequest - wantSpans) > 0.1) {
      throw new Error(`mode ${modeKey}: expected ${wantSpans} exported spans per request, got ${spansPerRequest.toFixed(2)}`);
    }
    return {
      round, modeKey, mechanism: server.ready.mechanism,
      requestsPerSecond: load.requestsPerSecond,
      latencyP99Ms: load.latencyP99Ms,
      requests: stopped.requests,
      // The event-loop thread's CPU (where the hooks and the manager run); process CPU adds V8's
      // and libuv's helper threads (GC, compilation), which move with the machine's noise.
      cpuUsPerRequest: stopped.threadCpuUs / stopped.requests,
      processCpuUsPerRequest: serverUs / stopped.requests,
      // /proc/stat ticks are 10 ms: over a 5 s window this is good to about ±0.5 %.
      foreignPercent: Math.max(0, (cpuAfter.busyUs - cpuBefore.busyUs - serverUs) / windowUs * 100),
      stealPercent: (cpuAfter.stealUs - cpuBefore.stealUs) / windowUs * 100,
      spansPerRequest,
    };
  } finally {
    await server.stop();
  }
}

async function main() {
  const config = parseConfig(process.argv.slice(2));
  if (config.report !== undefined) {
    const saved = JSON.parse(fs.readFileSync(config.report, 'utf8'));
    const report = { ...saved, summary: summarise(saved.samples, saved.config.modes) };
    process.stdout.write(markdown(report) + '\n');
    if (config.roundsTable) process.stdout.write('\n' + roundsTable(report.samples) + '\n');
    return;
  }
  checkTaskset();
  const node = nodeVersion(config.nodeBin);
  const machine = describeMachine();
  const revision = codeRevision(path.join(__dirname, '..', '..'));
  const startedAt = new Date();
  const loadBefore = loadAverage();
  const perRound = config.modes.length * (config.duration + config.warmup + 1.5);
  process.stderr.write(`bench:http on Node ${node}: ${config.rounds} rounds × modes ${config.modes.join(' ')}, ` +
    `about ${Math.ceil(config.rounds * perRound / 60)} min; load average ${loadBefore.join(' ')}\n`);
  const samples = await alternate({
    rounds: config.rounds,
    modes: config.modes,
    measure: (modeKey, round) => measure(config, modeKey, round, process.execPath),
    onSample: (sample) => process.stderr.write(`  round ${sample.round} ${sample.modeKey}: ${sample.requestsPerSecond.toFixed(0)} req/s, ` +
      `${sample.cpuUsPerRequest.toFixed(1)} µs CPU/req, p99 ${sample.latencyP99Ms} ms, ` +
      `foreign ${sample.foreignPercent.toFixed(1)} %, steal ${sample.stealPercent.toFixed(1)} %\n`),
  });
  const finishedAt = new Date();
  const loadAfter = loadAverage();
  const summary = summarise(samples, config.modes);
  const command = ['npm run bench:http --', ...process.argv.slice(2)].join(' ').replace(/ --$/, '');
  const report = { summary, samples, config, machine, node, revision, startedAt, finishedAt, loadBefore, loadAfter, command };
  process.stdout.write(markdown(report) + '\n');
  if (config.roundsTable) process.stdout.write('\n' + roundsTable(samples) + '\n');
  if (config.json !== undefined) fs.writeFileSync(config.json, JSON.stringify(report, null, 2) + '\n');
}

main().catch((err) => {
  process.stderr.write(`bench:http: ${err.message}\n`);
  process.exit(1);
});
