'use strict';
// Allocation sampling (js/profiling/allocations.js): the option and the environment variable, V8's
// sampling heap profiler started once per thread (main and workers) and seen running by a second
// inspector session, the interval published once per process, and failures as one warning. Each
// case runs in a fresh child: sampling, once started, lasts for the thread's life.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { ROOT } = require('./helpers/addon');
const { ThreadContextManager, register } = require('..');

// Runs `body` in a child with `lib` (the package), `say(obj)` and `samples(fnName)`: how many
// samples of the calling thread's sampling heap profile were allocated in function fnName
// (null when the profiler is not running there). Returns what the child said, and its warnings.
function runChild(body, env = {}) {
  const script = `
    process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
    const lib = require(${JSON.stringify(ROOT)});
    const inspector = require('node:inspector');
    const said = [];
    const say = (o) => said.push(o);
    const warnings = [];
    process.on('warning', (w) => { if (w.code === 'OTEL_THREAD_CTX_ALLOCATIONS') warnings.push(w.message); });
    function samples(fnName) {
      const s = new inspector.Session();
      s.connect();
      let result = null;
      s.post('HeapProfiler.getSamplingProfile', (err, r) => { result = err ? null : r.profile; });
      s.disconnect();
      if (result === null) return null;
      const ids = new Set();
      (function walk(node, inside) {
        const here = inside || node.callFrame.functionName === fnName;
        if (here) ids.add(node.id);
        for (const c of node.children) walk(c, here);
      })(result.head, false);
      return result.samples.filter((x) => ids.has(x.nodeId)).length;
    }
    (async () => { ${body} })().then(
      () => setImmediate(() => process.stdout.write(JSON.stringify({ said, warnings }) + '\\n')),
      (e) => { process.stdout.write(JSON.stringify({ error: e.stack }) + '\\n'); });
  `;
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], {
    cwd: ROOT, encoding: 'utf8', timeout: 120_000,
    env: { ...process.env, OTEL_THREAD_CTX_ALLOCATIONS: '', ...env },
  });
  assert.equal(r.status, 0, `child failed: ${r.stderr}`);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.equal(out.error, undefined, out.error);
  return out;
}

// Allocates `mb` MiB of 64 KiB arrays in functions the profile can name: kept alive, or dropped.
// V8 samples each array with probability 1 - e^(-64 KiB / interval).
const ALLOCATE = `
  const kept = [];
  function retainHere(mb) { for (let i = 0; i < mb * 16; i++) kept.push(new Array(8192).fill(i)); }
  function discardHere(mb) { let x; for (let i = 0; i < mb * 16; i++) x = new Array(8192).fill(i); return x.length; }
`;

test('options.allocations: TypeError or RangeError naming the option, before anything starts', () => {
  const cases = [
    [{ allocations: 'yes' }, TypeError, /^options\.allocations: expected a boolean or \{ samplingIntervalBytes \}, got string "yes"$/],
    [{ allocations: null }, TypeError, /^options\.allocations: expected a boolean .*got null$/],
    [{ allocations: [] }, TypeError, /^options\.allocations: .*got an array$/],
    [{ allocations: { interval: 4096 } }, TypeError, /^options\.allocations\.interval: unknown option \(expected samplingIntervalBytes\)$/],
    [{ allocations: { samplingIntervalBytes: '4096' } }, TypeError, /^options\.allocations\.samplingIntervalBytes: expected a number of bytes, got string "4096"$/],
    [{ allocations: { samplingIntervalBytes: 1023 } }, RangeError, /^options\.allocations\.samplingIntervalBytes: expected an integer from 1024 to 1073741824, got 1023$/],
    [{ allocations: { samplingIntervalBytes: 4096.5 } }, RangeError, /got 4096\.5$/],
    [{ allocations: { samplingIntervalBytes: 2 ** 31 } }, RangeError, /got 2147483648$/],
    [{ allocations: { samplingIntervalBytes: NaN } }, RangeError, /got NaN$/],
  ];
  for (const [options, kind, message] of cases) {
    assert.throws(() => new ThreadContextManager(options), (e) => e instanceof kind && message.test(e.message), JSON.stringify(options));
    assert.throws(() => register(options), (e) => e instanceof kind && message.test(e.message), `register ${JSON.stringify(options)}`);
  }
  assert.equal(require('..').threadInfo().allocations.active, false, 'a refused option started nothing');
});

