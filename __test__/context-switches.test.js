'use strict';
// Every kind of switch: the record read back from the page inside the resumed callback must show
// the span that callback runs in, and none in root-context callbacks and between callbacks.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const http = require('node:http');
const { EventEmitter } = require('node:events');
const { AsyncLocalStorage, AsyncResource } = require('node:async_hooks');
const { trace, context, ROOT_CONTEXT, TraceFlags } = require('@opentelemetry/api');
const {
  setupTracing, assertPublished, assertNone, watchBetweenCallbacks, sleep, immediate,
} = require('./context-helpers');

const { manager, tracer } = setupTracing();

// Runs `fn(span)` in a new active span and ends it.
function inSpan(name, fn) {
  return tracer.startActiveSpan(name, async (span) => {
    try {
      return await fn(span);
    } finally {
      span.end();
    }
  });
}

// Runs `fn(span)` in a new active span that stays open (ended spans publish none): the caller
// ends it.
function inOpenSpan(name, fn) {
  return tracer.startActiveSpan(name, (span) => fn(span));
}

// Resolves when the callback scheduled by `schedule` ran `assertion` without throwing.
function checkIn(schedule, assertion) {
  return new Promise((resolve, reject) => {
    schedule(function callback(...args) {
      try {
        assertion(...args);
        resolve();
      } catch (error) {
        reject(error);
      }
    });
  });
}

test('the manager tracks async callbacks with a detected mechanism', () => {
  assert.ok(manager.enabled, 'expected register() to return an enabled manager');
  assert.match(manager.mechanism, /^(async_hooks|async_hooks\+scopes|promiseHooks\+async_hooks)$/,
    `expected a known mechanism, got ${manager.mechanism}`);
  assertNone('test body outside any span');
});

test('await of a resolved, pending, rejected and non-promise value resumes with the span', async () => {
  await inSpan('await', async (span) => {
    assertPublished(span, 'span start');
    await Promise.resolve(1);
    assertPublished(span, 'after await of a resolved promise');
    await sleep(1);
    assertPublished(span, 'after await of a pending promise (timer)');
    await new Promise((resolve) => setImmediate(resolve));
    assertPublished(span, 'after await of a pending promise (immediate)');
    await assert.rejects(Promise.reject(new Error('boom')));
    assertPublished(span, 'after await of assert.rejects');
    try {
      await Promise.reject(new Error('boom'));
    } catch {
      assertPublished(span, 'in catch after await of a rejected promise');
    }
    await null;
    assertPublished(span, 'after await null');
    await { then(resolve) { resolve(2); } };
    assertPublished(span, 'after await of a thenable');
  });
  assertNone('after the span ended');
});

test('timers, immediates, nextTick and queueMicrotask run with the span they were scheduled in', async () => {
  await inSpan('callbacks', async (span) => {
    await checkIn((cb) => setTimeout(cb, 1), () => assertPublished(span, 'setTimeout callback'));
    await checkIn((cb) => setImmediate(cb), () => assertPublished(span, 'setImmediate callback'));
    await checkIn((cb) => process.nextTick(cb), () => assertPublished(span, 'process.nextTick callback'));
    await checkIn((cb) => queueMicrotask(cb), () => assertPublished(span, 'queueMicrotask callback'));
    await checkIn((cb) => Promise.resolve().then(cb), () => assertPublished(span, '.then callback'));
    let ticks = 0;
    await checkIn((cb) => {
      const interval = setInterval(() => {
        if (++ticks === 3) { clearInterval(interval); cb(); } else assertPublished(span, `setInterval tick ${ticks}`);
      }, 1);
    }, () => assertPublished(span, 'setInterval third tick'));
  });
  // Scheduled from the root context: they must see none, whatever ran before.
  await checkIn((cb) => setTimeout(cb, 1), () => assertNone('root setTimeout callback'));
  await checkIn((cb) => setImmediate(cb), () => assertNone('root setImmediate callback'));
  await checkIn((cb) => process.nextTick(cb), () => assertNone('root nextTick callback'));
});

test('fs callbacks and fs.promises resume with the span', async () => {
  await inSpan('fs', async (span) => {
    await checkIn((cb) => fs.readFile(__filename, cb), (error) => {
      assert.ifError(error);
      assertPublished(span, 'fs.readFile callback');
    });
    await checkIn((cb) => fs.stat(__filename, cb), () => assertPublished(span, 'fs.stat callback'));
    await fs.promises.readFile(__filename);
    assertPublished(span, 'after await fs.promises.readFile');
  });
});

