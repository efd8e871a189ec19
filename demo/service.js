'use strict';
// The demo service: node:http instrumented the way the README sets a service up: the
// OpenTelemetry SDK (NodeSDK) with otel-thread-ctx's context manager as its one extra option.
// Three routes with different CPU profiles. Finished spans go over OTLP to the Collector named by
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (where the spanprofiles connector explains each one), and/or
// to a JSON-lines log (span-log.js) when SPAN_LOG is set (the demo's fallback without root reads
// it); the profiler outside needs nothing from the service but the package and that option.
//   PORT=0 SPAN_LOG=/tmp/spans.jsonl node demo/service.js   -> prints {"pid":..,"port":..}
const { trace, context } = require('@opentelemetry/api');
const { NodeSDK } = require('@opentelemetry/sdk-node');
const { BatchSpanProcessor, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { ThreadContextManager } = require('..');
const { JsonLinesSpanExporter } = require('./span-log');

// The context manager publishes the process context (service.name and the rest of the SDK's
// resource) and keeps each thread's record on the active span; `attributes` makes every record
// carry its request's http.route, so each CPU sample knows its route.
const sdk = new NodeSDK({
  serviceName: process.env.OTEL_SERVICE_NAME || 'demo-shop',
  resource: resourceFromAttributes({ 'service.version': '1.0.0' }),
  contextManager: new ThreadContextManager({ attributes: ['http.route'] }),
  spanProcessors: [
    ...(process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? [new BatchSpanProcessor(new OTLPTraceExporter())] : []),
    ...(process.env.SPAN_LOG ? [new SimpleSpanProcessor(new JsonLinesSpanExporter(process.env.SPAN_LOG))] : []),
  ],
  instrumentations: [new HttpInstrumentation()],
});
sdk.start();
const tracer = trace.getTracer('demo');
// Required after sdk.start() so that the HTTP instrumentation can patch it.
const http = require('node:http');

// CPU-burning pieces, named so they stand out in flame graphs.
function renderReport(n) { let acc = 0; for (let i = 1; i < n; i++) acc += Math.sqrt(i) * Math.sin(i); return acc; }
function rankSearchResults(q) { const a = []; for (let i = 0; i < 20000; i++) a.push(((i * 2654435761) ^ q.length) >>> 0); return a.sort((x, y) => x - y)[0]; }
function formatUser(id) { return JSON.stringify({ id, name: `user-${id}`, tags: Array.from({ length: 20 }, (_, i) => `t${i}`) }); }

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tick = () => new Promise((r) => setImmediate(r));

async function db(name, fn) {
  return tracer.startActiveSpan(name, async (span) => {
    try { await tick(); return fn(); } finally { span.end(); }
  });
}

const routes = [
  [/^\/api\/report$/, '/api/report', async () => {
    let total = 0;
    for (let i = 0; i < 4; i++) { total += renderReport(60000); await tick(); }
    total += await db('db.aggregate', () => renderReport(40000));
    return { total };
  }],
  [/^\/api\/search$/, '/api/search', async (url) => {
    const q = url.searchParams.get('q') || '';
    const hits = await db('db.search', () => rankSearchResults(q));
    await sleep(1);
    return { q, best: rankSearchResults(q + hits) };
  }],
  [/^\/api\/users\/(\d+)$/, '/api/users/:id', async (url, m) => {
    await Promise.resolve();
    return JSON.parse(await db('db.user', () => formatUser(Number(m[1]))));
  }],
];

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://localhost');
  const span = trace.getSpan(context.active());
  for (const [re, route, handler] of routes) {
    const m = re.exec(url.pathname);
    if (!m) continue;
    span?.setAttribute('http.route', route);
    span?.updateName(`${req.method} ${route}`);
    const body = JSON.stringify(await handler(url, m));
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    return;
  }
  res.writeHead(404).end();
});

server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  console.log(JSON.stringify({ pid: process.pid, port: server.address().port }));
});
process.on('SIGTERM', () => server.close(() => sdk.shutdown().finally(() => process.exit(0))));
