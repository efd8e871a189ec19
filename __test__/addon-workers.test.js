'use strict';
// Each worker gets its own page; tearing a worker down unmaps it and leaves nothing behind.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { Worker } = require('node:worker_threads');
const { api, ROOT, IDS } = require('./helpers/addon');

const WORKER_SRC = `
  const { parentPort, workerData } = require('node:worker_threads');
  process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE = '1';
  const api = require(${JSON.stringify(ROOT)});
  const before = api.getSpanContext();
  api.setSpanContext(workerData.trace, workerData.span, 1);
  const info = api.threadInfo();
  parentPort.postMessage({ before, after: api.getSpanContext(), info });
`;

function runWorker(i, { terminate = true } = {}) {
  const trace = (i + 1).toString(16).padStart(32, 'a');
  const span = (i + 1).toString(16).padStart(16, 'b');
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER_SRC, { eval: true, workerData: { trace, span } });
    w.once('error', reject);
    w.once('message', async (m) => {
      if (terminate) await w.terminate();
      resolve({ ...m, trace, span, worker: w });
    });
  });
}

const mapCount = () => fs.readFileSync('/proc/self/maps', 'utf8').trim().split('\n').length;
// Our record pages are the process's only MADV_WIPEONFORK mappings ("wf" in smaps VmFlags), and
// their flags keep them from merging with neighbours: one such mapping per live record.
const recordMappings = () =>
  fs.readFileSync('/proc/self/smaps', 'utf8').split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)
    .filter((b) => /^VmFlags:.*\bwf\b/m.test(b)).map((b) => b.slice(0, b.indexOf(' ')));
const lockedKb = () => Number(/^Locked:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'))[1]);

test('a worker has its own record; the main thread record is untouched', async () => {
  api.setSpanContext(IDS.traceA, IDS.spanA, 1);
  const main = api.threadInfo();
  const r = await runWorker(0);
  assert.equal(r.before, null, 'a new worker starts with no context');
  assert.deepEqual(r.after, { traceId: r.trace, spanId: r.span, traceFlags: 1 });
  assert.notEqual(r.info.tid, main.tid);
  assert.notEqual(r.info.recordAddress, main.recordAddress);
  assert.equal(r.info.pinned, true);
  assert.equal(r.info.tlsModel, main.tlsModel);
  assert.equal(r.info.tlsOffset, main.tlsOffset, 'static TLS offset is the same on every thread');
  assert.deepEqual(api.getSpanContext(), { traceId: IDS.traceA, spanId: IDS.spanA, traceFlags: 1 });
  api.clearSpanContext();
});

test('500 workers created and terminated leave no record mapping and no locked memory behind', async () => {
  // Warm up: the first workers grow malloc arenas and V8 code space once.
  for (let i = 0; i < 20; i++) await runWorker(i);
  const maps0 = mapCount();
  const ours0 = recordMappings();
  const locked0 = lockedKb();
  const addresses = new Set();
  for (let i = 0; i < 500; i++) {
    const r = await runWorker(i);
    assert.deepEqual(r.after, { traceId: r.trace, spanId: r.span, traceFlags: 1 }, `worker ${i}`);
    addresses.add(r.info.recordAddress);
  }
  const maps1 = mapCount();
  const ours1 = recordMappings();
  const locked1 = lockedKb();
  console.log(`# record mappings before ${ours0.length} after ${ours1.length}; all maps ${maps0} -> ${maps1}` +
    ` (V8 heap pages and malloc arenas drift by tens with or without the addon); locked ${locked0} kB -> ${locked1} kB;` +
    ` distinct record pages seen ${addresses.size}`);
  assert.deepEqual(ours1, ours0, 'a terminated worker left its record page mapped');
  assert.equal(locked1, locked0, 'record pages of terminated workers are still locked (not unmapped)');
});

test('terminating a worker while it is busy tears its page down too', async () => {
  const locked0 = lockedKb();
  const busy = new Worker(`
    const api = require(${JSON.stringify(ROOT)});
    api.setSpanContext('${IDS.traceB}', '${IDS.spanB}');
    require('node:worker_threads').parentPort.postMessage('ready');
    for (;;) {}
  `, { eval: true });
  await new Promise((resolve) => busy.once('message', resolve));
  assert.equal(lockedKb(), locked0 + 4, 'the busy worker holds one locked page');
  await busy.terminate();
  assert.equal(lockedKb(), locked0, 'the terminated worker page is gone');
});
