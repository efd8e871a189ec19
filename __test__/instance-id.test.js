'use strict';
// One identity for spans and profiles: with the one-line wiring, the SDK's resource carries the
// same service.instance.id that the process context publishes (read from outside the process),
// so a profiler's samples and the service's spans name the same process even where pid and
// host name do not tell it apart (two containers in PID namespaces of their own, on the host's
// network). NodeSDK's default detectors give none; a value the application sets wins and is the
// one published.

const test = require('node:test');
const assert = require('node:assert/strict');
const { startChild } = require('./helpers/child');
const { hasProtoc, readProcessContext, decodePayload } = require('./process-context-reader');
const { needs } = require('./helpers/needs');

const need = needs(hasProtoc ? false : 'protoc is not installed (apt-get install -y protobuf-compiler)');
const QUIET = { OTEL_LOGS_EXPORTER: 'none', OTEL_METRICS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none' };

const CHILD = `
  const { NodeSDK } = require('@opentelemetry/sdk-node');
  const { InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
  const { trace } = require('@opentelemetry/api');
  const exporter = new InMemorySpanExporter();
  new NodeSDK({ spanProcessors: [new SimpleSpanProcessor(exporter)], contextManager: new lib.ThreadContextManager() }).start();
  onLine(async () => {
    const span = trace.getTracer('t').startActiveSpan('GET', (s) => { s.end(); return s; });
    await span.resource.waitForAsyncAttributes?.();
    // The resource the exporter sends with the span is the span's own.
    for (let i = 0; i < 100 && exporter.getFinishedSpans().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    say({ exported: exporter.getFinishedSpans()[0].resource.attributes['service.instance.id'] });
  });
  say({});
`;

async function publishedInstanceId(pid) {
  for (let i = 0; i < 200; i++) {
    const id = decodePayload(readProcessContext(pid).payload).resource['service.instance.id'];
    if (id !== undefined) return id;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  assert.fail(`the process context of ${pid} has no service.instance.id`);
}

test('NodeSDK with its default detectors: exported spans carry the service.instance.id the process context publishes', { skip: need.skip, timeout: 60_000 }, need.guard(async (t) => {
  const child = startChild(t, CHILD, QUIET);
  await child.next();
  child.send('span');
  const { exported } = await child.next();
  assert.match(exported, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a generated UUID');
  assert.equal(await publishedInstanceId(child.pid), exported, 'the same id, read from outside the process');
}));

test('a service.instance.id the application sets wins and is what gets published', { skip: need.skip, timeout: 60_000 }, need.guard(async (t) => {
  const child = startChild(t, CHILD, { ...QUIET, OTEL_RESOURCE_ATTRIBUTES: 'service.instance.id=shop-7' });
  await child.next();
  child.send('span');
  assert.equal((await child.next()).exported, 'shop-7');
  assert.equal(await publishedInstanceId(child.pid), 'shop-7');
}));
