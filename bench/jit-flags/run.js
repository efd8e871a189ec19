'use strict';
// What Node's JIT-naming flags cost a busy service (docs/source-lines.md): bench:http's service
// with the ThreadContextManager (mode b), one server process per flag set, alternated round after
// round under the same autocannon load (server and load pinned to two CPUs): process CPU per
// request, as a per-round ratio to the same service without flags, with bootstrap intervals. Then
// what each flag set leaves on disk: the perf map, the jitdump and V8's isolate log, measured at
// four points of a --growth-second run under load after the warm-up, and the rate of the second
// half extrapolated to an hour.
//
//   node bench/jit-flags/run.js [--node 24|PATH] [--rounds 5] [--duration 5] [--growth 120]
//     [--modes none,map,map-interp,dump,dump-all] [--connections 50] [--server-cpu 0] [--client-cpu 1]
//   (--growth 0: no growth measurement; --rounds 0: no CPU measurement)

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { resolveNode, nodeVersion } = require('../lib/node-binary');
const { positiveInteger, cpuNumber } = require('../lib/args');
const { describeMachine, loadAverage, codeRevision } = require('../lib/machine');
const { measureServerRound } = require('../lib/server-round');
const { startServer, runLoad, cleanUpOnInterrupt } = require('../lib/processes');
const { alternate } = require('../lib/rounds');
const { pairedRatio, median } = require('../lib/stats');
const { fixed, interval, utcMinute } = require('../lib/format');

const SERVER = path.join(__dirname, '..', 'http', 'server.js');
const SERVER_MODE = 'b'; // ThreadContextManager with NodeSDK-style telemetry
const WARMUP_REQUESTS = 3000;
// --logfile=/dev/null: --perf-prof (and, on Node 24+, the perf map flags) open V8's isolate log in
// the working directory; the recommended sets send it nowhere (measured: the jitdump and perf map
// are still written).
const MODES = {
  none: [],
  map: ['--perf-basic-prof-only-functions', '--logfile=/dev/null'],
  'map-interp': ['--perf-basic-prof-only-functions', '--interpreted-frames-native-stack', '--logfile=/dev/null'],
  dump: ['--perf-prof', '--logfile=/dev/null'],
  'dump-all': ['--perf-prof', '--perf-basic-prof-only-functions', '--interpreted-frames-native-stack', '--logfile=/dev/null'],
  // What the flags leave without --logfile: for the isolate log's growth only.
  'dump-log': ['--perf-prof', '--perf-basic-prof-only-functions'],
};

function parseConfig(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      node: { type: 'string' },
      rounds: { type: 'string', default: '5' },
      duration: { type: 'string', default: '5' },
      growth: { type: 'string', default: '120' },
      modes: { type: 'string', default: 'none,map,map-interp,dump,dump-all' },
      connections: { type: 'string', default: '50' },
      'server-cpu': { type: 'string', default: '0' },
      'client-cpu': { type: 'string', default: '1' },
    },
  });
  const modes = values.modes.split(',').filter(Boolean);
  for (const m of modes) {
    if (!(m in MODES)) throw new TypeError(`--modes: expected names among ${Object.keys(MODES).join(', ')}, got ${JSON.stringify(m)}`);
  }
  if (!modes.includes('none')) throw new TypeError('--modes: expected none among the modes (ratios are taken against it)');
  const nonNegative = (name, text) => (text === '0' ? 0 : positiveInteger(name, text));
  return {
    nodeBin: resolveNode(values.node),
    rounds: nonNegative('rounds', values.rounds),
    duration: positiveInteger('duration', values.duration),
    growth: nonNegative('growth', values.growth),
    modes,
    connections: positiveInteger('connections', values.connections),
    serverCpu: cpuNumber('server-cpu', values['server-cpu']),
    clientCpu: cpuNumber('client-cpu', values['client-cpu']),
  };
}

/** Sizes of what V8 wrote for process `pid` started in `dir`. */
function filesOf(pid, dir) {
  const size = (file) => { try { return fs.statSync(file).size; } catch { return null; } };
  const logs = fs.readdirSync(dir).filter((n) => n.startsWith('isolate-') && n.includes(`-${pid}-`));
  return {
    perfMap: size(`/tmp/perf-${pid}.map`),
    jitdump: size(path.join(dir, `jit-${pid}.dump`)),
    isolateLog: logs.length === 0 ? null : logs.reduce((sum, n) => sum + size(path.join(dir, n)), 0),
  };
}

