'use strict';
// How many requests of each route get at least one CPU sample at each sampling rate: the question
// behind the agent's shipped rate (deploy/systemd/agent.env), since the spanprofiles connector's
// per-request figures (own CPU, top frames, who held it) come from the samples a request got, and
// a request with none has nothing to explain. As root: the demo service (demo/service.js, its
// records carrying http.route) under an open-loop load of --rps requests a second over its three
// routes, sampled by `thread-ctx record --hz RATE --format jsonl --off-cpu` for --seconds, rates
// alternated round after round (bench/lib/rounds.js). Per route and rate: the requests answered
// while it sampled, the distinct traces among its CPU samples (each request is one trace), their
// ratio, and the sampler's own CPU as a share of one core (what the rate costs).
//   node bench/agent/coverage.js [--rates 19,49,99] [--seconds 30] [--rps 60] [--rounds 2] [--bin PATH]
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { root, track, cpuSeconds, waitFor, startLoad, DEMO_PATHS, sleep } = require('../lib/agent-bench');
const { alternate } = require('../lib/rounds');
const { spread } = require('../lib/stats');
const { option } = require('../lib/args');

const RATES = option('rates', '19,49,99').split(',').map(Number);
const SECONDS = Number(option('seconds', '30'));
const RPS = Number(option('rps', '60'));
const ROUNDS = Number(option('rounds', '2'));
const BIN = path.resolve(option('bin', path.join(root, 'target/release/thread-ctx')));
for (const r of RATES) if (!(Number.isInteger(r) && r >= 1 && r <= 999)) throw new RangeError(`--rates: expected rates of 1 to 999 Hz, got ${option('rates')}`);
if (!(SECONDS >= 10)) throw new RangeError(`--seconds: expected at least 10, got ${option('seconds')}`);
if (!(RPS > 0 && RPS <= 1000)) throw new RangeError(`--rps: expected 1 to 1000 requests a second, got ${option('rps')}`);
if (!(ROUNDS >= 1)) throw new RangeError(`--rounds: expected at least 1, got ${option('rounds')}`);
if (process.getuid() !== 0) throw new Error('the sampler needs root (eBPF): run with sudo');
if (!fs.existsSync(BIN)) throw new Error(`--bin: no ${BIN}: run cargo build --release first`);

// The route the service's records carry, by the path the load asks for.
const ROUTE_OF = { '/api/report': '/api/report', '/api/search?q=shoes': '/api/search', '/api/users/7': '/api/users/:id' };

/** One sampling run at `hz`: per route, requests answered and traces with a CPU sample; the sampler's CPU. */
async function measure(hz, pid, load) {
  const args = ['record', String(pid), '--hz', String(hz), '--duration', `${SECONDS}s`, '--format', 'jsonl', '--off-cpu'];
  const recorder = track(spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  let stderr = '';
  recorder.stderr.on('data', (d) => (stderr += d));
  const tracesOf = new Map();
  const lines = readline.createInterface({ input: recorder.stdout });
  const linesRead = new Promise((resolve) => lines.once('close', resolve));
  let seenCpu = 0;
  lines.on('line', (l) => {
    const s = JSON.parse(l);
    if (s.kind !== 'cpu') return;
    seenCpu++;
    const route = s.attrs?.entries?.find((e) => e.key === 'http.route')?.value;
    const trace = s.trace_id;
    if (!route || !trace || /^0+$/.test(trace)) return;
    if (!tracesOf.has(route)) tracesOf.set(route, new Set());
    tracesOf.get(route).add(trace);
  });
  // Requests answered while it sampled: from its first second (the programs loaded) to its end.
  await sleep(1000);
  const before = load.counts().answeredOf;
  const cpu0 = cpuSeconds(recorder.pid);
  let cpu1 = cpu0;
  const exited = new Promise((resolve) => recorder.on('exit', resolve));
  const lastCpu = setInterval(() => {
    try {
      cpu1 = cpuSeconds(recorder.pid);
    } catch {}
  }, 250);
  const code = await exited;
  clearInterval(lastCpu);
  await linesRead;
  const after = load.counts().answeredOf;
  if (code !== 0) throw new Error(`thread-ctx record exited ${code}: ${stderr.slice(-600)}`);
  const routes = {};
  for (const p of DEMO_PATHS) {
    const route = ROUTE_OF[p];
    routes[route] = { requests: after[p] - before[p], sampled: tracesOf.get(route)?.size ?? 0 };
  }
  return { routes, cpuSamples: seenCpu, cpuPct: (100 * (cpu1 - cpu0)) / (SECONDS - 1), load: os.loadavg()[0] };
}

(async () => {
  const service = track(spawn(process.execPath, [path.join(root, 'demo/service.js')], {
    // A span processor, so that the service has a tracer and its records spans.
    env: { ...process.env, PORT: '0', OTEL_SERVICE_NAME: 'bench-coverage', SPAN_LOG: '/dev/null' },
    stdio: ['ignore', 'pipe', 'inherit'],
  }));
  const { pid, port } = JSON.parse((await waitFor(service, '}')).trim().split('\n').pop());
  process.stderr.write(`demo service ${pid} on port ${port}; ${RPS} requests/s over ${DEMO_PATHS.join(', ')}\n`);
  const load = startLoad(port, RPS);
  await sleep(10000); // the service's code compiled and optimised before the first run
  const rows = await alternate({
    rounds: ROUNDS,
    modes: RATES.map(String),
    measure: (hz) => measure(Number(hz), pid, load),
    onSample: (r) => {
      const shares = Object.entries(r.routes).map(([route, x]) => `${route} ${x.sampled}/${x.requests}`);
      process.stderr.write(`round ${r.round}: ${r.mode} Hz: ${shares.join(', ')}; ${r.cpuPct.toFixed(2)} % of a core\n`);
    },
  });
  const { sent, answered, failed } = load.counts();
  load.stop();
  service.kill('SIGKILL');

  const f = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  const routes = DEMO_PATHS.map((p) => ROUTE_OF[p]);
  console.log(`thread-ctx record --off-cpu on the demo service at ${RPS} requests/s (${answered} of ${sent} answered, ${failed} failed), ${SECONDS} s per row, ${ROUNDS} rounds, ${os.cpus().length} CPUs, load ${f(Math.min(...rows.map((r) => r.load)))}–${f(Math.max(...rows.map((r) => r.load)))}`);
  console.log(`| rate | ${routes.map((r) => `${r}: requests with ≥ 1 CPU sample`).join(' | ')} | CPU samples/s | sampler CPU (% of a core), median [min, max] |`);
  console.log(`|---|${routes.map(() => '---|').join('')}---|---|`);
  for (const hz of RATES) {
    const mine = rows.filter((r) => r.mode === String(hz));
    const cells = routes.map((route) => {
      const requests = mine.reduce((a, r) => a + r.routes[route].requests, 0);
      const sampled = mine.reduce((a, r) => a + r.routes[route].sampled, 0);
      return `${f((100 * sampled) / requests)} % (${sampled} of ${requests})`;
    });
    const cpu = spread(mine.map((r) => r.cpuPct));
    const perSec = mine.reduce((a, r) => a + r.cpuSamples, 0) / (mine.length * SECONDS);
    console.log(`| ${hz} Hz | ${cells.join(' | ')} | ${f(perSec)} | ${f(cpu.median, 2)} [${f(cpu.min, 2)}, ${f(cpu.max, 2)}] |`);
  }
})().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
