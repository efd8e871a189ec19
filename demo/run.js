'use strict';
// The end-to-end demo, the pipeline this project exists to feed, on one host (demo/pipeline.js
// starts the parts on free loopback ports):
//   1. Jaeger v2, a trace backend (target/jaeger/, memory storage);
//   2. the project's OpenTelemetry Collector (target/otelcol/, collector/spanprofiles.yaml): OTLP
//      in, the spanprofiles connector joining each span with its thread's samples, spanmetrics,
//      the enriched spans to Jaeger and to a file, the profiles to a file;
//   3. an HTTP service instrumented with the OpenTelemetry SDK (NodeSDK) and this package's
//      context manager (demo/service.js), exporting its spans to that Collector, driven with load
//      (autocannon);
//   4. `thread-ctx agent --off-cpu`, sampling the service from outside with eBPF and streaming
//      span-linked profiles to the same Collector as OTLP/Profiles, stopped with SIGTERM (which
//      sends its last window);
//   5. `thread-ctx report` on what the Collector received: CPU per route, the share of samples
//      linked to a trace and span, the service's resource, the build ids, a flame graph of it all;
//      then `thread-ctx report --traces` on the enriched spans: why the slowest requests were slow
//      (their own CPU, other requests holding the event loop, off-CPU time), as Jaeger shows them;
//   6. who made others wait, read back from Prometheus 3 (target/prometheus/, which took the
//      connector's metrics and spanmetrics' over OTLP) with PromQL, and one exemplar of the
//      slowest latency bucket with the enriched trace it opens in Jaeger.
// eBPF needs root. Without it the demo samples with `thread-ctx dump` snapshots (ptrace) instead,
// with no agent and no Collector, and says so.
//   7. the page of it all (`thread-ctx report --traces --otlp --html`), one file to open in a
//      browser, and the command that serves it.
//   node demo/run.js [--seconds 6] [--hz 499] [--snapshots] [--flamegraph-all FILE.svg]
//                    [--pprof FILE] [--otlp-out FILE] [--traces-out FILE] [--page-out FILE.html]
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const autocannon = require('autocannon');
const pipeline = require('./pipeline');
const { spansOf } = require('../__test__/e2e/jaeger');

