'use strict';
// Child process of context-uncaught.test.js (node:test treats uncaught exceptions as failures,
// so they are thrown here): callbacks throw inside spans, an uncaughtException handler swallows
// them; afterwards no span may be left published. Prints one JSON line.

const { AsyncResource } = require('node:async_hooks');
const { context, trace, ROOT_CONTEXT } = require('@opentelemetry/api');
const { setupTracing, watchBetweenCallbacks, lib, describeRecord } = require('./context-helpers');

const { tracer } = setupTracing();
const watch = watchBetweenCallbacks();
const caught = [];
const inHandler = [];
process.on('uncaughtException', (error) => {
  caught.push(error.message);
  inHandler.push(lib.getSpanContext() === null ? 'none' : 'span');
});

tracer.startActiveSpan('thrower', (span) => {
  setTimeout(() => { throw new Error('in timer'); }, 1);
  setImmediate(() => context.with(trace.setSpan(ROOT_CONTEXT, tracer.startSpan('inner')), () => {
    throw new Error('in with inside an immediate');
  }));
  const resource = new AsyncResource('THROWER');
  setTimeout(() => resource.runInAsyncScope(() => resource.runInAsyncScope(() => {
    throw new Error('in nested runInAsyncScope');
  })), 2);
  process.nextTick(() => { throw new Error('in nextTick'); });
  queueMicrotask(() => { throw new Error('in queueMicrotask'); });
  (async () => {
    await new Promise((resolve) => setTimeout(resolve, 3));
    throw new Error('unhandled rejection after await');
  })();
  span.end();
});

setTimeout(() => {
  const { checks, violations } = watch.stop();
  const record = lib.getSpanContext();
  process.stdout.write(JSON.stringify({ caught: caught.sort(), inHandler, checks, violations, record: record && describeRecord(record) }) + '\n');
}, 30);
