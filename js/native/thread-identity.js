'use strict';
// This thread as the semantic conventions name it on a span: `thread.id` (the Linux thread id,
// as this process sees it: in a PID namespace of its own, not the host's) and `thread.name`.
// Every span gets both at its first activation (when its record entry is built, on the thread
// that started it), so that a join of spans with profile samples uses the span's own thread
// instead of guessing it (a request's trace often runs on several threads: its worker's spans
// on the worker, its server span on the main loop).
//
// Names: the main thread keeps its OS name (`node`; `MainThread` from Node 24 on); a worker
// thread is named as its Worker was (`new Worker(file, { name })`, read as
// worker_threads.threadName from Node 22 on; `WorkerThread` before, Node 24's name for a worker
// without one). The OS thread name of a worker is set to it too (prctl PR_SET_NAME, cut at 15
// bytes) unless the runtime named the thread already (Node 24 does), so that a profiler's samples
// (their `thread.name` is the thread's comm) stop calling every worker `node`.
//
// A module instance is per thread (each worker loads its own), so the cache below is too.

const fs = require('node:fs');
const workerThreads = require('node:worker_threads');
const native = require('./addon');

const DEFAULT_WORKER_NAME = 'WorkerThread';

let attributes; // this thread's { 'thread.id', 'thread.name' }, or null when unknown

// /proc/thread-self/comm: the calling thread's OS name (Linux 3.17+).
function osName(path = '/proc/thread-self/comm') {
  try {
    return fs.readFileSync(path, 'utf8').replace(/\n$/, '');
  } catch {
    return null;
  }
}

function workerName() {
  const name = workerThreads.threadName;
  return typeof name === 'string' && name !== '' ? name : DEFAULT_WORKER_NAME;
}

// Names this worker's OS thread after its Worker, unless something named it already (its name
// is then no longer the process's).
function nameOsThread(name) {
  if (workerThreads.isMainThread || !native.supported || typeof native.setThreadName !== 'function') return;
  const current = osName();
  if (current === null || current !== osName('/proc/self/comm')) return;
  try {
    native.setThreadName(name);
  } catch {
    // a name the kernel refuses: the thread keeps the process's name
  }
}

/** The span attributes of this thread: `thread.id` and `thread.name`; null without the addon. */
function threadAttributes() {
  if (attributes !== undefined) return attributes;
  attributes = null;
  try {
    const tid = native.supported ? native.threadInfo().tid : null;
    if (typeof tid !== 'number' || tid <= 0) return attributes;
    const name = workerThreads.isMainThread ? (osName() ?? 'main') : workerName();
    attributes = Object.freeze({ 'thread.id': tid, 'thread.name': name });
  } catch {
    // no thread id to give: spans go without
  }
  return attributes;
}

/**
 * Writes this thread's `thread.id` and `thread.name` onto `span` (an SDK span: one with an
 * attributes object), unless it has a `thread.id` already. Called from async hooks: never throws.
 */
function noteSpanThread(span) {
  try {
    const attrs = span.attributes;
    if (attrs === null || typeof attrs !== 'object' || attrs['thread.id'] !== undefined) return;
    const own = threadAttributes();
    if (own !== null && typeof span.setAttributes === 'function') span.setAttributes(own);
  } catch {
    // a span whose attributes cannot be read or set goes without
  }
}

if (!workerThreads.isMainThread) {
  try {
    nameOsThread(workerName());
  } catch {
    // never fails a worker's start
  }
}

module.exports = { noteSpanThread, threadAttributes };
