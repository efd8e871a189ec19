'use strict';
// The agent as the repository ships it explains a slow request: `thread-ctx agent` with exactly
// the flags of deploy/systemd/agent.env (which the DaemonSet and the image must share), the
// service of service.js under load (/hog on CPU back to back, /block blocking every 200 ms, four
// clients of /wait), the project's Collector (spanprofiles) and Jaeger v2. The slowest /wait
// requests must carry their causes: the off-CPU figures (idle, blocked, other requests off CPU,
// waiting for a CPU), which only an agent with --off-cpu gives, and figures that account for
// most of their time. Run once per CI run (scripts/test.sh), not per Node version.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');
const { findSpans } = require('./jaeger');
const { needs } = require('../helpers/needs');
const { client } = require('./client');
const { shippedAgentArgs, flagValue } = require('../helpers/shipped-agent');

const SERVICE = 'shipped-shop';
const SCRIPT = path.join(__dirname, 'service.js');
const need = needs(process.getuid() !== 0 && 'thread-ctx agent needs root to load its eBPF programs');
const SHIPPED = shippedAgentArgs();
// The share of the slowest /wait requests with a CPU sample (a request with none has nothing to
// explain) below which the shipped rate is too low for the connector's per-request figures.
const SLOWEST_SHARE = 0.05;
const OFF_CPU = ['thread_ctx.off_cpu.trace_ms', 'thread_ctx.off_cpu.other_traces_ms', 'thread_ctx.off_cpu.no_span_ms', 'thread_ctx.off_cpu.runnable_ms'];
const EXPLAINING = ['thread_ctx.cpu.trace_ms', 'thread_ctx.cpu.other_traces_ms', 'thread_ctx.cpu.no_span_ms', ...OFF_CPU];

/** "10s", "2" (seconds), "500ms" in milliseconds. */
function ms(duration) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(duration ?? '');
  assert.ok(m, `expected a duration such as 10s, got ${duration}`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000 }[m[2] ?? 's'];
}

const fmt = (x) => (Number.isFinite(x) ? x.toFixed(1) : String(x));

test('the systemd service, the DaemonSet and the image ship the same agent flags, --off-cpu among them', () => {
  assert.deepEqual(SHIPPED.daemonset, SHIPPED.systemd, 'deploy/kubernetes/daemonset.yaml against deploy/systemd/agent.env');
  assert.deepEqual(SHIPPED.image, SHIPPED.systemd, 'deploy/Dockerfile CMD against deploy/systemd/agent.env');
  assert.ok(SHIPPED.systemd.includes('--off-cpu'), `the shipped flags explain waits: ${SHIPPED.systemd.join(' ')}`);
  assert.ok(Number(flagValue(SHIPPED.systemd, '--hz')) > 0, `the shipped flags name their rate: ${SHIPPED.systemd.join(' ')}`);
});

test('at the shipped defaults, the slowest requests under load carry their causes, off CPU included', { skip: need.skip, timeout: 300_000 }, need.guard(async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shipped-defaults-e2e-'));
  const procs = [];
  t.after(async () => {
    for (const p of procs.reverse()) await pipeline.stop(p, 10_000);
    if (!t.passed || process.env.SPANPROFILES_E2E_KEEP === '1') t.diagnostic(`logs and files kept in ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  });
  // The Collector holds a span until the windows that cover it are in: a window's length, and
  // time to send it.
  const windowMs = ms(flagValue(SHIPPED.systemd, '--interval') ?? '10s');
  const jaeger = await pipeline.startJaeger(dir);
  procs.push(jaeger);
  const collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, `${Math.ceil(windowMs / 1000) + 10}s`);
  procs.push(collector);
  const svc = await pipeline.startService(SCRIPT, collector.http, { OTEL_SERVICE_NAME: SERVICE });
  procs.push(svc);
  const agent = await pipeline.startAgent(svc.pid, collector.grpc, SHIPPED.systemd);
  procs.push(agent);
  t.diagnostic(`${agent.command} (deploy/systemd/agent.env); Jaeger on ${jaeger.queryHttp}`);

  const until = (at) => () => Date.now() < at;
  await Promise.all([client(svc.port, '/hog', until(Date.now() + 1500)), client(svc.port, '/wait', until(Date.now() + 1500))]);
  // Two windows of load at least.
  const from = Date.now();
  const load = [['/hog', 0], ['/block', 200], ...Array(4).fill(['/wait', 0])];
  const ns = await Promise.all(load.map(([route, pause]) => client(svc.port, route, until(from + Math.max(20_000, 2 * windowMs)), pause)));
  const to = Date.now();
  const waitsSent = ns.filter((_, i) => load[i][0] === '/wait').reduce((a, b) => a + b, 0);
  t.diagnostic(`under load ${fmt((to - from) / 1000)} s: ${load.map(([r], i) => `${r} ${ns[i]}`).join(', ')}`);

  // The agent's last window goes out at SIGTERM; then the Collector releases every span.
  await pipeline.stop(agent);
  procs.splice(procs.indexOf(agent), 1);
  let waits = [];
  for (const deadline = Date.now() + 90_000; Date.now() < deadline; await sleep(2000)) {
    waits = (await findSpans(jaeger.queryHttp, SERVICE, from, to + 1000)).filter((s) => s.route === '/wait');
    if (waits.length >= waitsSent * 0.98) break;
  }
  assert.ok(waits.length >= waitsSent * 0.98, `Jaeger has ${waits.length} of the ${waitsSent} /wait spans`);
  const slowest = [...waits].sort((a, b) => b.durationMs - a.durationMs).slice(0, Math.max(5, Math.ceil(waits.length * SLOWEST_SHARE)));
  const rows = slowest.slice(0, 5).map((s) => `${fmt(s.durationMs)} ms: ${EXPLAINING.map((k) => `${k.replace('thread_ctx.', '')} ${fmt(s.attrs[k])}`).join(', ')}`);
  t.diagnostic(`the slowest ${slowest.length} of ${waits.length} /wait:\n  ${rows.join('\n  ')}`);
  for (const s of slowest) {
    for (const k of OFF_CPU) assert.ok(Number.isFinite(s.attrs[k]), `${s.traceId ?? ''} (${fmt(s.durationMs)} ms): no ${k}: ${JSON.stringify(s.attrs)}`);
  }
  // Their causes account for most of their time: what they ran, what held them (other requests
  // on or off CPU), idle, blocked, waiting for a CPU.
  const explained = slowest.map((s) => EXPLAINING.reduce((a, k) => a + (s.attrs[k] ?? 0), 0) / s.durationMs);
  const mostly = explained.filter((x) => x >= 0.5).length;
  t.diagnostic(`explained share of each: ${explained.map((x) => `${fmt(100 * x)} %`).join(', ')}`);
  assert.ok(mostly >= slowest.length * 0.8, `only ${mostly} of the slowest ${slowest.length} /wait have >= 50 % of their time explained`);
}));
