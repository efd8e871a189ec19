//! The `nodejs_v1_dev` walk over a target's memory, from a thread's
//! `otel_thread_ctx_nodejs_v1` struct to the address of its OTEP 4947 record:
//!
//! 1. `cped = *cped_slot` (the isolate's continuation-preserved embedder data);
//!    `undefined` → no async-context frame, no context.
//! 2. the frame is a JSMap: its OrderedHashMap table at `js_map_table_offset`;
//!    after `ordered_hash_map_header_size` three Smis (elements, deleted,
//!    buckets), the bucket heads, then entries `{key, value, chain}`.
//! 3. bucket `als_identity_hash & (buckets - 1)`; follow the chain comparing
//!    each key with `*als_handle` (the writer's AsyncLocalStorage, kept current by the GC).
//! 4. the value (the ALS store): `undefined` → no context; else a JSObject whose
//!    internal field holds a native pointer `W`. Where, and what `W` is, depends
//!    on the revision of RFC #1861 the writer follows:
//!    - latest: the struct's `record_slot_offset` byte (at `2*ptr+4`) says where
//!      the field is, and `W` is the record (this package's writer);
//!    - earlier, the byte 0: the field at the layout's `wrapped_object_offset`
//!      (published as a process-context integer, or this schema's default for the
//!      target's V8: dd-trace 6.21), `W` the record, or (when the writer
//!      publishes `native_wrap_fields_offset`) its wrapper, with the record
//!      pointer at `W + native_wrap_fields_offset`.
//!
//! Every word on the way is the target's: a tagged pointer must carry the heap
//! object tag, a count must be a Smi, the bucket count a power of two within
//! [`MAX_BUCKETS`], every index inside the table, and the chain at most
//! [`MAX_CHAIN`] long. What stops a walk is a [`Miss`], counted by kind; the BPF
//! program (`bpf/nodejs_record.bpf.h`) follows the same steps and bounds.

use super::layout::NodejsLayout;
use crate::remote_memory::TargetMemory;
use serde::Serialize;

/// Size of the TLS struct: `{u64 cped_slot; u64 als_handle; i32 als_identity_hash;
/// u8 record_slot_offset; u8 reserved[3]; u64 undefined_addr}`.
pub const STRUCT_SIZE: usize = 32;
/// Where the struct's `record_slot_offset` byte is: `2 * sizeof(void *) + 4`.
pub const RECORD_SLOT_OFFSET_AT: usize = 20;
/// Buckets accepted in a frame's table. A frame has one entry per
/// AsyncLocalStorage that holds a value; V8 sizes the table at half its
/// capacity (load factor 2), so real frames have a handful of buckets.
pub const MAX_BUCKETS: u64 = 1 << 16;
/// Entries followed in one bucket's chain (cyclic or absurd chains stop here).
/// With V8's load factor of 2 a chain longer than a few entries means a frame
/// with thousands of live AsyncLocalStorages.
pub const MAX_CHAIN: usize = 16;
/// V8's end-of-chain / empty-bucket marker: Smi -1.
const NOT_FOUND: i64 = -1;
/// OrderedHashMap entry: key, value, chain.
const ENTRY_WORDS: u64 = 3;
/// Counts before the bucket heads: elements, deleted elements, buckets.
const COUNT_WORDS: u64 = 3;
/// Heap object tag (kHeapObjectTag) in the low two bits of a tagged pointer.
const HEAP_OBJECT_TAG: u64 = 1;

/// The thread's `otel_thread_ctx_nodejs_v1` struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DiscoveryStruct {
    pub cped_slot: u64,
    pub als_handle: u64,
    pub als_identity_hash: i32,
    /// Where the stored object keeps its record's address (RFC #1861, latest text); 0 from a
    /// writer of an earlier revision, whose layout then says.
    pub record_slot_offset: u8,
    pub undefined_addr: u64,
}

impl DiscoveryStruct {
    pub fn parse(b: &[u8; STRUCT_SIZE]) -> Self {
        let word = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        DiscoveryStruct {
            cped_slot: word(0),
            als_handle: word(8),
            als_identity_hash: i32::from_ne_bytes(b[16..20].try_into().unwrap()),
            record_slot_offset: b[RECORD_SLOT_OFFSET_AT],
            undefined_addr: word(24),
        }
    }
}

