'use strict';
// The real HTTP instrumentation with NodeTracerProvider.register({ contextManager }): inside the
// server handler (also after awaits) the record shows the instrumentation's server span; on the
// client side it follows the active span; between requests it shows none.

const test = require('node:test');
const assert = require('node:assert/strict');
const { trace, context, SpanKind } = require('@opentelemetry/api');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { lib, assertPublished, assertNone, assertMatchesActive, watchBetweenCallbacks, sleep } = require('./context-helpers');

const manager = new lib.ThreadContextManager();
const provider = new NodeTracerProvider();
provider.register({ contextManager: manager });
registerInstrumentations({ instrumentations: [new HttpInstrumentation()] });
const http = require('node:http'); // after the instrumentation, so it is patched
const tracer = trace.getTracer('otel-thread-ctx-http-test');

test('NodeTracerProvider.register({ contextManager }) enables and installs the manager', () => {
  assert.ok(manager.enabled, 'expected register() of the provider to enable the manager');
  context.with(trace.setSpan(context.active(), tracer.startSpan('probe')), () => assertMatchesActive('global with()'));
  assertNone('after the global with()');
});

test('http server handler and client callbacks, with instrumentation-http spans', async () => {
  const problems = [];
  const check = (where) => {
    try {
      assertMatchesActive(where);
    } catch (error) {
      problems.push(error.message);
    }
  };
  const serverSpans = [];
  const server = http.createServer(async (req, res) => {
    const span = trace.getActiveSpan();
    serverSpans.push(span && span.kind);
    check('server handler entry');
    await sleep(1);
    check('server handler after await');
    req.resume();
    req.on('end', () => {
      check('server request end listener');
      setImmediate(() => {
        check('server immediate before responding');
        res.end(JSON.stringify(span.spanContext()));
      });
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const watch = watchBetweenCallbacks();
  try {
    const port = server.address().port;
    const replies = await Promise.all([0, 1, 2, 3, 4].map((i) => tracer.startActiveSpan(`client ${i}`, async (span) => {
      const body = await new Promise((resolve, reject) => {
        http.get({ host: '127.0.0.1', port, path: `/${i}`, agent: false }, (res) => {
          check(`client ${i} response callback`);
          let data = '';
          res.on('data', (chunk) => { data += chunk; });
          res.on('end', () => { check(`client ${i} response end`); resolve(data); });
        }).on('error', reject);
      });
      assertPublished(span, `client ${i} after the response`);
      span.end();
      return JSON.parse(body);
    })));
    assert.equal(replies.length, 5);
    assert.deepEqual(serverSpans, [SpanKind.SERVER, SpanKind.SERVER, SpanKind.SERVER, SpanKind.SERVER, SpanKind.SERVER],
      'expected the instrumentation to run each handler in a server span');
    assert.equal(new Set(replies.map((r) => r.spanId)).size, 5, 'expected five distinct server spans');
    assert.deepEqual(problems, []);
  } finally {
    const { violations } = watch.stop();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    assert.deepEqual(violations, [], 'expected none between callbacks');
  }
  assertNone('after the requests');
});
