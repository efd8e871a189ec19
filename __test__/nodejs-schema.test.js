'use strict';
// Schema 'nodejs' (js/nodejs/frame-context-manager.js, js/nodejs/frame-writer.js): options, the
// fallback where the runtime has no AsyncContextFrame, and the same semantics as schema 'tls', read
// back the way a nodejs_v1_dev reader reads them (getFrameSpanContext(): the reader's walk from
// otel_thread_ctx_nodejs_v1 through the AsyncContextFrame, in-process). The view from outside the
// process is nodejs-schema-outside-view.test.js.
const test = require('node:test');
const assert = require('node:assert/strict');
const asyncHooks = require('node:async_hooks');
const v8 = require('node:v8');
const fs = require('node:fs');
const { EventEmitter } = require('node:events');
const { Worker } = require('node:worker_threads');
const { trace, context, ROOT_CONTEXT, createContextKey } = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { expectNodejs, skipNodejs } = require('./nodejs-schema-helpers');
const { hasProtoc, readProcessContext, decodePayload } = require('./process-context-reader');
const { ROOT } = require('./helpers/addon');
const lib = require('..');
const { decodeAttributes } = require('../js/record/attrs-data');
const { needs } = require('./helpers/needs');

const tracer = new BasicTracerProvider().getTracer('nodejs-schema-test');
const KEY = createContextKey('nodejs-schema-test other value');

function ids(span) {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return { traceId, spanId, traceFlags };
}

function seen() {
  const record = lib.getFrameSpanContext();
  return record === null ? null : { traceId: record.traceId, spanId: record.spanId, traceFlags: record.traceFlags };
}

// Installs `manager` as the API's global manager for one test, and takes it down after.
function install(t, manager) {
  context.disable();
  assert.equal(context.setGlobalContextManager(manager.enable()), true);
  t.after(() => {
    manager.disable();
    context.disable();
  });
  return manager;
}

test('options.schema is checked before anything changes', () => {
  assert.throws(() => new lib.ThreadContextManager({ schema: 42 }), { name: 'TypeError', message: /options\.schema: expected 'tls' or 'nodejs', got number 42/ });
  assert.throws(() => new lib.ThreadContextManager({ schema: 'v8' }), { name: 'RangeError', message: /options\.schema: expected 'tls' or 'nodejs', got "v8"/ });
  assert.throws(() => new lib.ThreadContextManager({ schema: 'nodejs', contextManager: new AsyncLocalStorageContextManager() }),
    { name: 'TypeError', message: /options\.contextManager: not used with schema 'nodejs'/ });
  assert.throws(() => lib.register({ schema: null }), { name: 'TypeError', message: /options\.schema/ });
  assert.equal(new lib.ThreadContextManager().schema, 'tls');
  assert.equal(new lib.ThreadContextManager({ schema: 'tls' }).schemaFallback, null);
});

test('without AsyncContextFrame, schema nodejs publishes with tls after one warning that says why', { skip: expectNodejs && 'this runtime has AsyncContextFrame' }, () => {
  const warnings = [];
  const onWarning = (w) => { if (w.code === 'OTEL_THREAD_CTX_SCHEMA_FALLBACK') warnings.push(w.message); };
  process.on('warning', onWarning);
  const a = new lib.ThreadContextManager({ schema: 'nodejs' });
  const b = new lib.ThreadContextManager({ schema: 'nodejs' });
  assert.equal(a.schema, 'tls');
  assert.equal(b.schema, 'tls');
  assert.match(a.schemaFallback, /--experimental-async-context-frame|no V8 part is built for this Node's ABI/);
  assert.equal(a.mechanism, new lib.ThreadContextManager().mechanism, 'the tls manager it is');
  // Warnings are emitted on the next tick.
  return new Promise((resolve) => setImmediate(() => {
    process.off('warning', onWarning);
    assert.equal(warnings.length, 1, `expected one warning, got ${JSON.stringify(warnings)}`);
    assert.match(warnings[0], /schema 'nodejs' is not available here: .*Spans are published with schema 'tls' instead/);
    resolve();
  }));
});

test('schema nodejs is in effect where AsyncContextFrame is, and installs no async hook at all', { skip: skipNodejs }, (t) => {
  const calls = [];
  const spy = (object, name) => {
    const original = object[name];
    object[name] = function spied(...args) { calls.push(name); return original.apply(this, args); };
    t.after(() => { object[name] = original; });
  };
  spy(asyncHooks, 'createHook');
  for (const name of ['onInit', 'onBefore', 'onAfter', 'onSettled', 'createHook']) spy(v8.promiseHooks, name);
  const manager = install(t, new lib.ThreadContextManager({ schema: 'nodejs' }));
  assert.equal(manager.schema, 'nodejs', `fell back: ${manager.schemaFallback}`);
  assert.equal(manager.schemaFallback, null);
  assert.equal(manager.mechanism, 'AsyncContextFrame');
  assert.ok(manager instanceof lib.ThreadContextManager);
  const span = tracer.startSpan('s');
  return context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
    await null;
    await new Promise((resolve) => setTimeout(resolve, 1));
    assert.deepEqual(seen(), ids(span));
    span.end();
    assert.deepEqual(calls, [], 'no async_hooks or promise hooks');
  });
});