/// Why a walk found no record. The kinds are the sampler's `CtxState`s for a
/// nodejs target (`NoIsolate` shares `null_record`, `RecordFault` is found
/// after the walk, when the record itself is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Miss {
    /// `cped_slot` or `als_handle` is 0: no isolate published on this thread (or torn down).
    NoIsolate,
    /// The frame is `undefined`, has no entry for the ALS, the store is `undefined`,
    /// or the wrapper is cleared: no context right now.
    NoStore,
    /// A read on the way faulted (a pointer into nothing).
    FrameFault,
    /// A word is not what V8 would put there: not a tagged heap object, a count that
    /// is not a Smi (the table being rehashed), a bucket count that is not a power
    /// of two or above MAX_BUCKETS, an index outside the table.
    BadFrame,
    /// The chain did not end within MAX_CHAIN entries (cyclic or huge).
    ChainTooLong,
}

impl Miss {
    /// Not a context, but not a fault either.
    pub fn is_no_context(self) -> bool {
        matches!(self, Miss::NoIsolate | Miss::NoStore)
    }
}

/// Where the walk ended: the record's address, or why none, with the detail a user reads.
pub type WalkResult = Result<u64, (Miss, String)>;

fn is_heap_object(v: u64) -> bool {
    v & 3 == HEAP_OBJECT_TAG
}

/// Smi of a 64-bit V8 without pointer compression: value << 32, low half zero.
fn smi(v: u64) -> Option<i64> {
    (v & 0xffff_ffff == 0).then_some((v as i64) >> 32)
}

struct Reader<'m, M: TargetMemory> {
    mem: &'m M,
}

impl<M: TargetMemory> Reader<'_, M> {
    fn word(&self, addr: Option<u64>, what: &str) -> Result<u64, (Miss, String)> {
        let addr = addr.ok_or_else(|| (Miss::BadFrame, format!("{what}: address wraps around")))?;
        self.mem.read_u64(addr, what).map_err(|e| (Miss::FrameFault, e.to_string()))
    }

    /// Field at byte `offset` of the heap object `tagged` points at.
    fn field(&self, tagged: u64, offset: u64, what: &str) -> Result<u64, (Miss, String)> {
        self.word((tagged - HEAP_OBJECT_TAG).checked_add(offset), what)
    }
}

/// Reads the struct from the thread's TLS slot.
pub fn read_struct(mem: &impl TargetMemory, slot: u64) -> Result<DiscoveryStruct, (Miss, String)> {
    let mut b = [0u8; STRUCT_SIZE];
    mem.read(slot, &mut b, "otel_thread_ctx_nodejs_v1 struct").map_err(|e| (Miss::FrameFault, e.to_string()))?;
    Ok(DiscoveryStruct::parse(&b))
}

