'use strict';
// The end-to-end demo, the pipeline this project exists to feed, on one host:
//   1. an HTTP service instrumented with the OpenTelemetry SDK (NodeSDK) and this package's
//      context manager (demo/service.js), driven with load (autocannon);
//   2. an OpenTelemetry Collector (the one scripts/build-collector.sh builds into target/otelcol/,
//      with collector/config.yaml: OTLP receiver, profiles pipeline, file exporter);
//   3. `thread-ctx agent`, sampling the service from outside with eBPF and streaming span-linked
//      profiles to the Collector as OTLP/Profiles, stopped with SIGTERM (which sends its last window);
//   4. `thread-ctx report` on what the Collector received: CPU per route, the share of samples
//      linked to a trace and span, the service's resource, the build ids, a flame graph of it all
//      and one of the slowest trace (named by the service's span log).
// eBPF needs root. Without it the demo samples with `thread-ctx dump` snapshots (ptrace) instead,
// with no agent and no Collector, and says so.
//   node demo/run.js [--seconds 6] [--hz 499] [--snapshots] [--flamegraph FILE.svg]
//                    [--flamegraph-all FILE.svg] [--pprof FILE] [--otlp-out FILE]
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');

const ROOT = path.join(__dirname, '..');
const THREAD_CTX = process.env.THREAD_CTX_BIN || path.join(ROOT, 'target', 'release', 'thread-ctx');
const COLLECTOR = process.env.OTELCOL_BIN || path.join(ROOT, 'target', 'otelcol', 'otelcol-thread-ctx');
const arg = (name, dflt) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : dflt; };
const SECONDS = Number(arg('seconds', 6));
const HZ = Number(arg('hz', 499));
const INTERVAL = '2s';
const SERVICE_NAME = 'demo-shop';
const useEbpf = process.getuid() === 0 && !process.argv.includes('--snapshots');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function startService(spanLog) {
  // --logfile=/dev/null: with a perf map, Node 24+ also writes an isolate-*-v8.log into the working
  // directory, which nothing here reads (the perf map goes to /tmp either way).
  const child = spawn(process.execPath, ['--perf-basic-prof-only-functions', '--logfile=/dev/null', path.join(__dirname, 'service.js')], {
    // The service exports spans to its log only: no metrics or logs pipeline to reach.
    env: { ...process.env, PORT: '0', SPAN_LOG: spanLog, OTEL_SERVICE_NAME: SERVICE_NAME, OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve({ child, ...JSON.parse(String(d).split('\n')[0]) }));
    child.once('exit', (code) => reject(new Error(`service exited early (${code})`)));
  });
}

function load(port, seconds) {
  return autocannon({
    url: `http://127.0.0.1:${port}`, connections: 16, duration: seconds,
    requests: [{ path: '/api/report' }, { path: '/api/search?q=shoes' }, { path: '/api/users/42' }, { path: '/api/users/7' }],
  });
}

// A free loopback port (another process could take it before the Collector binds it: then the
// Collector is started again on others).
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer().once('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

// Waits until `exited` settles or `ms` pass; true when it exited.
const exitedWithin = (exited, ms) => Promise.race([exited.then(() => true), sleep(ms).then(() => false)]);

// The Collector on free ports, with the repository's configuration: ready once it logs so.
async function startCollector(dir, output) {
  if (!fs.existsSync(COLLECTOR)) throw new Error(`${COLLECTOR} missing: run "bash scripts/setup.sh" first (it builds the Collector; needs Go)`);
  for (let attempt = 1; ; attempt++) {
    const [grpc, http] = [await freePort(), await freePort()];
    const logPath = path.join(dir, `collector-${attempt}.log`);
    const log = fs.openSync(logPath, 'w');
    const child = spawn(COLLECTOR, ['--config', path.join(ROOT, 'collector', 'config.yaml'), '--feature-gates=+service.profilesSupport'], {
      env: { ...process.env, OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_HTTP_ENDPOINT: `127.0.0.1:${http}`, OTELCOL_OUTPUT: output },
      stdio: ['ignore', log, log],
    });
    fs.closeSync(log);
    const exited = new Promise((r) => child.once('exit', r));
    const deadline = Date.now() + 60_000;
    let text = '';
    while (Date.now() < deadline) {
      text = fs.readFileSync(logPath, 'utf8');
      if (text.includes('Everything is ready')) return { child, exited, grpc, logPath };
      if (await exitedWithin(exited, 100)) break;
    }
    child.kill('SIGKILL');
    if (!text.includes('address already in use') || attempt === 3) throw new Error(`the Collector did not start (log ${logPath}):\n${text}`);
  }
}

async function stopChild(child, exited, ms = 30_000) {
  child.kill('SIGTERM');
  if (!(await exitedWithin(exited, ms))) { child.kill('SIGKILL'); await exited; }
}

// `thread-ctx agent` for the service, streaming to the Collector; resolves once it tracks it.
function startAgent(pid, grpcPort) {
  const args = ['agent', '--pid', String(pid), '--hz', String(HZ), '--interval', INTERVAL, '--endpoint', `http://127.0.0.1:${grpcPort}`, '--protocol', 'grpc'];
  const child = spawn(THREAD_CTX, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const lines = [];
  let pending = '';
  const exited = new Promise((r) => child.once('close', (code) => r(code))); // after its stderr is read
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`thread-ctx agent did not track process ${pid} within 30 s:\n${lines.join('\n')}`)); }, 30_000);
    child.stderr.on('data', (d) => {
      const parts = (pending + d).split('\n');
      pending = parts.pop();
      lines.push(...parts);
      if (parts.some((l) => l.includes(`tracking process ${pid}`))) { clearTimeout(timer); resolve({ child, exited, lines, command: `thread-ctx ${args.join(' ')}` }); }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(Object.assign(new Error(`thread-ctx agent exited (${code}): ${[...lines, pending].join('\n').trim()}`), { agentFailed: true }));
    });
  });
}

