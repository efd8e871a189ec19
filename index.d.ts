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
 * Attributes in the record are dropped.
 *
 * @param traceId 32 hex characters (any case) or a 16-byte Uint8Array/Buffer; not all zero.
 * @param spanId 16 hex characters (any case) or an 8-byte Uint8Array/Buffer; not all zero.
 * @param traceFlags integer 0-255; defaults to 1 (sampled).
 * @throws TypeError (code ERR_INVALID_ARG_TYPE) for a wrong argument type or more than 3 arguments;
 *   RangeError (ERR_INVALID_ARG_VALUE / ERR_OUT_OF_RANGE) for a wrong length, a non-hex character,
 *   an all-zero id or flags out of range. A rejected call leaves the record exactly as it was.
 */
export function setSpanContext(traceId: string | Uint8Array, spanId: string | Uint8Array, traceFlags?: number): void;

/** Detaches: valid = 0, then ids, flags and attrs size zeroed. */
export function clearSpanContext(): void;

/** The published span context read back from the record (what a reader sees), or null. */
export function getSpanContext(): PublishedSpanContext | null;

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
}

/** Facts about the calling thread's record page and TLS placement. */
export function threadInfo(): ThreadInfo;

/**
 * The JS fast path: a 640-byte Uint8Array aliasing the calling thread's record (its `.buffer` is the
 * whole page; the record starts at byteOffset 0). Stores land in the pinned page directly. Only
 * the owning thread may write, in this order: byte 24 (valid) = 0 first, then ids, flags, attrs
 * size and attrs, then valid = 1 last. Layout: see `layout`.
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
// Context manager layer (js/context-manager.js, js/register.js, js/trace-active.js): keeps the
// calling thread's record equal to the active OpenTelemetry span. Needs @opentelemetry/api and
// (for the default delegate) @opentelemetry/context-async-hooks.
// ---------------------------------------------------------------------------------------------

import type { Context, ContextManager, Span, SpanOptions, Tracer } from '@opentelemetry/api';

export interface ThreadContextManagerOptions {
  /** Where contexts are stored; default: a new AsyncLocalStorageContextManager. */
  contextManager?: ContextManager;
  /**
   * Default true: publish on every async callback entry and exit (promise reactions, timers,
   * immediates, nextTick, I/O, AsyncResource scopes), so that after an `await` the record shows the
   * resumed span and between callbacks none. false ("cheap mode"): publish only around with();
   * never a wrong span, but none after an `await`.
   */
  asyncTracking?: boolean;
}

/**
 * An @opentelemetry/api ContextManager that delegates storage to another manager and publishes the
 * span of the active context in this thread's record (invalid or missing span: none; an unsampled
 * but valid span is published with its flags; a span that has ended: none, also where its context
 * lives on in timers or bound functions). One enabled manager per JS thread.
 * @throws TypeError naming the option for bad options.
 */
