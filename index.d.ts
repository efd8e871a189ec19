// Type definitions for otel-thread-ctx.
//
// ---------------------------------------------------------------------------------------------
// Native addon: one OTEP 4947 Thread-Local Context Record per JS thread (main thread and each
// worker_threads Worker), in a pinned page that `otel_thread_ctx_v1` points at.
// ---------------------------------------------------------------------------------------------

/** A span context as published in the record. Ids are lowercase hex. */
export interface PublishedSpanContext {
  /** 32 lowercase hex characters. */
  traceId: string;
  /** 16 lowercase hex characters. */
  spanId: string;
  /** W3C trace flags byte (bit 0 = sampled). */
  traceFlags: number;
}

/**
 * Publishes a span context for the calling thread (valid = 0, write ids and flags, valid = 1).
 * Attributes in the record are dropped. While a ThreadContextManager is enabled on the thread,
 * the write lasts until its next switch (callback entry or exit, with() entry or exit), which
 * publishes what the manager says again: no later callback can publish a stale span.
 *
 * @param traceId 32 hex characters (any case) or a 16-byte Uint8Array/Buffer; not all zero.
 * @param spanId 16 hex characters (any case) or an 8-byte Uint8Array/Buffer; not all zero.
 * @param traceFlags integer 0-255; defaults to 1 (sampled).
 * @throws TypeError (code ERR_INVALID_ARG_TYPE) for a wrong argument type or more than 3 arguments;
 *   RangeError (ERR_INVALID_ARG_VALUE / ERR_OUT_OF_RANGE) for a wrong length, a non-hex character,
 *   an all-zero id or flags out of range; messages read "<argument>: expected <what>, got <what>".
 *   A rejected call leaves the record exactly as it was.
 */
export function setSpanContext(traceId: string | Uint8Array, spanId: string | Uint8Array, traceFlags?: number): void;

/**
 * Publishes none, the one "none" of the package: valid, flags and attrs size zero (the ids stay;
 * readers ignore them). Same lifetime as setSpanContext under an enabled manager.
 */
export function clearSpanContext(): void;

/** The published span context read back from the record (what a reader sees), or null. */
export function getSpanContext(): PublishedSpanContext | null;

/** threadInfo(): JSON.stringify writes recordAddress as a hex string. */
export interface ThreadInfo {
  /** False when the native addon could not load here (unsupported platform): calls are no-ops. */
  supported: boolean;
  /** Linux thread id of the calling thread (null when unsupported). */
  tid: number | null;
  /** Address of the record, the value of this thread's `otel_thread_ctx_v1`. */
  recordAddress: bigint | null;
  /** Whether the page is mlock'ed. */
  pinned: boolean;
  /** Why the page is not pinned, else null. */
  pinError: string | null;
  /** Whether a fork() child sees a zeroed page (MADV_WIPEONFORK). */
  wipeOnFork: boolean;
  /** Static thread-pointer offset of `otel_thread_ctx_v1`, or null when glibc gave the module dynamic TLS. */
  tlsOffset: number | null;
  tlsModel: 'static' | 'dynamic' | 'unknown';
  /** 'mmap' normally; 'arraybuffer' on runtimes that refuse external ArrayBuffers. */
  pageBacking: 'mmap' | 'arraybuffer' | null;
  /** Why this thread has no record (or the view is unavailable), else null. */
  error: string | null;
  /** This thread's allocation sampling (V8's sampling heap profiler, started by `allocations`). */
  allocations: AllocationSamplingInfo;
}

/** Whether V8's sampling heap profiler runs on the calling thread, at what interval, or why not. */
export interface AllocationSamplingInfo {
  /** Started on this thread by the package (it then runs for the thread's life). */
  active: boolean;
  /** The mean bytes between samples, one per process (the first thread to start decides), or null. */
  samplingIntervalBytes: number | null;
  /** Why it could not start on this thread (also emitted once as a process warning), else null. */
  error: string | null;
}

/**
 * `allocations` option: true samples at the default mean interval (512 KiB); an object sets it
 * (an integer from 1024 to 2^30 bytes). Unset: OTEL_THREAD_CTX_ALLOCATIONS decides (1/true, 0/false,
 * or an interval in bytes).
 */
