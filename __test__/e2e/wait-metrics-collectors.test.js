'use strict';
// Two Collectors, one Prometheus: each Collector's wait metrics are series of their own. The
// nodes of a DaemonSet each run a Collector that sums from its own start; the series of one
// service must not meet (Prometheus would read one node's total after the other's as a reset,
// or refuse it). Both Collectors (the rig with spanprofiles-prometheus.yaml, flushing every
// second) take the agent's golden window and the workload's spans (the contract's files,
// collector/spanprofilesconnector/testdata/agent/: a /hog request held the thread while /wait
// awaited) over OTLP/HTTP, five times; Prometheus then holds each series once per Collector
// (`instance`, the Collector's service.instance.id), each growing, never reset, and no metric
// was sent without points. Then a gateway's many cheap lines and one hot line: in PromQL the hot
// line has the top series. Then the production configuration, collector/node.yaml as shipped,
// reaches Prometheus with its documented environment.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');

const TESTDATA = path.join(pipeline.ROOT, 'collector', 'spanprofilesconnector', 'testdata');
const built = pipeline.missing('prometheus');
const skip = built === null || process.env.REQUIRE_EBPF === '1' ? false : built;
const METRIC = 'thread_ctx_wait_inflicted_milliseconds_total';
const ROUNDS = 5;

// The golden files are as a file exporter writes them: each OTLP message after its size (4
// bytes, big endian); each is one OTLP/HTTP request's body.
function messages(file) {
  const raw = fs.readFileSync(path.join(TESTDATA, file));
  const out = [];
  for (let at = 0; at + 4 <= raw.length; at += 4 + raw.readUInt32BE(at)) out.push(raw.subarray(at + 4, at + 4 + raw.readUInt32BE(at)));
  assert.ok(out.length > 0, `${file} holds no message`);
  return out;
}

async function post(collector, route, file) {
  for (const body of messages(file)) {
    const res = await fetch(`http://127.0.0.1:${collector.http}${route}`, { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body });
    assert.equal(res.status, 200, `${route}: ${await res.text()}`);
  }
}

// Prometheus and one rig Collector per name (each in a folder of its own, flushing its metrics
// every second), stopped when the test ends; their logs kept if it failed.
async function startRig(t, prefix, names) {
  assert.equal(built, null, built);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const procs = [];
  t.after(async () => {
    for (const p of procs.reverse()) await pipeline.stop(p, 10_000);
    if (t.passed) fs.rmSync(dir, { recursive: true, force: true });
    else t.diagnostic(`logs kept in ${dir}`);
  });
  const prometheus = await pipeline.startPrometheus(dir);
  procs.push(prometheus);
  const collectors = [];
  for (const name of names) {
    const sub = path.join(dir, name);
    fs.mkdirSync(sub);
    // No Jaeger: the traces exporter retries to a closed port; the metrics are what is read.
    const c = await pipeline.startCollector(sub, 1, '2s', {}, { prometheus: { port: prometheus.port, flush: '1s' } });
    procs.push(c);
    collectors.push(c);
  }
  return { prometheus, collectors, dir, procs };
}

test('two Collectors into one Prometheus: distinct series, each monotonic', { skip, timeout: 120_000 }, async (t) => {
  const { prometheus, collectors } = await startRig(t, 'wait-metrics-collectors-', ['node-a', 'node-b']);

  // Each round both Collectors join the window with the spans (the window again is a duplicate,
  // refused; the spans join with the one kept) and flush within a second.
  const seen = new Map();
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of collectors) {
      await post(c, '/v1development/profiles', 'agent/profiles.pb');
      await post(c, '/v1/traces', 'agent/spans.pb');
    }
    await sleep(2500);
    for (const r of await pipeline.promQuery(prometheus.port, METRIC)) {
      const key = JSON.stringify(Object.entries(r.metric).filter(([k]) => k !== '__name__').sort());
      seen.set(key, [...(seen.get(key) ?? []), Number(r.value[1])]);
    }
  }
  const series = [...seen.entries()].map(([k, values]) => ({ labels: Object.fromEntries(JSON.parse(k)), values }));
  t.diagnostic(series.map((s) => `${s.labels.instance} ${s.labels.http_route} ${s.labels.code_function} ${s.labels.kind}: ${s.values.map((v) => v.toFixed(1)).join(' ')}`).join('; '));

  const instances = new Set(series.map((s) => s.labels.instance));
  assert.equal(instances.size, 2, `one instance label per Collector: ${[...instances].join(', ')}`);
  assert.ok(!instances.has(undefined) && !instances.has(''), 'every series names its Collector');
  for (const instance of instances) {
    const own = series.filter((s) => s.labels.instance === instance);
    assert.ok(own.length > 0, `${instance}: no series`);
    for (const s of own) {
      for (let i = 1; i < s.values.length; i++) assert.ok(s.values[i] >= s.values[i - 1], `${instance} ${JSON.stringify(s.labels)} went down: ${s.values.join(', ')}`);
    }
    // Five rounds, each a delayed request: the Collector's series grew past its first round's.
    const total = (i) => own.reduce((a, s) => a + (s.values[i] ?? 0), 0);
    assert.ok(own.some((s) => s.values.length >= 3) && total(own[0].values.length - 1) > total(0), `${instance} did not grow: ${JSON.stringify(own.map((s) => s.values))}`);
  }
  // The same series of the two Collectors carry the same figures: one join, twice.
  const [a, b] = [...instances];
  const byKey = (inst) => new Map(series.filter((s) => s.labels.instance === inst).map((s) => [`${s.labels.http_route} ${s.labels.code_function} ${s.labels.kind} ${s.labels.thread_ctx_delayed_route}`, s]));
  assert.deepEqual([...byKey(a).keys()].sort(), [...byKey(b).keys()].sort(), 'the same lines from both');

  const resets = await pipeline.promQuery(prometheus.port, `resets(${METRIC}[5m]) > 0`);
  assert.deepEqual(resets.map((r) => r.metric), [], 'no series was reset');
  const log = fs.readFileSync(prometheus.logPath, 'utf8');
  assert.ok(!/empty data points/.test(log), `Prometheus dropped metrics without points: ${log.split('\n').filter((l) => l.includes('empty data points')).slice(0, 3).join('\n')}`);
});