function report(args) {
  const r = spawnSync(THREAD_CTX, ['report', ...args], { encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// The flame graph of the slowest trace: the span log names the slowest requests recorded from
// start to end; `thread-ctx report --trace` draws the first of them that has CPU samples in what
// the Collector received. A request can be slow without CPU of its own (queued behind others on
// the event loop): then the slowest one with samples is drawn, and the output says so.
function drawSlowestTrace(received, pid, spanLog, window) {
  const svg = path.resolve(arg('flamegraph', path.join(os.tmpdir(), 'otel-thread-ctx-demo-slowest-trace.svg')));
  const roots = fs.readFileSync(spanLog, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    .filter((s) => !s.parentSpanId && s.startMs >= window.start && s.startMs + s.durationMs <= window.end)
    .sort((a, b) => b.durationMs - a.durationMs);
  for (const [rank, s] of roots.slice(0, 50).entries()) {
    const drawn = report(['--otlp', received, '--pid', String(pid), '--flamegraph', svg, '--trace', s.traceId]);
    if (drawn.code !== 0) continue; // no CPU samples in that trace
    const samples = Number(/\((\d+) CPU samples/.exec(drawn.stderr)?.[1]);
    const which = rank === 0 ? 'the slowest trace' : `the slowest trace with CPU samples (the ${rank} slower ones had none)`;
    console.log(`\nflame graph of ${which}, ${s.traceId} (${s.name}): ${s.durationMs.toFixed(1)} ms long, ${samples} CPU samples at ${HZ} Hz ` +
      `(~${(samples * 1000 / HZ).toFixed(0)} ms on CPU; the rest of the time it waited: I/O, timers, or other requests on the event loop)\n  ${svg}`);
    return;
  }
  console.log(`\nno flame graph of a trace: none of the ${Math.min(roots.length, 50)} slowest traces recorded from start to end has CPU samples in ${received}`);
}

// The pipeline: Collector, agent, load, SIGTERM, then what the Collector received.
async function viaAgentAndCollector(svc, spanLog) {
  const received = path.resolve(arg('otlp-out', path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'otel-thread-ctx-demo-')), 'received.pb')));
  fs.rmSync(received, { force: true });
  const allSvg = path.resolve(arg('flamegraph-all', path.join(os.tmpdir(), 'otel-thread-ctx-demo-all.svg')));
  const pprof = arg('pprof');
  const collector = await startCollector(path.dirname(received), received);
  const window = {};
  let agent = null;
  try {
    console.log(`OpenTelemetry Collector ${path.relative(ROOT, COLLECTOR)} (--feature-gates=+service.profilesSupport): OTLP gRPC on 127.0.0.1:${collector.grpc}, file exporter -> ${received}`);
    agent = await startAgent(svc.pid, collector.grpc);
    console.log(`${agent.command}: tracking the service`);
    window.start = Date.now();
    const result = await load(svc.port, SECONDS);
    window.end = Date.now();
    console.log(`load: ${result.requests.total} requests in ${SECONDS} s, ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms`);
    await stopChild(agent.child, agent.exited);
    const windows = agent.lines.filter((l) => l.includes(': window ')).length;
    const last = agent.lines.filter((l) => l.includes('stopped')).pop() ?? '(no final line)';
    console.log(`agent: SIGTERM after ${windows} windows; ${last.replace(/^thread-ctx agent: /, '')}`);
  } finally {
    if (agent) agent.child.kill('SIGKILL'); // no-op once it exited
    await stopChild(collector.child, collector.exited); // drains its pipeline into the file
  }
  const args = ['--otlp', received, '--pid', String(svc.pid), '--top', '5', '--flamegraph', allSvg, ...(pprof ? ['--pprof', path.resolve(pprof)] : [])];
  const r = report(args);
  console.log(`\nwhat the Collector received (thread-ctx report ${args.join(' ')}):\n`);
  process.stdout.write(r.stdout);
  if (r.code !== 0) throw new Error(`thread-ctx report failed (${r.code}): ${r.stderr}`);
  console.log(`\nflame graph of everything the Collector received from the service: ${allSvg}`);
  drawSlowestTrace(received, svc.pid, spanLog, window);
}

// The record attribute `key` of a snapshot (dump thread), if any.
function recordAttr(entries, key) {
  return entries?.find((e) => e.key === key)?.value ?? null;
}

async function snapshots(pid, seconds) {
  const samples = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const threads = JSON.parse(execFileSync(THREAD_CTX, ['dump', String(pid), '--json'], { encoding: 'utf8' })).threads;
    for (const t of threads) {
      const valid = t.state === 'valid';
      samples.push({ tid: t.tid, trace_id: valid ? t.trace_id : null, span_id: valid ? t.span_id : null, route: valid ? recordAttr(t.attrs, 'http.route') : null });
    }
    await sleep(50);
  }
  return samples;
}

const pct = (n, total) => `${((100 * n) / Math.max(total, 1)).toFixed(1)}%`;

// The snapshots of the event-loop thread by route and span (snapshots also catch the thread
// idle, so "no span" includes waiting for work).
function reportSnapshots(samples, spanLog, mainTid) {
  const spans = new Map();
  for (const line of fs.readFileSync(spanLog, 'utf8').split('\n')) if (line) { const s = JSON.parse(line); spans.set(s.spanId, s); }
  const onLoop = samples.filter((s) => s.tid === mainTid);
  const byRoute = new Map(), byName = new Map();
  const count = (map, key, init) => { const e = map.get(key) ?? init(); e.n++; map.set(key, e); };
  for (const s of onLoop) {
    const route = !s.span_id ? '(no span: idle, GC, between requests)' : (s.route ?? '(no route in the record yet)');
    count(byRoute, route, () => ({ n: 0 }));
    if (!s.span_id) continue;
    const name = spans.get(s.span_id)?.name ?? '(span not exported yet)';
    count(byName, `${name}\t${route}`, () => ({ n: 0, name, route }));
  }
  console.log(`\nsnapshots of the event-loop thread (tid ${mainTid}): ${onLoop.length} (snapshots also catch the thread idle: "no span" includes waiting for work)`);
  console.log('\nRoutes:\n| route | snapshots | share of snapshots |\n|---|---|---|');
  for (const [route, e] of [...byRoute].sort((a, b) => b[1].n - a[1].n)) console.log(`| ${route} | ${e.n} | ${pct(e.n, onLoop.length)} |`);
  console.log('\nSpans (all instances of a span name):\n| span | route | snapshots | share of snapshots |\n|---|---|---|---|');
  for (const e of [...byName.values()].sort((a, b) => b.n - a.n)) console.log(`| ${e.name} | ${e.route} | ${e.n} | ${pct(e.n, onLoop.length)} |`);
  const tagged = onLoop.filter((s) => s.span_id).length;
  console.log(`\n${pct(tagged, onLoop.length)} of event-loop snapshots carry a span.`);
}

async function viaSnapshots(svc, spanLog) {
  const loadDone = load(svc.port, SECONDS);
  await sleep(500);
  const samples = await snapshots(svc.pid, SECONDS - 1);
  const result = await loadDone;
  console.log(`load: ${result.requests.total} requests in ${SECONDS} s, ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms`);
  await sleep(300); // let the last spans reach the log
  reportSnapshots(samples, spanLog, svc.pid); // the event-loop thread's tid is the pid
}

async function main() {
  if (!fs.existsSync(THREAD_CTX)) throw new Error(`${THREAD_CTX} missing: run "bash scripts/setup.sh" first`);
  const spanLog = path.join(os.tmpdir(), `otel-thread-ctx-demo-spans-${process.pid}.jsonl`);
  const svc = await startService(spanLog);
  console.log(`demo service pid ${svc.pid} on 127.0.0.1:${svc.port} (NodeSDK + ThreadContextManager, service.name ${SERVICE_NAME}); load for ${SECONDS} s`);
  try {
    if (!useEbpf) {
      console.log((process.getuid() === 0 ? '--snapshots given' : 'not root: eBPF sampling needs root') +
        '; falling back to thread-ctx dump snapshots (ptrace), one every 50 ms plus the time a dump takes, without the agent and the Collector');
      await viaSnapshots(svc, spanLog);
      return;
    }
    try {
      await viaAgentAndCollector(svc, spanLog);
    } catch (e) {
      if (!e.agentFailed) throw e;
      console.log(`eBPF sampling failed (${e.message}); falling back to thread-ctx dump snapshots (ptrace)`);
      await viaSnapshots(svc, spanLog);
    }
  } finally {
    // V8 writes its perf map (for naming JS frames) to /tmp; it means nothing once the service is gone.
    svc.child.once('exit', () => fs.rmSync(`/tmp/perf-${svc.pid}.map`, { force: true }));
    svc.child.kill('SIGTERM');
    fs.rmSync(spanLog, { force: true });
  }
}

main().catch((e) => { console.error(e.message); process.exit(1); });
