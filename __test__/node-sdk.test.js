'use strict';
// The one-line wiring with the real @opentelemetry/sdk-node: `contextManager: new
// ThreadContextManager(options)` and nothing else publishes the process context with the SDK's
// own resource, read from outside the process (maps + /proc/PID/mem, decoded by protoc; and by
// `thread-ctx inspect` when the reader is built). SDK shutdown and a new SDK work, in sequence.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { ROOT } = require('./helpers/addon');
const { startChild } = require('./helpers/child');
const { hasProtoc, readProcessContext, decodePayload } = require('./process-context-reader');
const { needs } = require('./helpers/needs');

const need = needs(hasProtoc ? false : 'protoc is not installed (apt-get install -y protobuf-compiler)');
const READER = path.join(ROOT, 'target', 'release', 'thread-ctx');

// No exporter traffic: spans go to memory, logs and metrics nowhere.
const QUIET = { OTEL_LOGS_EXPORTER: 'none', OTEL_METRICS_EXPORTER: 'none', OTEL_TRACES_EXPORTER: 'none' };

// Child code: a NodeSDK factory and a command that runs a span, awaits inside it and reports
// what the record showed there and the SDK's resource (once its detectors settled).
const SDK_CHILD = `
  const { NodeSDK } = require('@opentelemetry/sdk-node');
  const { InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
  const { resourceFromAttributes } = require('@opentelemetry/resources');
  const { trace } = require('@opentelemetry/api');
  const warnings = [];
  process.on('warning', (w) => warnings.push({ code: w.code, message: w.message }));
  const startSdk = (config) => {
    const sdk = new NodeSDK({ spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())], ...config });
    sdk.start();
    return sdk;
  };
  async function runSpan(name) {
    return trace.getTracer('node-sdk-test').startActiveSpan(name, { attributes: { 'http.route': '/' + name } }, async (span) => {
      await new Promise((resolve) => setTimeout(resolve, 2));
      const record = lib.getSpanContext();
      const view = lib.recordView();
      const attrs = Buffer.from(view.subarray(28, 28 + (view[26] | (view[27] << 8)))).toString('latin1');
      span.end();
      await span.resource.waitForAsyncAttributes?.();
      return { record, span: span.spanContext(), attrs, resource: span.resource.attributes };
    });
  }
`;

