'use strict';
// The shipped Collector configurations, checked by the project's Collector itself: the production
// one (collector/node.yaml, with and without collector/storage.yaml; with collector/to-tier.yaml,
// and the trace tier's collector/tier.yaml) and the test and demo rig
// (collector/spanprofiles.yaml) are valid; `--set=connectors::span_profiles::...` reaches the
// connector; the old type name `spanprofiles` still loads, with its deprecation warning; the
// rig's files append across a restart and rotate; the Collector's own metrics,
// which the docs and `thread-ctx report --traces` point at, are served by both.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');

const { ROOT, BIN } = pipeline;
const CONFIG = (name) => path.join(ROOT, 'collector', name);
// A missing build is a skip, and a failure in CI (REQUIRE_EBPF=1: every built part required).
const built = fs.existsSync(BIN.collector);
const skip = built || process.env.REQUIRE_EBPF === '1' ? false : `${BIN.collector} missing: run "bash scripts/setup.sh"`;
const GATE = '--feature-gates=+service.profilesSupport';
// What the production configuration needs from its environment.
// Metrics go over OTLP/HTTP (Prometheus 3 has no OTLP gRPC receiver): a base URL.
const BACKENDS = { TRACES_BACKEND_ENDPOINT: 'traces-backend:4317', METRICS_BACKEND_ENDPOINT: 'http://metrics-backend:9090/api/v1/otlp' };
const RIG_FILES = { OTELCOL_OUTPUT: '/tmp/p.pb', OTELCOL_TRACES_OUTPUT: '/tmp/t.pb', OTELCOL_METRICS_OUTPUT: '/tmp/m.json' };

function validate(configs, env, ...args) {
  assert.ok(built, `${BIN.collector} missing: run "bash scripts/setup.sh"`);
  return spawnSync(BIN.collector, ['validate', ...configs.flatMap((c) => ['--config', CONFIG(c)]), GATE, ...args],
    { encoding: 'utf8', env: { ...process.env, ...env } });
}

test('the production configuration is valid, alone, with storage and with auth; it needs its backends named', { skip }, () => {
  const auth = { OTELCOL_TLS_CERT_FILE: '/c.pem', OTELCOL_TLS_KEY_FILE: '/k.pem', OTELCOL_TOKEN_FILE: '/tokens' };
  for (const configs of [['node.yaml'], ['node.yaml', 'storage.yaml'], ['node.yaml', 'storage.yaml', 'auth.yaml']]) {
    const r = validate(configs, { ...BACKENDS, ...auth });
    assert.equal(r.status, 0, `otelcol validate ${configs.join(' + ')}: ${r.stdout}${r.stderr}`);
  }
  const r = validate(['node.yaml'], {});
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /otlp_grpc\/traces: requires a non-empty "endpoint"/);
});

test('spanprofiles-prometheus.yaml merges over the production configuration: its metrics go to Prometheus, METRICS_BACKEND_ENDPOINT unset', { skip }, () => {
  const r = validate(['node.yaml', 'spanprofiles-prometheus.yaml'], { TRACES_BACKEND_ENDPOINT: BACKENDS.TRACES_BACKEND_ENDPOINT });
  assert.equal(r.status, 0, `otelcol validate node.yaml + spanprofiles-prometheus.yaml: ${r.stdout}${r.stderr}`);
});

test('the trace tier is valid; node.yaml with to-tier.yaml needs only the tier named, with storage and auth too', { skip }, () => {
  const tier = validate(['tier.yaml'], { TRACES_BACKEND_ENDPOINT: BACKENDS.TRACES_BACKEND_ENDPOINT });
  assert.equal(tier.status, 0, `otelcol validate tier.yaml: ${tier.stdout}${tier.stderr}`);
  const auth = { OTELCOL_TLS_CERT_FILE: '/c.pem', OTELCOL_TLS_KEY_FILE: '/k.pem', OTELCOL_TOKEN_FILE: '/tokens' };
  const toTier = { METRICS_BACKEND_ENDPOINT: BACKENDS.METRICS_BACKEND_ENDPOINT, TIER_HOSTNAME: 'otelcol-tier.observability.svc.cluster.local', ...auth };
  for (const configs of [['node.yaml', 'to-tier.yaml'], ['node.yaml', 'storage.yaml', 'auth.yaml', 'to-tier.yaml']]) {
    const r = validate(configs, toTier);
    assert.equal(r.status, 0, `otelcol validate ${configs.join(' + ')}: ${r.stdout}${r.stderr}`);
  }
  const noBackend = validate(['tier.yaml'], {});
  assert.notEqual(noBackend.status, 0);
  assert.match(noBackend.stderr, /otlp_grpc\/traces: requires a non-empty "endpoint"/);
});

