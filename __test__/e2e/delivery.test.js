'use strict';
// Nothing the Collector holds or sends is lost, end to end with every part real: the NestJS
// service of __test__/e2e/nest (NodeSDK, its OTLP exporter logging every span the Collector
// acknowledged), `thread-ctx agent` with its default 10 s windows, the project's Collector with
// collector/spanprofiles.yaml and collector/storage.yaml, and Jaeger v2. One pipeline start for:
//   1. a minute at >= 1,000 requests/s: every span the SDK exported is in Jaeger (an agent window
//      releases ~10,000 enriched spans at once; sent as one request, Jaeger refuses it over 4 MiB);
//   2. the docs' Jaeger query, as docs/spanprofiles.md writes it;
//   3. the Collector killed (SIGKILL) under load and restarted: every span the SDK exported is in
//      Jaeger, enriched where the agent's windows covered it.
// The service runs without the express and router instrumentations (a span per middleware): one
// span per request keeps the service cheap enough for the rate on two cores, and the read-back
// of a minute's spans from Jaeger to ~60,000 spans; the rate of enriched spans a window releases
// is what makes its batch too large, whatever spans it is made of.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const autocannon = require('autocannon');
const pipeline = require('../../demo/pipeline');
const { findSpans } = require('./jaeger');
const { cpuSeconds } = require('./run-dir');

const SERVICE = 'nest-delivery';
const NEST = path.join(__dirname, 'nest', 'dist', 'main.js');
const STORAGE = path.join(pipeline.ROOT, 'collector', 'storage.yaml');
const RATE = 1000; // requests/s, a floor (issue 33)
const LOAD_S = 60;
// The connector's wait (the rig's default, as shipped) and the agent's default window.
const MAX_WAIT_S = 30;
const WINDOW_S = 10;
const isRoot = process.getuid() === 0;
const requireEbpf = process.env.REQUIRE_EBPF === '1';
const fmt = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : String(x));

/** `seconds` of load at `rate` requests/s over 32 connections: /orders/:id, every tenth /quote/:sku. */
async function load(port, seconds, rate) {
  let n = 0;
  const r = await autocannon({
    url: `http://127.0.0.1:${port}`, connections: 32, duration: seconds, overallRate: rate,
    requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: ++n % 10 === 0 ? `/quote/sku-${n % 50}` : `/orders/${n}` }) }],
  });
  return { ok: r['2xx'], failed: r.non2xx + r.errors + r.timeouts, seconds: r.duration, rate: r['2xx'] / r.duration };
}

/** The spans the SDK's exporter had acknowledged: spanId -> start (ms). */
function exported(file) {
  const out = new Map();
  if (!fs.existsSync(file)) return out;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const [, spanId, startMs] = line.split(' ');
    if (spanId) out.set(spanId, Number(startMs));
  }
  return out;
}

/**
 * Looks for `expected` (spanId -> start ms) in Jaeger, 5 s of start time per query, until every
 * one is found or `deadline`; returns { found: Map spanId -> span, missing: [spanId] }.
 */
async function lookUp(jaegerPort, expected, deadline) {
  const found = new Map();
  for (;;) {
    const missing = [...expected.keys()].filter((id) => !found.has(id));
    if (missing.length === 0 || Date.now() > deadline) return { found, missing };
    const slices = new Set(missing.map((id) => Math.floor(expected.get(id) / 5000)));
    for (const slice of slices) {
      for (const s of await findSpans(jaegerPort, SERVICE, slice * 5000 - 1, slice * 5000 + 5001, 50_000)) {
        if (expected.has(s.spanId)) found.set(s.spanId, s);
      }
    }
    if (found.size < expected.size) await sleep(5000);
  }
}

// One counter of the Collector's own metrics, summed over the series whose labels include `labels`.
function metric(metrics, name, labels = '') {
  return Object.entries(metrics).filter(([k]) => (k === name || k.startsWith(`${name}{`)) && k.includes(labels)).reduce((a, [, v]) => a + v, 0);
}

