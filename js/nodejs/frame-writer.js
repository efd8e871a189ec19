'use strict';
// The writer of the `nodejs` schema on this JS thread. Contexts live in one AsyncLocalStorage per
// thread whose store is a holder or undefined; V8 carries the store across every await, timer and
// callback in its AsyncContextFrame, and a reader outside the process walks
// otel_thread_ctx_nodejs_v1 -> the frame -> this storage's entry -> the holder -> its span's
// record. Nothing runs per async switch: the work is per span (one record) and per context
// passed to with() (one holder).
//
// Records are OTEP 4947 records in record blocks, pinned pages the V8 addon hands out as
// ArrayBuffers (v8-addon/record_blocks.cc). A slot is the record's address (8 bytes, written by the
// addon, for this layer's own checks) then the record. A holder is an API object
// (v8-addon/holder.cc) whose internal field 0 is the record's address (what a reader finds at the
// discovery struct's record_slot_offset in the holder), whose second internal field is the page's
// ArrayBuffer (so a record is never freed while a frame can reach it), and whose one property is
// the context. A span's record and its first holder come from one native call
// (spanHolder: the hex ids decoded and the record written there, the control word last); another
// context of the same span gets a holder of the same slot. Ending a span and rewriting its
// attributes go through typed arrays, as with the TLS record. V8 frees the page (and the addon
// takes it back) when the last holder, span and cursor using it are gone.

const { AsyncLocalStorage } = require('node:async_hooks');
const { trace, ROOT_CONTEXT } = require('@opentelemetry/api');
const { CONTROL_WORD, HEADER_SIZE, RECORD_SIZE } = require('../record/layout');
const { controlWord } = require('../tls/entry-encoder');
const { kFrameRecord, unpublishOnEnd } = require('../tls/span-entries');
const { spanRecordState, encodeState } = require('../tls/span-attributes');
const { registeredKeys } = require('../process-context/process-context');
const { noteSpanResource } = require('../process-context/sdk-resource');
const { noteSpanThread } = require('../native/thread-identity');

const PAGE_SIZE = 4096;
const ADDRESS_SIZE = 8;
// Slots without record attributes: the address and the 28-byte header, 8-aligned (102 per page).
const SMALL_SLOT = 40;
// With record attributes (keys registered): the full 612 bytes of attrs-data, so that a value set
// after the span started (express sets http.route then) fits in place (6 per page).
const LARGE_SLOT = ADDRESS_SIZE + RECORD_SIZE;

/** A record slot in a page: where its words are, and its holders' arguments (buffer, slot). */
class FrameRecord {
  constructor(block, slot, capacity) {
    this.buffer = block.buffer; // the page's ArrayBuffer: holders keep it alive through this object
    this.words = block.words;
    this.bytes = block.bytes;
    this.slot = slot; // byte offset of the slot in the page
    this.at = (slot + ADDRESS_SIZE) >>> 2; // word index of the record
    this.capacity = capacity; // bytes of attrs-data that fit
  }

  /** The record's address, as the addon wrote it in the slot's first word (tests, the self-check). */
  address() {
    const word = (this.slot >>> 2);
    return this.words[word + 1] * 2 ** 32 + this.words[word];
  }

  /** The span ended: valid 0 in place, for every frame and holder that still reaches it. */
  end() {
    this.words[this.at + CONTROL_WORD] = 0;
  }

  /**
   * New attrs-data for a live record: valid 0, the bytes, then the control word (valid 1) last.
   * Returns false (nothing written) when they do not fit the slot.
   */
  setAttrs(bytes) {
    if (bytes.length > this.capacity) return false;
    const words = this.words;
    const control = words[this.at + CONTROL_WORD];
    if ((control & 0xff) === 0) return true; // ended: stays unpublished
    words[this.at + CONTROL_WORD] = 0;
    this.bytes.set(bytes, (this.at << 2) + HEADER_SIZE);
    words[this.at + CONTROL_WORD] = ((control & 0xffff) | (bytes.length << 16)) >>> 0;
    return true;
  }
}

/** Slots of one size, carved in order from the current page (a new page when it is full). */
class BlockCursor {
  constructor(addon, slotSize) {
    this.addon = addon;
    this.slotSize = slotSize;
    this.block = null;
    this.next = PAGE_SIZE;
  }

  take() {
    if (this.next + this.slotSize > PAGE_SIZE) {
      const buffer = this.addon.newBlock(this.slotSize);
      this.block = { buffer, words: new Uint32Array(buffer), bytes: new Uint8Array(buffer) };
      this.next = 0;
    }
    const slot = this.next;
    this.next += this.slotSize;
    return new FrameRecord(this.block, slot, this.slotSize - ADDRESS_SIZE - HEADER_SIZE);
  }

