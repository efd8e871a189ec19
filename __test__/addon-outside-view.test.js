'use strict';
// The first proof that a standard out-of-process reader finds the symbol: gdb (with libthread_db)
// resolves otel_thread_ctx_v1 per thread in a live Node process and reads the record it points to.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { ROOT, isRoot } = require('./helpers/addon');
const { needs } = require('./helpers/needs');

const hasGdb = (() => { try { execFileSync('gdb', ['--version']); return true; } catch { return false; } })();
const need = needs(!hasGdb ? 'gdb is not installed (apt-get install -y gdb)' : !isRoot ? 'attaching gdb needs root (or ptrace rights over the child)' : false);

const CHILD = `
  const { Worker } = require('node:worker_threads');
  const api = require(${JSON.stringify(ROOT)});
  const contexts = [
    ['11111111111111111111111111111111', '1111111111111111', 1],
    ['22222222222222222222222222222222', '2222222222222222', 0],
    ['0123456789abcdef0123456789abcdef', 'fedcba9876543210', 3],
  ];
  const [trace, span, flags] = contexts[0];
  api.setSpanContext(trace, span, flags);
  const threads = [{ tid: api.threadInfo().tid, trace, span, flags }];
  let pending = 2;
  for (const c of contexts.slice(1)) {
    const w = new Worker(\`
      const api = require(${JSON.stringify(ROOT)});
      const { parentPort, workerData: [t, s, f] } = require('node:worker_threads');
      api.setSpanContext(t, s, f);
      parentPort.postMessage(api.threadInfo().tid);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // park with the context set
    \`, { eval: true, workerData: c });
    w.once('message', (tid) => {
      threads.push({ tid, trace: c[0], span: c[1], flags: c[2] });
      if (--pending === 0) console.log(JSON.stringify(threads));
    });
  }
  setInterval(() => {}, 1000);
`;

function parseGdb(out) {
  // "Thread 3 (Thread 0x7f.. (LWP 1234) "node"):" then "0x7f..:\t0x11\t0x11 ..." lines
  const byTid = new Map();
  let tid = null;
  for (const line of out.split('\n')) {
    const t = /^Thread \d+ .*\(LWP (\d+)\)/.exec(line);
    if (t) { tid = Number(t[1]); if (!byTid.has(tid)) byTid.set(tid, { ptr: null, bytes: [] }); continue; }
    if (tid === null) continue;
    const p = /^\$\d+ = (0x[0-9a-f]+|0x0)$/.exec(line.trim());
    if (p) { byTid.get(tid).ptr = BigInt(p[1]); continue; }
    const m = /^0x[0-9a-f]+(?: <[^>]*>)?:\s+(.*)$/.exec(line.trim());
    if (m) byTid.get(tid).bytes.push(...m[1].trim().split(/\s+/).map((b) => parseInt(b, 16)));
  }
  return byTid;
}

// gdb's view of every thread: its otel_thread_ctx_v1 pointer and the record's 28-byte header.
function gdbRecords(pid) {
  const out = execFileSync('gdb', ['-p', String(pid), '-batch', '-nx',
    '-ex', 'set print thread-events off',
    '-ex', 'thread apply all -s p/x *(void**)&otel_thread_ctx_v1',
    '-ex', 'thread apply all -s x/28xb *(void**)&otel_thread_ctx_v1',
  ], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 90_000 });
  return { out, seen: parseGdb(out) };
}