function removeFilesOf(pid, dir) {
  fs.rmSync(`/tmp/perf-${pid}.map`, { force: true });
  for (const n of fs.readdirSync(dir)) fs.rmSync(path.join(dir, n), { force: true, recursive: true });
}

// Every server runs in `dir` (the jitdump and isolate log go to the working directory).
function serverOptions(config, mode) {
  return {
    nodeBin: config.nodeBin, nodeArgs: MODES[mode], script: SERVER, modeKey: SERVER_MODE, cpu: config.serverCpu,
    env: { OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none' },
  };
}

async function measureCpu(config, dir) {
  const samples = await alternate({
    rounds: config.rounds,
    modes: config.modes,
    measure: (mode) => measureServerRound({
      server: serverOptions(config, mode),
      load: { nodeBin: process.execPath, connections: config.connections, cpu: config.clientCpu },
      warmup: { requests: WARMUP_REQUESTS },
      duration: config.duration,
    }),
    onSample: (s) => {
      process.stderr.write(`round ${s.round} ${s.mode}: ${fixed(s.processCpuUsPerRequest, 1)} µs CPU/request, ${fixed(s.requestsPerSecond, 0)} req/s\n`);
      for (const n of fs.readdirSync(dir)) fs.rmSync(path.join(dir, n), { force: true });
    },
  });
  console.log(`\n### CPU per request (process CPU, ${config.rounds} rounds of ${config.duration} s, ratio to no flags per round)\n`);
  console.log('| flags | µs CPU / request (median) | ratio to none [95% interval] |');
  console.log('|---|---|---|');
  for (const mode of config.modes) {
    const us = median(samples.filter((s) => s.mode === mode).map((s) => s.processCpuUsPerRequest));
    const ratio = mode === 'none' ? '1' : interval(pairedRatio(samples, mode, 'none', (s) => s.processCpuUsPerRequest));
    console.log(`| ${MODES[mode].join(' ') || '(none)'} | ${fixed(us, 1)} | ${ratio} |`);
  }
}

async function measureGrowth(config, dir, mode) {
  const server = await startServer(serverOptions(config, mode));
  const pid = server.ready.pid;
  try {
    const load = { nodeBin: process.execPath, connections: config.connections, cpu: config.clientCpu, port: server.ready.port };
    await runLoad({ ...load, requests: WARMUP_REQUESTS });
    const points = [{ seconds: 0, requests: 0, ...filesOf(pid, dir) }];
    let requests = 0;
    for (let i = 1; i <= 4; i++) {
      const r = await runLoad({ ...load, seconds: config.growth / 4 });
      requests += r.requestsTotal;
      points.push({ seconds: config.growth * i / 4, requests, ...filesOf(pid, dir) });
    }
    return points;
  } finally {
    await server.stop();
    removeFilesOf(pid, dir);
  }
}

function kib(bytes) {
  return bytes === null ? '–' : fixed(bytes / 1024, 0);
}

async function main() {
  const config = parseConfig(process.argv.slice(2));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jit-flags-'));
  cleanUpOnInterrupt(() => fs.rmSync(dir, { recursive: true, force: true }));
  process.chdir(dir);
  console.log(`## JIT-naming flags on ${nodeVersion(config.nodeBin)} (${utcMinute(Date.now())}, ${codeRevision(path.join(__dirname, '..', '..'))})`);
  console.log(`machine: ${JSON.stringify(describeMachine())}, load average before: ${loadAverage().join(' ')}`);
  try {
    if (config.rounds > 0) await measureCpu(config, dir);
    if (config.growth > 0) {
      console.log(`\n### Files after the warm-up (${WARMUP_REQUESTS} requests), then under load for ${config.growth} s (KiB)\n`);
      console.log('| flags | file | after warm-up | +25% | +50% | +75% | end | second half, per hour | requests |');
      console.log('|---|---|---|---|---|---|---|---|---|');
      for (const mode of [...config.modes.filter((m) => m !== 'none'), 'dump-log']) {
        const points = await measureGrowth(config, dir, mode);
        const [, , half, , end] = points;
        for (const file of ['perfMap', 'jitdump', 'isolateLog']) {
          if (points.every((p) => p[file] === null)) continue;
          const perHour = (end[file] - half[file]) / (end.seconds - half.seconds) * 3600;
          console.log(`| ${MODES[mode].join(' ')} | ${file} | ${points.map((p) => kib(p[file])).join(' | ')} | ${kib(perHour)} | ${end.requests} |`);
        }
      }
    }
  } finally {
    console.log(`\nload average after: ${loadAverage().join(' ')}`);
    process.chdir(os.tmpdir());
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err.stack || String(err));
  process.exit(1);
});
