'use strict';
// Shared by the context-*.test.js files: tracing set up with the real SDK and assertions that
// read the record back from this thread's page (getSpanContext()).

const assert = require('node:assert/strict');
const { createHook } = require('node:async_hooks');
const { trace, context } = require('@opentelemetry/api');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
// Fail loudly when the addon does not load, instead of the package's no-op fallback.
process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
const lib = require('..');

function setupTracing(registerOptions) {
  const manager = lib.register(registerOptions);
  const provider = new BasicTracerProvider();
  trace.setGlobalTracerProvider(provider);
  return { manager, provider, tracer: trace.getTracer('otel-thread-ctx-test') };
}

function describeRecord(record) {
  return record === null ? 'none (valid 0)' : `trace ${record.traceId} span ${record.spanId} flags ${record.traceFlags}`;
}

function sameSpan(record, spanContext) {
  return record !== null && record.traceId === spanContext.traceId &&
    record.spanId === spanContext.spanId && record.traceFlags === spanContext.traceFlags;
}

// The record must show `span` (a Span or a SpanContext).
function assertPublished(span, where) {
  const expected = typeof span.spanContext === 'function' ? span.spanContext() : span;
  const record = lib.getSpanContext();
  assert.ok(sameSpan(record, expected),
    `${where}: expected the record to show trace ${expected.traceId} span ${expected.spanId} ` +
    `flags ${expected.traceFlags}, it shows ${describeRecord(record)}`);
}

function assertNone(where) {
  const record = lib.getSpanContext();
  assert.equal(record, null, `${where}: expected the record to show none, it shows ${describeRecord(record)}`);
}

// The record must show the span of the active context (or none without one).
function assertMatchesActive(where) {
  const span = trace.getSpan(context.active());
  if (span === undefined || !trace.isSpanContextValid(span.spanContext())) assertNone(where);
  else assertPublished(span, where);
}

// Watches the moments between callbacks: installed after the manager, its `after` hook runs after
// the manager's, so when the outermost callback ends the record must already show none.
function watchBetweenCallbacks() {
  let depth = 0;
  let checks = 0;
  const violations = [];
  const hook = createHook({
    before() { depth++; },
    after() {
      if (depth > 0 && --depth === 0) {
        checks++;
        const record = lib.getSpanContext();
        if (record !== null && violations.length < 10) violations.push(describeRecord(record));
      }
    },
  }).enable();
  return {
    stop() {
      hook.disable();
      return { checks, violations };
    },
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const immediate = () => new Promise((resolve) => setImmediate(resolve));

module.exports = {
  lib, setupTracing, assertPublished, assertNone, assertMatchesActive, watchBetweenCallbacks,
  describeRecord, sameSpan, sleep, immediate,
};
