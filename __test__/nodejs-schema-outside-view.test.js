'use strict';
// Schema 'nodejs' seen from outside the process, by a reader that shares no code with the package:
// gdb attaches to a live Node process and, in its own Python, walks each thread's
// otel_thread_ctx_nodejs_v1 -> the CPED slot -> the AsyncContextFrame's hash table -> the entry
// keyed by the published AsyncLocalStorage -> the holder's internal field 0 -> the OTEP 4947
// record, as RFC #1861's latest text has a reader do it: the V8 layout the schema fixes, the
// record slot offset from the struct's byte at 2*ptr+4, nothing else from the process context
// (decoded by protoc, process-context-reader.js) but the schema version.
// The process is parked at chosen moments of interleaved async chains (after each kind of
// resumption, in a worker, in the root context, in an ended span's context), each parked on a
// blocking read of stdin while gdb looks.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { ROOT, isRoot } = require('./helpers/addon');
const { skipNodejs } = require('./nodejs-schema-helpers');
const { needs } = require('./helpers/needs');
const { hasProtoc, readProcessContext, decodePayload } = require('./process-context-reader');

const hasGdb = (() => { try { execFileSync('gdb', ['--version']); return true; } catch { return false; } })();
// This runtime without schema 'nodejs' is not a machine that lacks something: a plain skip.
const need = needs(!skipNodejs && (!hasGdb ? 'gdb is not installed (apt-get install -y gdb)'
  : !isRoot ? 'attaching gdb needs root (or ptrace rights over the child)'
    : !hasProtoc ? 'protoc is not installed (apt-get install -y protobuf-compiler)' : false));

// The child: four interleaved chains, each in its own span, resuming through a different kind of
// callback at each step; at chosen steps the running chain parks the main thread (a blocking read
// of stdin) after printing what a reader must see. A worker parks in its own span meanwhile.
const WORKER = `
  const { parentPort } = require('node:worker_threads');
  const { trace, context, ROOT_CONTEXT } = require('@opentelemetry/api');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const lib = require(${JSON.stringify(ROOT)});
  lib.register({ schema: 'nodejs' });
  const span = new BasicTracerProvider().getTracer('w').startSpan('worker');
  context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
    await null;
    parentPort.postMessage({ tid: lib.threadInfo().tid, ids: span.spanContext().traceId + span.spanContext().spanId });
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  });
`;

const CHILD = `
  process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
  const fs = require('node:fs');
  const { EventEmitter } = require('node:events');
  const { Worker } = require('node:worker_threads');
  const { trace, context, ROOT_CONTEXT } = require('@opentelemetry/api');
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const lib = require(${JSON.stringify(ROOT)});
  const manager = lib.register({ schema: 'nodejs' });
  if (manager.schema !== 'nodejs') throw new Error('schema nodejs fell back: ' + manager.schemaFallback);
  const tracer = new BasicTracerProvider().getTracer('outside-view');
  const ids = (span) => span.spanContext().traceId + span.spanContext().spanId;
  const park = (what) => {
    fs.writeSync(1, JSON.stringify(what) + '\\n');
    fs.readSync(0, Buffer.alloc(1)); // blocks the thread until the test has looked
  };
  const emitter = new EventEmitter();
  const resumptions = [
    ['await null', () => null],
    ['setImmediate', () => new Promise((r) => setImmediate(r))],
    ['setTimeout', () => new Promise((r) => setTimeout(r, 1))],
    ['process.nextTick', () => new Promise((r) => process.nextTick(r))],
    ['fs.promises.stat', () => fs.promises.stat(${JSON.stringify(__filename)})],
    ['bound emitter', () => new Promise((r) => { emitter.once('go', r); setImmediate(() => emitter.emit('go')); })],
  ];
  const worker = new Worker(${JSON.stringify(WORKER)}, { eval: true });
  worker.once('message', async (w) => {
    const main = lib.threadInfo().tid;
    let step = 0;
    const parkAt = new Set([1, 6, 11, 16, 21, 26]); // one park per resumption kind, chains interleaved
    await Promise.all([0, 1, 2, 3].map((chain) => {
      const span = tracer.startSpan('chain ' + chain);
      return context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
        for (let round = 0; round < 8; round++) {
          const [kind, resume] = resumptions[(round + chain) % resumptions.length];
          await resume();
          if (parkAt.has(++step)) park({ main, worker: w, expect: 'span', ids: ids(span), kind, chain });
        }
        span.end();
      });
    }));
    park({ main, worker: w, expect: 'none', kind: 'root context' });
    const ended = tracer.startSpan('ended');
    await context.with(trace.setSpan(ROOT_CONTEXT, ended), async () => {
      ended.end();
      await new Promise((r) => setTimeout(r, 1));
      park({ main, worker: w, expect: 'ended', ids: ids(ended), kind: 'timer in an ended span' });
    });
    fs.writeSync(1, JSON.stringify({ done: true }) + '\\n');
    process.exit(0);
  });
`;

