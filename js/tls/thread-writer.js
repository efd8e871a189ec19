'use strict';
// The one writer of this JS thread's OTEP 4947 record. Everything that changes the record goes
// through it: the context manager's switches (with() and async callbacks), record attributes,
// span ends, traceActive, and the public setSpanContext/clearSpanContext. It owns the typed-array
// view of the page, what is published, the stack of what to restore, the last context lookup and
// the enabled manager, so the record always equals what it believes.
//
// One per thread: each worker loads its own copy of this module, and the writer is also kept on
// the thread's record view, so a second copy of the package's JS in one thread shares it.

const { CONTROL_WORD, ID_WORDS, HEADER_WORDS, RECORD_SIZE, RECORD_WORDS } = require('../record/layout');

// Entries: a span context encoded once (js/tls/entry-encoder.js) into the words the record stores,
// kept in this writer's arena, a ring of SLOTS header-sized slots, and named by a small integer
// handle, (generation << SLOT_BITS) | slot, which the caches on spans and contexts, the restore
// stack and the writer hold. No object per span: an entry is a slot, and a new one takes the oldest
// slot and bumps its generation, so every handle to the entry it held goes stale. A stale handle is
// never published as another span's: publish() shows none for it, and the caches rebuild it from
// the span (an ended span's cache says none by then). Before the arena, each span allocated a
// Uint32Array: ~3 k instructions per span of the span workload, mostly the GC's.
const SLOT_BITS = 12;
const SLOTS = 1 << SLOT_BITS; // 4,096 × 28 bytes; an entry lives for 4,095 newer ones
const SLOT_MASK = SLOTS - 1;
// Handles stay small integers (V8 Smis, 31 bits): 18 bits of generation. A stale handle could only
// match again after its slot was reused 262,144 times (a billion entries built on this thread)
// without its context being switched to once in between.
const GENERATION_MASK = (1 << (30 - SLOT_BITS)) - 1;

/** The entry of "no span": slot 0, never allocated, so always live; only its control word, 0, is stored. */
const NONE = 0;
// What the page holds after a direct setSpanContext() (the addon wrote it): never a live entry,
// so the next switch rewrites the record in full.
const DIRECT = -1;

class ThreadWriter {
  constructor(view) {
    if (!(view instanceof Uint8Array) || view.byteLength < RECORD_SIZE || view.byteOffset % 4 !== 0) {
      throw new TypeError(`view: expected the record's Uint8Array (${RECORD_SIZE} bytes, 4-byte aligned)`);
    }
    this.words = new Uint32Array(view.buffer, view.byteOffset, RECORD_WORDS);
    // The arena: header words by slot, the generation of each slot, and the attrs-data words of
    // entries that carry record attributes (null for the others).
    this.entries = new Uint32Array(SLOTS * HEADER_WORDS);
    this.generations = new Int32Array(SLOTS);
    this.attrs = new Array(SLOTS).fill(null);
    this.nextSlot = 1;
    // The entry in the page, and the entry whose ids and attrs-data are in the page. "None"
    // (NONE) is the control word stored as 0 (valid, flags and attrs size zero) and nothing
    // else: the ids and attrs-data stay under valid 0, so returning to that span is one store.
    this.current = NONE;
    this.body = NONE;
    // What the enabled manager says the record shows now: the entry of the context being run.
    // Every switch restores a managed entry, so a direct write lasts until the next switch.
    this.managed = NONE;
    // The managed entry to restore when each entered callback exits.
    this.stack = [];
    this.depth = 0;
    // Bumped by reset() (enable, disable, takeover): a with() that spans one restores nothing.
    this.epoch = 0;
    // The enabled ThreadContextManager, the only one whose hooks and with() publish.
    this.owner = null;
    // The last context -> entry lookup (js/tls/span-entries.js): switches often enter the same one.
    this.lastContext = null;
    this.lastEntry = NONE;
    // Record attribute entries dropped whole because the 612 bytes of attrs-data were full.
    this.droppedAttributes = 0;
    this.detach();
  }

  // Stores `entry` unless it is already published. Order matters for a reader that interrupts
  // the thread: valid 0 first, the control word (valid 1) last.
  publish(entry) {
    if (entry === this.current) return;
    const words = this.words;
    words[CONTROL_WORD] = 0;
    if (entry === NONE || !this.isLive(entry)) {
      this.current = NONE;
      return;
    }
    this.current = entry;
    const entries = this.entries;
    const at = (entry & SLOT_MASK) * HEADER_WORDS;
    const control = entries[at + CONTROL_WORD];
    if (entry !== this.body) {
      for (let i = 0; i < ID_WORDS; i++) words[i] = entries[at + i];
      const attrsBytes = control >>> 16;
      if (attrsBytes !== 0) {
        const attrs = this.attrs[entry & SLOT_MASK];
        const end = (attrsBytes + 3) >>> 2;
        for (let i = 0; i < end; i++) words[HEADER_WORDS + i] = attrs[i];
      }
      this.body = entry;
    }
    words[CONTROL_WORD] = control;
  }

