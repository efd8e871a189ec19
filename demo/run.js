'use strict';
// The end-to-end demo: start the instrumented service, drive load at it, sample it from outside
// with `thread-ctx record` (eBPF; needs root) and say which routes and spans burned the CPU.
// Without root it falls back to `thread-ctx dump` snapshots (ptrace) and says so. With eBPF one
// recording gives both the report (JSON lines) and a pprof profile, from which the flame graph of
// the slowest trace is drawn (default: in the temp directory; its path is printed).
// Routes come from the samples themselves: the service registers `http.route` as a record
// attribute, so each record carries its request's route into the profile.
//   node demo/run.js [--seconds 6] [--hz 499] [--snapshots] [--flamegraph FILE.svg] [--flamegraph-all FILE.svg] [--pprof FILE]
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');

const ROOT = path.join(__dirname, '..');
const THREAD_CTX = process.env.THREAD_CTX_BIN || path.join(ROOT, 'target', 'release', 'thread-ctx');
const arg = (name, dflt) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : dflt; };
const SECONDS = Number(arg('seconds', 6));
const HZ = Number(arg('hz', 499));
const useEbpf = process.getuid() === 0 && !process.argv.includes('--snapshots');

function startService(spanLog) {
  const child = spawn(process.execPath, ['--perf-basic-prof-only-functions', path.join(__dirname, 'service.js')], {
    env: { ...process.env, PORT: '0', SPAN_LOG: spanLog, OTEL_SERVICE_NAME: 'demo-shop' },
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

// One eBPF recording: JSON lines on stdout for the report, and a pprof for the flame graph.
function runRecorder(pid, pprof, allSvg) {
  return new Promise((resolve, reject) => {
    const args = ['record', String(pid), '--hz', String(HZ), '--duration', `${SECONDS - 1}s`, '--format', 'jsonl', '--pprof', pprof, '--flamegraph', allSvg];
    const rec = spawn(THREAD_CTX, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    rec.stdout.on('data', (d) => { out += d; });
    rec.stderr.on('data', (d) => { err += d; });
    rec.once('exit', (code) => code === 0 ? resolve({ lines: out, stderr: err }) : reject(new Error(`thread-ctx record failed (${code}): ${err}`)));
  });
}

// The record attribute `key` of a sample (eBPF JSON line) or a snapshot (dump thread), if any.
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
    await new Promise((r) => setTimeout(r, 50));
  }
  return samples;
}

// The flame graph of the slowest trace: once the span log names the slowest request recorded from
// start to end, `thread-ctx flamegraph` draws its trace from the recording's pprof. A request can
// be slow without CPU of its own (queued behind others on the event loop): then the slowest one
// that has samples is drawn, and the output says so.
function drawSlowestTrace(pprof, spanLog, window) {
  const svg = path.resolve(arg('flamegraph', path.join(os.tmpdir(), 'otel-thread-ctx-demo-slowest-trace.svg')));
  const roots = fs.readFileSync(spanLog, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    .filter((s) => !s.parentSpanId && s.startMs >= window.start && s.startMs + s.durationMs <= window.end)
    .sort((a, b) => b.durationMs - a.durationMs);
  for (const [rank, s] of roots.slice(0, 50).entries()) {
    const drawn = spawnSync(THREAD_CTX, ['flamegraph', pprof, '--trace', s.traceId, '-o', svg], { encoding: 'utf8' });
    if (drawn.status !== 0) continue; // no CPU samples in that trace
    const samples = Number(/\((\d+) CPU samples/.exec(drawn.stderr)?.[1]);
    const which = rank === 0 ? 'the slowest trace' : `the slowest trace with CPU samples (the ${rank} slower ones had none)`;
    console.log(`\nflame graph of ${which}, ${s.traceId} (${s.name}): ${s.durationMs.toFixed(1)} ms long, ${samples} CPU samples at ${HZ} Hz ` +
      `(~${(samples * 1000 / HZ).toFixed(0)} ms on CPU; the rest of the time it waited: I/O, timers, or other requests on the event loop)\n  ${svg}`);
    return;
  }
  console.log(`\nno flame graph: none of the ${Math.min(roots.length, 50)} slowest traces recorded from start to end has CPU samples in ${pprof}`);
}

const pct = (n, total) => `${((100 * n) / Math.max(total, 1)).toFixed(1)}%`;

// `kind` says what the samples are: eBPF CPU samples (on-CPU time only), or ptrace snapshots
// (which also catch the thread idle, so "no span" includes waiting for work).
function report(samples, spanLog, mainTid, kind) {
  const spans = new Map();
  for (const line of fs.readFileSync(spanLog, 'utf8').split('\n')) if (line) { const s = JSON.parse(line); spans.set(s.spanId, s); }
  const routeOfTrace = new Map([...spans.values()].filter((s) => s.route).map((s) => [s.traceId, s.route]));
  const onLoop = samples.filter((s) => s.tid === mainTid);
  let routeAgrees = 0;
  let routeCarried = 0;
  const byRoute = new Map(), byName = new Map(), bySpan = new Map();
  const count = (map, key, init) => { const e = map.get(key) ?? init(); e.n++; map.set(key, e); };
  for (const s of onLoop) {
    const span = s.span_id ? spans.get(s.span_id) : undefined;
    // The route the record carried at sample time; the span log (exported spans) cross-checks it.
    const route = !s.span_id ? '(no span: idle, GC, between requests)' : (s.route ?? '(no route in the record yet)');
    if (s.span_id && s.route) {
      routeCarried++;
      if (routeOfTrace.get(s.trace_id) === s.route) routeAgrees++;
    }
    count(byRoute, route, () => ({ n: 0 }));
    if (!s.span_id) continue;
    const name = span?.name ?? '(span not exported yet)';
    count(byName, `${name}\t${route}`, () => ({ n: 0, name, route }));
    const key = `${s.trace_id} ${s.span_id}`;
    const row = bySpan.get(key) ?? { n: 0, name, route, durationMs: span?.durationMs };
    if (s.route) row.route = route; // the record carries the route from the moment the handler set it
    row.n++;
    bySpan.set(key, row);
  }
  const what = kind === 'cpu' ? 'CPU samples' : 'snapshots';
  console.log(`\n${what} of the event-loop thread (tid ${mainTid}): ${onLoop.length}` +
    (kind === 'cpu' ? '' : ' (snapshots also catch the thread idle: "no span" includes waiting for work)'));
  const share = kind === 'cpu' ? 'share of event-loop CPU' : 'share of snapshots';
  console.log(`\nRoutes:\n| route | ${what} | ${share} |\n|---|---|---|`);
  for (const [route, e] of [...byRoute].sort((a, b) => b[1].n - a[1].n)) console.log(`| ${route} | ${e.n} | ${pct(e.n, onLoop.length)} |`);
  console.log(`\nSpans (all instances of a span name):\n| span | route | ${what} | ${share} |\n|---|---|---|---|`);
  for (const e of [...byName.values()].sort((a, b) => b.n - a.n)) console.log(`| ${e.name} | ${e.route} | ${e.n} | ${pct(e.n, onLoop.length)} |`);
  console.log(`\nTop single spans:\n| trace id | span id | span | route | ${what} | span duration |\n|---|---|---|---|---|---|`);
  for (const [key, e] of [...bySpan].sort((a, b) => b[1].n - a[1].n).slice(0, 5)) {
    const [t, s] = key.split(' ');
    console.log(`| ${t} | ${s} | ${e.name} | ${e.route} | ${e.n} | ${e.durationMs?.toFixed(1) ?? '?'} ms |`);
  }
  const tagged = onLoop.filter((s) => s.span_id).length;
  const known = onLoop.filter((s) => s.span_id && spans.has(s.span_id)).length;
  console.log(`\n${pct(tagged, onLoop.length)} of event-loop ${what} carry a span; ${pct(known, tagged)} of those name a span the service exported; ` +
    `${pct(routeCarried, tagged)} carry the route in the record (http.route), and for ${pct(routeAgrees, routeCarried)} of those it is the route the exported server span reports.`);
}

async function main() {
  if (!fs.existsSync(THREAD_CTX)) throw new Error(`${THREAD_CTX} missing: run "bash scripts/setup.sh" first`);
  const spanLog = path.join(os.tmpdir(), `otel-thread-ctx-demo-spans-${process.pid}.jsonl`);
  const pprof = path.resolve(arg('pprof', path.join(os.tmpdir(), 'otel-thread-ctx-demo.pb.gz')));
  const allSvg = path.resolve(arg('flamegraph-all', path.join(os.tmpdir(), 'otel-thread-ctx-demo-all.svg')));
  const svc = await startService(spanLog);
  const mainTid = svc.pid; // the event-loop thread's tid is the pid
  console.log(`demo service pid ${svc.pid} on 127.0.0.1:${svc.port}; driving load for ${SECONDS} s`);
  try {
    const loadDone = load(svc.port, SECONDS);
    await new Promise((r) => setTimeout(r, 500));
    let samples = null;
    let kind = 'cpu';
    const window = { start: Date.now() + 500 }; // attaching takes a moment
    if (useEbpf) {
      console.log(`sampling with eBPF: thread-ctx record ${svc.pid} --hz ${HZ} --pprof ${pprof}`);
      try {
        const { lines } = await runRecorder(svc.pid, pprof, allSvg);
        console.log(`flame graph of the whole recording (all threads, all spans): ${allSvg}`);
        window.end = Date.now() - 200; // the last poll may miss the final moments
        samples = lines.split('\n').filter(Boolean).map((l) => JSON.parse(l))
          .map((l) => ({ ...l, route: recordAttr(l.attrs?.entries, 'http.route') }));
      } catch (e) {
        console.log(`eBPF sampling failed (${e.message.trim()}); falling back to thread-ctx dump snapshots (ptrace)`);
      }
    } else {
      console.log((process.getuid() === 0 ? '--snapshots given' : 'not root: eBPF sampling needs root') +
        '; falling back to thread-ctx dump snapshots (ptrace), one every 50 ms plus the time a dump takes');
    }
    if (samples === null) {
      kind = 'snapshots';
      samples = await snapshots(svc.pid, SECONDS - 1);
    }
    const result = await loadDone;
    console.log(`load: ${result.requests.total} requests, ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms`);
    await new Promise((r) => setTimeout(r, 300)); // let the last spans reach the log
    report(samples, spanLog, mainTid, kind);
    if (kind === 'cpu') drawSlowestTrace(pprof, spanLog, window);
  } finally {
    // V8 writes its perf map (for naming JS frames) to /tmp; it means nothing once the service is gone.
    svc.child.once('exit', () => fs.rmSync(`/tmp/perf-${svc.pid}.map`, { force: true }));
    svc.child.kill('SIGTERM');
    fs.rmSync(spanLog, { force: true });
  }
}

main().catch((e) => { console.error(e.message); process.exit(1); });