test('delivery: no span lost at 1,000 requests/s, nor when the Collector is killed', {
  skip: !isRoot && !requireEbpf ? 'needs root: thread-ctx agent loads eBPF programs (REQUIRE_EBPF=1 makes this a failure)' : false,
  timeout: 1_200_000,
}, async (t) => {
  assert.ok(isRoot, 'REQUIRE_EBPF=1 but not root: thread-ctx agent cannot load its eBPF programs');
  const why = pipeline.missing();
  assert.equal(why, null, why);
  assert.ok(fs.existsSync(NEST), `${NEST} missing: run "bash scripts/setup.sh" (it installs and compiles the NestJS service)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'delivery-e2e-'));
  const procs = [];
  t.after(async () => {
    for (const p of procs.reverse()) await pipeline.stop(p, 10_000);
    if (!t.passed || process.env.DELIVERY_E2E_KEEP === '1') t.diagnostic(`logs and files kept in ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  });
  const started = Date.now();
  const jaeger = await pipeline.startJaeger(dir);
  procs.push(jaeger);
  const collectorOptions = { configs: [STORAGE], env: { OTELCOL_STORAGE_DIR: path.join(dir, 'storage') } };
  let collector = await pipeline.startCollector(dir, jaeger.otlpGrpc, `${MAX_WAIT_S}s`, {}, collectorOptions);
  procs.push(collector);
  const exportedFile = path.join(dir, 'exported-spans.txt');
  const svc = await pipeline.startService(NEST, collector.http, {
    OTEL_SERVICE_NAME: SERVICE, NEST_EXPORTED_SPANS: exportedFile, OTEL_NODE_DISABLED_INSTRUMENTATIONS: 'express,router',
    // 1,000 spans/s leave every 200 ms: the SDK's queue holds 8 s of them.
    OTEL_BSP_MAX_QUEUE_SIZE: '8192',
  });
  procs.push(svc);
  const agent = await pipeline.startAgent(svc.pid, collector.grpc, []);
  procs.push(agent);
  t.diagnostic(`${agent.command} (default windows: ${WINDOW_S} s); Collector with collector/spanprofiles.yaml + storage.yaml, max_wait ${MAX_WAIT_S}s; pipeline up in ${fmt((Date.now() - started) / 1000)} s`);
  // Warm up: JIT, the SDK's first exports.
  await load(svc.port, 3, 300);
  // Spans found in Jaeger by a check: a later check looks for the others.
  const verified = new Set();

  await t.test(`a minute at >= ${RATE} requests/s with ${WINDOW_S} s windows: every span the SDK exported is in Jaeger`, async () => {
    // The rate is a floor: a machine too busy to give it gets a second minute, then the test
    // fails saying so. Each minute's spans are checked before the next (Jaeger's memory store
    // keeps the newest 100,000 traces, fewer than two minutes make).
    let run;
    for (let attempt = 1; attempt <= 2; attempt++) {
      const cpuBefore = process.cpuUsage();
      const serviceBefore = cpuSeconds(svc.pid);
      run = await load(svc.port, LOAD_S, RATE * 1.15);
      const serviceCpu = cpuSeconds(svc.pid) - serviceBefore;
      const loadAverage = os.loadavg().map((x) => fmt(x)).join(' ');
      t.diagnostic(`load ${attempt}: ${run.ok} requests in ${fmt(run.seconds)} s, ${fmt(run.rate)}/s (${run.failed} failed); load average ${loadAverage}; `
        + `the service used ${fmt(serviceCpu)} s of CPU (${fmt(1000 * serviceCpu / run.ok, 3)} ms per request), the load generator ${fmt((process.cpuUsage(cpuBefore).user + process.cpuUsage(cpuBefore).system) / 1e6)} s`);
      const loadEnd = Date.now();
      // Spans wait for the window covering them (up to max_wait), then leave.
      const expected = new Map([...exported(exportedFile)].filter(([id]) => !verified.has(id)));
      const { found, missing } = await lookUp(jaeger.queryHttp, expected, loadEnd + (MAX_WAIT_S + 2 * WINDOW_S + 60) * 1000);
      for (const id of found.keys()) verified.add(id);
      const enriched = [...found.values()].filter((s) => s.attrs['thread_ctx.samples'] !== undefined).length;
      t.diagnostic(`${expected.size} spans exported by the SDK, ${found.size} in Jaeger (${enriched} enriched) ${fmt((Date.now() - loadEnd) / 1000)} s after the load`);
      const metrics = await pipeline.collectorMetrics(collector);
      const sent = metric(metrics, 'otelcol_exporter_sent_spans', 'exporter="otlp_grpc/traces"');
      const failed = metric(metrics, 'otelcol_exporter_send_failed_spans', 'exporter="otlp_grpc/traces"');
      t.diagnostic(`the Collector's own metrics: otlp_grpc/traces sent ${sent} spans, failed ${failed}; connector export errors ${metric(metrics, 'otelcol_connector_spanprofiles_export_errors')}`);
      assert.deepEqual(missing.slice(0, 20), [], `${missing.length} of ${expected.size} spans the SDK exported are not in Jaeger`);
      assert.equal(failed, 0, 'spans the backend refused, as the Collector counts them');
      assert.ok(sent >= verified.size, `the Collector's otelcol_exporter_sent_spans (${sent}) counts what it sent`);
      assert.ok(enriched >= found.size * 0.9, `${enriched} of ${found.size} enriched`);
      assert.equal(run.failed, 0, 'failed requests');
      if (run.rate >= RATE) break;
    }
    assert.ok(run.ok >= RATE * LOAD_S * 0.98, `${run.ok} requests in a minute`);
    assert.ok(run.rate >= RATE, `the service answered ${fmt(run.rate)} requests/s, under the ${RATE} this test needs: the machine is too busy (load average ${os.loadavg().map((x) => fmt(x)).join(' ')})`);
  });

  await t.test('the docs\' Jaeger query runs as written', async () => {
    const doc = fs.readFileSync(path.join(pipeline.ROOT, 'docs', 'spanprofiles.md'), 'utf8');
    const written = /curl '(http:\/\/127\.0\.0\.1:16686\/api\/v3\/traces\?[^']+)'/.exec(doc);
    assert.ok(written, 'docs/spanprofiles.md has a Jaeger query');
    const url = new URL(written[1]);
    url.port = String(jaeger.queryHttp);
    url.searchParams.set('query.service_name', SERVICE);
    url.searchParams.set('query.start_time_min', new Date(started).toISOString());
    url.searchParams.set('query.start_time_max', new Date().toISOString());
    const res = await fetch(url);
    const body = await res.text();
    assert.equal(res.status, 200, `${url}: ${body.slice(0, 300)}`);
    const traces = JSON.parse(body).result.resourceSpans.length;
    t.diagnostic(`${url.pathname}?…&query.num_traces=${url.searchParams.get('query.num_traces')}: ${traces} resource spans`);
    assert.ok(traces > 0);
  });

  await t.test('kill -9 under load, restart: every span the SDK exported is in Jaeger, enriched where windows covered it', async () => {
    const from = Date.now();
    const running = load(svc.port, 40, 500);
    // Killed mid-window, with spans held for their windows and queued for Jaeger: after 10 s of
    // load, at the first moment its gauge says it holds some (a window that just arrived may have
    // released every span; CI once read 0 at a fixed 15 s).
    await sleep(10_000);
    let held = 0;
    for (const deadline = Date.now() + 30_000; held === 0 && Date.now() < deadline;) {
      held = metric(await pipeline.collectorMetrics(collector), 'otelcol_connector_spanprofiles_pending_spans');
      if (held === 0) await sleep(200);
    }
    collector.child.kill('SIGKILL');
    await collector.exited;
    const killedAt = Date.now();
    await sleep(5_000);
    const restarted = await pipeline.startCollector(dir, jaeger.otlpGrpc, `${MAX_WAIT_S}s`, {}, { ...collectorOptions, restart: collector.restart });
    procs[procs.indexOf(collector)] = restarted;
    collector = restarted;
    t.diagnostic(`killed with ${held} spans held, restarted after ${fmt((Date.now() - killedAt) / 1000)} s`);
    const run = await running;
    t.diagnostic(`load: ${run.ok} requests answered, ${fmt(run.rate)}/s`);
    const loadEnd = Date.now();
    // Every span exported since the last check found them all (those it missed included).
    const expected = new Map([...exported(exportedFile)].filter(([id]) => !verified.has(id)));
    const { found, missing } = await lookUp(jaeger.queryHttp, expected, loadEnd + (MAX_WAIT_S + 2 * WINDOW_S + 60) * 1000);
    const phase = [...expected].filter(([, ms]) => ms >= from).map(([id]) => found.get(id)).filter(Boolean);
    const enriched = phase.filter((s) => s.attrs['thread_ctx.samples'] !== undefined).length;
    t.diagnostic(`${expected.size} spans exported since the first check, ${found.size} in Jaeger; of the ${phase.length} that started in this phase, ${enriched} enriched`);
    assert.ok(held > 0, 'the Collector held spans when it was killed');
    assert.ok(phase.length >= 1000, `${phase.length} spans of this phase in Jaeger`);
    assert.deepEqual(missing.slice(0, 20), [], `${missing.length} of ${expected.size} spans the SDK exported are not in Jaeger`);
    assert.ok(enriched >= phase.length * 0.9, `${enriched} of ${phase.length} spans of this phase enriched`);
  });
});
