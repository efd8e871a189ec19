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
const { execFileSync } = require('node:child_process');
const { MODES } = require('./modes');
const { nodeVersion } = require('../lib/node-binary');
const { parseServiceArgs } = require('../lib/args');
const path = require('node:path');
const { describeMachine, loadAverage, codeRevision } = require('../lib/machine');
const { measureServerRound } = require('../lib/server-round');
const { alternate } = require('../lib/rounds');
const { summarise, markdown, roundsTable } = require('./report');

const SERVER = path.join(__dirname, 'server.js');

function parseConfig(argv) {
  const config = parseServiceArgs(argv, { connections: 50, modes: 'abcde' });
  if (config.report !== undefined) return config;
  const modes = [...config.modes];
  for (const key of modes) {
    if (MODES[key] === undefined) {
      throw new TypeError(`--modes: expected letters from ${Object.keys(MODES).join('')}, got ${JSON.stringify(config.modes)}`);
    }
  }
  if (new Set(modes).size !== modes.length) throw new TypeError(`--modes: expected each mode once, got ${JSON.stringify(config.modes)}`);
  return { ...config, modes };
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

// One measured round of one mode in a fresh server process.
function measure(config, modeKey, clientNode) {
  return measureServerRound({
    server: { nodeBin: config.nodeBin, nodeArgs: config.nodeArgs, script: SERVER, modeKey, cpu: config.serverCpu },
    load: { nodeBin: clientNode, connections: config.connections, cpu: config.clientCpu },
    warmup: config.warmup,
    duration: config.duration,
    checkReady: (ready) => checkServerState(ready, modeKey),
    afterStop: (stopped) => {
      const spansPerRequest = stopped.spansExported / stopped.totalRequests;
      const wantSpans = MODES[modeKey].name === 'none' ? 0 : 2;
      if (Math.abs(spansPerRequest - wantSpans) > 0.1) {
        throw new Error(`mode ${modeKey}: expected ${wantSpans} exported spans per request, got ${spansPerRequest.toFixed(2)}`);
      }
      return { spansPerRequest };
    },
  });
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
    measure: (modeKey) => measure(config, modeKey, process.execPath),
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
