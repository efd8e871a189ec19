// Every export of otel-thread-ctx, called as index.d.ts types it, with what it returns checked
// at run time against those types: tsc checks the calls, running the compiled file checks that
// the package does what its types say. esm.mts and cjs.cts pass in the module as each style
// imports it. The `@ts-expect-error` calls are ones the types forbid; the package must refuse
// them too, with the TypeError or RangeError its types promise.
import type * as ThreadCtx from 'otel-thread-ctx';
import type { ProcessContextInfo, PublishedSpanContext, ThreadInfo } from 'otel-thread-ctx';
import { context, trace, ROOT_CONTEXT } from '@opentelemetry/api';
import type { Span } from '@opentelemetry/api';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN_ID = 'b7ad6b7169203331';

function check(ok: boolean, what: string): asserts ok {
  if (!ok) throw new Error(`types and runtime disagree: ${what}`);
}

function refuses(kind: 'TypeError' | 'RangeError', call: () => unknown, what: string): void {
  try {
    call();
  } catch (err) {
    check(err instanceof Error && err.name === kind, `${what}: expected a ${kind}, got ${String(err)}`);
    return;
  }
  throw new Error(`types and runtime disagree: ${what} is a type error, but the package accepted it`);
}

const isHex = (s: string, n: number): boolean => new RegExp(`^[0-9a-f]{${n}}$`).test(s);

function spanContextOk(sc: PublishedSpanContext | null, traceId: string, spanId: string): boolean {
  return sc !== null && isHex(sc.traceId, 32) && isHex(sc.spanId, 16) && sc.traceId === traceId && sc.spanId === spanId &&
    typeof sc.traceFlags === 'number';
}

function recordApi(api: typeof ThreadCtx): void {
  const info: ThreadInfo = api.threadInfo();
  check(info.supported, 'threadInfo().supported in a checkout with the addon built');
  check(typeof info.tid === 'number' && typeof info.recordAddress === 'bigint', 'threadInfo() tid and recordAddress');
  check(['static', 'dynamic', 'unknown'].includes(info.tlsModel), `threadInfo().tlsModel ${info.tlsModel}`);
  check(info.tlsOffset === null || typeof info.tlsOffset === 'number', 'threadInfo().tlsOffset');
  check(info.pageBacking === 'mmap' || info.pageBacking === 'arraybuffer' || info.pageBacking === null, 'threadInfo().pageBacking');

  api.setSpanContext(TRACE_ID, SPAN_ID);
  check(spanContextOk(api.getSpanContext(), TRACE_ID, SPAN_ID), 'setSpanContext(hex, hex) then getSpanContext()');
  api.setSpanContext(new Uint8Array(16).fill(1), new Uint8Array(8).fill(2), 0);
  check(spanContextOk(api.getSpanContext(), '01'.repeat(16), '02'.repeat(8)), 'setSpanContext(bytes, bytes, 0)');
  api.clearSpanContext();
  check(api.getSpanContext() === null, 'clearSpanContext() then getSpanContext() is null');

  const view: Uint8Array = api.recordView();
  check(view instanceof Uint8Array && view.length === api.layout.RECORD_SIZE, 'recordView() is RECORD_SIZE bytes');
  const offsets: 0 = api.layout.TRACE_ID_OFFSET;
  check(offsets === 0 && api.layout.HEADER_SIZE === 28 && api.layout.MAX_ATTRS_SIZE === 612, 'layout constants');

  // @ts-expect-error ids are strings or bytes
  refuses('TypeError', () => api.setSpanContext(1, SPAN_ID), 'setSpanContext(number, …)');
  // @ts-expect-error at most three arguments
  refuses('TypeError', () => api.setSpanContext(TRACE_ID, SPAN_ID, 1, 1), 'setSpanContext with four arguments');
}

