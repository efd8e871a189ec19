'use strict';
// traceActive() for apps that keep another context manager (here the stock
// AsyncLocalStorageContextManager, installed globally): the record follows the span of fn,
// including after its awaits, and shows none outside.

const test = require('node:test');
const assert = require('node:assert/strict');
const { trace, context } = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { lib, assertPublished, assertNone, sleep, immediate } = require('./context-helpers');

const { traceActive } = lib;
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const tracer = new BasicTracerProvider().getTracer('otel-thread-ctx-trace-active-test');

test('traceActive keeps the record on its span across awaits, with another context manager', async () => {
  const rootSeen = [];
  const rootTimer = setInterval(() => rootSeen.push(lib.getSpanContext()), 1);
  try {
    const result = await traceActive(tracer, 'outer', async (span) => {
      assert.equal(trace.getActiveSpan(), span, 'expected the span active in the global manager too');
      assertPublished(span, 'traceActive start');
      await sleep(2);
      assertPublished(span, 'after await sleep');
      await traceActive(tracer, 'child', { attributes: { a: 1 } }, async (child) => {
        assert.equal(child.parentSpanContext?.spanId ?? child.parentSpanId, span.spanContext().spanId,
          'expected the child span to be parented to the outer span');
        await immediate();
        assertPublished(child, 'child after await');
        child.end();
      });
      assertPublished(span, 'outer after the child');
      await Promise.resolve();
      assertPublished(span, 'outer after await of a resolved promise');
      span.end();
      return 'done';
    });
    assert.equal(result, 'done');
    assertNone('after traceActive');
    await sleep(3);
  } finally {
    clearInterval(rootTimer);
  }
  assert.ok(rootSeen.length > 0, 'expected the root-context interval to run');
  assert.deepEqual(rootSeen.filter((r) => r !== null), [], 'expected root-context callbacks to see none');
});

test('traceActive accepts an explicit parent context and returns what fn returns', () => {
  const parent = tracer.startSpan('parent');
  const value = traceActive(tracer, 'with parent', {}, trace.setSpan(context.active(), parent), (span) => {
    assertPublished(span, 'sync traceActive with a parent context');
    span.end();
    return 42;
  });
  assert.equal(value, 42);
  assertNone('after the sync traceActive');
  parent.end();
});

test('traceActive rejects bad arguments', () => {
  assert.throws(() => traceActive(null, 'x', () => {}), { name: 'TypeError', message: /^tracer: expected/ });
  assert.throws(() => traceActive({}, 'x', () => {}), { name: 'TypeError', message: /^tracer: expected/ });
  assert.throws(() => traceActive(tracer, 5, () => {}), { name: 'TypeError', message: /^name: expected a string, got number/ });
  assert.throws(() => traceActive(tracer, 'x'), { name: 'RangeError', message: /expected \(tracer, name, \[options, \[context\]\], fn\), got 2 arguments/ });
  assert.throws(() => traceActive(tracer, 'x', {}, {}, {}, () => {}), { name: 'RangeError' });
  assert.throws(() => traceActive(tracer, 'x', {}), { name: 'TypeError', message: /^fn: expected a function as the last argument, got an object/ });
});