test('the test and demo rig is valid, alone and with storage', { skip }, () => {
  for (const configs of [['spanprofiles.yaml'], ['spanprofiles.yaml', 'storage.yaml'], ['spanprofiles.yaml', 'spanprofiles-prometheus.yaml']]) {
    const r = validate(configs, RIG_FILES);
    assert.equal(r.status, 0, `otelcol validate ${configs.join(' + ')}: ${r.stdout}${r.stderr}`);
  }
});

test('--set=connectors::span_profiles::... reaches the connector', { skip }, () => {
  const ok = validate(['node.yaml'], BACKENDS, '--set=connectors::span_profiles::max_wait=20s');
  assert.equal(ok.status, 0, ok.stderr);
  const bad = validate(['node.yaml'], BACKENDS, '--set=connectors::span_profiles::max_wait=2ms');
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /max_wait is 2ms: expected between 1s/);
});

// OTLP/HTTP JSON: `n` server spans of service `name`, each with `pad` bytes of attribute.
function spans(name, n, pad) {
  const now = BigInt(Date.now()) * 1_000_000n;
  const ids = [];
  const list = [];
  for (let i = 0; i < n; i++) {
    const spanId = crypto.randomBytes(8).toString('hex');
    ids.push(spanId);
    list.push({
      traceId: crypto.randomBytes(16).toString('hex'), spanId, name: 'GET', kind: 2,
      startTimeUnixNano: String(now - 5_000_000n), endTimeUnixNano: String(now),
      attributes: [{ key: 'padding', value: { stringValue: 'x'.repeat(pad) } }],
    });
  }
  const body = { resourceSpans: [{ resource: { attributes: [{ key: 'service.name', value: { stringValue: name } }, { key: 'process.pid', value: { intValue: '1' } }] }, scopeSpans: [{ spans: list }] }] };
  return { ids, body: JSON.stringify(body) };
}

async function post(collector, { body }) {
  const res = await fetch(`http://127.0.0.1:${collector.http}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  assert.equal(res.status, 200, await res.text());
}

// Every file the traces exporter wrote: the current one and its rotated backups.
function tracesFiles(collector) {
  const { dir, name, ext } = path.parse(collector.files.traces);
  return fs.readdirSync(dir).filter((f) => f.startsWith(name) && f.endsWith(ext)).map((f) => path.join(dir, f));
}

test('the rig appends to its files across a restart and rotates them; its own metrics are served', { skip, timeout: 120_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'collector-configs-'));
  let collector = null;
  t.after(async () => {
    await pipeline.stop(collector, 10_000);
    if (t.passed) fs.rmSync(dir, { recursive: true, force: true });
    else t.diagnostic(`logs kept in ${dir}`);
  });
  // Rotation at 1 MB, from a configuration merged over the rig's. No Jaeger: its exporter
  // retries, the file has it all.
  const options = { configs: [], env: {} };
  const rotateAt1MB = path.join(dir, 'rotate.yaml');
  // The file exporter refuses one write larger than max_megabytes: the connector's batches stay
  // under it (256 KiB here, 3 MiB by default against the rig's 100 MB).
  fs.writeFileSync(rotateAt1MB, 'exporters:\n  file/traces:\n    rotation: { max_megabytes: 1, max_backups: 5 }\n'
    + 'connectors:\n  span_profiles:\n    max_batch_bytes: 262144\n');
  options.configs.push(rotateAt1MB);
  collector = await pipeline.startCollector(dir, 9, '1s', {}, options);
  // No profiles come: each span passes after max_wait (1 s), unenriched (no_process).
  const first = spans('rig', 20, 100);
  await post(collector, first);
  let metrics = {};
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(500)) {
    metrics = await pipeline.collectorMetrics(collector);
    if ((metrics['otelcol_connector_spanprofiles_spans{outcome="no_process"}'] ?? 0) >= 20) break;
  }
  assert.equal(metrics['otelcol_connector_spanprofiles_spans{outcome="no_process"}'], 20, `the connector's counter, as served: ${JSON.stringify(Object.keys(metrics).filter((k) => k.includes('spanprofiles')))}`);
  assert.ok('otelcol_exporter_send_failed_spans{exporter="otlp_grpc/traces"}' in metrics || 'otelcol_exporter_sent_spans{exporter="file/traces"}' in metrics,
    `the exporters' counters: ${Object.keys(metrics).filter((k) => k.startsWith('otelcol_exporter')).join(', ')}`);
  await pipeline.stop(collector, 15_000);
  const sizeBefore = fs.statSync(collector.files.traces).size;
  assert.ok(sizeBefore > 0, 'the first run wrote spans');

  // Restarted: the file grows from where it was, then rotates past 1 MB.
  collector = await pipeline.startCollector(dir, 9, '1s', {}, { ...options, restart: collector.restart });
  const second = spans('rig', 20, 100);
  await post(collector, second);
  const big = [];
  for (let i = 0; i < 6; i++) {
    const b = spans('rig', 50, 8000);
    big.push(b);
    await post(collector, b);
  }
  await pipeline.stop(collector, 15_000);
  const files = tracesFiles(collector);
  const all = Buffer.concat(files.map((f) => fs.readFileSync(f)));
  const missing = [first, second, ...big].flatMap((s) => s.ids).filter((id) => !all.includes(Buffer.from(id, 'hex')));
  assert.deepEqual(missing, [], `spans missing from ${files.join(', ')}`);
  assert.ok(files.length >= 2, `rotated past 1 MB: ${files.map((f) => `${path.basename(f)} ${fs.statSync(f).size}`).join(', ')}`);
});

