'use strict';
// setSpanContext / clearSpanContext called directly while a ThreadContextManager is enabled: the
// write goes through the thread's writer and lasts until the manager's next switch, which
// publishes what the manager says again. So a direct write inside span A can never leave a stale
// record in A's later callbacks (timers, awaits, bound functions), nor in other callbacks.

const test = require('node:test');
const assert = require('node:assert/strict');
const { context } = require('@opentelemetry/api');
const { setupTracing, assertPublished, assertNone, lib, sleep, immediate } = require('./context-helpers');

const { manager, tracer } = setupTracing();
const B = { traceId: 'b'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 1 };
const setB = () => lib.setSpanContext(B.traceId, B.spanId, B.traceFlags);

test("a direct write inside span A lasts until the next switch; A's later callbacks publish A", async () => {
  await tracer.startActiveSpan('A', async (span) => {
    const bound = manager.bind(context.active(), () => lib.getSpanContext());
    const timer = new Promise((resolve) => setTimeout(() => resolve(lib.getSpanContext()), 1));
    const tick = new Promise((resolve) => process.nextTick(() => resolve(lib.getSpanContext())));
    setB();
    assertPublished(B, 'right after setSpanContext');
    assert.equal(bound().spanId, span.spanContext().spanId, 'a function bound to A publishes A');
    assertPublished(span, 'after the bound function returned (its with() restored what the manager says)');
    setB();
    await null;
    assertPublished(span, 'after an await');
    setB();
    assert.equal((await tick).spanId, span.spanContext().spanId, 'a nextTick callback armed in A');
    setB();
    assert.equal((await timer).spanId, span.spanContext().spanId, 'a timer armed in A (the reported bug: it saw B)');
    assertPublished(span, 'after awaiting the timer');
    lib.clearSpanContext();
    assertNone('right after clearSpanContext');
    await sleep(1);
    assertPublished(span, 'after an await that followed clearSpanContext');
    setB();
    span.end();
  });
  assertNone('after the span');
});

test('a direct write in one callback does not leak into the next callbacks', async () => {
  await new Promise((resolve) => setImmediate(() => {
    setB();
    assertPublished(B, 'in the callback that wrote it');
    resolve();
  }));
  assertNone('in the next callback (a promise continuation)');
  await immediate();
  assertNone('in a later immediate');
  await tracer.startActiveSpan('C', async (span) => {
    await sleep(1);
    assertPublished(span, 'a span after the direct write');
    span.end();
  });
});

test('without an enabled manager, a direct write stays until the next direct write', async () => {
  manager.disable();
  try {
    setB();
    await sleep(1);
    await immediate();
    assertPublished(B, 'after callbacks, with no manager');
    lib.clearSpanContext();
    await sleep(1);
    assertNone('after clearSpanContext, with no manager');
  } finally {
    manager.enable();
  }
  assertNone('enable() starts from none');
});