test('net: client callbacks see the span they were created in, the server side sees its own', async () => {
  const serverSide = [];
  const sockets = [];
  const server = net.createServer((socket) => {
    sockets.push(socket);
    serverSide.push(trace.getActiveSpan() === undefined ? null : 'span');
    socket.on('data', (data) => socket.end(data));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await inSpan('net client', async (span) => {
      const socket = net.connect(server.address().port, '127.0.0.1');
      sockets.push(socket);
      await checkIn((cb) => socket.once('connect', cb), () => assertPublished(span, 'net connect callback'));
      socket.write('ping');
      await checkIn((cb) => socket.once('data', cb), () => assertPublished(span, 'net data callback'));
      await checkIn((cb) => socket.once('close', cb), () => assertPublished(span, 'net close callback'));
      assertPublished(span, 'after awaiting the socket close');
    });
    assert.deepEqual(serverSide, [null], 'expected the server connection handler to run without a span');
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('http: the server handler sees the span of listen(), spans started in it survive awaits', async () => {
  const seen = [];
  let server;
  let listenSpan;
  await inOpenSpan('http listen', async (span) => {
    listenSpan = span;
    server = http.createServer((req, res) => {
      try {
        assertPublished(listenSpan, 'http request handler entry');
      } catch (error) {
        seen.push(error);
      }
      tracer.startActiveSpan('handle', async (span) => {
        try {
          await sleep(1);
          assertPublished(span, 'http handler after await');
          req.resume();
          await new Promise((resolve) => req.on('end', resolve));
          assertPublished(span, 'http handler after the request body');
        } catch (error) {
          seen.push(error);
        }
        res.end('ok');
        span.end();
      });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  try {
    await inSpan('http client', async (span) => {
      const body = await new Promise((resolve, reject) => {
        http.get(`http://127.0.0.1:${server.address().port}/`, { agent: false }, (res) => {
          try {
            assertPublished(span, 'http client response callback');
          } catch (error) {
            reject(error);
          }
          let data = '';
          res.on('data', (chunk) => { data += chunk; });
          res.on('end', () => resolve(data));
        }).on('error', reject);
      });
      assert.equal(body, 'ok');
      assertPublished(span, 'after the http response');
    });
    if (seen.length > 0) throw seen[0];
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    listenSpan.end();
  }
});

test('EventEmitter and functions bound with context.bind publish the bound span', async () => {
  const emitter = new EventEmitter();
  let boundSpan;
  let boundFn;
  inSpan('bound', async (span) => {
    boundSpan = span;
    context.bind(context.active(), emitter);
    boundFn = context.bind(context.active(), (x) => { assertPublished(span, 'bound function'); return x * 2; });
  });
  const calls = [];
  const listener = () => { assertPublished(boundSpan, 'bound listener'); calls.push('on'); };
  emitter.on('event', listener);
  emitter.once('event', () => { assertPublished(boundSpan, 'bound once listener'); calls.push('once'); });
  emitter.emit('event');
  assertNone('after emit from the root context');
  await inSpan('emitter caller', async (caller) => {
    emitter.emit('event');
    assertPublished(caller, 'after emit from another span');
    assert.equal(boundFn(21), 42);
    assertPublished(caller, 'after calling a bound function');
  });
  emitter.removeListener('event', listener);
  emitter.emit('event');
  assert.deepEqual(calls, ['on', 'once', 'on'], 'expected removeListener to remove the bound listener');
  assertNone('after the bound calls');
});

test('nested context.with publishes the innermost span and restores the outer one', () => {
  const outer = tracer.startSpan('outer');
  const inner = tracer.startSpan('inner');
  const outerContext = trace.setSpan(ROOT_CONTEXT, outer);
  context.with(outerContext, () => {
    assertPublished(outer, 'outer with');
    context.with(trace.setSpan(outerContext, inner), () => assertPublished(inner, 'inner with'));
    assertPublished(outer, 'back in outer with');
    context.with(ROOT_CONTEXT, () => assertNone('with(ROOT_CONTEXT) inside a span'));
    assertPublished(outer, 'back in outer with after ROOT_CONTEXT');
  });
  assertNone('after the outer with');
  outer.end();
  inner.end();
});

test('startActiveSpan with async callbacks: the parent resumes with its own span after a child', async () => {
  await inSpan('parent', async (parent) => {
    const childResult = await inSpan('child', async (child) => {
      await sleep(1);
      assertPublished(child, 'child after await');
      await inSpan('grandchild', async (grandchild) => {
        await immediate();
        assertPublished(grandchild, 'grandchild after await');
      });
      assertPublished(child, 'child after the grandchild');
      return 7;
    });
    assert.equal(childResult, 7);
    assertPublished(parent, 'parent after awaiting the child');
  });
});

test('thrown errors restore the previous span', async () => {
  const outer = tracer.startSpan('outer');
  const inner = tracer.startSpan('inner');
  context.with(trace.setSpan(ROOT_CONTEXT, outer), () => {
    assert.throws(() => context.with(trace.setSpan(ROOT_CONTEXT, inner), () => {
      assertPublished(inner, 'inside the throwing with');
      throw new Error('thrown in with');
    }), /thrown in with/);
    assertPublished(outer, 'after a with() that threw');
  });
  assertNone('after the outer with');
  await assert.rejects(inSpan('async thrower', async () => {
    await sleep(1);
    throw new Error('thrown after await');
  }), /thrown after await/);
  assertNone('after an async span that threw');
  outer.end();
  inner.end();
});

test('Promise.all of interleaved spans: each resumes with its own span', async () => {
  const work = (i) => inSpan(`request ${i}`, async (span) => {
    for (let step = 0; step < 20; step++) {
      if (step % 3 === 0) await sleep(step % 2);
      else if (step % 3 === 1) await immediate();
      else await Promise.resolve();
      assertPublished(span, `request ${i} step ${step}`);
    }
    return i;
  });
  const results = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(work));
  assert.deepEqual(results, [0, 1, 2, 3, 4, 5, 6, 7]);
  assertNone('after Promise.all');
});

test('AsyncResource scopes (runInAsyncScope, bind, AsyncLocalStorage.snapshot) nest and restore', async () => {
  let resourceA;
  let resourceC;
  let boundA;
  let snapshotA;
  let spanA;
  let spanC;
  await inOpenSpan('A', async (span) => {
    spanA = span;
    resourceA = new AsyncResource('TEST_A');
    boundA = AsyncResource.bind(() => assertPublished(spanA, 'AsyncResource.bind function'));
    snapshotA = AsyncLocalStorage.snapshot ? AsyncLocalStorage.snapshot() : null;
  });
  await inOpenSpan('C', async (span) => {
    spanC = span;
    resourceC = new AsyncResource('TEST_C');
  });
  await inSpan('B', async (spanB) => {
    resourceA.runInAsyncScope(() => {
      assertPublished(spanA, 'runInAsyncScope of A');
      resourceC.runInAsyncScope(() => assertPublished(spanC, 'nested runInAsyncScope of C'));
      assertPublished(spanA, 'back in A after the nested scope');
    });
    assertPublished(spanB, 'back in B after runInAsyncScope');
    boundA();
    assertPublished(spanB, 'back in B after the bound function');
    if (snapshotA !== null) {
      snapshotA(() => assertPublished(spanA, 'AsyncLocalStorage.snapshot of A'));
      assertPublished(spanB, 'back in B after the snapshot');
    }
  });
  resourceA.emitDestroy();
  resourceC.emitDestroy();
  spanA.end();
  spanC.end();
});

test('an ended span publishes none, also where its context lives on (timers, bound functions)', async () => {
  let bound;
  let timerFired;
  await inOpenSpan('short', async (span) => {
    assertPublished(span, 'before end()');
    bound = context.bind(context.active(), () => assertNone('a function bound to the ended span'));
    timerFired = new Promise((resolve) => setTimeout(() => {
      try {
        assertNone('a timer armed in the span, firing after it ended');
        resolve(null);
      } catch (error) {
        resolve(error);
      }
    }, 5));
    span.end();
    assertNone('right after end(), still inside the span\'s with()');
    await sleep(1);
    assertNone('after an await, after end()');
  });
  bound();
  const error = await timerFired;
  if (error !== null) throw error;
  // A context whose span had already ended when it was first activated.
  const ended = tracer.startSpan('ended first');
  ended.end();
  context.with(trace.setSpan(ROOT_CONTEXT, ended), () => assertNone('with() of an already ended span'));
  assertNone('after the ended-span calls');
});

test('end() unpublishes for span classes, subclasses calling super.end(), and spans with their own end()', () => {
  const ids = (n) => ({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: `00f067aa0ba902b${n}`, traceFlags: 1 });
  class BaseSpan {
    constructor(n) { this.context = ids(n); this.ends = []; }
    spanContext() { return this.context; }
    end() { this.ends.push('base'); }
  }
  class DerivedSpan extends BaseSpan {
    end() { this.ends.push('derived'); super.end(); }
  }
  const base = new BaseSpan(1);
  const derived = new DerivedSpan(2);
  const own = new BaseSpan(3);
  own.end = function ownEnd() { this.ends.push('own'); };
  for (const [span, expected] of [[base, ['base']], [derived, ['derived', 'base']], [own, ['own']]]) {
    const spanContext = trace.setSpan(ROOT_CONTEXT, span);
    context.with(spanContext, () => {
      assertPublished(span, `${span.constructor.name} ${span.context.spanId} before end()`);
      span.end();
      assertNone(`${span.constructor.name} ${span.context.spanId} right after end()`);
    });
    assert.deepEqual(span.ends, expected, 'expected each original end() to run once');
    context.with(spanContext, () => assertNone(`${span.context.spanId}: its context after end()`));
  }
});

test('an unsampled but valid span is published with its flags; an invalid one is none', () => {
  const unsampled = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.NONE };
  context.with(trace.setSpanContext(ROOT_CONTEXT, unsampled), () => {
    assertPublished(unsampled, 'unsampled span context');
    const invalid = { traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 1 };
    context.with(trace.setSpanContext(ROOT_CONTEXT, invalid), () => assertNone('invalid span context'));
    const malformed = { traceId: 'not hex', spanId: 'xyz', traceFlags: 1 };
    context.with(trace.setSpanContext(ROOT_CONTEXT, malformed), () => assertNone('malformed span context'));
    assertPublished(unsampled, 'back in the unsampled span');
  });
  const upper = { traceId: '0AF7651916CD43DD8448EB211C80319C', spanId: 'B7AD6B7169203331', traceFlags: 1 };
  context.with(trace.setSpanContext(ROOT_CONTEXT, upper), () => {
    assertPublished({ ...upper, traceId: upper.traceId.toLowerCase(), spanId: upper.spanId.toLowerCase() },
      'uppercase ids (valid for @opentelemetry/api), read back in lowercase');
  });
});

test('between callbacks the record shows none', async () => {
  const watch = watchBetweenCallbacks();
  try {
    await Promise.all([1, 2, 3, 4].map((i) => inSpan(`between ${i}`, async (span) => {
      for (let step = 0; step < 10; step++) {
        await (step % 2 ? sleep(1) : immediate());
        await Promise.resolve();
        process.nextTick(() => {});
        setImmediate(() => {});
        assertPublished(span, `between ${i} step ${step}`);
      }
    })));
    await sleep(2);
  } finally {
    const { checks, violations } = watch.stop();
    assert.ok(checks > 50, `expected more than 50 callback ends observed, saw ${checks}`);
    assert.deepEqual(violations, [], `expected none between callbacks, saw ${violations.length} spans`);
  }
});

test('bound EventEmitter: prependListener, off, once removal, removeAllListeners, foreign receivers', () => {
  const emitter = new EventEmitter();
  let boundSpan;
  inSpan('bound emitter', (span) => {
    boundSpan = span;
    context.bind(context.active(), emitter);
  });
  const calls = [];
  const first = () => { assertPublished(boundSpan, 'prepended listener'); calls.push('first'); };
  const second = () => { assertPublished(boundSpan, 'listener'); calls.push('second'); };
  const once = () => calls.push('once');
  emitter.on('e', second);
  emitter.prependListener('e', first);
  emitter.once('e', once);
  const listed = emitter.listeners('e');
  assert.deepEqual(listed.slice(0, 2), [first, second], 'listeners() gives the listeners as added');
  assert.equal(listed[2].listener, once, 'a bound once() listener carries the original as .listener');
  emitter.removeListener('e', once);
  emitter.prependOnceListener('e', once);
  emitter.off('e', once);
  emitter.emit('e');
  assert.deepEqual(calls, ['first', 'second'], 'expected prepend order, and a once listener removed before it fired');
  emitter.off('e', first);
  emitter.emit('e');
  assert.deepEqual(calls, ['first', 'second', 'second'], 'expected off() to remove the bound listener');
  emitter.removeAllListeners();
  emitter.emit('e');
  assert.equal(emitter.listenerCount('e'), 0);
  emitter.on('e', second);
  emitter.removeAllListeners('e');
  assert.equal(emitter.listenerCount('e'), 0, 'expected removeAllListeners(event) to remove bound listeners');
  // A patched method called on another emitter behaves like EventEmitter's own.
  const other = new EventEmitter();
  emitter.on.call(other, 'x', () => calls.push('other'));
  other.emit('x');
  assert.deepEqual(calls.slice(-1), ['other']);
  assertNone('after the emitter calls');
});
