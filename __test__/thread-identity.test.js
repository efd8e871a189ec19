'use strict';
// Each span says the thread that started it (semantic conventions' thread.id and thread.name),
// so that a join with profile samples needs no guess: a server span whose trace runs on in a
// worker is the main thread's, the worker's spans are the worker's. A worker's OS thread is
// named after its Worker, seen from outside through /proc, so that profilers' samples stop
// calling it `node`.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { Worker } = require('node:worker_threads');
const { setupTracing, lib } = require('./context-helpers');

const { tracer } = setupTracing();

// Node 22 reads a Worker's name inside it (worker_threads.threadName); before, a worker is
// `WorkerThread`, as Node 24 names one without a name.
const readsWorkerName = typeof require('node:worker_threads').threadName === 'string';
const mainName = fs.readFileSync('/proc/thread-self/comm', 'utf8').trim();

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { setupTracing, lib } = require(${JSON.stringify(require.resolve('./context-helpers'))});
const { tracer } = setupTracing();
tracer.startActiveSpan('render report', (span) => {
  span.end();
  parentPort.postMessage({ attributes: span.attributes, tid: lib.threadInfo().tid });
});
setInterval(() => {}, 1000);
`;

test('a span started on the main thread carries its thread id and OS name', () => {
  tracer.startActiveSpan('GET /report', (span) => {
    assert.equal(span.attributes['thread.id'], lib.threadInfo().tid);
    assert.equal(span.attributes['thread.name'], mainName);
    span.end();
  });
});

test('a span started in a worker carries the worker thread, named after its Worker; its OS thread has that name', async () => {
  const worker = new Worker(WORKER_SOURCE, { eval: true, name: 'report-worker-for-invoices' });
  try {
    const reply = await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    const name = readsWorkerName ? 'report-worker-for-invoices' : 'WorkerThread';
    assert.notEqual(reply.tid, lib.threadInfo().tid);
    assert.equal(reply.attributes['thread.id'], reply.tid);
    assert.equal(reply.attributes['thread.name'], name);
    // From outside the worker: the kernel's name of its thread, cut at 15 bytes (the span keeps it whole).
    assert.equal(fs.readFileSync(`/proc/self/task/${reply.tid}/comm`, 'utf8').trim(), name.slice(0, 15));
    assert.equal(fs.readFileSync('/proc/self/comm', 'utf8').trim(), mainName, 'the main thread keeps its name');
  } finally {
    await worker.terminate();
  }
});

test('a thread.id the application set is kept', () => {
  const span = tracer.startSpan('preset', { attributes: { 'thread.id': 7, 'thread.name': 'mine' } });
  const { context, trace } = require('@opentelemetry/api');
  context.with(trace.setSpan(context.active(), span), () => {
    assert.equal(span.attributes['thread.id'], 7);
    assert.equal(span.attributes['thread.name'], 'mine');
  });
  span.end();
});

// fetch's client spans (undici's instrumentation) are started and never made active: the context
// manager never sees them, so ThreadSpanProcessor writes the thread when they start.
test('ThreadSpanProcessor: a span never made active carries its thread too', () => {
  const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
  const provider = new BasicTracerProvider({ spanProcessors: [new lib.ThreadSpanProcessor()] });
  const client = provider.getTracer('fetch-like').startSpan('GET', { kind: 2 });
  assert.equal(client.attributes['thread.id'], lib.threadInfo().tid);
  assert.equal(client.attributes['thread.name'], mainName);
  client.end();
  const preset = provider.getTracer('fetch-like').startSpan('preset', { attributes: { 'thread.id': 7 } });
  assert.equal(preset.attributes['thread.id'], 7, 'a thread.id the application set is kept');
  preset.end();
});
