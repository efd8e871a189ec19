'use strict';
// Record attributes seen from outside the process: gdb (with libthread_db) resolves each thread's
// otel_thread_ctx_v1 and dumps the whole record while the threads are parked inside a span. The
// main thread serves a real request through instrumentation-http; a worker overflows its record.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { spawn, execFileSync } = require('node:child_process');
const { ROOT, isRoot } = require('./helpers/addon');
const { needs } = require('./helpers/needs');

const hasGdb = (() => { try { execFileSync('gdb', ['--version']); return true; } catch { return false; } })();
const need = needs(!hasGdb ? 'gdb is not installed (apt-get install -y gdb)' : !isRoot ? 'attaching gdb needs root (or ptrace rights over the child)' : false);

const KEYS = ['http.route', 'http.request.method', 'long.value', 'big.a', 'big.b'];
const ROUTE = '/café/€/{id}/😀';
const LONG = 'ü'.repeat(140); // 280 bytes: cut to 254 (127 characters), not 255
const BIG = 'b'.repeat(200);

const CHILD = `
  process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
  const { trace } = require('@opentelemetry/api');
  const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
  const { registerInstrumentations } = require('@opentelemetry/instrumentation');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
  const { Worker } = require('node:worker_threads');
  const lib = require(${JSON.stringify(ROOT)});
  const say = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
  const park = () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  const provider = new NodeTracerProvider();
  provider.register({ contextManager: new lib.ThreadContextManager() });
  lib.register({ attributes: ${JSON.stringify(KEYS)} });
  registerInstrumentations({ instrumentations: [new HttpInstrumentation()] });
  const http = require('node:http');
  const worker = new Worker(\`
    const { trace } = require('@opentelemetry/api');
    const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
    const { parentPort } = require('node:worker_threads');
    const lib = require(${JSON.stringify(ROOT)});
    lib.register();
    trace.setGlobalTracerProvider(new BasicTracerProvider());
    const big = ${JSON.stringify(BIG)};
    const attributes = { 'http.route': big, 'http.request.method': big, 'long.value': big, 'big.a': big, 'big.b': 'z' };
    trace.getTracer('w').startActiveSpan('overflow', { attributes }, (span) => {
      parentPort.postMessage({ tid: lib.threadInfo().tid, ...span.spanContext(), dropped: lib.droppedAttributeCount() });
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    });
  \`, { eval: true });
  worker.once('message', (w) => {
    const server = http.createServer((req, res) => {
      const span = trace.getActiveSpan();
      span.setAttribute('http.route', ${JSON.stringify(ROUTE)});
      span.setAttribute('long.value', ${JSON.stringify(LONG)});
      say({ worker: w, main: { tid: lib.threadInfo().tid, ...span.spanContext() } });
      park(); // inside the request span, record published
    });
    server.listen(0, '127.0.0.1', () => say({ port: server.address().port }));
  });
  setInterval(() => {}, 1000);
`;

function parseGdb(out) {
  const byTid = new Map();
  let tid = null;
  for (const line of out.split('\n')) {
    const t = /^Thread \d+ .*\(LWP (\d+)\)/.exec(line);
    if (t) { tid = Number(t[1]); if (!byTid.has(tid)) byTid.set(tid, []); continue; }
    const m = tid !== null && /^0x[0-9a-f]+(?: <[^>]*>)?:\s+(.*)$/.exec(line.trim());
    if (m) byTid.get(tid).push(...m[1].trim().split(/\s+/).map((b) => parseInt(b, 16)));
  }
  return byTid;
}

// Independent of js/record/attrs-data.js: UTF-8 cut at 255 bytes, backed off to a character
// boundary.
function entry(key, value) {
  let b = Buffer.from(value, 'utf8');
  if (b.length > 255) {
    let end = 255;
    while ((b[end] & 0xc0) === 0x80) end--;
    b = b.subarray(0, end);
  }
  return Buffer.concat([Buffer.from([KEYS.indexOf(key), b.length]), b]);
}

function expectedRecord({ traceId, spanId, traceFlags }, attrs) {
  const data = Buffer.concat(attrs.map(([k, v]) => entry(k, v)));
  return [...Buffer.from(traceId + spanId, 'hex'), 1, traceFlags, data.length & 0xff, data.length >> 8, ...data];
}

test('http.route and friends in the records, byte-exact, read by gdb from outside', { skip: need.skip, timeout: 120_000 }, need.guard(async (t) => {
  const child = spawn(process.execPath, ['-e', CHILD], { stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT });
  t.after(() => child.kill('SIGKILL'));
  const messages = [];
  let wake = null;
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    for (let nl; (nl = buf.indexOf('\n')) >= 0; buf = buf.slice(nl + 1)) { messages.push(JSON.parse(buf.slice(0, nl))); if (wake) wake(); }
  });
  const next = async () => { while (messages.length === 0) await new Promise((r) => { wake = r; child.once('exit', r); if (child.exitCode !== null) r(); }); if (messages.length === 0) throw new Error('child exited early'); return messages.shift(); };
  const { port } = await next();
  const req = http.get({ host: '127.0.0.1', port, path: '/caf%C3%A9/1', agent: false });
  req.on('error', () => {}); // the child is killed with the request open
  const { main, worker } = await next();
  assert.equal(worker.dropped, 1, 'the worker should count the one entry that did not fit');
  const out = execFileSync('gdb', ['-p', String(child.pid), '-batch', '-nx',
    '-ex', 'set print thread-events off',
    '-ex', 'thread apply all -s x/640xb *(void**)&otel_thread_ctx_v1',
  ], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 90_000 });
  const seen = parseGdb(out);
  const check = (who, th, attrs) => {
    const bytes = seen.get(th.tid);
    assert.ok(bytes && bytes.length === 640, `${who}: gdb did not dump thread ${th.tid}'s record:\n${out.slice(0, 2000)}`);
    const want = expectedRecord(th, attrs);
    assert.deepEqual(bytes.slice(0, want.length), want, `${who}: record bytes seen by gdb differ from the expected header + attrs-data`);
  };
  // instrumentation-http set http.request.method when it started the span; the handler set the rest.
  check('main thread (request span)', main, [['http.route', ROUTE], ['http.request.method', 'GET'], ['long.value', LONG]]);
  assert.equal(entry('long.value', LONG).length - 2, 254, 'test premise: the long value is cut to 254 bytes');
  check('worker (overflow)', worker, [['http.route', BIG], ['http.request.method', BIG], ['long.value', BIG], ['big.b', 'z']]);
  req.destroy();
}));
