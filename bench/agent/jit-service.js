'use strict';
// A service for bench/agent/soak.js whose perf map keeps growing: the OpenTelemetry SDK with this
// package's context manager, and spans that each compile and run a new JS function (a fresh
// `new Function` body every few milliseconds), so that V8 keeps writing new code and new perf-map
// lines under --perf-basic-prof --interpreted-frames-native-stack. SERVICE_LIFETIME_MS ends it.
// Prints "ready" once it publishes. Not shipped.
process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
const { trace } = require('@opentelemetry/api');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const lib = require('../..');

process.env.OTEL_SERVICE_NAME = process.env.OTEL_SERVICE_NAME || 'bench-jit-service';
new NodeTracerProvider().register({ contextManager: new lib.ThreadContextManager() });
lib.register({ attributes: ['http.route'] });
const tracer = trace.getTracer('bench-jit');
const lifetime = Number(process.env.SERVICE_LIFETIME_MS || 0);
if (lifetime > 0) setTimeout(() => process.exit(0), lifetime).unref();

let serial = 0;
function freshFunction() {
  serial++;
  // A distinct body (and name) each time: V8 cannot reuse earlier code for it.
  // eslint-disable-next-line no-new-func
  return new Function('n', `"use strict"; let x = ${serial}; for (let i = 0; i < n; i++) x = (x * 31 + i + ${serial % 97}) | 0; return x; //# sourceURL=generated-${serial}.js`);
}

async function request() {
  await tracer.startActiveSpan('GET /generated', { attributes: { 'http.route': '/generated' } }, async (span) => {
    const f = freshFunction();
    const end = performance.now() + 3;
    let x = 0;
    while (performance.now() < end) x ^= f(2000);
    await new Promise(setImmediate);
    span.end();
    return x;
  });
}

(async () => {
  process.stdout.write('ready\n');
  for (;;) await request();
})();