/// The walk: struct → record address. Reads at most 9 + 2 × MAX_CHAIN words.
pub fn record_address(mem: &impl TargetMemory, s: &DiscoveryStruct, l: &NodejsLayout) -> WalkResult {
    let r = Reader { mem };
    let bad = |what: String| Err((Miss::BadFrame, what));
    if s.cped_slot == 0 || s.als_handle == 0 {
        return Err((Miss::NoIsolate, "no isolate published on this thread (cped_slot or als_handle is 0)".into()));
    }
    let cped = r.word(Some(s.cped_slot), "continuation-preserved embedder data slot")?;
    if cped == s.undefined_addr {
        return Err((Miss::NoStore, "no async-context frame (CPED is undefined)".into()));
    }
    if !is_heap_object(cped) {
        return bad(format!("CPED {cped:#x} is not a tagged heap object"));
    }
    let als = r.word(Some(s.als_handle), "AsyncLocalStorage global handle")?;
    if !is_heap_object(als) {
        return bad(format!("the AsyncLocalStorage handle holds {als:#x}, not a tagged heap object"));
    }
    let table = r.field(cped, l.js_map_table_offset, "async-context frame: JSMap table")?;
    if !is_heap_object(table) {
        return bad(format!("frame {cped:#x}: table {table:#x} is not a tagged heap object"));
    }
    let counts = (table - HEAP_OBJECT_TAG).checked_add(l.ordered_hash_map_header_size);
    let count = |i: u64, what: &str| -> Result<i64, (Miss, String)> {
        let v = r.word(counts.and_then(|c| c.checked_add(i * l.tagged_size)), what)?;
        smi(v).ok_or_else(|| (Miss::BadFrame, format!("table {table:#x}: {what} {v:#x} is not a Smi (table being rehashed?)")))
    };
    let elements = count(0, "element count")?;
    let deleted = count(1, "deleted-element count")?;
    let buckets = count(2, "bucket count")?;
    if buckets <= 0 || buckets as u64 > MAX_BUCKETS || !(buckets as u64).is_power_of_two() {
        return bad(format!("table {table:#x}: {buckets} buckets, expected a power of two up to {MAX_BUCKETS}"));
    }
    let buckets = buckets as u64;
    // V8 grows the table at buckets × 2 entries (load factor 2).
    let used = elements.checked_add(deleted).filter(|&u| elements >= 0 && deleted >= 0 && u as u64 <= 2 * buckets);
    let Some(used) = used.map(|u| u as u64) else {
        return bad(format!("table {table:#x}: {elements} elements + {deleted} deleted do not fit {buckets} buckets"));
    };
    let word_at = |index: u64| counts.and_then(|c| c.checked_add((COUNT_WORDS + index) * l.tagged_size));
    let bucket = (s.als_identity_hash as u32 as u64) & (buckets - 1);
    let head = r.word(word_at(bucket), "bucket head")?;
    let mut entry = smi(head).ok_or_else(|| (Miss::BadFrame, format!("table {table:#x}: bucket head {head:#x} is not a Smi")))?;
    for _ in 0..MAX_CHAIN {
        if entry == NOT_FOUND {
            return Err((Miss::NoStore, "the frame has no entry for the AsyncLocalStorage".into()));
        }
        if entry < 0 || entry as u64 >= used {
            return bad(format!("table {table:#x}: entry index {entry} outside the {used} entries in use"));
        }
        let base = buckets + entry as u64 * ENTRY_WORDS;
        let key = r.word(word_at(base), "entry key")?;
        if key == als {
            let store = r.word(word_at(base + 1), "entry value")?;
            return store_record(&r, s, l, store);
        }
        let chain = r.word(word_at(base + 2), "entry chain")?;
        entry = smi(chain).ok_or_else(|| (Miss::BadFrame, format!("table {table:#x}: chain link {chain:#x} is not a Smi")))?;
    }
    Err((Miss::ChainTooLong, format!("bucket {bucket}'s chain did not end within {MAX_CHAIN} entries")))
}