test('allocations: true starts V8 sampling on this thread at 512 KiB; the interval is in the process context', () => {
  const out = runChild(`
    ${ALLOCATE}
    say(lib.threadInfo().allocations);
    const manager = new lib.ThreadContextManager({ allocations: true }).enable();
    say(manager.allocations);
    retainHere(32);
    say(samples('retainHere'));
    say(require(${JSON.stringify(`${ROOT}/js/native/addon`)}).heapSamplingInterval());
  `);
  const [before, after, count, published] = out.said;
  assert.deepEqual(before, { active: false, samplingIntervalBytes: null, error: null });
  assert.deepEqual(after, { active: true, samplingIntervalBytes: 512 * 1024, error: null });
  // 512 arrays, each sampled with probability 1 - e^(-1/8): ~60 samples (none: p < 1e-26).
  assert.ok(count > 0, `the profiler runs on this thread: ${count} samples`);
  assert.equal(published, 512 * 1024);
  assert.deepEqual(out.warnings, []);
});

test('started once per thread: more managers, register() and a second copy of the package change nothing', () => {
  const out = runChild(`
    let connects = 0;
    const connect = inspector.Session.prototype.connect;
    inspector.Session.prototype.connect = function () { connects++; return connect.call(this); };
    new lib.ThreadContextManager({ allocations: { samplingIntervalBytes: 65536 } }).enable();
    new lib.ThreadContextManager({ allocations: true }).enable();
    lib.register({ allocations: { samplingIntervalBytes: 4096 } });
    const path = require('node:path');
    delete require.cache[require.resolve(${JSON.stringify(ROOT)})];
    for (const k of Object.keys(require.cache)) if (k.startsWith(path.join(${JSON.stringify(ROOT)}, 'js'))) delete require.cache[k];
    const copy = require(${JSON.stringify(ROOT)});
    new copy.ThreadContextManager({ allocations: true }).enable();
    say({ connects, info: copy.threadInfo().allocations, first: lib.threadInfo().allocations });
  `);
  const [{ connects, info, first }] = out.said;
  assert.equal(connects, 1, 'one inspector session for the thread');
  assert.deepEqual(info, { active: true, samplingIntervalBytes: 65536, error: null });
  assert.deepEqual(first, info);
  assert.deepEqual(out.warnings, [], 'the thread already samples: later asks are not conflicts');
});

test('memory stays bounded: samples of collected objects are not kept', () => {
  const out = runChild(`
    ${ALLOCATE}
    new lib.ThreadContextManager({ allocations: { samplingIntervalBytes: 16384 } }).enable();
    retainHere(16);
    discardHere(256);
    global.gc(); global.gc();
    say({ retained: samples('retainHere'), discarded: samples('discardHere') });
  `);
  // At a 16 KiB mean each 64 KiB array is sampled with probability 0.98: ~250 of the 256 kept
  // ones, and ~4,000 of the dropped ones, which V8 must have let go with their objects.
  const [{ retained, discarded }] = out.said;
  assert.ok(retained > 150, `samples of live arrays: ${retained}`);
  assert.ok(discarded < 50, `samples of collected arrays still held: ${discarded}`);
});