test('active() is exactly the context given to with(), and the frame shows its span after every kind of resumption', { skip: skipNodejs }, async (t) => {
  const manager = install(t, new lib.ThreadContextManager({ schema: 'nodejs' }));
  const outer = tracer.startSpan('outer');
  const inner = tracer.startSpan('inner');
  const outerCtx = trace.setSpan(ROOT_CONTEXT, outer);
  const innerCtx = trace.setSpan(outerCtx, inner).setValue(KEY, 'x');
  assert.equal(manager.active(), ROOT_CONTEXT);
  assert.equal(seen(), null);
  const resumptions = {
    'await null': () => null,
    'await a pending promise': () => new Promise((resolve) => setImmediate(resolve)),
    setTimeout: () => new Promise((resolve) => setTimeout(resolve, 1)),
    setImmediate: () => new Promise((resolve) => setImmediate(resolve)),
    'process.nextTick': () => new Promise((resolve) => process.nextTick(resolve)),
    queueMicrotask: () => new Promise((resolve) => queueMicrotask(resolve)),
    'fs.promises.stat': () => fs.promises.stat(__filename),
    'fs.stat callback': () => new Promise((resolve) => fs.stat(__filename, resolve)),
  };
  await manager.with(outerCtx, async () => {
    assert.equal(manager.active(), outerCtx);
    assert.deepEqual(seen(), ids(outer));
    const innerDone = manager.with(innerCtx, async () => {
      for (const [kind, resume] of Object.entries(resumptions)) {
        await resume();
        assert.equal(manager.active(), innerCtx, `after ${kind}`);
        assert.deepEqual(seen(), ids(inner), `after ${kind}`);
      }
    });
    // Interleaved with the inner chain: each continuation shows its own span.
    for (const [kind, resume] of Object.entries(resumptions)) {
      await resume();
      assert.equal(manager.active(), outerCtx, `outer, after ${kind}`);
      assert.deepEqual(seen(), ids(outer), `outer, after ${kind}`);
    }
    await innerDone;
    assert.equal(manager.with(ROOT_CONTEXT, () => manager.active()), ROOT_CONTEXT);
    assert.equal(manager.with(ROOT_CONTEXT, seen), null);
    assert.equal(manager.with(innerCtx, function () { return this; }, 'thisArg'), 'thisArg');
    assert.deepEqual(manager.with(innerCtx, (a, b) => [a, b], undefined, 1, 2), [1, 2]);
  });
  assert.equal(manager.active(), ROOT_CONTEXT);
  assert.equal(seen(), null);
  outer.end();
  inner.end();
});