// The production configuration (`config(dir)`: its path) started with its environment on free
// ports; stopped when `t` ends. Resolves with the Collector and the metrics it serves.
async function startProduction(t, prefix, config) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  let proc = null;
  t.after(async () => {
    await pipeline.stop(proc, 10_000);
    if (t.passed) fs.rmSync(dir, { recursive: true, force: true });
  });
  proc = await pipeline.startCollectorWith(dir, [config(dir)], ([grpc, http, telemetry]) => ({
    ...BACKENDS, BACKEND_INSECURE: 'true', OTELCOL_GRPC_ENDPOINT: `127.0.0.1:${grpc}`, OTELCOL_HTTP_ENDPOINT: `127.0.0.1:${http}`, OTELCOL_TELEMETRY_PORT: String(telemetry),
    // health_check on any free port: its answer is checked in collector-auth.test.js.
    OTELCOL_HEALTH_ENDPOINT: '127.0.0.1:0',
  }));
  const metrics = await pipeline.collectorMetrics(proc);
  assert.ok('otelcol_connector_spanprofiles_pending_spans' in metrics, `served: ${Object.keys(metrics).slice(0, 20).join(', ')}`);
  return proc;
}

test('the production configuration starts and serves the connector\'s metrics', { skip, timeout: 60_000 }, async (t) => {
  await startProduction(t, 'collector-node-', () => 'node.yaml');
});

// The connector was `spanprofiles` before contrib's snake case: a configuration written then
// (node.yaml as it shipped) still starts, and the Collector says the name is deprecated.
test('the old type name `spanprofiles` still loads, with the Collector\'s deprecation warning', { skip, timeout: 60_000 }, async (t) => {
  const shipped = fs.readFileSync(CONFIG('node.yaml'), 'utf8');
  const old = shipped.replace(/(?<![\w./-])span_profiles(?=[:\],])/g, 'spanprofiles');
  assert.ok(!/(?<![\w./-])span_profiles(?=[:\],])/.test(old) && old.includes('exporters: [spanprofiles]'), 'node.yaml rewritten to the old name');
  const proc = await startProduction(t, 'collector-old-name-', (dir) => {
    const oldConfig = path.join(dir, 'node-old-name.yaml');
    fs.writeFileSync(oldConfig, old);
    return oldConfig;
  });
  assert.match(fs.readFileSync(proc.logPath, 'utf8'), /"spanprofiles" alias is deprecated; use "span_profiles" instead/);
});
