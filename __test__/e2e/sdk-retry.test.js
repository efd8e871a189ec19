'use strict';
// What the JavaScript SDK's OTLP exporters do while the Collector restarts, as docs/security.md
// ("What the SDK retries, and what a Collector restart loses") says: three real SDK processes
// (BatchSpanProcessor and the OTLP trace exporters from npm) send to the project's Collector
// (collector/spanprofiles.yaml, its traces file read back), which is stopped for a few seconds
// and started again on the same ports. OTLP/HTTP with the default 10 s timeout retries
// ECONNREFUSED until the Collector is back: nothing lost. OTLP/HTTP with a 2 s timeout gives up
// before: the batch is lost. gRPC does not retry: the batch is lost. All three send again after
// the restart, so a loss is not an exporter that stopped working; gRPC loses those too until its
// channel reconnects.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');
const pipeline = require('../../demo/pipeline');

const { ROOT, BIN } = pipeline;
// A missing build is a skip, and a failure in CI (REQUIRE_EBPF=1: every built part required).
const built = fs.existsSync(BIN.collector);
const skip = built || process.env.REQUIRE_EBPF === '1' ? false : `${BIN.collector} missing: run "bash scripts/setup.sh"`;
// How long the Collector stays down: past the 2 s exporter's deadline, within the 10 s one's
// fourth retry (6.5 s at the earliest, the jitter included) with the Collector's start.
const OUTAGE_MS = 2500;

// An SDK process: on each "burst N" line of its stdin it ends N spans and prints their ids as
// a JSON line; the BatchSpanProcessor sends them 100 ms later.
function sdk(protocol, env) {
  const pkg = protocol === 'grpc' ? '@opentelemetry/exporter-trace-otlp-grpc' : '@opentelemetry/exporter-trace-otlp-proto';
  const script = `
    const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
    const from = [process.cwd(), require.resolve('@opentelemetry/sdk-node')];
    const { OTLPTraceExporter } = require(require.resolve(${JSON.stringify(pkg)}, { paths: from }));
    const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter(), { scheduledDelayMillis: 100 })] });
    const tracer = provider.getTracer('sdk-retry');
    require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
      const n = Number(line.split(' ')[1]);
      const ids = [];
      for (let i = 0; i < n; i++) { const s = tracer.startSpan('op'); ids.push(s.spanContext().spanId); s.end(); }
      console.log(JSON.stringify(ids));
    });`;
  const child = spawn(process.execPath, ['-e', script], { cwd: ROOT, env: { ...process.env, OTEL_LOG_LEVEL: 'none', ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    child,
    async burst(n) {
      child.stdin.write(`burst ${n}\n`);
      const { value } = await lines.next();
      return JSON.parse(value);
    },
  };
}

// Which of `ids` (hex span ids) the Collector wrote to its traces files.
function arrived(collector, ids) {
  const dir = path.dirname(collector.files.traces);
  const base = path.basename(collector.files.traces).replace(/\.pb$/, '');
  const all = Buffer.concat(fs.readdirSync(dir).filter((f) => f.startsWith(base)).map((f) => fs.readFileSync(path.join(dir, f))));
  return ids.filter((id) => all.includes(Buffer.from(id, 'hex')));
}

async function waitArrived(collector, ids, ms) {
  const deadline = Date.now() + ms;
  let got = arrived(collector, ids);
  while (got.length < ids.length && Date.now() < deadline) {
    await sleep(250);
    got = arrived(collector, ids);
  }
  return got;
}

test('a Collector restart under the SDK: OTLP/HTTP retries within its timeout, gRPC does not', { skip, timeout: 90_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-retry-'));
  let collector = null;
  const sdks = [];
  t.after(async () => {
    for (const s of sdks) s.child.kill('SIGKILL');
    await pipeline.stop(collector, 10_000);
    if (t.passed) fs.rmSync(dir, { recursive: true, force: true });
    else t.diagnostic(`logs kept in ${dir}`);
  });
  // The connector's shortest wait: spans reach the file a second after they arrive.
  collector = await pipeline.startCollector(dir, 9, '1s');
  const http = (extra) => ({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${collector.http}/v1/traces`, ...extra });
  const kinds = {
    'OTLP/HTTP, 10 s timeout': sdk('http/protobuf', http({})),
    'OTLP/HTTP, 2 s timeout': sdk('http/protobuf', http({ OTEL_EXPORTER_OTLP_TIMEOUT: '2000' })),
    'gRPC': sdk('grpc', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${collector.grpc}` }),
  };
  sdks.push(...Object.values(kinds));

  const sent = {};
  for (const [kind, s] of Object.entries(kinds)) sent[kind] = { before: await s.burst(20) };
  const before = Object.values(sent).flatMap((s) => s.before);
  assert.equal((await waitArrived(collector, before, 20_000)).length, before.length, 'every span sent before the restart');

  await pipeline.stop(collector, 15_000);
  for (const [kind, s] of Object.entries(kinds)) sent[kind].during = await s.burst(20);
  await sleep(OUTAGE_MS);
  collector = await pipeline.startCollector(dir, 9, '1s', {}, { restart: collector.restart });
  const restarted = Date.now();

  // The 10 s exporter's batch arrives at its next retry (within its deadline).
  const kept = sent['OTLP/HTTP, 10 s timeout'].during;
  assert.equal((await waitArrived(collector, kept, 15_000)).length, kept.length, 'the 10 s exporter\'s batch sent while the Collector was down');
  // Every exporter works again: OTLP/HTTP at once; gRPC once its channel has reconnected (grpc-js
  // waits 1 s, then x1.6 each time, between attempts, and fails every export meanwhile), so a
  // burst a second until one arrives, the earlier ones counted as lost.
  for (const [kind, s] of Object.entries(kinds)) {
    sent[kind].lostAfter = [];
    for (;;) {
      const ids = await s.burst(20);
      if ((await waitArrived(collector, ids, 3000)).length === ids.length) break;
      sent[kind].lostAfter.push(...ids);
      assert.ok(Date.now() - restarted < 30_000, `${kind}: nothing arrives 30 s after the Collector is back`);
    }
    t.diagnostic(`${kind}: ${sent[kind].lostAfter.length} spans sent after the restart lost before the exporter reconnected`);
  }
  for (const kind of ['OTLP/HTTP, 10 s timeout', 'OTLP/HTTP, 2 s timeout']) {
    assert.deepEqual(sent[kind].lostAfter, [], `${kind}: sends at once after the restart`);
  }
  for (const kind of ['OTLP/HTTP, 2 s timeout', 'gRPC']) {
    assert.deepEqual(arrived(collector, sent[kind].during), [], `${kind}: the batch sent while the Collector was down is lost`);
  }
});
