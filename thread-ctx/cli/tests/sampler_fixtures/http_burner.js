// Leak/coverage test service (not shipped): node:http with the real OpenTelemetry SDK,
// instrumentation-http and otel-thread-ctx's ThreadContextManager, serving on the main thread and
// on one worker thread (one server each). Every GET /burn runs a child span "burn" that burns CPU
// in BURN_PIECES pieces of BURN_PIECE_MS, separated by timers and immediates, so that requests on
// the same thread interleave. Each thread logs, with process.hrtime (CLOCK_MONOTONIC) times:
//   spans:  {kind: 'server' | 'burn', traceId, spanId, start, end} where [start, end] encloses
//           every moment the span can be the active context (see the comments below);
//   pieces: {spanId, start, end} of each synchronous burn: the span is active all through it.
// GET /log returns this thread's log as JSON ({tid, spans, pieces}; times as decimal strings).
// Run with --perf-basic-prof-only-functions so the test can find burnCpuForSpanTest's code.
// Prints "pid P", one "thread TID 0... 0... 00 RECORD_ADDRESS PORT" line per serving thread (no
// context published yet), then "ready".
// Usage: node --perf-basic-prof-only-functions http_burner.js PACKAGE_DIR [tls|nodejs]
// (the ThreadContextManager's schema, tls by default).
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');

const BURN_PIECES = 4;
const BURN_PIECE_MS = 1;

const { pkg, schema } = isMainThread ? { pkg: process.argv[2], schema: process.argv[3] ?? 'tls' } : workerData;
const { ThreadContextManager, threadInfo } = require(pkg);
const { trace, context, ROOT_CONTEXT, SpanKind } = require('@opentelemetry/api');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');

const now = () => process.hrtime.bigint();
const spans = [];
const pieces = [];
const serverSpans = new Map();

// Server spans: instrumentation-http starts them before activating them, so onStart's time
// precedes any moment they are active. Their end is set by the request handler.
class ServerSpanLog {
  onStart(span) {
    if (span.kind !== SpanKind.SERVER) return;
    const { traceId, spanId } = span.spanContext();
    const entry = { kind: 'server', traceId, spanId, start: now(), end: null };
    spans.push(entry);
    serverSpans.set(spanId, entry);
  }
  onEnd() {}
  forceFlush() { return Promise.resolve(); }
  shutdown() { return Promise.resolve(); }
}

const provider = new NodeTracerProvider({ spanProcessors: [new ServerSpanLog()] });
const manager = new ThreadContextManager({ schema });
if (manager.schema !== schema) throw new Error(`schema ${schema} is not in effect: ${manager.schemaFallback}`);
provider.register({ contextManager: manager });
registerInstrumentations({ instrumentations: [new HttpInstrumentation()] });
const tracer = trace.getTracer('http-burner');
// Required after registerInstrumentations so that the HTTP instrumentation can patch it.
const http = require('node:http');

// The CPU burner the test finds in the V8 perf map by name: keep the name unique.
function burnCpuForSpanTest(ms) {
  const until = performance.now() + ms;
  let x = 1;
  do {
    for (let i = 0; i < 2000; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
  } while (performance.now() < until);
  return x;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const immediate = () => new Promise((r) => setImmediate(r));

async function burnRequest() {
  // Taken before the span exists and after its last callback returned (all of its timers are
  // awaited, nothing of it is left pending): the span cannot be active outside [start, end].
  const start = now();
  const entry = await tracer.startActiveSpan('burn', async (span) => {
    const { traceId, spanId } = span.spanContext();
    for (let i = 0; i < BURN_PIECES; i++) {
      const pieceStart = now();
      burnCpuForSpanTest(BURN_PIECE_MS);
      pieces.push({ spanId, start: String(pieceStart), end: String(now()) });
      await (i % 2 === 0 ? sleep(1) : immediate());
    }
    span.end();
    return { kind: 'burn', traceId, spanId, start };
  });
  spans.push({ ...entry, end: now() });
}

function serve(onListening) {
  const tid = threadInfo().tid;
  const server = http.createServer(async (req, res) => {
    const server = serverSpans.get(trace.getSpan(context.active())?.spanContext().spanId);
    if (server) {
      // instrumentation-http ends the span in its own 'close' listener, and listeners of this
      // (bound) response run in the span's context: the span's window closes in an immediate
      // scheduled outside any span once this last listener has returned.
      res.on('close', () => context.with(ROOT_CONTEXT, () => setImmediate(() => { server.end = now(); })));
    }
    if (req.url === '/log') {
      const times = (e) => ({ ...e, start: String(e.start), end: e.end === null ? null : String(e.end) });
      res.end(JSON.stringify({ tid, spans: spans.map(times), pieces }));
      return;
    }
    if (req.url !== '/burn') {
      res.writeHead(404).end();
      return;
    }
    await burnRequest();
    res.end('burnt\n');
  });
  server.listen(0, '127.0.0.1', () => onListening(
    `thread ${tid} ${'0'.repeat(32)} ${'0'.repeat(16)} 00 0x${threadInfo().recordAddress.toString(16)} ${server.address().port}`));
}

if (isMainThread) {
  const lines = [];
  const ready = (line) => {
    lines.push(line);
    if (lines.length === 2) process.stdout.write(`pid ${process.pid}\n${lines.join('\n')}\nready\n`);
  };
  serve(ready);
  const w = new Worker(__filename, { workerData: { pkg, schema } });
  w.on('message', ready);
  w.on('error', (e) => { console.error(e); process.exit(1); });
} else {
  serve((line) => parentPort.postMessage(line));
}
