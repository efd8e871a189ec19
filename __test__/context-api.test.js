'use strict';
// ThreadContextManager's lifecycle and options: disable/enable, cheap mode, takeover by a newer
// manager, register() wrapping an installed manager, attach(), and clear errors for bad arguments.

const test = require('node:test');
const assert = require('node:assert/strict');
const { trace, context, ROOT_CONTEXT } = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager, AsyncHooksContextManager } = require('@opentelemetry/context-async-hooks');
const { BasicTracerProvider } = require('@opentelemetry/sdk-trace-base');
const { AsyncResource } = require('node:async_hooks');
const { lib, assertPublished, assertNone, sleep } = require('./context-helpers');

const { ThreadContextManager, register } = lib;
const provider = new BasicTracerProvider();
const tracer = provider.getTracer('otel-thread-ctx-api-test');
const span = tracer.startSpan('api');
const spanContext = trace.setSpan(ROOT_CONTEXT, span);
const nodeRunInAsyncScope = AsyncResource.prototype.runInAsyncScope;

test('disable() removes the hooks and clears the record; enable() works again', async () => {
  const manager = new ThreadContextManager().enable();
  try {
    await manager.with(spanContext, async () => {
      await sleep(1);
      assertPublished(span, 'after await, enabled');
      manager.disable();
      assertNone('right after disable() inside the span');
      await sleep(1);
      assertNone('after await, disabled');
    });
    manager.with(spanContext, () => assertNone('with() of a disabled manager'));
    manager.enable();
    manager.with(spanContext, () => {
      manager.disable();
      lib.setSpanContext(span.spanContext().traceId, 'aaaaaaaaaaaaaaaa', 1);
    });
    assert.equal(lib.getSpanContext().spanId, 'aaaaaaaaaaaaaaaa',
      'expected a with() that spans disable() not to write the record when it returns');
    lib.clearSpanContext();
    manager.enable();
    await manager.with(spanContext, async () => {
      assertPublished(span, 'with() after enable() again');
      await sleep(1);
      assertPublished(span, 'after await, enabled again');
    });
    assertNone('after the with() of the re-enabled manager');
  } finally {
    manager.disable();
  }
});

test('AsyncResource scopes publish their span while enabled; disable() gives runInAsyncScope back', () => {
  const manager = new ThreadContextManager().enable();
  const resource = manager.with(spanContext, () => new AsyncResource('OTEL_THREAD_CTX_TEST'));
  try {
    resource.runInAsyncScope(() => assertPublished(span, 'in the scope of a resource made in the span'));
    assertNone('after the scope');
  } finally {
    manager.disable();
    resource.emitDestroy();
  }
  assert.equal(AsyncResource.prototype.runInAsyncScope, nodeRunInAsyncScope,
    'expected disable() to leave AsyncResource.prototype.runInAsyncScope as Node has it');
  resource.runInAsyncScope(() => assertNone('in a scope after disable()'));
});

test('cheap mode (asyncTracking: false) publishes only around with()', async () => {
  const manager = new ThreadContextManager({ asyncTracking: false }).enable();
  try {
    assert.equal(manager.mechanism, 'none');
    const done = manager.with(spanContext, async () => {
      assertPublished(span, 'synchronous part of with()');
      await sleep(1);
      assert.equal(trace.getSpan(manager.active()), span, 'expected the delegate to keep the context');
      assertNone('after await in cheap mode (never a wrong span)');
    });
    assertNone('after with() returned');
    await done;
  } finally {
    manager.disable();
  }
});

test('the newest enable() takes the record over; the previous manager forwards its calls to it', async () => {
  const first = new ThreadContextManager().enable();
  const second = new ThreadContextManager().enable(); // no throw: a restarted SDK enables a new manager
  try {
    assert.deepEqual([first.enabled, second.enabled], [false, true]);
    assertNone('right after the takeover');
    // What an API that still holds the first manager does (NodeSDK cannot unregister it).
    await first.with(spanContext, async () => {
      assertPublished(span, "the first manager's with()");
      assert.equal(trace.getSpan(first.active()), span);
      assert.equal(trace.getSpan(second.active()), span, 'the context lives in the second manager');
      await sleep(1);
      assertPublished(span, "after await, through the second manager's hooks");
    });
    assertNone('after the forwarded with()');
    const bound = first.bind(spanContext, () => lib.getSpanContext());
    assert.equal(bound().spanId, span.spanContext().spanId, 'a function bound through the first manager');
    first.disable(); // already disabled: the second keeps the record
    assert.equal(second.enabled, true);
    await second.with(spanContext, async () => {
      await sleep(1);
      assertPublished(span, 'the second manager after the first one was disabled');
    });
    first.enable(); // and back
    assert.deepEqual([first.enabled, second.enabled], [true, false]);
    await first.with(spanContext, async () => {
      await sleep(1);
      assertPublished(span, 'the first manager after taking the record back');
    });
  } finally {
    first.disable();
    second.disable();
  }
  assertNone('after both are disabled');
});