// gdb's Python: per thread, the discovery struct and the walk. Reads only through gdb.
const WALK = String.raw`
import gdb
# What nodejs_v1_dev fixes: the JSMap's table at +24, the OrderedHashMap's header 16 bytes.
JS_MAP_TABLE_OFFSET, ORDERED_HASH_MAP_HEADER_SIZE = 24, 16
inf = gdb.selected_inferior()
def u64(a): return int.from_bytes(bytes(inf.read_memory(a, 8)), 'little')
def smi(v): return v >> 32 if (v & 0xffffffff) == 0 else None
out = []
for th in inf.threads():
    th.switch()
    row = {'lwp': th.ptid[1]}
    try:
        s = int(gdb.parse_and_eval('(unsigned long)&otel_thread_ctx_nodejs_v1'))
    except gdb.error as e:
        row['error'] = 'no TLS block: ' + str(e); out.append(row); continue
    cped_slot, als_handle = u64(s), u64(s + 8)
    hash_ = int.from_bytes(bytes(inf.read_memory(s + 16, 4)), 'little', signed=True)
    record_slot_offset = bytes(inf.read_memory(s + 20, 1))[0]
    row['record_slot_offset'] = record_slot_offset
    undefined = u64(s + 24)
    row['published'] = cped_slot != 0
    if cped_slot == 0: out.append(row); continue
    frame = u64(cped_slot)
    if frame == undefined: row['state'] = 'none'; out.append(row); continue
    table = u64(frame - 1 + JS_MAP_TABLE_OFFSET)
    h = table - 1 + ORDERED_HASH_MAP_HEADER_SIZE
    elements, deleted, buckets = smi(u64(h)), smi(u64(h + 8)), smi(u64(h + 16))
    key = u64(als_handle)
    link = smi(u64(h + 24 + 8 * (hash_ & (buckets - 1))))
    entries = h + 24 + 8 * buckets
    store = None
    hops = 0
    while link is not None and link >= 0 and hops <= elements + deleted:
        e = entries + 24 * link
        if u64(e) == key: store = u64(e + 8); break
        link = smi(u64(e + 16)); hops += 1
    if store is None: row['state'] = 'not in frame'; out.append(row); continue
    if store == undefined: row['state'] = 'none'; out.append(row); continue
    record = u64(store - 1 + record_slot_offset)
    row['state'] = 'record'
    row['record'] = bytes(inf.read_memory(record, 28)).hex()
    out.append(row)
import json
print('WALK ' + json.dumps(out))
`;