function processContextApi(api: typeof ThreadCtx): void {
  const indexes: number[] = api.registerAttributeKeys(['http.route', 'typed.key']);
  check(indexes.length === 2 && indexes.every((i) => Number.isInteger(i)), 'registerAttributeKeys() returns indexes');
  const keys: string[] = api.attributeKeyMap();
  check(keys.includes('typed.key'), 'attributeKeyMap() holds the registered key');
  const published: ProcessContextInfo | null = api.publishProcessContext({
    resource: { attributes: { 'service.name': 'typed-test', 'service.version': '1', 'process.pid': 1, 'typed.flag': true } },
  });
  check(published !== null && typeof published.headerAddress === 'bigint' && published.origin === 'explicit', 'publishProcessContext()');
  const info = api.processContextInfo();
  check(info !== null && info.schemaVersion === 'tlsdesc_v1_dev' && info.keyCount >= 2, 'processContextInfo()');
  check(info.backing === 'memfd' || info.backing === 'anonymous', `processContextInfo().backing ${info.backing}`);

  // @ts-expect-error keys are an array of strings
  refuses('TypeError', () => api.registerAttributeKeys('http.route'), 'registerAttributeKeys(string)');
  // @ts-expect-error only `resource` is an option
  refuses('TypeError', () => api.publishProcessContext({ resorce: {} }), 'publishProcessContext({ resorce })');
}

async function managerApi(api: typeof ThreadCtx): Promise<void> {
  // @ts-expect-error a misspelt option is an excess property, and an unknown option at run time
  refuses('TypeError', () => new api.ThreadContextManager({ atributes: ['x'] }), 'new ThreadContextManager({ atributes })');
  // @ts-expect-error asyncTracking is a boolean
  refuses('TypeError', () => new api.ThreadContextManager({ asyncTracking: 'yes' }), 'asyncTracking: string');

  // @ts-expect-error allocations is a boolean or { samplingIntervalBytes }
  refuses('TypeError', () => new api.ThreadContextManager({ allocations: 'on' }), 'allocations: string');
  refuses('RangeError', () => new api.ThreadContextManager({ allocations: { samplingIntervalBytes: 10 } }), 'samplingIntervalBytes below 1024');
  const sampling: ThreadCtx.AllocationSamplingInfo = new api.ThreadContextManager({ allocations: { samplingIntervalBytes: 1 << 20 } }).allocations;
  check(sampling.active === false && sampling.samplingIntervalBytes === null, 'allocation sampling starts at enable(), not before');
  const unused = new api.ThreadContextManager({ attributes: ['http.route'], asyncTracking: false });
  check(unused.mechanism === 'none' && unused.enabled === false, 'a cheap-mode manager, not enabled');

  const manager: ThreadCtx.ThreadContextManager = api.register({ attributes: ['http.route'] });
  check(manager instanceof api.ThreadContextManager && manager.enabled, 'register() returns the enabled manager');
  check(['async_hooks', 'async_hooks+scopes', 'promiseHooks+async_hooks'].includes(manager.mechanism), `mechanism ${manager.mechanism}`);

  const span: Span = trace.wrapSpanContext({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 });
  const inside = await context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
    await Promise.resolve();
    const set: boolean = api.setAttribute('http.route', '/typed');
    return { read: api.getSpanContext(), set };
  });
  check(spanContextOk(inside.read, TRACE_ID, SPAN_ID) && inside.set, 'the span is published inside context.with() after an await');
  check(api.getSpanContext() === null, 'and none outside it');
  check(api.setAttribute('http.route', undefined) === false, 'setAttribute() without an active span is false');
  // @ts-expect-error values are strings
  refuses('TypeError', () => api.setAttribute('http.route', 42), 'setAttribute(key, number)');

  const tracer = trace.getTracer('typed-test');
  const returned: Promise<string> = api.traceActive(tracer, 'typed', async (s: Span) => {
    await Promise.resolve();
    s.end();
    return 'done';
  });
  check((await returned) === 'done', 'traceActive() returns what its callback returns');
  // @ts-expect-error the callback is required: too few arguments
  refuses('RangeError', () => api.traceActive(tracer, 'typed'), 'traceActive() without a callback');
  // @ts-expect-error the callback is a function
  refuses('TypeError', () => api.traceActive(tracer, 'typed', 'callback'), 'traceActive() with a string for a callback');

  const processor = new api.ThreadSpanProcessor();
  const unactivated = tracer.startSpan('never active');
  processor.onStart(unactivated, ROOT_CONTEXT);
  await processor.forceFlush();
  unactivated.end();

  const dropped: number = api.droppedAttributeCount();
  check(Number.isInteger(dropped) && dropped >= 0, 'droppedAttributeCount()');
  manager.disable();
}