test('the storage holds a holder or undefined, never another object', { skip: skipNodejs }, async (t) => {
  const manager = install(t, new lib.ThreadContextManager({ schema: 'nodejs' }));
  const { frames } = require('../js/nodejs/availability').nodejsSchema();
  const stores = [];
  const note = () => stores.push(frames.als.getStore());
  const span = tracer.startSpan('s');
  note();
  manager.with(ROOT_CONTEXT, note);
  manager.with(ROOT_CONTEXT.setValue(KEY, 1), note); // a context without a span
  manager.with(trace.setSpan(ROOT_CONTEXT, span), note);
  manager.with('not a context', note);
  await manager.with(trace.setSpan(ROOT_CONTEXT, span), async () => { await null; note(); });
  for (const store of stores) assert.ok(store === undefined || frames.isHolder(store), `store ${String(store)}`);
  assert.deepEqual(stores.map((s) => s === undefined), [true, true, false, false, false, false]);
  span.end();
});

test('an ended span is not published any more, also where its context lives on in a timer or a bound function', { skip: skipNodejs }, async (t) => {
  const manager = install(t, new lib.ThreadContextManager({ schema: 'nodejs' }));
  const span = tracer.startSpan('ends');
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  let fromTimer;
  const timerFired = new Promise((resolve) => {
    manager.with(ctx, () => setTimeout(() => { fromTimer = { active: manager.active(), seen: seen() }; resolve(); }, 20));
  });
  const bound = manager.bind(ctx, () => ({ active: manager.active(), seen: seen() }));
  assert.deepEqual(bound().seen, ids(span), 'published before the end');
  span.end();
  const afterEnd = bound();
  assert.equal(afterEnd.active, ctx, 'the context is still the active one');
  assert.equal(afterEnd.seen, null, 'but its ended span is not published');
  await timerFired;
  assert.equal(fromTimer.active, ctx);
  assert.equal(fromTimer.seen, null);
  // A span that ended before its first activation is never published.
  const early = tracer.startSpan('early');
  early.end();
  assert.equal(manager.with(trace.setSpan(ROOT_CONTEXT, early), seen), null);
});

test('bind(): functions and EventEmitter listeners run in the bound context', { skip: skipNodejs }, (t) => {
  const manager = install(t, new lib.ThreadContextManager({ schema: 'nodejs' }));
  const span = tracer.startSpan('bound');
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  const emitter = manager.bind(ctx, new EventEmitter());
  let fromListener;
  emitter.on('x', () => { fromListener = { active: manager.active(), seen: seen() }; });
  emitter.emit('x');
  assert.equal(fromListener.active, ctx);
  assert.deepEqual(fromListener.seen, ids(span));
  const fn = manager.bind(ctx, function named(a, b, c) { return [manager.active(), seen(), a + b + c]; });
  assert.equal(fn.length, 3);
  const [active, record, sum] = fn(1, 2, 3);
  assert.equal(active, ctx);
  assert.deepEqual(record, ids(span));
  assert.equal(sum, 6);
  span.end();
});

test('attach() switches the running execution until its token is disposed', { skip: skipNodejs }, (t) => {
  const manager = install(t, new lib.ThreadContextManager({ schema: 'nodejs' }));
  if (typeof manager.attach !== 'function') {
    t.skip('the installed @opentelemetry/context-async-hooks has no attach()');
    return;
  }
  const span = tracer.startSpan('attached');
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  manager.with(ROOT_CONTEXT, () => {
    const token = manager.attach(ctx);
    assert.equal(manager.active(), ctx);
    assert.deepEqual(seen(), ids(span));
    token.dispose();
    token.dispose();
    assert.equal(manager.active(), ROOT_CONTEXT);
    assert.equal(seen(), null);
  });
  span.end();
});

