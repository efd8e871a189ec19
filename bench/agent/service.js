'use strict';
// A busy instrumented service for bench/agent/run.js: the OpenTelemetry SDK with this package's
// context manager and record attribute http.route; spans named after routes take turns burning
// CPU in their own functions, forever; with OTEL_THREAD_CTX_ALLOCATIONS set (bench/agent/run.js
// --alloc) each also allocates as it works, as a service builds responses. Prints "ready" once it
// publishes. Not shipped.
process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
const { trace } = require('@opentelemetry/api');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const lib = require('../..');

process.env.OTEL_SERVICE_NAME = process.env.OTEL_SERVICE_NAME || 'bench-agent-service';
new NodeTracerProvider().register({ contextManager: new lib.ThreadContextManager() });
lib.register({ attributes: ['http.route'] });
const tracer = trace.getTracer('bench-agent');

const ALLOCATES = Boolean(process.env.OTEL_THREAD_CTX_ALLOCATIONS);
let kept;
function renderPage(ms) {
  const end = performance.now() + ms;
  let x = 1;
  while (performance.now() < end) {
    for (let i = 0; i < 20000; i++) x = (x * 31 + i) | 0;
    if (ALLOCATES) kept = new Array(512).fill(x); // ~4 KiB per 20,000 iterations
  }
  return x;
}
function searchIndex(ms) {
  const end = performance.now() + ms;
  let y = 7;
  while (performance.now() < end) for (let i = 0; i < 20000; i++) y = (y ^ (i * 17)) + 3 | 0;
  return y;
}

async function request(route, work) {
  await tracer.startActiveSpan(`GET ${route}`, { attributes: { 'http.route': route } }, async (span) => {
    work(2);
    await new Promise(setImmediate);
    work(2);
    span.end();
  });
}

(async () => {
  process.stdout.write('ready\n');
  for (;;) {
    await request('/page', renderPage);
    await request('/search', searchIndex);
  }
})();