function gdbWalk(pid, dir) {
  const script = path.join(dir, 'walk.py');
  fs.writeFileSync(script, WALK);
  const out = execFileSync('gdb', ['-p', String(pid), '-batch', '-nx', '-ex', 'set print thread-events off', '-x', script],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  const line = out.split('\n').find((l) => l.startsWith('WALK '));
  assert.ok(line, `gdb printed no walk:\n${out}`);
  return new Map(JSON.parse(line.slice(5)).map((row) => [row.lwp, row]));
}

/** The process context declares the schema, and (RFC #1861's latest text) no layout integer. */
function checkDeclared(pid) {
  const attributes = decodePayload(readProcessContext(pid).payload).attributes;
  assert.equal(attributes['threadlocal.schema_version'], 'nodejs_v1_dev');
  assert.deepEqual(Object.keys(attributes).filter((k) => k.startsWith('threadlocal.')).sort(),
    ['threadlocal.attribute_key_map', 'threadlocal.schema_version']);
}

test('gdb walks each thread from otel_thread_ctx_nodejs_v1 through the AsyncContextFrame to the span record', { skip: skipNodejs || need.skip, timeout: 600_000 }, need.guard(async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nodejs-outside-'));
  // This Node's AsyncContextFrame flag (22 needs one) goes to the child too.
  const flags = process.execArgv.filter((a) => a.includes('async-context-frame'));
  const child = spawn(process.execPath, [...flags, '-e', CHILD], { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => { child.kill('SIGKILL'); fs.rmSync(dir, { recursive: true, force: true }); });
  const lines = [];
  let waiting = null;
  let buffered = '';
  child.stdout.on('data', (d) => {
    buffered += d;
    let i;
    while ((i = buffered.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buffered.slice(0, i)));
      buffered = buffered.slice(i + 1);
      if (waiting) { const w = waiting; waiting = null; w(); }
    }
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const next = () => (lines.length > 0 ? Promise.resolve(lines.shift())
    : Promise.race([new Promise((resolve) => { waiting = () => resolve(lines.shift()); }),
      exited.then((code) => { throw new Error(`child exited with ${code} before the next park`); })]));
  let declared = false;
  const kinds = [];
  for (;;) {
    const park = await next();
    if (park.done) break;
    if (!declared) checkDeclared(child.pid);
    declared = true;
    const seen = gdbWalk(child.pid, dir);
    const main = seen.get(park.main);
    const worker = seen.get(park.worker.tid);
    assert.ok(main && main.published, `main thread ${park.main} not published: ${JSON.stringify(main)}`);
    // An API object's internal field 0: after the JSObject header (24) on Node 22, one slot later on 23+.
    assert.equal(main.record_slot_offset, Number(process.versions.node.split('.')[0]) >= 23 ? 32 : 24, 'record_slot_offset');
    if (park.expect === 'span') {
      assert.equal(main.state, 'record', `${park.kind}: ${JSON.stringify(main)}`);
      assert.equal(main.record.slice(0, 48), park.ids, `${park.kind} (chain ${park.chain}): the record's ids`);
      assert.equal(main.record.slice(48, 50), '01', `${park.kind}: valid`);
    } else if (park.expect === 'ended') {
      assert.equal(main.state, 'record', `${park.kind}: ${JSON.stringify(main)}`);
      assert.equal(main.record.slice(0, 48), park.ids);
      assert.equal(main.record.slice(48, 50), '00', `${park.kind}: an ended span's record is valid 0`);
    } else {
      assert.equal(main.state, 'none', `${park.kind}: ${JSON.stringify(main)}`);
    }
    assert.equal(worker && worker.state, 'record', `worker: ${JSON.stringify(worker)}`);
    assert.equal(worker.record.slice(0, 50), `${park.worker.ids}01`, 'the worker shows its own span');
    // Threads that never published (libuv pool, V8 platform threads) have nothing.
    for (const [lwp, row] of seen) {
      if (lwp !== park.main && lwp !== park.worker.tid) assert.notEqual(row.published, true, `thread ${lwp} published`);
    }
    kinds.push(park.kind);
    child.stdin.write('\n');
  }
  assert.equal(kinds.length, 8, `parks seen: ${kinds.join(', ')}`);
  assert.equal(await exited, 0);
}));