test('bad arguments throw TypeErrors naming the argument', () => {
  assert.throws(() => new ThreadContextManager(5), { name: 'TypeError', message: /^options: expected an object, got number 5/ });
  assert.throws(() => new ThreadContextManager(null), { name: 'TypeError', message: /^options: expected an object, got null/ });
  assert.throws(() => new ThreadContextManager({ asyncTracking: 'yes' }),
    { name: 'TypeError', message: /^options.asyncTracking: expected a boolean, got string "yes"/ });
  assert.throws(() => new ThreadContextManager({ contextManager: 3 }),
    { name: 'TypeError', message: /^options.contextManager: expected a ContextManager object/ });
  assert.throws(() => new ThreadContextManager({ contextManager: { active() {} } }),
    { name: 'TypeError', message: /^options.contextManager: expected a ContextManager, missing method\(s\) with, bind, enable, disable/ });
  assert.throws(() => new ThreadContextManager({ contextManager: new ThreadContextManager() }),
    { name: 'TypeError', message: /^options.contextManager: .*got a ThreadContextManager/ });
  assert.throws(() => new ThreadContextManager({ atributes: ['http.route'] }),
    { name: 'TypeError', message: /^options.atributes: unknown option \(expected contextManager, asyncTracking, attributes, resource, schema, tlsSchemaVersion, allocations\)$/ });
  assert.throws(() => new ThreadContextManager({ attributes: 'http.route' }),
    { name: 'TypeError', message: /^options.attributes: expected an array of attribute key strings/ });
  assert.throws(() => new ThreadContextManager({ resource: 'shop' }),
    { name: 'TypeError', message: /^options.resource: expected an OpenTelemetry Resource/ });
  const manager = new ThreadContextManager();
  assert.throws(() => manager.with(ROOT_CONTEXT, 'not a function'), { name: 'TypeError', message: /^fn: expected a function/ });
  assert.throws(() => register('x'), { name: 'TypeError', message: /^options: expected an object, got string/ });
  assert.throws(() => register({ asyncTracking: 1 }), { name: 'TypeError', message: /^options.asyncTracking/ });
  assertNone('after the rejected calls');
  assert.equal(context.active(), ROOT_CONTEXT, 'expected no global manager installed by a rejected register()');
});

test('bind() routes through the publishing with(); non-functions are returned as is', () => {
  const manager = new ThreadContextManager().enable();
  try {
    const bound = manager.bind(spanContext, function named(a, b) { assertPublished(span, 'bound function'); return [this, a, b]; });
    assert.equal(bound.length, 2, 'expected the bound function to keep its length');
    const receiver = {};
    assert.deepEqual(bound.call(receiver, 1, 2), [receiver, 1, 2]);
    assertNone('after the bound function returned');
    const plain = { x: 1 };
    assert.equal(manager.bind(spanContext, plain), plain);
    for (let arity = 0; arity <= 6; arity++) {
      const params = Array.from({ length: arity }, (_, i) => `p${i}`);
      // eslint-disable-next-line no-new-func
      const target = new Function(...params, 'return Array.from(arguments);');
      const boundN = manager.bind(spanContext, target);
      assert.equal(boundN.length, arity, `expected a bound function of arity ${arity} to keep it`);
      assert.deepEqual(boundN(1, 2, 3, 4, 5, 6, 7), [1, 2, 3, 4, 5, 6, 7], `arity ${arity}: every argument passed on`);
    }
  } finally {
    manager.disable();
  }
});

test('attach() publishes until the token is disposed', { skip: typeof new AsyncLocalStorageContextManager().attach !== 'function' }, () => {
  const manager = new ThreadContextManager().enable();
  try {
    assert.equal(typeof manager.attach, 'function');
    const token = manager.attach(spanContext);
    assertPublished(span, 'after attach()');
    assert.equal(trace.getSpan(manager.active()), span);
    token.dispose();
    assertNone('after dispose()');
    token.dispose();
    assertNone('after a second dispose()');
  } finally {
    manager.disable();
  }
});

test('register() wraps the context manager already installed and returns the enabled manager', async () => {
  const installed = new AsyncLocalStorageContextManager();
  assert.ok(context.setGlobalContextManager(installed.enable()));
  const manager = register();
  try {
    assert.ok(manager instanceof ThreadContextManager && manager.enabled);
    assert.equal(register(), manager, 'expected a second register() to return the same manager');
    await context.with(spanContext, async () => {
      assert.equal(trace.getSpan(installed.active()), span, 'expected the installed manager to hold the context');
      await sleep(1);
      assertPublished(span, 'after await under register()');
    });
    assertNone('after the global with()');
  } finally {
    context.disable();
    manager.disable();
  }
});

test('any delegate works: the async_hooks-based AsyncHooksContextManager', async () => {
  const manager = new ThreadContextManager({ contextManager: new AsyncHooksContextManager() }).enable();
  try {
    const other = tracer.startSpan('other');
    await Promise.all([span, other].map((s) => manager.with(trace.setSpan(ROOT_CONTEXT, s), async () => {
      for (let i = 0; i < 5; i++) {
        await (i % 2 ? sleep(1) : Promise.resolve());
        assertPublished(s, `span ${s.spanContext().spanId} step ${i} with AsyncHooksContextManager`);
      }
    })));
    assertNone('after the AsyncHooksContextManager spans');
    other.end();
  } finally {
    manager.disable();
  }
});