  /** A new entry's handle; the caller writes its words (wordsAt) before anything can publish it. */
  allocate() {
    const slot = this.nextSlot;
    this.nextSlot = slot === SLOT_MASK ? 1 : slot + 1;
    const generation = (this.generations[slot] + 1) & GENERATION_MASK;
    this.generations[slot] = generation;
    this.attrs[slot] = null;
    return (generation << SLOT_BITS) | slot;
  }

  /** Whether `entry` still names the entry it was given for (NONE always does). */
  isLive(entry) {
    return this.generations[entry & SLOT_MASK] === entry >>> SLOT_BITS;
  }

  /** Where a live entry's header words start in `entries`. */
  wordsAt(entry) {
    return (entry & SLOT_MASK) * HEADER_WORDS;
  }

  /** Sets a live entry's attrs-data (a Uint32Array of whole words, or null) and its attrs size. */
  setAttrs(entry, attrWords, attrsBytes) {
    const at = this.wordsAt(entry) + CONTROL_WORD;
    this.attrs[entry & SLOT_MASK] = attrWords;
    this.entries[at] = ((this.entries[at] & 0xffff) | (attrsBytes << 16)) >>> 0;
  }

  /** A span ended: its live entry shows none from now on, wherever it is cached. */
  endEntry(entry) {
    if (entry === NONE) return;
    if (this.isLive(entry)) this.entries[this.wordsAt(entry) + CONTROL_WORD] = 0;
    this.refresh(entry); // published, even stale: none now
  }

  // An async callback starts in a context whose entry is `entry`.
  enter(entry) {
    this.stack[this.depth++] = this.managed;
    this.managed = entry;
    this.publish(entry);
  }

  // It ends: back to what the manager published before it (none between callbacks; a callback
  // that started before the manager was enabled has nothing to restore and ends in none).
  exit() {
    const entry = this.depth > 0 ? this.stack[--this.depth] : NONE;
    this.managed = entry;
    this.publish(entry);
  }

  // with() entry: publishes `entry` and returns what its exit restores.
  switchTo(entry) {
    const previous = this.managed;
    this.managed = entry;
    this.publish(entry);
    return previous;
  }

  // with() exit, unless the writer was reset in between (`epoch` read before switchTo).
  switchBack(previous, epoch) {
    if (epoch !== this.epoch) return;
    this.managed = previous;
    this.publish(previous);
  }

  // `entry` was changed in place (its record attributes, or its span ended): store it again if
  // it is published, and rewrite it in full the next time it is.
  refresh(entry) {
    if (entry === this.body) this.body = NONE;
    if (entry !== this.current) return;
    this.current = NONE;
    this.publish(entry);
  }

  // The addon just wrote a span context into the record (setSpanContext).
  wroteDirectly() {
    this.current = DIRECT;
    this.body = DIRECT;
  }

  // Detach (clearSpanContext, and "none" for a reset): the control word 0, stored
  // unconditionally, so it also holds after writes the writer did not make.
  detach() {
    this.words[CONTROL_WORD] = 0;
    this.current = NONE;
    this.body = NONE;
  }

  // A manager takes over or lets go: nothing to restore, none published.
  reset() {
    this.detach();
    this.managed = NONE;
    this.stack.length = 0;
    this.depth = 0;
    this.epoch++;
    this.lastContext = null;
    this.lastEntry = NONE;
  }
}

const kWriter = Symbol.for('otel-thread-ctx.thread-writer');
let writer = null;

/** This thread's writer (created on first use, on the thread's record page). */
function threadWriter() {
  if (writer === null) {
    const view = threadRecordView();
    if (!(view[kWriter] instanceof Object)) view[kWriter] = new ThreadWriter(view);
    writer = view[kWriter];
  }
  return writer;
}

// A thread without a record (the addon refused it one) still gets working context management,
// on a private buffer nobody reads, and a warning that says why; OTEL_THREAD_CTX_REQUIRE_NATIVE=1
// throws instead.
function threadRecordView() {
  try {
    return require('../native/addon').recordView();
  } catch (error) {
    if (process.env.OTEL_THREAD_CTX_REQUIRE_NATIVE === '1') throw error;
    process.emitWarning(`otel-thread-ctx: no record for this thread (${error.message}); ` +
      'span contexts are not published here', { code: 'OTEL_THREAD_CTX_NO_RECORD' });
    return new Uint8Array(RECORD_SIZE);
  }
}

module.exports = { threadWriter, NONE, ENTRY_SLOTS: SLOTS };