// Many cheap lines and one hot line (testdata/gateway/, gateway_recording_test.go: a GraphQL
// gateway held 80 requests 10 ms each in 80 resolver lines that come first, and 20 requests 60 ms
// each in rankProducts): in PromQL the top series of kind cpu is the hot line, and `other` (the
// 71 cheap lines not elected) comes after it.
test('the heaviest line has the top series in Prometheus, not the first ones seen', { skip, timeout: 120_000 }, async (t) => {
  const { prometheus, collectors: [collector] } = await startRig(t, 'wait-metrics-hot-line-', ['node']);
  await post(collector, '/v1development/profiles', 'gateway/profiles.pb');
  await post(collector, '/v1/traces', 'gateway/spans.pb');
  const query = 'sort_desc(sum by (code_function) (thread_ctx_wait_inflicted_milliseconds_total{job="shop", http_route="/graphql", kind="cpu"}))';
  let rows = [];
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(500)) {
    rows = (await pipeline.promQuery(prometheus.port, query)).map((r) => ({ fn: r.metric.code_function, ms: Number(r.value[1]) }));
    if (rows.length >= 11) break;
  }
  t.diagnostic(`${query}: ${rows.slice(0, 4).map((r) => `${r.fn} ${r.ms} ms`).join('; ')} (${rows.length} series)`);
  assert.equal(rows.length, 11, 'max_functions (10) lines and `other`');
  assert.deepEqual(rows[0], { fn: 'rankProducts (gateway.js:28)', ms: 1200 });
  assert.deepEqual(rows[1], { fn: 'other', ms: 710 });
});

// The production configuration as shipped, with the environment its header documents, reaches
// Prometheus 3: collector/node.yaml sends over OTLP/HTTP to METRICS_BACKEND_ENDPOINT (its OTLP
// base URL), both connectors' metrics arrive at the first 15 s flush, with exemplars.
test('collector/node.yaml reaches Prometheus 3 with the documented environment', { skip, timeout: 120_000 }, async (t) => {
  const { prometheus, dir, procs } = await startRig(t, 'wait-metrics-node-', []);
  const node = await pipeline.startCollectorWith(dir, ['node.yaml'], ([grpc, http, telemetry]) => ({
    TRACES_BACKEND_ENDPOINT: '127.0.0.1:1', BACKEND_INSECURE: 'true', METRICS_BACKEND_ENDPOINT: `http://127.0.0.1:${prometheus.port}/api/v1/otlp`,
    OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_HTTP_ENDPOINT: `127.0.0.1:${http}`, OTELCOL_TELEMETRY_PORT: String(telemetry),
  }));
  procs.push(node);
  await post(node, '/v1development/profiles', 'agent/profiles.pb');
  await post(node, '/v1/traces', 'agent/spans.pb');
  let names = [];
  for (const deadline = Date.now() + 45_000; Date.now() < deadline; await sleep(1000)) {
    names = (await pipeline.promQuery(prometheus.port, 'count by (__name__) ({__name__=~"thread_ctx_.+|traces_span_metrics_.+"})')).map((r) => r.metric.__name__);
    if (names.includes(METRIC) && names.some((n) => n.startsWith('traces_span_metrics_duration'))) break;
  }
  t.diagnostic(`in Prometheus: ${names.sort().join(', ')}`);
  assert.ok(names.includes(METRIC), `no ${METRIC}: ${names.join(', ')}`);
  assert.ok(names.some((n) => n.startsWith('traces_span_metrics_duration')), `no span_metrics histogram: ${names.join(', ')}`);
  const exemplars = await pipeline.promExemplars(prometheus.port, METRIC, 10 * 365 * 86_400);
  assert.ok(exemplars.some((s) => s.exemplars.length > 0), `no exemplar on ${METRIC}: ${JSON.stringify(exemplars).slice(0, 500)}`);
  const log = fs.readFileSync(prometheus.logPath, 'utf8');
  assert.ok(!/empty data points/.test(log), 'Prometheus dropped metrics without points');
});