export type AllocationsOption = boolean | { samplingIntervalBytes?: number };

/** Facts about the calling thread's record page and TLS placement. */
export function threadInfo(): ThreadInfo;

/**
 * A 640-byte Uint8Array aliasing the calling thread's record (its `.buffer` is the whole page; the
 * record starts at byteOffset 0), to look at it. Write with setSpanContext / clearSpanContext:
 * the thread's writer (what the context manager publishes through) does not see stores made
 * through this view. Layout: see `layout`.
 */
export function recordView(): Uint8Array;

/** Byte offsets of the OTEP 4947 record. */
export const layout: {
  readonly TRACE_ID_OFFSET: 0;
  readonly SPAN_ID_OFFSET: 16;
  readonly VALID_OFFSET: 24;
  readonly FLAGS_OFFSET: 25;
  readonly ATTRS_SIZE_OFFSET: 26;
  readonly ATTRS_OFFSET: 28;
  readonly HEADER_SIZE: 28;
  readonly RECORD_SIZE: 640;
  readonly MAX_ATTRS_SIZE: 612;
};

// ---------------------------------------------------------------------------------------------
// Context manager layer (js/manager/, js/tls/context-manager.js,
// js/nodejs/frame-context-manager.js): keeps the calling thread's record equal to the active
// OpenTelemetry span. Needs @opentelemetry/api and (for the default delegate)
// @opentelemetry/context-async-hooks.
// ---------------------------------------------------------------------------------------------

import type { Context, ContextManager, Span, SpanOptions, Tracer } from '@opentelemetry/api';

export interface ThreadContextManagerOptions {
  /**
   * How readers find the span (docs/nodejs-schema.md). 'tls' (default): the OTEP 4947 record
   * behind `otel_thread_ctx_v1`, kept current at every async switch by hooks; every OTEP 4947
   * reader, every Node version. 'nodejs': the `nodejs_v1_dev` schema, the record reached from
   * V8's AsyncContextFrame through `otel_thread_ctx_nodejs_v1`; no hooks, nothing per switch;
   * needs AsyncContextFrame (Node 24+, 22 with --experimental-async-context-frame). Where it is
   * not available the manager publishes with 'tls' after one process warning
   * (OTEL_THREAD_CTX_SCHEMA_FALLBACK); `schema` and `schemaFallback` say so.
   */
  schema?: 'tls' | 'nodejs';
  /**
   * The `threadlocal.schema_version` announced while the manager publishes with 'tls':
   * 'tlsdesc_v1_dev' (default: what every reader keys on today) or 'tls_v1' (OTEP 4947's new name
   * for the same record, for readers that take it).
   */
  tlsSchemaVersion?: 'tlsdesc_v1_dev' | 'tls_v1';
  /** Where contexts are stored; default: a new AsyncLocalStorageContextManager. Not with schema 'nodejs' (TypeError). */
  contextManager?: ContextManager;
  /**
   * Attribute keys whose values the records carry (threadlocal.attribute_key_map), appended to
   * the process-wide key map at enable(): at most 256 keys of at most 255 UTF-8 bytes, 4096 bytes
   * together; known keys keep their index.
   */
  attributes?: string[];
  /**
   * The process context's resource, given explicitly: it is published at enable() and never
   * replaced by the SDK's. Without it, the environment's (OTEL_SERVICE_NAME /
   * OTEL_RESOURCE_ATTRIBUTES) is published at enable() and the SDK's own resource as soon as a
   * span carries it.
   */
  resource?: ResourceLike;
  /**
   * Default true: publish on every async callback entry and exit (promise reactions, timers,
   * immediates, nextTick, I/O, AsyncResource scopes), so that after an `await` the record shows the
   * resumed span and between callbacks none. false ("cheap mode"): publish only around with();
   * never a wrong span, but none after an `await`.
   */
  asyncTracking?: boolean;
  /**
   * Sample allocations for outside profilers (`thread-ctx record --alloc`): V8's sampling heap
   * profiler on every thread that enables a manager with this option, started once per thread and
   * kept for the thread's life; nothing runs in JavaScript per allocation. A failure to start is a
   * process warning. Default: OTEL_THREAD_CTX_ALLOCATIONS. See docs/allocations.md.
   * @throws TypeError / RangeError naming `options.allocations…` for a bad value.
   */
  allocations?: AllocationsOption;
}