/** Reads the process context from outside until `done(context)` holds (detectors settle async). */
async function readUntil(pid, done, what) {
  let last;
  for (let i = 0; i < 200; i++) {
    last = decodePayload(readProcessContext(pid).payload);
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  assert.fail(`the process context of ${pid} never showed ${what}; last read: ${JSON.stringify(last)}`);
}

// The SDK's resource attribute values as the process context carries them.
function published(value) {
  return Array.isArray(value) ? value.map(String) : value;
}

function readerInspect(pid) {
  if (!fs.existsSync(READER)) return null;
  return JSON.parse(execFileSync(READER, ['inspect', String(pid), '--json'], { encoding: 'utf8' }));
}

test('NodeSDK with only contextManager: new ThreadContextManager(options) publishes the SDK resource', { skip: need.skip, timeout: 90_000 }, need.guard(async (t) => {
  const child = startChild(t, `${SDK_CHILD}
    startSdk({
      serviceName: 'shop',
      resource: resourceFromAttributes({ 'service.instance.id': 'shop-1', 'service.version': '1.2.3', 'deployment.environment.name': 'prod' }),
      contextManager: new lib.ThreadContextManager({ attributes: ['http.route'] }),
    });
    say({ started: true });
    onLine(async (name) => say(await runSpan(name)));
  `, QUIET);
  await child.next();
  // Published at enable(), before any span: readers that need the schema version start now.
  const early = decodePayload(readProcessContext(child.pid).payload);
  assert.equal(early.attributes['threadlocal.schema_version'], 'tlsdesc_v1_dev');
  assert.deepEqual(early.attributes['threadlocal.attribute_key_map'], ['http.route']);
  // The SDK's service name before the first span: a profiler names the service from the start.
  const named = await readUntil(child.pid, (c) => c.resource['service.name'] === 'shop', "the SDK's service.name before any span");
  assert.equal(named.resource['service.instance.id'], 'shop-1');

  child.send('checkout');
  const run = await child.next();
  assert.deepEqual(run.record, run.span, 'the record shows the span after an await inside it');
  assert.equal(run.attrs, '\u0000\u0009/checkout', 'the record carries http.route (key 0) from the span');
  const ctx = await readUntil(child.pid, (c) => c.resource['service.name'] === 'shop' && c.resource['host.id'] !== undefined,
    "the SDK's service.name and its async host.id");
  for (const [key, value] of Object.entries(run.resource)) {
    assert.deepEqual(ctx.resource[key], published(value), `resource attribute ${key}: the SDK's value, read from outside`);
  }
  assert.equal(ctx.resource['service.instance.id'], 'shop-1', "the SDK's service.instance.id, not a generated one");
  assert.equal(ctx.resource['telemetry.sdk.language'], 'nodejs');
  assert.deepEqual(ctx.attributes['threadlocal.attribute_key_map'], ['http.route']);

  const inspected = readerInspect(child.pid);
  if (inspected === null) {
    t.diagnostic(`${READER} is not built: checked with the protoc reader only`);
  } else {
    assert.equal(inspected.process_context.resource['service.name'], 'shop', 'thread-ctx inspect reads the same');
    assert.equal(inspected.process_context.schema_version, 'tlsdesc_v1_dev');
  }
}));

test('provider.register({ contextManager }) publishes the provider resource; register() keeps working without an SDK', { skip: need.skip, timeout: 90_000 }, need.guard(async (t) => {
  const child = startChild(t, `${SDK_CHILD}
    const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
    const provider = new NodeTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'api', 'service.version': '2.0.0' }) });
    provider.register({ contextManager: new lib.ThreadContextManager() });
    onLine(async (name) => say(await runSpan(name)));
    say({});
  `, QUIET);
  await child.next();
  await readUntil(child.pid, (c) => c.resource['service.name'] === 'api', 'service.name api before any span');
  child.send('users');
  const run = await child.next();
  assert.deepEqual(run.record, run.span);
  const ctx = await readUntil(child.pid, (c) => c.resource['service.name'] === 'api', 'service.name api');
  assert.equal(ctx.resource['service.version'], '2.0.0');

  const plain = startChild(t, `lib.register({ attributes: ['http.route'] }); say({});`, { OTEL_SERVICE_NAME: 'plain' });
  await plain.next();
  const plainCtx = decodePayload(readProcessContext(plain.pid).payload);
  assert.equal(plainCtx.resource['service.name'], 'plain', 'register() without an SDK: the environment');

  // A provider without NodeSDK's detectors ignores OTEL_SERVICE_NAME (its resource says
  // unknown_service:node); the environment fills that placeholder in, and what the resource lacks.
  const defaults = startChild(t, `${SDK_CHILD}
    const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
    new NodeTracerProvider().register({ contextManager: new lib.ThreadContextManager() });
    onLine(async (name) => say(await runSpan(name)));
    say({});
  `, { ...QUIET, OTEL_SERVICE_NAME: 'env-named', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=staging' });
  await defaults.next();
  defaults.send('defaults');
  const run2 = await defaults.next();
  assert.match(run2.resource['service.name'], /^unknown_service/, 'premise: the provider ignores OTEL_SERVICE_NAME');
  const merged = await readUntil(defaults.pid, (c) => c.resource['service.name'] === 'env-named', 'service.name from the environment');
  assert.equal(merged.resource['deployment.environment.name'], 'staging');
  assert.equal(merged.resource['telemetry.sdk.version'], run2.resource['telemetry.sdk.version'], "the SDK's own attributes");
}));

test('sdk.shutdown() and a new NodeSDK with a new manager: no throw, spans published, the new resource from outside', { skip: need.skip, timeout: 90_000 }, need.guard(async (t) => {
  const child = startChild(t, `${SDK_CHILD}
    const { context } = require('@opentelemetry/api');
    let sdk = startSdk({ serviceName: 'shop-one', contextManager: new lib.ThreadContextManager() });
    onLine(async (command) => {
      try {
        if (command === 'restart' || command === 'restart-clean') {
          await sdk.shutdown();
          // What test suites do between SDKs: release the API's globals (NodeSDK does not).
          if (command === 'restart-clean') { trace.disable(); context.disable(); }
          sdk = startSdk({ serviceName: command === 'restart' ? 'shop-two' : 'shop-three', contextManager: new lib.ThreadContextManager() });
          say({ restarted: true });
        } else {
          say(await runSpan(command));
        }
      } catch (error) {
        say({ error: error.message });
      }
    });
    say({});
  `, QUIET);
  await child.next();
  child.send('one');
  const one = await child.next();
  assert.deepEqual(one.record, one.span);
  await readUntil(child.pid, (c) => c.resource['service.name'] === 'shop-one', 'shop-one');

  // Shutdown and a new SDK without touching the API globals: the first SDK's tracer provider and
  // context manager stay registered (as with the stock manager); the old manager forwards to the
  // new one, which owns the record.
  child.send('restart');
  assert.deepEqual(await child.next(), { restarted: true }, 'the second SDK started without an error');
  child.send('two');
  const two = await child.next();
  assert.equal(two.error, undefined);
  assert.deepEqual(two.record, two.span, 'spans after the restart are published');

  // With the API globals released in between, the new SDK's own provider makes the spans, and the
  // process context follows its resource.
  child.send('restart-clean');
  assert.deepEqual(await child.next(), { restarted: true });
  child.send('three');
  const three = await child.next();
  assert.deepEqual(three.record, three.span);
  assert.equal(three.resource['service.name'], 'shop-three');
  await readUntil(child.pid, (c) => c.resource['service.name'] === 'shop-three', 'shop-three after the second restart');
}));

test('NaN, rejecting and oversized resource attributes: the service runs on, with a warning and a context without them', { skip: need.skip, timeout: 90_000 }, need.guard(async (t) => {
  const child = startChild(t, `${SDK_CHILD}
    const detector = { detect: () => ({ attributes: {
      'ok.async': Promise.resolve('fine'),
      'bad.nan': new Promise((resolve) => setTimeout(() => resolve(NaN), 20)),
      'bad.reject': new Promise((_, reject) => setTimeout(() => reject(new Error('detector failed')), 20)),
      'bad.object': { nested: true },
      'bad.huge': 'x'.repeat(5000),
    } }) };
    startSdk({ serviceName: 'faulty', resourceDetectors: [detector], contextManager: new lib.ThreadContextManager() });
    onLine(async (command) => {
      if (command === 'status') return say({ warnings, info: JSON.parse(JSON.stringify(pc.processContextInfo())) });
      if (command === 'span') return say(await runSpan('span'));
      // A resource whose async attributes reject outright (not guarded by the SDK), given explicitly.
      lib.register({ resource: {
        attributes: { 'service.name': 'explicit' }, asyncAttributesPending: true,
        waitForAsyncAttributes: () => Promise.reject(new Error('async attributes failed')),
      } });
      say({ registered: true });
    });
    say({});
  `, QUIET);
  await child.next();
  child.send('span');
  await child.next();
  const ctx = await readUntil(child.pid, (c) => c.resource['ok.async'] === 'fine', 'the settled async attribute');
  assert.equal(ctx.resource['service.name'], 'faulty');
  for (const bad of ['bad.nan', 'bad.reject', 'bad.object', 'bad.huge']) assert.equal(ctx.resource[bad], undefined, `${bad} left out`);
  child.send('status');
  const status = await child.next();
  const ours = status.warnings.filter((w) => w.code === 'OTEL_THREAD_CTX_PROCESS_CONTEXT');
  assert.ok(ours.some((w) => /bad\.nan: not a finite number/.test(w.message)), JSON.stringify(ours));
  assert.ok(ours.some((w) => /bad\.object: not a string, number, boolean or array/.test(w.message)), JSON.stringify(ours));
  assert.ok(ours.some((w) => /bad\.huge: a key or string value over 4096 bytes/.test(w.message)), JSON.stringify(ours));
  assert.ok(status.info.droppedAttributeCount >= 3, `droppedAttributeCount ${status.info.droppedAttributeCount}`);

  child.send('register');
  assert.deepEqual(await child.next(), { registered: true });
  await readUntil(child.pid, (c) => c.resource['service.name'] === 'explicit', 'the explicit resource');
  await new Promise((resolve) => setTimeout(resolve, 100));
  child.send('status');
  const after = await child.next(); // the child is alive: no unhandled rejection ended it
  const asyncWarnings = after.warnings.filter((w) => /asynchronous attributes \(async attributes failed\)/.test(w.message));
  assert.equal(asyncWarnings.length, 1, `expected one warning for the rejected async attributes: ${JSON.stringify(after.warnings)}`);
  assert.equal(child.exitCode, null, 'the child must still run');
}));
