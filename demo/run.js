'use strict';
// The end-to-end demo: start the instrumented service, drive load at it, sample it from outside
// with `thread-ctx record` (eBPF; needs root) and say which routes and spans burned the CPU.
// Without root it falls back to `thread-ctx dump` snapshots (ptrace) and says so. With eBPF it also
// writes the flame graph of the slowest trace (default: in the temp directory) and prints its path.
//   node demo/run.js [--seconds 6] [--hz 99] [--snapshots] [--flamegraph FILE.svg]
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');

const ROOT = path.join(__dirname, '..');
const THREAD_CTX = process.env.THREAD_CTX_BIN || path.join(ROOT, 'target', 'release', 'thread-ctx');
const arg = (name, dflt) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : dflt; };
const SECONDS = Number(arg('seconds', 6));
const HZ = Number(arg('hz', 99));
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

function runRecorder(pid) {
  return new Promise((resolve, reject) => {
    const rec = spawn(THREAD_CTX, ['record', String(pid), '--hz', String(HZ), '--duration', `${SECONDS - 1}s`, '--format', 'jsonl'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    rec.stdout.on('data', (d) => { out += d; });
    rec.stderr.on('data', (d) => { err += d; });
    rec.once('exit', (code) => code === 0 ? resolve({ lines: out, stderr: err }) : reject(new Error(`thread-ctx record failed (${code}): ${err}`)));
  });
}

async function snapshots(pid, seconds) {
  const samples = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const threads = JSON.parse(execFileSync(THREAD_CTX, ['dump', String(pid), '--json'], { encoding: 'utf8' })).threads;
    for (const t of threads) samples.push({ tid: t.tid, trace_id: t.state === 'valid' ? t.trace_id : null, span_id: t.state === 'valid' ? t.span_id : null });
    await new Promise((r) => setTimeout(r, 50));
  }
  return samples;
}

// The flame graph of the slowest trace: a second recorder (999 Hz, so one request gets several
// samples) writes a pprof with trace labels while the load runs; once the span log names the
// slowest request recorded from start to end, `thread-ctx flamegraph` draws its trace from that
// profile. A request can be slow without CPU of its own (queued behind others on the event loop):
// then the slowest one that has samples is drawn, and the output says so.
function flameGraphOfSlowestTrace(pid, spanLog) {
  const pprof = path.join(os.tmpdir(), `otel-thread-ctx-demo-${process.pid}.pb.gz`);
  const svg = path.resolve(arg('flamegraph', path.join(os.tmpdir(), 'otel-thread-ctx-demo-slowest-trace.svg')));
  const window = { start: Date.now() + 500 }; // attaching takes a moment
  const rec = spawn(THREAD_CTX, ['record', String(pid), '--hz', '999', '--duration', `${SECONDS - 1}s`, '--format', 'jsonl', '--pprof', pprof], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  rec.stderr.on('data', (d) => { err += d; });
  const recorded = new Promise((resolve, reject) => rec.once('exit', (code) => {
    window.end = Date.now() - 200; // the last poll may miss the final moments
    if (code === 0) resolve(); else reject(new Error(`thread-ctx record --pprof failed (${code}): ${err}`));
  }));
  return async () => {
    await recorded;
    const roots = fs.readFileSync(spanLog, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
      .filter((s) => !s.parentSpanId && s.startMs >= window.start && s.startMs + s.durationMs <= window.end)
      .sort((a, b) => b.durationMs - a.durationMs);
    for (const [rank, s] of roots.slice(0, 50).entries()) {
      const drawn = spawnSync(THREAD_CTX, ['flamegraph', pprof, '--trace', s.traceId, '-o', svg], { encoding: 'utf8' });
      if (drawn.status !== 0) continue; // no CPU samples in that trace
      const samples = Number(/\((\d+) CPU samples/.exec(drawn.stderr)?.[1]);
      const which = rank === 0 ? 'the slowest trace' : `the slowest trace with CPU samples (the ${rank} slower ones had none)`;
      console.log(`\nflame graph of ${which}, ${s.traceId} (${s.name}): ${s.durationMs.toFixed(1)} ms long, ${samples} CPU samples at 999 Hz ` +
        `(~${samples} ms on CPU; the rest of the time it waited: I/O, timers, or other requests on the event loop)\n  ${svg}`);
      return;
    }
    console.log(`\nno flame graph: none of the ${Math.min(roots.length, 50)} slowest traces recorded from start to end has CPU samples in ${pprof}`);
  };
}

const pct = (n, total) => `${((100 * n) / Math.max(total, 1)).toFixed(1)}%`;

// `kind` says what the samples are: eBPF CPU samples (on-CPU time only), or ptrace snapshots
// (which also catch the thread idle, so "no span" includes waiting for work).
function report(samples, spanLog, mainTid, kind) {
  const spans = new Map();
  for (const line of fs.readFileSync(spanLog, 'utf8').split('\n')) if (line) { const s = JSON.parse(line); spans.set(s.spanId, s); }
  const routeOfTrace = new Map([...spans.values()].filter((s) => s.route).map((s) => [s.traceId, s.route]));
  const onLoop = samples.filter((s) => s.tid === mainTid);
  const byRoute = new Map(), byName = new Map(), bySpan = new Map();
  const count = (map, key, init) => { const e = map.get(key) ?? init(); e.n++; map.set(key, e); };
  for (const s of onLoop) {
    const span = s.span_id ? spans.get(s.span_id) : undefined;
    const route = s.span_id ? (routeOfTrace.get(s.trace_id) ?? '(span not exported yet)') : '(no span: idle, GC, between requests)';
    count(byRoute, route, () => ({ n: 0 }));
    if (!s.span_id) continue;
    const name = span?.name ?? '(span not exported yet)';
    count(byName, `${name}\t${route}`, () => ({ n: 0, name, route }));
    count(bySpan, `${s.trace_id} ${s.span_id}`, () => ({ n: 0, name, route, durationMs: span?.durationMs }));
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
  console.log(`\n${pct(tagged, onLoop.length)} of event-loop ${what} carry a span; ${pct(known, tagged)} of those name a span the service exported.`);
}

async function main() {
  if (!fs.existsSync(THREAD_CTX)) throw new Error(`${THREAD_CTX} missing: run "bash scripts/setup.sh" first`);
  const spanLog = path.join(os.tmpdir(), `otel-thread-ctx-demo-spans-${process.pid}.jsonl`);
  const svc = await startService(spanLog);
  const mainTid = svc.pid; // the event-loop thread's tid is the pid
  console.log(`demo service pid ${svc.pid} on 127.0.0.1:${svc.port}; driving load for ${SECONDS} s`);
  try {
    const loadDone = load(svc.port, SECONDS);
    await new Promise((r) => setTimeout(r, 500));
    const drawSlowestTrace = useEbpf ? flameGraphOfSlowestTrace(svc.pid, spanLog) : null;
    let samples = null;
    let kind = 'cpu';
    if (useEbpf) {
      console.log(`sampling with eBPF: thread-ctx record ${svc.pid} --hz ${HZ}`);
      try {
        const { lines } = await runRecorder(svc.pid);
        samples = lines.split('\n').filter(Boolean).map((l) => JSON.parse(l));
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
    if (kind === 'cpu') await drawSlowestTrace?.();
  } finally {
    // V8 writes its perf map (for naming JS frames) to /tmp; it means nothing once the service is gone.
    svc.child.once('exit', () => fs.rmSync(`/tmp/perf-${svc.pid}.map`, { force: true }));
    svc.child.kill('SIGTERM');
    fs.rmSync(spanLog, { force: true });
  }
}

main().catch((e) => { console.error(e.message); process.exit(1); });