  /** The slot just taken was not used (its span's ids were invalid): the next take() reuses it. */
  giveBack(record) {
    if (record.buffer === this.block.buffer && record.slot + this.slotSize === this.next) this.next = record.slot;
  }
}

// Holders and records are cached on the Context and Span objects under private symbols (a switch
// to a context seen before costs one property load), with a WeakMap for frozen or sealed objects,
// as js/tls/span-entries.js does for the TLS schema's entries. One function per symbol: a computed
// key shared by both would make every access a megamorphic keyed lookup (~800 instructions per
// request of the span workload, callgrind).
const kHolder = Symbol('otel-thread-ctx holder');
const holderByObject = new WeakMap();
const recordByObject = new WeakMap();
let weakMapUsed = false;

function cachedHolder(context) {
  const holder = context[kHolder];
  return holder !== undefined || !weakMapUsed ? holder : holderByObject.get(context);
}

function cacheHolder(context, holder) {
  try {
    context[kHolder] = holder;
  } catch {
    weakMapUsed = true;
    holderByObject.set(context, holder);
  }
}

function cachedRecord(span) {
  const record = span[kFrameRecord];
  return record !== undefined || !weakMapUsed ? record : recordByObject.get(span);
}

function cacheRecord(span, record) {
  try {
    span[kFrameRecord] = record;
  } catch {
    weakMapUsed = true;
    recordByObject.set(span, record);
  }
}

class FrameWriter {
  constructor(addon) {
    this.addon = addon;
    this.Holder = addon.Holder;
    this.spanHolder = addon.spanHolder;
    /** The thread's storage: its store is a holder, or undefined for ROOT_CONTEXT. */
    this.als = new AsyncLocalStorage();
    this.small = new BlockCursor(addon, SMALL_SLOT);
    this.large = new BlockCursor(addon, LARGE_SLOT);
    // The record of every context without a live span: valid 0, never written.
    this.none = this.small.take();
    this.published = false;
    // Where a holder keeps its record's address: the discovery struct's record_slot_offset.
    this.recordSlotOffset = addon.recordSlotOffset;
  }

  /**
   * Why this runtime cannot use the schema, or null: AsyncLocalStorage must run on
   * AsyncContextFrame (felt natively: the frame binds the storage to the store), and the reader's
   * walk through a struct filled as publish() fills it must land on the record of a probe holder.
   */
  check() {
    const probe = this.newHolder(this.none, ROOT_CONTEXT);
    const addon = this.addon;
    const als = this.als;
    const seen = als.run(probe, () => ({ holds: addon.frameHolds(als, probe), walk: addon.walkFrameFor(als) }));
    if (!seen.holds) {
      return 'AsyncLocalStorage does not run on AsyncContextFrame here (Node 22 needs ' +
        '--experimental-async-context-frame; Node 24 and later have it unless started with --no-async-context-frame)';
    }
    const expected = this.none.address();
    if (seen.walk !== expected) {
      return `the V8 layout check failed: the walk from the frame reached ${seen.walk}, not the probe record at ${expected}`;
    }
    return null;
  }

  /** Publishes otel_thread_ctx_nodejs_v1 for this thread (after check()). */
  publish() {
    if (this.published) return;
    this.addon.publish(this.als);
    this.published = true;
  }

  /** cped_slot 0: readers find nothing on this thread until publish() (no manager of the schema owns it). */
  unpublish() {
    if (!this.published) return;
    this.addon.unpublish();
    this.published = false;
  }

  /** A holder of `record`'s slot for `context`. */
  newHolder(record, context) {
    const holder = new this.Holder(record.buffer, record.slot);
    holder.context = context;
    return holder;
  }

  /** Whether `store` is one of this writer's holders (the storage holds nothing else). */
  isHolder(store) {
    return store instanceof this.Holder;
  }