// Schema 'nodejs' where the runtime has it ('tls', and the reason, where it does not).
async function nodejsSchemaApi(api: Api): Promise<void> {
  const info: ThreadCtx.NodejsSchemaInfo = api.nodejsSchemaInfo();
  check(typeof info.available === 'boolean' && (info.available ? info.reason === null : typeof info.reason === 'string'), 'nodejsSchemaInfo()');
  const manager = new api.ThreadContextManager({ schema: 'nodejs' });
  const schema: 'tls' | 'nodejs' = manager.schema;
  const fallback: string | null = manager.schemaFallback;
  check(schema === (info.available ? 'nodejs' : 'tls') && (fallback === null) === info.available, `schema ${schema} (${fallback})`);
  // @ts-expect-error the schemas are 'tls' and 'nodejs'
  refuses('RangeError', () => new api.ThreadContextManager({ schema: 'v8' }), "new ThreadContextManager({ schema: 'v8' })");
  const tlsV1 = new api.ThreadContextManager({ tlsSchemaVersion: 'tls_v1' });
  const tlsVersion: 'tlsdesc_v1_dev' | 'tls_v1' = tlsV1.tlsSchemaVersion;
  check(tlsVersion === 'tls_v1' && new api.ThreadContextManager().tlsSchemaVersion === 'tlsdesc_v1_dev', 'tlsSchemaVersion');
  // @ts-expect-error the TLS schema versions are 'tlsdesc_v1_dev' and 'tls_v1'
  refuses('RangeError', () => new api.ThreadContextManager({ tlsSchemaVersion: 'tls_v2' }), "new ThreadContextManager({ tlsSchemaVersion: 'tls_v2' })");
  if (!info.available) return;
  context.disable();
  context.setGlobalContextManager(manager.enable());
  check(manager.mechanism === 'AsyncContextFrame', `mechanism ${manager.mechanism}`);
  const span: Span = trace.wrapSpanContext({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 });
  const seen: ThreadCtx.FrameSpanContext | null = await context.with(trace.setSpan(ROOT_CONTEXT, span), async () => {
    await Promise.resolve();
    return api.getFrameSpanContext();
  });
  check(spanContextOk(seen, TRACE_ID, SPAN_ID) && seen !== null && seen.attrs instanceof Uint8Array, 'getFrameSpanContext() after an await');
  check(api.getFrameSpanContext() === null, 'and none outside it');
  manager.disable();
  context.disable();
}

function jitNamesApi(api: typeof ThreadCtx): void {
  const status: ThreadCtx.JitNamesStatus = api.jitNamesStatus();
  check(typeof status.perfMap === 'boolean' && typeof status.jitdump === 'boolean', 'jitNamesStatus() flags');
  check((status.perfMapPath === null) === !status.perfMap && (status.jitdumpPath === null) === !status.jitdump, 'jitNamesStatus() paths with their flags');
  const unchanged = api.enableJitNames(false);
  check(Array.isArray(unchanged.problems) && unchanged.problems.length === 0 && !unchanged.interpretedFrames, 'enableJitNames(false) sets nothing');
  // @ts-expect-error options are a boolean or an object
  refuses('TypeError', () => api.enableJitNames(5), 'enableJitNames(number)');
  // @ts-expect-error warn is a boolean
  refuses('TypeError', () => api.enableJitNames({ warn: 'yes' }), 'enableJitNames({ warn: string })');
}

/** The package's exports, as `require()` returns them. */
export type Api = typeof ThreadCtx;

export async function exercise(api: Api): Promise<void> {
  recordApi(api);
  processContextApi(api);
  jitNamesApi(api);
  await managerApi(api);
  await nodejsSchemaApi(api);
}