const { ROOT } = pipeline;
const THREAD_CTX = pipeline.BIN.threadCtx;
const arg = (name, dflt) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : dflt; };
const SECONDS = Number(arg('seconds', 6));
const HZ = Number(arg('hz', 499));
const INTERVAL = '2s';
const SERVICE_NAME = 'demo-shop';
const useEbpf = process.getuid() === 0 && !process.argv.includes('--snapshots');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The service for the snapshots (no Collector): its spans go to the span log only.
function startLoggingService(spanLog) {
  // Plain node: the profiler names JS frames from V8's own heap.
  const child = spawn(process.execPath, [path.join(__dirname, 'service.js')], {
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

function report(args) {
  const r = spawnSync(THREAD_CTX, ['report', ...args], { encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// The size of a file, 0 while it does not exist.
const sizeOf = (file) => { try { return fs.statSync(file).size; } catch { return 0; } };

// Waits until `file` has not grown for `quietMs` (at most `capMs`): the Collector writes each span
// once the agent's windows that cover it are in, and the agent's last window left at SIGTERM.
async function settled(file, quietMs, capMs) {
  const deadline = Date.now() + capMs;
  let [size, since] = [sizeOf(file), Date.now()];
  while (Date.now() < deadline && Date.now() - since < quietMs) {
    await sleep(250);
    const now = sizeOf(file);
    if (now !== size) [size, since] = [now, Date.now()];
  }
}

// The pipeline: Jaeger, the Collector, the service exporting its spans to it, the agent, load,
// SIGTERM; then what the Collector received and why the slowest requests were slow.
async function viaAgentAndCollector() {
  const missing = pipeline.missing();
  if (missing) throw new Error(missing);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otel-thread-ctx-demo-'));
  const received = path.resolve(arg('otlp-out', path.join(dir, 'profiles.pb')));
  const traces = path.resolve(arg('traces-out', path.join(dir, 'traces.pb')));
  const allSvg = path.resolve(arg('flamegraph-all', path.join(os.tmpdir(), 'otel-thread-ctx-demo-all.svg')));
  const pageHtml = path.resolve(arg('page-out', path.join(os.tmpdir(), 'otel-thread-ctx-demo-page.html')));
  const pprof = arg('pprof');
  const procs = [];
  let svc = null;
  let jaeger = null;
  let waited = null;
  // Prometheus is built by scripts/setup.sh (scripts/demo.sh runs it); a checkout without it
  // still runs the rest of the demo, and says what it left out.
  const withPrometheus = pipeline.missing('prometheus') === null;
  try {
    jaeger = await pipeline.startJaeger(dir);
    procs.push(jaeger);
    console.log(`Jaeger v2 (memory storage): OTLP on 127.0.0.1:${jaeger.otlpGrpc}, query API on http://127.0.0.1:${jaeger.queryHttp}/api/v3/traces/ID`);
    const prometheus = withPrometheus ? await pipeline.startPrometheus(dir) : null;
    if (prometheus) {
      procs.push(prometheus);
      console.log(`Prometheus 3 (${path.relative(ROOT, pipeline.BIN.prometheus)}): OTLP receiver and exemplar storage on, PromQL on http://127.0.0.1:${prometheus.port}/api/v1/query`);
    }
    // max_wait: the agent's windows are INTERVAL long here; a span waits at most this for them.
    const collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, '10s', { profiles: received, traces },
      prometheus ? { prometheus: { port: prometheus.port, flush: '1s' } } : {});
    procs.push(collector);
    console.log(`OpenTelemetry Collector ${path.relative(ROOT, pipeline.BIN.collector)} (collector/spanprofiles.yaml): OTLP on 127.0.0.1:${collector.grpc} (gRPC) and ${collector.http} (HTTP); ` +
      'spanprofiles joins each span with its thread\'s samples, spanmetrics, the spans to Jaeger');
    svc = await pipeline.startService(path.join(__dirname, 'service.js'), collector.http, { OTEL_SERVICE_NAME: SERVICE_NAME });
    procs.push(svc);
    console.log(`demo service pid ${svc.pid} on 127.0.0.1:${svc.port} (NodeSDK + ThreadContextManager, service.name ${SERVICE_NAME}, spans over OTLP to the Collector); load for ${SECONDS} s`);
    const agent = await pipeline.startAgent(svc.pid, collector.grpc, ['--hz', String(HZ), '--interval', INTERVAL, '--off-cpu']);
    procs.push(agent);
    console.log(`${agent.command}: tracking the service`);
    const result = await load(svc.port, SECONDS);
    console.log(`load: ${result.requests.total} requests in ${SECONDS} s, ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms`);
    await pipeline.stop(agent);
    const windows = agent.lines.filter((l) => l.includes(': window ')).length;
    const last = agent.lines.filter((l) => l.includes('stopped')).pop() ?? '(no final line)';
    console.log(`agent: SIGTERM after ${windows} windows; ${last.replace(/^\S+ thread-ctx agent: /, '')}`);
    await settled(collector.files.traces, 2000, 30_000);
    // The connector sends its metrics every second: the last spans are in the next send.
    if (prometheus) {
      await sleep(2500);
      waited = await whoMadeOthersWait(prometheus.port, jaeger.queryHttp);
    }
  } finally {
    // The Collector drains its pipeline into the files as it stops.
    for (const p of procs.reverse()) await pipeline.stop(p);
  }
  // The flame graph is of CPU: on one time scale with off-CPU time, the idle waits of V8's helper
  // threads (~10x the service's CPU time in the demo) would fill it.
  const args = ['--otlp', received, '--pid', String(svc.pid), '--top', '5', '--flamegraph', allSvg, '--kind', 'cpu', ...(pprof ? ['--pprof', path.resolve(pprof)] : [])];
  const r = report(args);
  console.log(`\nwhat the Collector received (thread-ctx report ${args.join(' ')}):\n`);
  process.stdout.write(r.stdout);
  if (r.code !== 0) throw new Error(`thread-ctx report failed (${r.code}): ${r.stderr}`);
  console.log(`\nflame graph of the CPU the Collector received from the service: ${allSvg}`);
  const why = report(['--traces', traces, '--slowest', '3']);
  console.log(`\nwhy the slowest requests were slow: their spans as the spanprofiles connector enriched them (thread-ctx report --traces ${traces} --slowest 3):\n`);
  process.stdout.write(why.stdout);
  if (why.code !== 0) throw new Error(`thread-ctx report --traces failed (${why.code}): ${why.stderr}`);
  console.log(`\nthe same fields are on each span in Jaeger (it ran at 127.0.0.1:${jaeger.queryHttp} for the demo): thread_ctx.cpu.*, thread_ctx.off_cpu.*, and the thread_ctx.profile event`);
  if (waited) process.stdout.write(waited);
  else console.log('\nwho made others wait, from Prometheus: left out, target/prometheus/prometheus is not built (bash scripts/setup.sh builds it)');
  // The same, to look at: routes, each slow request's spans and causes, flame graphs, who made
  // whom wait, as one file that fetches nothing.
  const page = report(['--traces', traces, '--otlp', received, '--html', pageHtml]);
  if (page.code !== 0) throw new Error(`thread-ctx report --html failed (${page.code}): ${page.stderr}`);
  console.log(`\nthe page of it all (thread-ctx report --traces ${traces} --otlp ${received} --html ${pageHtml}): file://${pageHtml}`);
  console.log(`  or served: ${path.relative(process.cwd(), THREAD_CTX) || THREAD_CTX} report --traces ${traces} --otlp ${received} --serve 127.0.0.1:8080 [--jaeger URL]`);
}

// Who made others wait, read back from Prometheus with PromQL, and the slowest latency bucket's
// exemplar with the trace it opens in Jaeger: the text to print.
async function whoMadeOthersWait(promPort, jaegerPort) {
  const job = `job="${SERVICE_NAME}"`;
  const byHolder = `sort_desc(sum by (http_route, code_function, kind) (thread_ctx_wait_inflicted_milliseconds_total{${job}}))`;
  const rows = await pipeline.promQuery(promPort, byHolder);
  const delayed = await pipeline.promQuery(promPort, `sum by (http_route, code_function, kind) (thread_ctx_wait_delayed_total{${job}})`);
  const key = (m) => `${m.http_route}\t${m.code_function}\t${m.kind}`;
  const delayedBy = new Map(delayed.map((r) => [key(r.metric), Number(r.value[1])]));
  const total = rows.reduce((a, r) => a + Number(r.value[1]), 0);
  let out = `\nwho made others wait, read back from Prometheus (PromQL: ${byHolder}):\n\n`;
  out += `${'HOLDER ROUTE'.padEnd(24)}${'LINE'.padEnd(40)}${'KIND'.padEnd(9)}${'INFLICTED ms'.padStart(13)}${'DELAYED'.padStart(9)}${'SHARE'.padStart(7)}\n`;
  for (const r of rows.slice(0, 8)) {
    const ms = Number(r.value[1]);
    out += `${r.metric.http_route.padEnd(24)}${r.metric.code_function.slice(0, 39).padEnd(40)}${r.metric.kind.padEnd(9)}${ms.toFixed(1).padStart(13)}` +
      `${String(delayedBy.get(key(r.metric)) ?? 0).padStart(9)}${`${Math.round((100 * ms) / Math.max(total, 1e-9))} %`.padStart(7)}\n`;
  }
  // The slowest bucket of spanmetrics' latency histogram that kept an exemplar, and its trace.
  const series = await pipeline.promExemplars(promPort, `traces_span_metrics_duration_milliseconds_bucket{${job}, span_kind="SPAN_KIND_SERVER"}`);
  const exemplars = series.flatMap((x) => x.exemplars.map((e) => ({ le: x.seriesLabels.le, route: x.seriesLabels.http_route, value: Number(e.value), trace: e.labels.trace_id })));
  const slowest = exemplars.sort((a, b) => b.value - a.value)[0];
  if (!slowest) return `${out}\nno exemplar on the latency histogram yet\n`;
  out += `\nan exemplar of the slowest latency bucket (le ${slowest.le} ms): ${slowest.route} ${slowest.value.toFixed(1)} ms, trace ${slowest.trace}\n`;
  const res = await fetch(`http://127.0.0.1:${jaegerPort}/api/v3/traces/${slowest.trace}`);
  const span = res.ok ? spansOf((await res.json()).result).find((x) => x.route) : undefined;
  if (!span) return `${out}  Jaeger does not have it (${res.status})\n`;
  const ev = span.events.find((e) => e.name === 'thread_ctx.profile')?.attrs ?? {};
  const f = (k) => (span.attrs[k] === undefined ? '-' : Number(span.attrs[k]).toFixed(1));
  out += `  opens in Jaeger (/api/v3/traces/${slowest.trace}): ${span.name} ${span.durationMs.toFixed(1)} ms; other requests held it ${f('thread_ctx.cpu.other_traces_ms')} ms on CPU, ` +
    `${f('thread_ctx.off_cpu.other_traces_ms')} ms blocked; waiting for a CPU ${f('thread_ctx.off_cpu.runnable_ms')} ms\n`;
  for (const r of ev.held_by_routes ?? []) out += `    held by ${r}\n`;
  return out;
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
  if (useEbpf) {
    try {
      await viaAgentAndCollector();
      return;
    } catch (e) {
      if (!/thread-ctx agent (exited|did not track)/.test(e.message)) throw e;
      console.log(`eBPF sampling failed (${e.message}); falling back to thread-ctx dump snapshots (ptrace)`);
    }
  } else {
    console.log((process.getuid() === 0 ? '--snapshots given' : 'not root: eBPF sampling needs root') +
      '; falling back to thread-ctx dump snapshots (ptrace), one every 50 ms plus the time a dump takes, without the agent and the Collector');
  }
  const spanLog = path.join(os.tmpdir(), `otel-thread-ctx-demo-spans-${process.pid}.jsonl`);
  const svc = await startLoggingService(spanLog);
  console.log(`demo service pid ${svc.pid} on 127.0.0.1:${svc.port} (NodeSDK + ThreadContextManager, service.name ${SERVICE_NAME}); load for ${SECONDS} s`);
  try {
    await viaSnapshots(svc, spanLog);
  } finally {
    svc.child.kill('SIGTERM');
    fs.rmSync(spanLog, { force: true });
  }
}

main().catch((e) => { console.error(e.message); process.exit(1); });
