'use strict';
// The end-to-end test's service: node:http with the OpenTelemetry SDK (NodeSDK, its OTLP trace
// exporter chosen by OTEL_TRACES_EXPORTER=otlp and sent to the Collector the environment
// names) and otel-thread-ctx's context manager, as the README wires a service. Each request's
// work runs in a handler span (`handle /ROUTE`, attribute e2e.handler) inside the server span, as
// a framework's handler spans do, so that a span's own CPU (cpu.span_ms) and its trace's
// (cpu.trace_ms) differ. Its routes:
//   /hog    20-40 ms of synchronous CPU in hogCPU
//   /wait   awaits a 30 ms timer and answers
//   /alloc  allocates ~8 MB in allocateRows
//   /block  blocks the thread for 30 ms inside its span (Atomics.wait), off CPU
//   PORT=0 node __test__/e2e/service.js   -> prints {"pid":..,"port":..}
const { trace, context } = require('@opentelemetry/api');
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { serve } = require('./serve');
const { ThreadContextManager } = require('../..');

const sdk = new NodeSDK({
  serviceName: process.env.OTEL_SERVICE_NAME || 'e2e-shop',
  contextManager: new ThreadContextManager({ attributes: ['http.route'], allocations: true }),
  instrumentations: [new HttpInstrumentation()],
});
sdk.start();
// Required after sdk.start() so that the HTTP instrumentation can patch it.
const http = require('node:http');

function hogCPU(ms) {
  const end = performance.now() + ms;
  let acc = 0;
  while (performance.now() < end) for (let i = 0; i < 1000; i++) acc += Math.sqrt(i);
  return acc;
}

function allocateRows() {
  const rows = [];
  for (let i = 0; i < 40_000; i++) rows.push({ id: i, name: `row-${i}`, tags: [i, i + 1, i + 2] });
  return rows.length;
}

const blocker = new Int32Array(new SharedArrayBuffer(4));
function blockFor(ms) {
  Atomics.wait(blocker, 0, 0, ms);
}

const tracer = trace.getTracer('e2e-service');

const routes = {
  // The CPU the kernel gave the request (all of the process's threads, mostly this one): what
  // tells the test whether a busy machine preempted the service.
  '/hog': async (span) => {
    const before = process.cpuUsage();
    hogCPU(20 + Math.random() * 20);
    const used = process.cpuUsage(before);
    span.setAttribute('e2e.cpu_ms', (used.user + used.system) / 1000);
  },
  '/wait': () => new Promise((resolve) => setTimeout(resolve, 30)),
  '/alloc': async () => allocateRows(),
  '/block': async () => blockFor(30),
};

const server = http.createServer(async (req, res) => {
  const route = new URL(req.url, 'http://localhost').pathname;
  const handler = routes[route];
  if (!handler) {
    res.writeHead(404).end();
    return;
  }
  const serverSpan = trace.getSpan(context.active());
  serverSpan?.setAttribute('http.route', route);
  serverSpan?.updateName(`${req.method} ${route}`);
  await tracer.startActiveSpan(`handle ${route}`, { attributes: { 'e2e.handler': route } }, async (span) => {
    try {
      await handler(span);
    } finally {
      span.end();
    }
  });
  res.writeHead(200).end('ok');
});

serve(server, sdk);
