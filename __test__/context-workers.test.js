'use strict';
// Each JS thread has its own record: a Worker publishes its spans in its own page while the main
// thread keeps showing its own span.

const test = require('node:test');
const assert = require('node:assert/strict');
const { Worker } = require('node:worker_threads');
const { setupTracing, assertPublished, sleep, lib } = require('./context-helpers');

const { tracer } = setupTracing();

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { setupTracing, sameSpan, lib } = require(${JSON.stringify(require.resolve('./context-helpers'))});
const { tracer } = setupTracing();
(async () => {
  let mismatches = 0;
  await Promise.all([1, 2, 3].map((i) => tracer.startActiveSpan('worker ' + i, async (span) => {
    for (let step = 0; step < 50; step++) {
      await new Promise((resolve) => (step % 2 ? setImmediate(resolve) : setTimeout(resolve, 0)));
      if (!sameSpan(lib.getSpanContext(), span.spanContext())) mismatches++;
    }
    span.end();
  })));
  parentPort.postMessage({ mismatches, after: lib.getSpanContext(), tid: lib.threadInfo().tid });
})();
`;

test('a Worker publishes in its own record, the main thread keeps its own span', async () => {
  await tracer.startActiveSpan('main', async (span) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    const reply = await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    assertPublished(span, 'main thread after the worker replied');
    assert.equal(reply.mismatches, 0, 'expected the worker record to follow the worker spans');
    assert.equal(reply.after, null, 'expected none in the worker after its spans');
    assert.notEqual(reply.tid, lib.threadInfo().tid, 'expected the worker to run on its own OS thread');
    await worker.terminate();
    await sleep(1);
    assertPublished(span, 'main thread after the worker exited');
    span.end();
  });
});
