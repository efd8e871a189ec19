'use strict';
// The demo service: node:http + the OpenTelemetry SDK + otel-thread-ctx's context manager. Three
// routes with different CPU profiles; finished spans are logged (JSON lines) so the demo can name
// the routes and traces behind the CPU samples it takes from outside.
//   PORT=0 SPAN_LOG=/tmp/spans.jsonl node demo/service.js   -> prints {"pid":..,"port":..}
const fs = require('node:fs');
const { trace, context } = require('@opentelemetry/api');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { ThreadContextManager, publishProcessContext, registerAttributeKeys } = require('..');

// Span log for the demo's report: which route each span id belongs to.
class JsonLinesExporter {
  constructor(path) { this.fd = path ? fs.openSync(path, 'w') : null; }
  export(spans, done) {
    if (this.fd !== null) {
      const lines = spans.map((s) => JSON.stringify({
        traceId: s.spanContext().traceId,
        spanId: s.spanContext().spanId,
        parentSpanId: s.parentSpanContext?.spanId ?? s.parentSpanId ?? null,
        name: s.name,
        route: s.attributes['http.route'] ?? null,
        startMs: s.startTime[0] * 1e3 + s.startTime[1] / 1e6, // epoch
        durationMs: s.duration[0] * 1e3 + s.duration[1] / 1e6,
      })).join('\n') + '\n';
      fs.writeSync(this.fd, lines);
    }
    done({ code: 0 });
  }
  shutdown() { if (this.fd !== null) fs.closeSync(this.fd); return Promise.resolve(); }
}

const resource = resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME || 'demo-shop', 'service.version': '1.0.0' });
const provider = new NodeTracerProvider({ resource, spanProcessors: [new SimpleSpanProcessor(new JsonLinesExporter(process.env.SPAN_LOG))] });
provider.register({ contextManager: new ThreadContextManager() });
// The OTEP 4719 process context (profilers read it first) and the attributes records carry:
// every CPU sample then knows its request's route, even for traces the SDK did not sample.
publishProcessContext({ resource });
registerAttributeKeys(['http.route', 'http.request.method']);
registerInstrumentations({ instrumentations: [new HttpInstrumentation()] });
const tracer = trace.getTracer('demo');
// Required after registerInstrumentations so that the HTTP instrumentation can patch it.
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
process.on('SIGTERM', () => server.close(() => provider.shutdown().then(() => process.exit(0))));