test('record attributes: from the options, a later span.setAttribute, and setAttribute()', { skip: skipNodejs }, async (t) => {
  const manager = install(t, new lib.ThreadContextManager({ schema: 'nodejs', attributes: ['http.route', 'tenant'] }));
  const route = lib.attributeKeyMap().indexOf('http.route');
  const tenant = lib.attributeKeyMap().indexOf('tenant');
  const attrs = () => new Map(decodeAttributes(lib.getFrameSpanContext().attrs));
  const span = tracer.startSpan('GET', { attributes: { 'http.route': '/a' } });
  await manager.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
    assert.equal(attrs().get(route), '/a');
    await null;
    span.setAttribute('http.route', '/users/:id'); // as express does, after the span started
    assert.equal(attrs().get(route), '/users/:id');
    assert.equal(lib.setAttribute('tenant', 'acme'), true);
    assert.deepEqual([...attrs()].sort(), [[route, '/users/:id'], [tenant, 'acme']].sort());
    span.setAttributes({ 'http.route': '/v2', other: 1 });
    assert.equal(attrs().get(route), '/v2');
    const child = tracer.startSpan('child', {}, context.active());
    await manager.with(trace.setSpan(context.active(), child), async () => {
      await null;
      assert.equal(attrs().get(route), '/v2', 'a child starts with its parent\'s values');
    });
    child.end();
    lib.setAttribute('tenant', 'x'.repeat(400));
    lib.setAttribute('tenant', 'y'.repeat(300)); // fits the 612 bytes in place
    assert.equal(attrs().get(tenant), 'y'.repeat(255), 'values are cut at 255 bytes');
  });
  assert.equal(manager.schema, 'nodejs');
  span.end();
});

const protocNeed = needs(!skipNodejs && !hasProtoc && 'protoc is not installed (apt-get install -y protobuf-compiler)');
test('the process context announces nodejs_v1_dev and only what RFC #1861 asks, read from outside the code', { skip: skipNodejs || protocNeed.skip }, protocNeed.guard((t) => {
  install(t, new lib.ThreadContextManager({ schema: 'nodejs' }));
  assert.equal(lib.processContextInfo().schemaVersion, 'nodejs_v1_dev');
  const attributes = new Map(Object.entries(decodePayload(readProcessContext(process.pid).payload).attributes));
  assert.equal(attributes.get('threadlocal.schema_version'), 'nodejs_v1_dev');
  assert.ok(Array.isArray(attributes.get('threadlocal.attribute_key_map')));
  // The latest text fixes the V8 layout by schema and carries the record slot offset in the TLS
  // struct: the older revisions' layout integers are not published.
  assert.deepEqual([...attributes.keys()].filter((k) => k.startsWith('threadlocal.')).sort(),
    ['threadlocal.attribute_key_map', 'threadlocal.schema_version']);
  // An API object's first embedder field: after the JSObject header (24), and on V8 13+ (Node 24,
  // 26) after one more slot, the CppHeap wrappable pointer (32).
  const info = require('../js/nodejs/v8-addon').v8Addon().addon.discoveryInfo();
  assert.equal(info.recordSlotOffset, Number(process.versions.node.split('.')[0]) >= 24 ? 32 : 24);
}));

test('takeover: the newest enabled manager owns the thread, whatever the schemas', { skip: skipNodejs }, async (t) => {
  const span = tracer.startSpan('owned');
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  const tls = new lib.ThreadContextManager().enable();
  const nodejs = new lib.ThreadContextManager({ schema: 'nodejs' }).enable();
  t.after(() => { nodejs.disable(); tls.disable(); newer.disable(); });
  assert.equal(tls.enabled, false, 'the older manager was taken over');
  // The superseded manager forwards: its with() is the owner's.
  await tls.with(ctx, async () => {
    await null;
    assert.equal(nodejs.active(), ctx);
    assert.deepEqual(seen(), ids(span));
    assert.equal(lib.getSpanContext(), null, 'the TLS record shows none while schema nodejs publishes');
  });
  assert.equal(lib.processContextInfo().schemaVersion, 'nodejs_v1_dev');
  const nodejsInfo = () => require('../js/nodejs/v8-addon').v8Addon().addon.discoveryInfo();
  assert.notEqual(nodejsInfo().cpedSlot, 0, 'published while a nodejs manager owns the thread');
  const newer = new lib.ThreadContextManager().enable();
  assert.equal(nodejs.enabled, false);
  assert.equal(nodejsInfo().cpedSlot, 0, 'unpublished once a tls manager owns it: nothing for a nodejs_v1_dev reader here');
  assert.equal(lib.processContextInfo().schemaVersion, 'tlsdesc_v1_dev', 'the process context follows the owner');
  nodejs.with(ctx, () => {
    assert.equal(lib.getSpanContext().spanId, span.spanContext().spanId, 'forwarded to the TLS owner, which publishes');
    assert.equal(seen(), null, 'the frame reader sees nothing once a TLS manager owns the thread');
  });
  const again = new lib.ThreadContextManager({ schema: 'nodejs' }).enable();
  assert.notEqual(nodejsInfo().cpedSlot, 0, 'published again');
  again.disable();
  assert.equal(nodejsInfo().cpedSlot, 0, 'disable() publishes none');
  span.end();
});

