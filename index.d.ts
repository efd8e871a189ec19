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
