'use strict';
// The writer's entry arena: a ring of slots whose handles go stale when a slot is reused. Whatever
// was cached or stacked before, the record shows the right span or none, never another span.

const test = require('node:test');
const assert = require('node:assert/strict');
const { trace, context, ROOT_CONTEXT } = require('@opentelemetry/api');
const { setupTracing, assertPublished, assertNone, lib, immediate } = require('./context-helpers');
const { ENTRY_SLOTS } = require('../js/tls/thread-writer');

const { manager, tracer } = setupTracing({ attributes: ['http.route'] });
test.after(() => manager.disable());
const view = lib.recordView();

// The record's http.route value (attrs-data: key index byte, length byte, UTF-8 bytes), or undefined.
function recordRoute() {
  const route = lib.attributeKeyMap().indexOf('http.route');
  const end = 28 + (view[26] | (view[27] << 8));
  for (let at = 28; at < end; at += 2 + view[at + 1]) {
    if (view[at] === route) return Buffer.from(view.subarray(at + 2, at + 2 + view[at + 1])).toString('utf8');
  }
  return undefined;
}

// Builds the entries of more spans than the arena has slots: every earlier entry's slot is reused,
// by the entry of a span still live (so a stale handle would show another span, not none).
function churn(label) {
  const spans = [];
  for (let i = 0; i < ENTRY_SLOTS + 10; i++) {
    const span = tracer.startSpan(`${label} ${i}`);
    context.with(trace.setSpan(ROOT_CONTEXT, span), () => {});
    spans.push(span);
  }
  return () => { for (const span of spans) span.end(); };
}

test('a context switched to again after its entry slot was reused shows its own span', () => {
  const span = tracer.startSpan('long-lived');
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  context.with(ctx, () => assertPublished(span, 'first'));
  churn('churn');
  context.with(ctx, () => assertPublished(span, 'after reuse'));
  // A fresh context of the same span (the span's own cache is stale too).
  context.with(trace.setSpan(ROOT_CONTEXT, span), () => assertPublished(span, 'new context, after reuse'));
  span.end();
  context.with(ctx, () => assertNone('ended'));
});

test('an ended span stays none in contexts that outlive it, after its slot was reused', () => {
  const span = tracer.startSpan('ended');
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  context.with(ctx, () => assertPublished(span, 'live'));
  span.end();
  const endChurn = churn('churn');
  context.with(ctx, () => assertNone('ended, slot reused'));
  endChurn();
});

test('with() restores the outer span after thousands of spans were built inside it', () => {
  const outer = tracer.startSpan('outer');
  context.with(trace.setSpan(ROOT_CONTEXT, outer), () => {
    assertPublished(outer, 'before');
    churn('inner');
    assertPublished(outer, 'after the inner spans');
  });
  assertNone('outside');
  outer.end();
});

test('an async callback resumes with its span after its slot was reused meanwhile', async () => {
  const span = tracer.startSpan('async');
  await context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
    assertPublished(span, 'before await');
    await immediate();
    churn('meanwhile');
    await immediate();
    assertPublished(span, 'after await');
  });
  span.end();
});

test('record attributes survive a reused slot, with changes made while it was gone', () => {
  const span = tracer.startSpan('route', { attributes: { 'http.route': '/a' } });
  const ctx = trace.setSpan(ROOT_CONTEXT, span);
  context.with(ctx, () => assert.equal(recordRoute(), '/a'));
  churn('churn');
  span.setAttribute('http.route', '/b'); // its entry is stale: the change waits in the span's state
  context.with(ctx, () => {
    assertPublished(span, 'rebuilt');
    assert.equal(recordRoute(), '/b');
    span.setAttribute('http.route', '/c');
    assert.equal(recordRoute(), '/c', 'a live entry is rewritten in place');
  });
  span.end();
});