test('register({ schema: "nodejs" }) replaces an installed manager instead of wrapping it', { skip: skipNodejs }, (t) => {
  context.disable();
  const stock = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(stock);
  const manager = lib.register({ schema: 'nodejs' });
  t.after(() => { manager.disable(); context.disable(); });
  assert.equal(manager.schema, 'nodejs');
  assert.equal(context._getContextManager(), manager);
  assert.equal(lib.register({ schema: 'nodejs' }), manager, 'registering the same schema again returns it');
  const span = tracer.startSpan('r');
  context.with(trace.setSpan(ROOT_CONTEXT, span), () => assert.deepEqual(seen(), ids(span)));
  span.end();
});

test('each worker publishes its own discovery struct and records', { skip: skipNodejs, timeout: 60_000 }, async () => {
  const code = `
    process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
    const { parentPort } = require('node:worker_threads');
    const { trace, context, ROOT_CONTEXT } = require('@opentelemetry/api');
    const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
    const lib = require(${JSON.stringify(ROOT)});
    const manager = lib.register({ schema: 'nodejs' });
    const span = new BasicTracerProvider().getTracer('w').startSpan('worker');
    context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
      await new Promise((r) => setTimeout(r, 1));
      const info = require(${JSON.stringify(ROOT)} + '/js/nodejs/v8-addon').v8Addon().addon.discoveryInfo();
      parentPort.postMessage({ schema: manager.schema, seen: lib.getFrameSpanContext(), spanId: span.spanContext().spanId, struct: info.structAddress, cped: info.cpedSlot });
      span.end();
    });
  `;
  const manager = lib.register({ schema: 'nodejs' });
  const span = tracer.startSpan('main');
  try {
    const main = await context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
      const results = await Promise.all([1, 2].map(() => new Promise((resolve, reject) => {
        const w = new Worker(code, { eval: true, cwd: ROOT });
        w.once('message', (m) => { resolve(m); w.terminate(); });
        w.once('error', reject);
      })));
      assert.deepEqual(seen(), ids(span), 'the main thread keeps its own span');
      return results;
    });
    const info = require('../js/nodejs/v8-addon').v8Addon().addon.discoveryInfo();
    const structs = new Set([info.structAddress]);
    for (const r of main) {
      assert.equal(r.schema, 'nodejs');
      assert.equal(r.seen && r.seen.spanId, r.spanId, 'the worker\'s frame shows the worker\'s span');
      assert.notEqual(r.cped, info.cpedSlot, 'each isolate has its own CPED slot');
      structs.add(r.struct);
    }
    assert.equal(structs.size, 3, 'one otel_thread_ctx_nodejs_v1 per thread');
  } finally {
    span.end();
    manager.disable();
    context.disable();
  }
});

test('nodejsSchemaInfo() says whether the schema is available, where its struct is and how its pages are held', () => {
  const info = lib.nodejsSchemaInfo();
  assert.equal(info.available, expectNodejs, info.reason ?? '');
  if (!expectNodejs) {
    assert.match(info.reason, /AsyncContextFrame|ABI/);
    return;
  }
  assert.equal(info.reason, null);
  assert.ok(info.structAddress > 0 && [24, 32].includes(info.recordSlotOffset));
  assert.ok(info.pages >= info.pinnedPages && info.pages > 0);
  assert.equal(info.pinnedPages > 0 || info.pinError !== null, true, 'pinned, or the mlock error is reported');
});