export class ThreadContextManager implements ContextManager {
  constructor(options?: ThreadContextManagerOptions);
  /** The hook mechanism chosen for this runtime by feature detection, or 'none' in cheap mode. */
  readonly mechanism: 'async_hooks' | 'async_hooks(init)' | 'promiseHooks+async_hooks(init)' | 'none';
  readonly enabled: boolean;
  active(): Context;
  /** Publishes the span of `context` while `fn` runs, restores the previous record after. @throws TypeError when fn is not a function. */
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(context: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F>;
  /** Functions and EventEmitter listeners bound here run through this manager's with(). */
  bind<T>(context: Context, target: T): T;
  /** Installs the hooks and clears the record. @throws Error when another ThreadContextManager is enabled on this thread. */
  enable(): this;
  /** Removes every hook, clears the record and disables the delegate. */
  disable(): this;
  /** Present when the delegate has attach(): switches to `context` until the token is disposed. */
  attach?(context: Context): { dispose(): void };
}

/**
 * Installs a ThreadContextManager as the global context manager, delegating to the manager already
 * installed (or a new AsyncLocalStorageContextManager), enables it and returns it. Returns the
 * installed one when it is already a ThreadContextManager. With NodeSDK / NodeTracerProvider pass
 * `contextManager: new ThreadContextManager()` instead.
 * @throws TypeError for bad options; Error when another ThreadContextManager is enabled on this thread.
 */
export function register(options?: ThreadContextManagerOptions): ThreadContextManager;

/**
 * For apps that keep another context manager: tracer.startActiveSpan(name, [options, [context]], fn)
 * that also keeps this thread's record on the span for the duration of fn, including its awaits.
 * @throws TypeError (tracer, name, fn) / RangeError (argument count) naming the argument.
 */
export function traceActive<F extends (span: Span) => unknown>(tracer: Tracer, name: string, fn: F): ReturnType<F>;
export function traceActive<F extends (span: Span) => unknown>(tracer: Tracer, name: string, options: SpanOptions, fn: F): ReturnType<F>;
export function traceActive<F extends (span: Span) => unknown>(tracer: Tracer, name: string, options: SpanOptions, context: Context, fn: F): ReturnType<F>;

// ---------------------------------------------------------------------------------------------
// OTEP 4719 process context and record attributes (src/process_ctx/, js/process-context.js,
// js/attributes.js, js/span-attributes.js). The process context is process-wide: one OTEL_CTX
// mapping shared by the main thread and every Worker; any thread may publish or append keys.
// ---------------------------------------------------------------------------------------------

/** An OpenTelemetry Resource (1.x or 2.x): only its `attributes` are read. */
export interface ResourceLike {
  readonly attributes: Record<string, string | number | boolean | Array<string | number | boolean | null | undefined> | undefined>;
  readonly asyncAttributesPending?: boolean;
  waitForAsyncAttributes?(): Promise<void>;
}

export interface RegisterOptions extends ThreadContextManagerOptions {
  /**
   * Resource attributes for the process context (default: OTEL_SERVICE_NAME /
   * OTEL_RESOURCE_ATTRIBUTES). service.name, telemetry.sdk.*, process.pid and service.instance.id
   * (a UUID generated once per process) are added when absent. A worker's register() without
   * `resource` keeps what the process already published.
   */
  resource?: ResourceLike;
  /**
   * Attribute keys whose values the records carry (threadlocal.attribute_key_map). Appended to
   * the process-wide key map (append-only, at most 256 keys; known keys keep their index),
   * which republishes the process context.
   */
  attributes?: string[];
}

/**
 * register() also publishes the process context (always when `resource` is given, else only if the
 * process has none yet) and appends `attributes` to the key map. Options are validated before
 * anything changes: TypeError / RangeError naming `options.resource…` or `options.attributes[i]`.
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
  /** threadlocal.schema_version: 'tlsdesc_v1_dev' (one constant, src/process_ctx/mod.rs SCHEMA_VERSION). */
  schemaVersion: string;
}

/**
 * (Re)publishes the process context with `options.resource` (or the environment's attributes).
 * Returns null when the native addon is unavailable.
 * @throws TypeError / RangeError naming `options.resource…` for a bad resource; nothing is published.
 */
export function publishProcessContext(options?: { resource?: ResourceLike }): ProcessContextInfo | null;

/** The published process context, or null before the first publish (or without the addon). */
export function processContextInfo(): ProcessContextInfo | null;

/**
 * Appends keys to the process-wide attribute key map and republishes; returns each key's index
 * (the key byte in record attrs-data). All or nothing.
 * @throws TypeError (not an array, a non-string key) / RangeError (empty or duplicate key, more
 *   than 256 keys in all) naming `attributes[i]`.
 */
export function registerAttributeKeys(keys: string[]): number[];

/** threadlocal.attribute_key_map as published (index = key byte). */
export function attributeKeyMap(): string[];

/**
 * Sets a record attribute of the active span: only its thread-context record changes, not the
 * span's own attributes (span.setAttribute() of a registered key updates both). `undefined`
 * removes it. Values are UTF-8, cut at 255 bytes on a character boundary; a record's attrs-data
 * holds at most 612 bytes: registered keys in index order, an entry that does not fit is dropped
 * whole and counted by droppedAttributeCount(). Local child spans start with their parent's values.
 * @returns false when there is no active span (or its record was built before any key was registered).
 * @throws TypeError (key or value not a string) / RangeError (key not in the key map).
 */
export function setAttribute(key: string, value: string | undefined): boolean;

/**
 * Attribute entries dropped whole from this thread's records because 612 bytes were full,
 * counted at each encoding (a span's first activation, then each change of its values).
 */
export function droppedAttributeCount(): number;