  /**
   * What a nodejs_v1_dev reader sees on this thread now: the reader's walk from the published
   * struct (v8-addon/frame_walk.cc) to a record address, checked against the record of the store
   * the storage holds, and that record decoded. Null for none (or before publish()).
   * @returns {{ traceId: string, spanId: string, traceFlags: number, attrs: Uint8Array } | null}
   */
  readFrame() {
    const address = this.addon.walkOwnFrame();
    if (address <= 0) return null;
    const holder = this.als.getStore();
    const record = holder === undefined ? undefined : this.recordOfContext(holder.context);
    if (record === undefined || record.address() !== address) {
      throw new Error(`otel-thread-ctx: the frame walk reached ${address}, not the active holder's record`);
    }
    const at = record.at << 2;
    const control = record.words[record.at + CONTROL_WORD];
    if ((control & 0xff) !== 1) return null;
    const hex = (from, to) => Buffer.from(record.bytes.subarray(at + from, at + to)).toString('hex');
    return {
      traceId: hex(0, 16), spanId: hex(16, 24), traceFlags: (control >>> 8) & 0xff,
      attrs: record.bytes.slice(at + HEADER_SIZE, at + HEADER_SIZE + (control >>> 16)),
    };
  }

  /**
   * The store that stands for `context`: its holder (built once per context, cached on it), or
   * undefined for the root context.
   */
  holderFor(context) {
    if (context === ROOT_CONTEXT || context === undefined || context === null) return undefined;
    if (typeof context !== 'object') return this.newHolder(this.none, context);
    let holder = cachedHolder(context);
    if (holder === undefined) {
      holder = this.contextHolder(context);
      cacheHolder(context, holder);
    }
    return holder;
  }

  /** The context of the running code (what with() was given). */
  active() {
    const holder = this.als.getStore();
    return holder === undefined ? ROOT_CONTEXT : holder.context;
  }

  /** A new holder for `context`: of its span's record (built with it on the span's first activation), or of none. */
  contextHolder(context) {
    const span = this.spanOf(context);
    if (span === undefined) return this.newHolder(this.none, context);
    const record = cachedRecord(span);
    return record !== undefined ? this.newHolder(record, context) : this.buildSpanHolder(span, context);
  }

  /** The span `context` holds, when it is an object; undefined otherwise. */
  spanOf(context) {
    try {
      if (typeof context.getValue !== 'function') return undefined;
      const span = trace.getSpan(context);
      return span !== null && typeof span === 'object' ? span : undefined;
    } catch {
      return undefined; // a Context implementation whose getValue throws
    }
  }

  /** The record a holder of `context` points at. */
  recordOfContext(context) {
    const span = context !== null && typeof context === 'object' ? this.spanOf(context) : undefined;
    return span === undefined ? this.none : cachedRecord(span) ?? this.none;
  }

  /** The record of a span, built here if no context of it was activated yet (tests, fixtures); `none` for anything that is not a live span. */
  recordForSpan(span) {
    if (span === null || typeof span !== 'object') return this.none;
    if (cachedRecord(span) === undefined) this.buildSpanHolder(span, undefined);
    return cachedRecord(span) ?? this.none;
  }

  /**
   * The span's record, cached on it, and its first holder, for `context`: one native call
   * decodes the ids, writes the record (the control word last) and makes the holder. A span that
   * is not live, or whose ids are invalid, gets `none`.
   */
  buildSpanHolder(span, context) {
    let record = this.none;
    let holder;
    try {
      const spanContext = typeof span.spanContext === 'function' ? span.spanContext() : null;
      if (spanContext != null && span.ended !== true) {
        noteSpanResource(span.resource);
        noteSpanThread(span);
        const state = registeredKeys().length === 0 ? undefined : spanRecordState(span);
        const attrs = state === undefined ? null : encodeState(state);
        const cursor = state === undefined ? this.small : this.large;
        const slot = cursor.take();
        // attrs-data first, while the fresh slot is not valid; the native call stores valid last.
        if (attrs !== null && attrs.length > 0) slot.bytes.set(attrs, (slot.at << 2) + HEADER_SIZE);
        const control = controlWord(spanContext.traceFlags, attrs === null ? 0 : attrs.length);
        holder = this.spanHolder(slot.buffer, slot.slot, spanContext.traceId, spanContext.spanId, control);
        if (holder === null) {
          cursor.giveBack(slot); // e.g. the API's non-recording span: all-zero ids take no slot
        } else {
          record = slot;
          if (state !== undefined) state.frameRecord = record;
          unpublishOnEnd(span);
        }
      }
    } catch {
      // a span implementation that throws publishes nothing rather than failing with()
    }
    cacheRecord(span, record);
    if (record === this.none) return this.newHolder(this.none, context);
    holder.context = context;
    return holder;
  }
}

let writer = null;

/** This thread's frame writer (created on first use with the thread's V8 addon instance). */
function frameWriter(addon) {
  if (writer === null) writer = new FrameWriter(addon);
  return writer;
}

module.exports = { frameWriter };