/// Step 4: the ALS store → the native wrapper → the record pointer.
fn store_record<M: TargetMemory>(r: &Reader<'_, M>, s: &DiscoveryStruct, l: &NodejsLayout, store: u64) -> WalkResult {
    if store == s.undefined_addr {
        return Err((Miss::NoStore, "the AsyncLocalStorage's store is undefined".into()));
    }
    if !is_heap_object(store) {
        return Err((Miss::BadFrame, format!("store {store:#x} is not a tagged heap object")));
    }
    if s.record_slot_offset != 0 {
        let offset = u64::from(s.record_slot_offset);
        if !offset.is_multiple_of(l.tagged_size) {
            return Err((Miss::BadFrame, format!("record_slot_offset {offset} is not a multiple of the tagged size {}", l.tagged_size)));
        }
        let record = r.field(store, offset, "store's record slot")?;
        return if record == 0 { Err((Miss::NoStore, "the store's record slot is cleared".into())) } else { Ok(record) };
    }
    let wrapper = r.field(store, l.wrapped_object_offset, "store's embedder field")?;
    if wrapper == 0 {
        return Err((Miss::NoStore, "the store's embedder field is cleared".into()));
    }
    match l.native_wrap_fields_offset {
        None => Ok(wrapper),
        Some(offset) => r.word(wrapper.checked_add(offset), "native wrapper's record pointer"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Result};
    use crate::nodejs::layout::LayoutSource;
    use crate::v8_version::V8Version;
    use std::cell::Cell;

    /// A fake heap: words at BASE.., reads outside fault; reads are counted.
    struct Heap {
        words: Vec<u64>,
        reads: Cell<usize>,
    }
    const BASE: u64 = 0x1000_0000;

    impl TargetMemory for Heap {
        fn read(&self, addr: u64, buf: &mut [u8], what: &str) -> Result<()> {
            self.reads.set(self.reads.get() + 1);
            let fault = || Error::Resolve { path: "heap".into(), reason: format!("{what} at {addr:#x}") };
            let off = addr.checked_sub(BASE).ok_or_else(fault)? as usize;
            if !off.is_multiple_of(8) || (off + buf.len()).div_ceil(8) > self.words.len() {
                return Err(fault());
            }
            for (i, chunk) in buf.chunks_mut(8).enumerate() {
                chunk.copy_from_slice(&self.words[off / 8 + i].to_ne_bytes()[..chunk.len()]);
            }
            Ok(())
        }
    }

    const LAYOUT: NodejsLayout = NodejsLayout {
        wrapped_object_offset: 32,
        native_wrap_fields_offset: None,
        js_map_table_offset: 24,
        ordered_hash_map_header_size: 16,
        tagged_size: 8,
        source: LayoutSource::SchemaDefaults,
        v8: Some(V8Version::new(13, 6, 0, 0)),
    };
    const SMI: fn(i64) -> u64 = |v| (v as u64) << 32;
    // Word indices of the fake objects.
    const UNDEFINED: usize = 0;
    const ALS: usize = 2;
    const HANDLE: usize = 4;
    const CPED: usize = 5;
    const FRAME: usize = 6;
    const STORE: usize = 12;
    const TABLE: usize = 20;
    const RECORD: u64 = 0xdead_0000;
    const HASH: i32 = 0x2b5;

    fn addr(word: usize) -> u64 {
        BASE + 8 * word as u64
    }
    fn tagged(word: usize) -> u64 {
        addr(word) + 1
    }

    /// A frame with 2 buckets: entry 0 another key, entry 1 the ALS (chained to 0).
    fn heap() -> (Heap, DiscoveryStruct) {
        let mut w = vec![0u64; 64];
        w[HANDLE] = tagged(ALS);
        w[CPED] = tagged(FRAME);
        w[FRAME + 3] = tagged(TABLE);
        w[STORE + 4] = RECORD;
        let t = TABLE + 2;
        w[t] = SMI(2);
        w[t + 1] = SMI(0);
        w[t + 2] = SMI(2);
        w[t + 3] = SMI(-1);
        w[t + 4] = SMI(-1);
        w[t + 3 + (HASH as usize & 1)] = SMI(1);
        let e = t + 5;
        w[e..e + 6].copy_from_slice(&[tagged(40), tagged(UNDEFINED), SMI(-1), tagged(ALS), tagged(STORE), SMI(0)]);
        let s = DiscoveryStruct {
            cped_slot: addr(CPED),
            als_handle: addr(HANDLE),
            als_identity_hash: HASH,
            record_slot_offset: 0,
            undefined_addr: tagged(UNDEFINED),
        };
        (Heap { words: w, reads: Cell::new(0) }, s)
    }

    #[test]
    fn the_walk_reaches_the_record() {
        let (h, s) = heap();
        assert_eq!(record_address(&h, &s, &LAYOUT), Ok(RECORD));
        let mut wrapped = LAYOUT;
        wrapped.native_wrap_fields_offset = Some(8);
        let mut h2 = heap().0;
        h2.words[STORE + 4] = addr(50);
        h2.words[51] = RECORD;
        assert_eq!(record_address(&h2, &s, &wrapped), Ok(RECORD), "one more indirection when the offset is published");
    }

    /// RFC #1861's latest text: the struct's byte says where the record's address is, whatever
    /// the layout's (an earlier revision's) offset and wrapper indirection say.
    #[test]
    fn the_structs_record_slot_offset_wins_over_the_layout() {
        let (mut h, mut s) = heap();
        h.words[STORE + 4] = 0x10; // what the layout's offset would read: a lie
        h.words[STORE + 5] = RECORD;
        s.record_slot_offset = 40;
        let mut wrapped = LAYOUT;
        wrapped.native_wrap_fields_offset = Some(8);
        assert_eq!(record_address(&h, &s, &wrapped), Ok(RECORD));
        h.words[STORE + 5] = 0;
        assert_eq!(record_address(&h, &s, &LAYOUT).unwrap_err().0, Miss::NoStore, "a cleared slot is no context");
        s.record_slot_offset = 36;
        let (miss, why) = record_address(&h, &s, &LAYOUT).unwrap_err();
        assert_eq!(miss, Miss::BadFrame);
        assert!(why.contains("record_slot_offset 36"), "{why}");
    }

    #[test]
    fn the_struct_parses_as_the_rfc_lays_it_out() {
        let mut b = [0u8; STRUCT_SIZE];
        b[0..8].copy_from_slice(&7u64.to_ne_bytes());
        b[8..16].copy_from_slice(&8u64.to_ne_bytes());
        b[16..20].copy_from_slice(&(-5i32).to_ne_bytes());
        b[20] = 32;
        b[21..24].copy_from_slice(&[0xff; 3]); // reserved: ignored
        b[24..32].copy_from_slice(&9u64.to_ne_bytes());
        let s = DiscoveryStruct::parse(&b);
        assert_eq!(s, DiscoveryStruct { cped_slot: 7, als_handle: 8, als_identity_hash: -5, record_slot_offset: 32, undefined_addr: 9 });
    }

    #[test]
    fn no_context_is_not_a_fault() {
        let (mut h, s) = heap();
        h.words[CPED] = tagged(UNDEFINED);
        assert_eq!(record_address(&h, &s, &LAYOUT).unwrap_err().0, Miss::NoStore);
        let (mut h, s) = heap();
        h.words[TABLE + 2 + 5 + 4] = tagged(UNDEFINED);
        assert_eq!(record_address(&h, &s, &LAYOUT).unwrap_err().0, Miss::NoStore);
        let (h, mut s) = heap();
        s.cped_slot = 0;
        assert_eq!(record_address(&h, &s, &LAYOUT).unwrap_err().0, Miss::NoIsolate);
    }

    /// One word of the heap changed.
    type Lie = fn(&mut Vec<u64>);

    #[test]
    fn each_lie_is_its_own_miss() {
        let cases: [(&str, Lie, Miss); 6] = [
            ("cped into nothing", |w| w[CPED] = 0x10 | 1, Miss::FrameFault),
            ("non-Smi count", |w| w[TABLE + 2] = tagged(40), Miss::BadFrame),
            ("3 buckets", |w| w[TABLE + 4] = SMI(3), Miss::BadFrame),
            ("2^30 buckets", |w| w[TABLE + 4] = SMI(1 << 30), Miss::BadFrame),
            ("cycle", |w| (w[TABLE + 7 + 3], w[TABLE + 7 + 2]) = (tagged(40), SMI(1)), Miss::ChainTooLong),
            ("untagged table", |w| w[FRAME + 3] = addr(TABLE), Miss::BadFrame),
        ];
        for (what, lie, miss) in cases {
            let (mut h, s) = heap();
            lie(&mut h.words);
            assert_eq!(record_address(&h, &s, &LAYOUT).map_err(|e| e.0), Err(miss), "{what}");
        }
    }

    /// Whatever one word of the heap says, the walk ends within its read bound.
    #[test]
    fn every_single_word_lie_ends_within_the_read_bound() {
        let values = [0, 1, u64::MAX, SMI(-1), SMI(0), SMI(1), SMI(7), SMI(1 << 20), tagged(TABLE), tagged(FRAME), addr(CPED), 0xffff_ffff];
        for i in 0..64 {
            for v in values {
                let (mut h, s) = heap();
                h.words[i] = v;
                let _ = record_address(&h, &s, &LAYOUT);
                assert!(h.reads.get() <= 9 + 2 * MAX_CHAIN, "word {i} = {v:#x}: {} reads", h.reads.get());
            }
        }
    }
}