test('gdb reads each thread record from outside the process', { skip: need.skip, timeout: 120_000 }, need.guard(async (t) => {
  const child = spawn(process.execPath, ['-e', CHILD], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => child.kill('SIGKILL'));
  const threads = await new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => { buf += d; if (buf.includes('\n')) resolve(JSON.parse(buf)); });
    child.once('exit', (c) => reject(new Error(`child exited early with ${c}`)));
  });
  const { out, seen } = gdbRecords(child.pid);
  for (const th of threads) {
    const s = seen.get(th.tid);
    assert.ok(s, `gdb did not list thread ${th.tid}:\n${out}`);
    assert.ok(s.ptr && s.ptr !== 0n, `thread ${th.tid}: otel_thread_ctx_v1 is NULL or unreadable:\n${out}`);
    const want = [...Buffer.from(th.trace + th.span, 'hex'), 1, th.flags, 0, 0];
    assert.deepEqual(s.bytes.slice(0, 28), want, `thread ${th.tid}: record bytes seen by gdb differ from what it set`);
  }
  // Threads that never loaded the addon in JS (libuv pool, V8 platform) have no record.
  const others = [...seen].filter(([tid]) => !threads.some((th) => th.tid === tid));
  for (const [tid, s] of others) assert.equal(s.ptr, 0n, `thread ${tid} has a record pointer but set no context`);
}));

// "None" is one thing whichever way it is written: the manager between callbacks and a direct
// clearSpanContext() both leave valid, flags and attrs size zero (the ids stay, ignored by
// readers). Seen from outside by gdb, and judged by thread-ctx dump when the reader is built.
const NONE_CHILD = `
  process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
  const { Worker } = require('node:worker_threads');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const api = require(${JSON.stringify(ROOT)});
  api.register();
  const tracer = new BasicTracerProvider().getTracer('none');
  const w = new Worker(\`
    const api = require(${JSON.stringify(ROOT)});
    const { parentPort } = require('node:worker_threads');
    api.setSpanContext('${'b'.repeat(32)}', '${'c'.repeat(16)}', 1);
    api.clearSpanContext();
    parentPort.postMessage(api.threadInfo().tid);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  \`, { eval: true });
  w.once('message', (workerTid) => tracer.startActiveSpan('A', async (span) => {
    await new Promise((resolve) => setTimeout(resolve, 1));
    const { traceId, spanId } = span.spanContext();
    span.end();
    // Back in the event loop: between callbacks the manager publishes none.
    setTimeout(() => console.log(JSON.stringify({ main: { tid: api.threadInfo().tid, ids: traceId + spanId },
      worker: { tid: workerTid, ids: '${'b'.repeat(32)}${'c'.repeat(16)}' } })), 10);
  }));
  setInterval(() => {}, 1000);
`;

test('none is the same from outside: between callbacks (manager) and after clearSpanContext (direct)', { skip: need.skip, timeout: 120_000 }, need.guard(async (t) => {
  const child = spawn(process.execPath, ['-e', NONE_CHILD], { stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT });
  t.after(() => child.kill('SIGKILL'));
  const threads = await new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => { buf += d; if (buf.includes('\n')) resolve(JSON.parse(buf)); });
    child.once('exit', (c) => reject(new Error(`child exited early with ${c}`)));
  });
  await new Promise((resolve) => setTimeout(resolve, 200)); // the main thread idle in the event loop
  const { out, seen } = gdbRecords(child.pid);
  for (const [who, th] of Object.entries(threads)) {
    const s = seen.get(th.tid);
    assert.ok(s && s.bytes.length >= 28, `gdb did not read the ${who} thread's record:\n${out}`);
    assert.deepEqual(s.bytes.slice(24, 28), [0, 0, 0, 0], `${who}: expected valid, flags and attrs size 0`);
    assert.equal(Buffer.from(s.bytes.slice(0, 24)).toString('hex'), th.ids, `${who}: expected the last ids left in place`);
  }
  const reader = path.join(ROOT, 'target', 'release', 'thread-ctx');
  if (!fs.existsSync(reader)) {
    t.diagnostic(`${reader} is not built: checked with gdb only`);
    return;
  }
  const dump = JSON.parse(execFileSync(reader, ['dump', String(child.pid), '--json'], { encoding: 'utf8' }));
  for (const [who, th] of Object.entries(threads)) {
    const row = dump.threads.find((r) => r.tid === th.tid);
    assert.equal(row && row.state, 'no_context', `${who}: thread-ctx dump should say no context: ${JSON.stringify(row)}`);
  }
}));