test('workers: each thread that enables a manager with allocations samples; one interval per process', async () => {
  const out = runChild(`
    ${ALLOCATE}
    const { Worker } = require('node:worker_threads');
    new lib.ThreadContextManager({ allocations: { samplingIntervalBytes: 65536 } }).enable();
    const worker = (allocations) => new Promise((resolve, reject) => {
      const w = new Worker(\`
        const { parentPort, workerData } = require('node:worker_threads');
        const lib = require(\${JSON.stringify(${JSON.stringify(ROOT)})});
        const warnings = [];
        process.on('warning', (w) => { if (w.code === 'OTEL_THREAD_CTX_ALLOCATIONS') warnings.push(w.message); });
        const before = lib.threadInfo().allocations;
        new lib.ThreadContextManager({ allocations: workerData }).enable();
        const s = new (require('node:inspector').Session)();
        s.connect();
        let running = false;
        s.post('HeapProfiler.getSamplingProfile', (err) => { running = !err; });
        setImmediate(() => parentPort.postMessage({ before, after: lib.threadInfo().allocations, running, warnings }));
      \`, { eval: true, workerData: allocations });
      w.once('message', (m) => { w.terminate().then(() => resolve(m)); });
      w.once('error', reject);
    });
    say(await worker({ samplingIntervalBytes: 65536 }));
    say(await worker({ samplingIntervalBytes: 131072 }));
    say(await worker(false));
    say(lib.threadInfo().allocations);
  `);
  const [same, other, off, main] = out.said;
  assert.deepEqual(same.before, { active: false, samplingIntervalBytes: null, error: null }, 'a new worker starts without');
  assert.deepEqual(same.after, { active: true, samplingIntervalBytes: 65536, error: null });
  assert.equal(same.running, true, "V8's profiler runs in the worker's isolate");
  assert.deepEqual(other.after, { active: true, samplingIntervalBytes: 65536, error: null }, 'the process interval wins');
  assert.equal(other.warnings.length, 1);
  assert.match(other.warnings[0], /samplingIntervalBytes 131072 asked for, but this process already samples at 65536 bytes/);
  assert.deepEqual(off.after, { active: false, samplingIntervalBytes: null, error: null });
  assert.equal(off.running, false);
  assert.deepEqual(main, { active: true, samplingIntervalBytes: 65536, error: null });
});

test('OTEL_THREAD_CTX_ALLOCATIONS turns it on for managers that do not say; the option wins; a bad value is one warning', () => {
  const body = `
    new lib.ThreadContextManager().enable();
    say(lib.threadInfo().allocations);
  `;
  const info = (env) => runChild(body, { OTEL_THREAD_CTX_ALLOCATIONS: env });
  assert.deepEqual(info('1').said[0], { active: true, samplingIntervalBytes: 524288, error: null });
  assert.deepEqual(info('true').said[0], { active: true, samplingIntervalBytes: 524288, error: null });
  assert.deepEqual(info('131072').said[0], { active: true, samplingIntervalBytes: 131072, error: null });
  for (const off of ['', '0', 'false']) assert.equal(info(off).said[0].active, false, `"${off}"`);
  for (const [bad, why] of [['yes', /expected 1, true, 0, false or a sampling interval in bytes, got "yes"/], ['12', /expected an integer from 1024/]]) {
    const out = info(bad);
    assert.equal(out.said[0].active, false);
    assert.equal(out.warnings.length, 1, bad);
    assert.match(out.warnings[0], why);
    assert.match(out.warnings[0], /OTEL_THREAD_CTX_ALLOCATIONS/);
  }
  const explicit = runChild(`new lib.ThreadContextManager({ allocations: false }).enable(); say(lib.threadInfo().allocations);`,
    { OTEL_THREAD_CTX_ALLOCATIONS: '1' });
  assert.equal(explicit.said[0].active, false, 'allocations: false wins over the environment');
  const registered = runChild(`lib.register(); say(lib.threadInfo().allocations);`, { OTEL_THREAD_CTX_ALLOCATIONS: '1' });
  assert.equal(registered.said[0].active, true, 'register() reads it too');
});

test('a profiler that cannot start is one warning: enable() still works and publishes spans', () => {
  const out = runChild(`
    inspector.Session.prototype.connect = function () { throw new Error('inspector unavailable here'); };
    const { trace, context } = require('@opentelemetry/api');
    const manager = new lib.ThreadContextManager({ allocations: true }).enable();
    new lib.ThreadContextManager({ allocations: true }).enable();
    say(lib.threadInfo().allocations);
    const span = trace.wrapSpanContext({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 1 });
    context.setGlobalContextManager(manager);
    context.with(trace.setSpan(context.active(), span), () => say(lib.getSpanContext()));
  `);
  const [info, published] = out.said;
  assert.equal(info.active, false);
  assert.match(info.error, /inspector unavailable here/);
  assert.equal(out.warnings.length, 1, 'one warning per thread, not one per manager');
  assert.match(out.warnings[0], /could not start V8's sampling heap profiler on this thread \(inspector unavailable here\)/);
  assert.equal(published.spanId, 'b7ad6b7169203331');
});