/**
 * An @opentelemetry/api ContextManager that delegates storage to another manager and publishes the
 * span of the active context in this thread's record (invalid or missing span: none; an unsampled
 * but valid span is published with its flags; a span that has ended: none, also where its context
 * lives on in timers or bound functions). With NodeSDK or provider.register(), passing it as
 * `contextManager` is the whole setup: it also publishes the process context, with the SDK's
 * resource once a span carries it.
 * @throws TypeError naming the option for bad or unknown options.
 */
export class ThreadContextManager implements ContextManager {
  constructor(options?: ThreadContextManagerOptions);
  /** The hook mechanism chosen for this runtime by feature detection, 'none' in cheap mode, 'AsyncContextFrame' with schema 'nodejs' (no hooks). */
  readonly mechanism: 'async_hooks' | 'async_hooks+scopes' | 'promiseHooks+async_hooks' | 'none' | 'AsyncContextFrame';
  /** The schema in effect: 'nodejs' only where it was asked for and is available. */
  readonly schema: 'tls' | 'nodejs';
  /** Why schema 'nodejs' was asked for and 'tls' is in effect (no AsyncContextFrame, no V8 addon for this Node ABI, ...), or null. */
  readonly schemaFallback: string | null;
  /** The threadlocal.schema_version this manager announces while it publishes with 'tls'. */
  readonly tlsSchemaVersion: 'tlsdesc_v1_dev' | 'tls_v1';
  readonly enabled: boolean;
  /** The calling thread's allocation sampling (`threadInfo().allocations`). */
  readonly allocations: AllocationSamplingInfo;
  active(): Context;
  /** Publishes the span of `context` while `fn` runs, restores the previous record after. @throws TypeError when fn is not a function. */
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(context: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F>;
  /** Functions and EventEmitter listeners bound here run through this manager's with(). */
  bind<T>(context: Context, target: T): T;
  /**
   * Installs the hooks, publishes none, and takes the thread's record over: a manager enabled
   * before on this thread is disabled and forwards active/with/bind/attach to this one (so an API
   * that still holds it keeps working). Publishes the process context and registers `attributes`;
   * a failure there is a process warning.
   */
  enable(): this;
  /** Removes every hook, clears the record and disables the delegate. */
  disable(): this;
  /** Present when the delegate has attach(): switches to `context` until the token is disposed. */
  attach?(context: Context): { dispose(): void };
}


/**
 * An SDK span processor (`spanProcessors` of NodeSDK or a tracer provider) that writes this
 * thread's `thread.id` and `thread.name` on every span when it starts, for the spans no one makes
 * active (fetch's client spans): the context manager writes them at a span's first activation.
 * A span that has a `thread.id` keeps it.
 */
export class ThreadSpanProcessor {
  constructor();
  onStart(span: Span, parentContext: Context): void;
  onEnd(span: unknown): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * For apps that keep another context manager: tracer.startActiveSpan(name, [options, [context]], fn)
 * that also keeps this thread's record on the span for the duration of fn, including its awaits.
 * @throws TypeError (tracer, name, fn) / RangeError (argument count) naming the argument.
 */
export function traceActive<F extends (span: Span) => unknown>(tracer: Tracer, name: string, fn: F): ReturnType<F>;
export function traceActive<F extends (span: Span) => unknown>(tracer: Tracer, name: string, options: SpanOptions, fn: F): ReturnType<F>;
export function traceActive<F extends (span: Span) => unknown>(tracer: Tracer, name: string, options: SpanOptions, context: Context, fn: F): ReturnType<F>;

// ---------------------------------------------------------------------------------------------
// OTEP 4719 process context and record attributes (src/process_ctx/, js/process-context/,
// js/record/attrs-data.js, js/tls/span-attributes.js). The process context is process-wide: one
// OTEL_CTX mapping shared by the main thread and every Worker; any thread may publish or append
// keys.
// ---------------------------------------------------------------------------------------------

/** An OpenTelemetry Resource (1.x or 2.x): only its `attributes` are read. */
export interface ResourceLike {
  readonly attributes: Record<string, string | number | boolean | Array<string | number | boolean | null | undefined> | undefined>;
  readonly asyncAttributesPending?: boolean;
  waitForAsyncAttributes?(): Promise<void>;
}

/**
 * register()'s options: the ThreadContextManager's. service.name, telemetry.sdk.*, process.pid and
 * service.instance.id (a UUID generated once per process) are added to a resource when absent. A
 * worker's register() without `resource` keeps what the process already published.
 */
export type RegisterOptions = ThreadContextManagerOptions;

/**
 * For apps that do not pass a context manager to NodeSDK / provider.register(): installs a
 * ThreadContextManager as the global context manager, delegating to the manager already installed
 * (or a new AsyncLocalStorageContextManager), enables it and returns it; returns the installed one
 * when it is already an enabled ThreadContextManager. Also publishes the process context (always
 * when `resource` is given, else only if the process has none yet) and appends `attributes` to the
 * key map. Options are validated before anything changes: TypeError / RangeError naming
 * `options.<key>…`, also for an unknown key.
 */
export function register(options?: RegisterOptions): ThreadContextManager;

export interface ProcessContextInfo {
  /** Address of the 32-byte header ("OTEL_CTX", version 2, payload size, published-at, payload pointer). */
  headerAddress: bigint;
  payloadAddress: bigint;
  payloadSize: number;
  /** CLOCK_BOOTTIME ns of the last publish; strictly increases on every republish. */
  publishedAt: bigint;
  publishCount: number;
  /** 'memfd' (maps name /memfd:OTEL_CTX) or 'anonymous' (memfd_create refused). */
  backing: 'memfd' | 'anonymous';
  memfdError: string | null;
  /** prctl(PR_SET_VMA_ANON_NAME) failure (EINVAL on kernels without CONFIG_ANON_VMA_NAME): harmless with a memfd. */
  anonNameError: string | null;
  dontforkError: string | null;
  serviceInstanceId: string;
  /** Keys in threadlocal.attribute_key_map. */
  keyCount: number;
  /** Where the published resource came from: the environment, the SDK's spans, or given explicitly. */
  origin: 'environment' | 'sdk' | 'explicit' | null;
  /** Resource attributes left out of the payload (unpublishable, or over the limits); each publish warns. */
  droppedAttributeCount: number;
  /** threadlocal.schema_version: the last enabled manager's: 'tlsdesc_v1_dev' (or 'tls_v1' when its tlsSchemaVersion says so), or 'nodejs_v1_dev' for schema 'nodejs'. */
  schemaVersion: 'tlsdesc_v1_dev' | 'tls_v1' | 'nodejs_v1_dev';
}

/**
 * (Re)publishes the process context with `options.resource` (or the environment's attributes). A
 * resource given here is explicit: the SDK's is no longer followed. Attribute values that cannot be
 * published (NaN, objects, over 4096 bytes, past 128 attributes or the 16,383-byte payload) are
 * left out with a process warning. Returns null when the native addon is unavailable.
 * @throws TypeError naming `options.resource…` when it is not a Resource (or an unknown option);
 *   nothing is published.
 */
export function publishProcessContext(options?: { resource?: ResourceLike }): ProcessContextInfo | null;

/** The published process context, or null before the first publish (or without the addon). */
export function processContextInfo(): ProcessContextInfo | null;

/**
 * Appends keys to the process-wide attribute key map and republishes; returns each key's index
 * (the key byte in record attrs-data). All or nothing.
 * @throws TypeError (not an array, a non-string key) / RangeError (empty or duplicate key, a key
 *   over 255 UTF-8 bytes, more than 256 keys or 4096 bytes of keys in all) naming `attributes[i]`.
 */
export function registerAttributeKeys(keys: string[]): number[];

/** threadlocal.attribute_key_map as published (index = key byte). */
export function attributeKeyMap(): string[];

/**
 * Sets a record attribute of the active span: only its thread-context record changes, not the
 * span's own attributes (span.setAttribute() of a registered key updates both; the latest write of
 * a key wins). `undefined` removes it. Values are UTF-8, cut at 255 bytes on a character boundary; a record's attrs-data
 * holds at most 612 bytes: registered keys in index order, an entry that does not fit is dropped
 * whole and counted by droppedAttributeCount(). Local child spans start with their parent's values.
 * @returns false when there is no active span (or its record was built before any key was registered).
 * @throws TypeError (key or value not a string) / RangeError (key not in the key map).
 */
export function setAttribute(key: string, value: string | undefined): boolean;

/**
 * Attribute entries dropped whole from this thread's records because 612 bytes were full, each
 * span and key counted once (however often its record is re-encoded).
 */
export function droppedAttributeCount(): number;

/** What a `nodejs_v1_dev` reader sees (getFrameSpanContext()): the record's ids, flags and attrs-data. */
export interface FrameSpanContext extends PublishedSpanContext {
  /** attrs-data: [key index u8][length u8][UTF-8 bytes] ... (a copy). */
  attrs: Uint8Array;
}

/**
 * Schema 'nodejs': the span context a `nodejs_v1_dev` reader sees on this thread now, found the
 * reader's way (otel_thread_ctx_nodejs_v1 -> the AsyncContextFrame -> the holder -> the record) but
 * in-process. Null when no schema 'nodejs' manager owns this thread, or the frame holds no live span.
 */
export function getFrameSpanContext(): FrameSpanContext | null;

/** Schema 'nodejs' on this thread: whether it is available (and why not), where its struct is, how its record pages are held. */
export interface NodejsSchemaInfo {
  available: boolean;
  /** Why it is not available (no AsyncContextFrame, no V8 addon for this Node ABI, the layout check failed), or null. */
  reason: string | null;
  /** Whether otel_thread_ctx_nodejs_v1 is published on this thread (a schema 'nodejs' manager was enabled here). */
  published: boolean;
  /** This thread's otel_thread_ctx_nodejs_v1. */
  structAddress: number | null;
  /** The struct's record_slot_offset: where a holder keeps its record's address (24 on Node 22, 32 on 24 and later). */
  recordSlotOffset: number | null;
  /** Record pages mapped in the process, how many of them mlock pinned, and the last mlock error. */
  pages: number;
  pinnedPages: number;
  pinError: string | null;
}

export function nodejsSchemaInfo(): NodejsSchemaInfo;
/** Which JIT naming the process was started with (its command line and NODE_OPTIONS). */
export interface JitNamesStatus {
  /** --perf-basic-prof(-only-functions): V8 writes /tmp/perf-PID.map (functions). */
  perfMap: boolean;
  /** --perf-prof: V8 writes jit-PID.dump into the working directory (functions and lines). */
  jitdump: boolean;
  /** --interpreted-frames-native-stack, at startup or set by enableJitNames(). */
  interpretedFrames: boolean;
  perfMapPath: string | null;
  jitdumpPath: string | null;
}

export interface JitNamesOptions {
  /** One process warning when no perf map or jitdump is written (default true). */
  warn?: boolean;
  /** Turn on --interpreted-frames-native-stack for code compiled from now on, when a perf map or jitdump is written (default true). */
  interpretedFrames?: boolean;
  /** Delete /tmp/perf-PID.map when the process exits (default false; V8 leaves it behind). */
  removePerfMapOnExit?: boolean;
}

/**
 * Does what a running process can so that profilers outside it name its JS frames: V8's perf map
 * and jitdump can only be turned on at startup (node flags or NODE_OPTIONS), so this warns once
 * when neither is written; with one, interpreted frames of code compiled afterwards are named too.
 * `false` does nothing (for an option passed through). Throws TypeError for bad options only.
 */
export function enableJitNames(options?: boolean | JitNamesOptions): JitNamesStatus & { problems: string[] };
export function jitNamesStatus(): JitNamesStatus;
