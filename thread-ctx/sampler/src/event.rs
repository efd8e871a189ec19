//! One decoded event: a CPU sample (who was running) or an off-CPU interval
//! (who was switched out, for how long), the thread context it published and
//! its stacks, decoded from the skeleton's `sample_event`.

use super::ctx_state::CtxState;
use super::skel::types::{js_frame, sample_event};
use serde_json::{json, Value};
use thread_ctx_discovery::ctx_record::{decode_attrs, Header, HEADER_SIZE};
use thread_ctx_discovery::ids::hex;
/// What the sampler read of one JS frame, as the data model carries it.
pub use thread_ctx_model::js_frame::{JsFrameSlots, JS_FRAME_LEAF_STACK, JS_FRAME_OFFSET_REGISTER, NOT_A_SMI};

/// Size of `struct sample_event` (bpf/sampler_abi.h asserts the same layout): the largest record.
pub const EVENT_SIZE: usize = 5192;
const _: () = assert!(std::mem::size_of::<sample_event>() == EVENT_SIZE);
/// Bytes of the event before its attrs: every ring-buffer record starts with them, followed by
/// the user and kernel stack frames, JS frames, leaf words and the attrs-data it holds
/// (`send_event` in bpf/ctx_reader.bpf.h).
pub const EVENT_HEAD_SIZE: usize = 80;
const _: () = assert!(std::mem::offset_of!(sample_event, attrs) == EVENT_HEAD_SIZE);
/// `struct js_frame` (bpf/sampler_abi.h asserts it too).
pub const JS_FRAME_SIZE: usize = 24;
/// `JS_FRAME_NOT_SMI`: the frame's bytecode offset slot held no Smi (its value is not sent).
const JS_FRAME_NOT_SMI: u16 = 4;
const _: () = assert!(std::mem::size_of::<js_frame>() == JS_FRAME_SIZE);
const EVENT_CPU_SAMPLE: u8 = 0;
const EVENT_OFF_CPU: u8 = 1;
const EVENT_ALLOC: u8 = 2;
const EVENT_FLAG_PREEMPTED: u16 = 1;

/// Which program sent the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A cpu-clock tick on the thread.
    Cpu,
    /// The thread was switched out for [`Event::off_cpu_ns`] from `time_ns`.
    OffCpu,
    /// V8 sampled an allocation of [`Event::alloc_size`] bytes on the thread (the allocation uprobe).
    Alloc,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns), comparable to process.hrtime().
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub state: CtxState,
    /// The thread's TLS pointer (record address), 0 when it was not reached.
    pub record_addr: u64,
    /// The header as copied, when the record was reachable (`state.has_header()`).
    pub header: Option<Header>,
    /// attrs-data bytes; only for `CtxState::Valid`.
    pub attrs: Vec<u8>,
    /// User stack (instruction pointers, innermost first), or the negative
    /// errno bpf_get_stack returned (-ENOENT: not captured).
    pub user_stack: Result<Vec<u64>, i32>,
    /// Likewise for the kernel stack (-EFAULT for a sample taken in user mode).
    pub kernel_stack: Result<Vec<u64>, i32>,
    /// A node process's JS frames (its user stack walked with V8's layout), innermost first.
    pub js_frames: Vec<JsFrameSlots>,
    /// The words at the stack pointer, when the innermost JS frame's flags say so.
    pub leaf_words: Vec<u64>,
    /// What the sample weighs, in its kind's unit: off-CPU the nanoseconds the thread was
    /// switched out, allocations the sampled object's bytes, 0 for CPU samples.
    pub value: u64,
    /// Off-CPU: switched out while runnable (waited for a CPU) rather than blocked.
    pub preempted: bool,
}

/// Why a ring-buffer record is not an event (the sampler's ABI and the reader's disagree).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("ring buffer event of {0} bytes, expected {EVENT_HEAD_SIZE} to {EVENT_SIZE}")]
    Size(usize),
    #[error("event declares {user} + {kernel} stack bytes, {js} JS frame bytes, {leaf} leaf bytes and {attrs} attrs bytes, more than it holds")]
    Overlong { user: usize, kernel: usize, js: usize, leaf: usize, attrs: usize },
    #[error("ring buffer event of {len} bytes, its head declares {declared}")]
    Length { len: usize, declared: usize },
    #[error("event kind {0}, expected {EVENT_CPU_SAMPLE} (CPU sample), {EVENT_OFF_CPU} (off-CPU) or {EVENT_ALLOC} (allocation)")]
    Kind(u8),
    #[error("event state {0} out of range")]
    State(u8),
}

/// The first `bytes` bytes of a stack buffer as instruction pointers, or the error.
fn stack(bytes: i32, buf: &[u64]) -> Result<Vec<u64>, i32> {
    if bytes < 0 {
        return Err(bytes);
    }
    let n = (bytes as usize / 8).min(buf.len());
    Ok(buf[..n].iter().copied().take_while(|&ip| ip != 0).collect())
}

/// One `struct js_frame` as the skeleton has it.
fn js_frame_from_raw(f: &js_frame) -> JsFrameSlots {
    slots(f.depth, f.flags, f.shared, f.bytecode_array, f.bytecode_offset)
}

/// One `struct js_frame` as the ring buffer holds it.
fn js_frame_from_bytes(b: &[u8]) -> JsFrameSlots {
    let w = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let h = |at: usize| u16::from_ne_bytes(b[at..at + 2].try_into().expect("2 bytes"));
    let offset = u32::from_ne_bytes(b[16..20].try_into().expect("4 bytes"));
    slots(h(20), h(22), w(0), w(8), offset)
}

/// The frame's slots as the data model carries them: the bytecode offset slot's word again (its
/// Smi, or a word that is none), or the offset register's value.
fn slots(depth: u16, flags: u16, shared: u64, bytecode_array: u64, offset: u32) -> JsFrameSlots {
    let bytecode_offset = if flags & JS_FRAME_OFFSET_REGISTER != 0 {
        offset as u64
    } else if flags & JS_FRAME_NOT_SMI != 0 {
        NOT_A_SMI
    } else {
        (offset as u64) << 32
    };
    JsFrameSlots { depth, flags: flags & !JS_FRAME_NOT_SMI, shared, bytecode_array, bytecode_offset }
}

impl Event {
    /// Decodes one ring-buffer record; Err says why it is not an event.
    pub fn decode(bytes: &[u8]) -> Result<Event, EventError> {
        if bytes.len() < EVENT_HEAD_SIZE || bytes.len() > EVENT_SIZE {
            return Err(EventError::Size(bytes.len()));
        }
        let mut raw = sample_event::default();
        // SAFETY: sample_event is plain integers and arrays, valid for any bits; the head is its first EVENT_HEAD_SIZE bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut raw as *mut sample_event).cast::<u8>(), EVENT_HEAD_SIZE) };
        let len = |n: i32| n.max(0) as usize;
        let (user, kernel) = (len(raw.user_stack_bytes), len(raw.kernel_stack_bytes));
        let js = raw.js_frame_count as usize * JS_FRAME_SIZE;
        let leaf = raw.leaf_word_count as usize * 8;
        let attrs = if raw.state == CtxState::Valid as u8 { raw.header.attrs_size as usize } else { 0 };
        if user > 8 * raw.user_stack.len()
            || kernel > 8 * raw.kernel_stack.len()
            || js > JS_FRAME_SIZE * raw.js.len()
            || leaf > 8 * raw.leaf_words.len()
            || attrs > raw.attrs.len()
        {
            return Err(EventError::Overlong { user, kernel, js, leaf, attrs });
        }
        let declared = EVENT_HEAD_SIZE + user + kernel + js + leaf + attrs;
        if bytes.len() != declared {
            return Err(EventError::Length { len: bytes.len(), declared });
        }
        let words = |at: usize, n: usize, out: &mut [u64]| {
            for (i, chunk) in bytes[at..at + n].chunks_exact(8).enumerate() {
                out[i] = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
            }
        };
        let mut at = EVENT_HEAD_SIZE;
        words(at, user, &mut raw.user_stack);
        at += user;
        words(at, kernel, &mut raw.kernel_stack);
        at += kernel;
        let js_frames = bytes[at..at + js].chunks_exact(JS_FRAME_SIZE).map(js_frame_from_bytes).collect();
        at += js;
        words(at, leaf, &mut raw.leaf_words);
        at += leaf;
        raw.attrs[..attrs].copy_from_slice(&bytes[at..]);
        let mut e = Self::from_raw(&raw)?;
        e.js_frames = js_frames;
        Ok(e)
    }

    fn from_raw(raw: &sample_event) -> Result<Event, EventError> {
        let kind = match raw.kind {
            EVENT_CPU_SAMPLE => EventKind::Cpu,
            EVENT_OFF_CPU => EventKind::OffCpu,
            EVENT_ALLOC => EventKind::Alloc,
            k => return Err(EventError::Kind(k)),
        };
        let state = CtxState::from_raw(raw.state).ok_or(EventError::State(raw.state))?;
        let header = state.has_header().then(|| {
            let h = &raw.header;
            let mut b = [0u8; HEADER_SIZE];
            b[..16].copy_from_slice(&h.trace_id);
            b[16..24].copy_from_slice(&h.span_id);
            (b[24], b[25]) = (h.valid, h.flags);
            b[26..28].copy_from_slice(&h.attrs_size.to_ne_bytes());
            Header::parse(&b)
        });
        let attrs = match (state, header) {
            (CtxState::Valid, Some(h)) => raw.attrs[..(h.attrs_size as usize).min(raw.attrs.len())].to_vec(),
            _ => Vec::new(),
        };
        Ok(Event {
            kind,
            time_ns: raw.time_ns,
            pid: raw.pid,
            tid: raw.tid,
            cpu: raw.cpu,
            state,
            record_addr: raw.record_addr,
            header,
            attrs,
            user_stack: stack(raw.user_stack_bytes, &raw.user_stack),
            kernel_stack: stack(raw.kernel_stack_bytes, &raw.kernel_stack),
            js_frames: raw.js[..(raw.js_frame_count as usize).min(raw.js.len())].iter().map(js_frame_from_raw).collect(),
            leaf_words: raw.leaf_words[..(raw.leaf_word_count as usize).min(raw.leaf_words.len())].to_vec(),
            value: raw.value,
            preempted: raw.flags & EVENT_FLAG_PREEMPTED != 0,
        })
    }

    /// The sampled object's size in bytes, for an allocation sample.
    pub fn alloc_size(&self) -> Option<u64> {
        (self.kind == EventKind::Alloc).then_some(self.value)
    }

    /// Nanoseconds the thread was switched out, for an off-CPU sample.
    pub fn off_cpu_ns(&self) -> Option<u64> {
        (self.kind == EventKind::OffCpu).then_some(self.value)
    }

    /// (trace id, span id, flags) when the sample carries a span context.
    pub fn span(&self) -> Option<([u8; 16], [u8; 8], u8)> {
        let h = self.header.filter(|_| self.state == CtxState::Valid)?;
        (h.trace_id != [0; 16] || h.span_id != [0; 8]).then_some((h.trace_id, h.span_id, h.flags))
    }

    /// One `--format jsonl` line.
    pub fn to_json(&self, key_map: Option<&[String]>) -> Value {
        let span = self.span();
        let attrs = (self.state == CtxState::Valid).then(|| {
            let (entries, problems) = decode_attrs(&self.attrs, key_map);
            json!({ "hex": hex(&self.attrs), "entries": entries, "problems": problems })
        });
        json!({
            "kind": match self.kind { EventKind::Cpu => "cpu", EventKind::OffCpu => "off_cpu", EventKind::Alloc => "alloc" },
            "time_ns": self.time_ns,
            "duration_ns": self.off_cpu_ns(),
            "preempted": (self.kind == EventKind::OffCpu).then_some(self.preempted),
            "size": self.alloc_size(),
            "pid": self.pid,
            "tid": self.tid,
            "cpu": self.cpu,
            "state": self.state.name(),
            "valid": self.header.map(|h| h.valid),
            "record_address": (self.record_addr != 0).then(|| format!("{:#x}", self.record_addr)),
            "trace_id": span.map(|s| hex(&s.0)),
            "span_id": span.map(|s| hex(&s.1)),
            "flags": span.map(|s| s.2),
            "attrs": attrs,
            "stack_depth": self.user_stack.as_ref().ok().map(Vec::len),
            "stack_error": self.user_stack.as_ref().err(),
            "kernel_stack_depth": self.kernel_stack.as_ref().ok().map(Vec::len),
            "js_frames": (!self.js_frames.is_empty()).then_some(self.js_frames.len()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(state: CtxState, valid: u8, attrs: &[u8]) -> sample_event {
        let mut e = sample_event { time_ns: 123, pid: 77, tid: 77, state: state as u8, ..Default::default() };
        e.user_stack_bytes = -14;
        e.kernel_stack_bytes = 16;
        e.kernel_stack[..2].copy_from_slice(&[0xffff_ffff_8100_0000, 0xffff_ffff_8100_0100]);
        e.header.trace_id = [0xaa; 16];
        e.header.span_id = [0xbb; 8];
        (e.header.valid, e.header.flags, e.header.attrs_size) = (valid, 1, attrs.len() as u16);
        e.attrs[..attrs.len()].copy_from_slice(attrs);
        e
    }

    /// The record the BPF program sends for `e`: its head, then what it holds.
    fn bytes(e: &sample_event) -> Vec<u8> {
        // SAFETY: reading a plain-data struct's bytes.
        let all = unsafe { std::slice::from_raw_parts((e as *const sample_event).cast::<u8>(), EVENT_SIZE) };
        let mut out = all[..EVENT_HEAD_SIZE].to_vec();
        let user = e.user_stack_bytes.max(0) as usize;
        let kernel = e.kernel_stack_bytes.max(0) as usize;
        out.extend(e.user_stack.iter().flat_map(|f| f.to_ne_bytes()).take(user));
        out.extend(e.kernel_stack.iter().flat_map(|f| f.to_ne_bytes()).take(kernel));
        // SAFETY: reading plain-data structs' bytes.
        let js = unsafe { std::slice::from_raw_parts(e.js.as_ptr().cast::<u8>(), JS_FRAME_SIZE * e.js_frame_count as usize) };
        out.extend_from_slice(js);
        out.extend(e.leaf_words.iter().flat_map(|f| f.to_ne_bytes()).take(8 * e.leaf_word_count as usize));
        if e.state == CtxState::Valid as u8 {
            out.extend_from_slice(&e.attrs[..e.header.attrs_size as usize]);
        }
        out
    }

    #[test]
    fn valid_sample_decodes_ids_attrs_and_stacks() {
        let s = Event::decode(&bytes(&raw(CtxState::Valid, 1, &[0, 2, b'/', b'a']))).unwrap();
        assert_eq!((s.time_ns, s.tid), (123, 77));
        assert_eq!(s.span(), Some(([0xaa; 16], [0xbb; 8], 1)));
        assert_eq!(s.user_stack, Err(-14));
        assert_eq!(s.kernel_stack, Ok(vec![0xffff_ffff_8100_0000, 0xffff_ffff_8100_0100]));
        assert_eq!((s.kind, s.value, s.preempted), (EventKind::Cpu, 0, false));
        let j = s.to_json(Some(&["http.route".to_string()]));
        assert_eq!(j["trace_id"], "aa".repeat(16));
        assert_eq!(j["attrs"]["hex"], "00022f61");
        assert_eq!(j["attrs"]["entries"][0]["key"], "http.route");
        assert_eq!(j["state"], "valid");
        assert_eq!((j["stack_error"].as_i64(), j["kernel_stack_depth"].as_u64()), (Some(-14), Some(2)));
        assert_eq!((j["kind"].as_str(), j["duration_ns"].as_u64()), (Some("cpu"), None));
    }

    #[test]
    fn js_frames_and_leaf_words_decode_after_the_stacks() {
        let mut e = raw(CtxState::Valid, 1, &[0, 1, b'x']);
        e.user_stack_bytes = 24;
        e.user_stack[..3].copy_from_slice(&[0x10, 0x20, 0x30]);
        e.js_frame_count = 2;
        e.js[0] = js_frame { shared: 0x1001, bytecode_array: 0x2001, bytecode_offset: 0, depth: 0, flags: JS_FRAME_LEAF_STACK | JS_FRAME_NOT_SMI };
        e.js[1] = js_frame { shared: 0x3001, bytecode_array: 7, bytecode_offset: 9, depth: 2, flags: 0 };
        e.leaf_word_count = 3;
        e.leaf_words = [0xa, 0xb, 0xc];
        let s = Event::decode(&bytes(&e)).unwrap();
        assert_eq!(s.user_stack, Ok(vec![0x10, 0x20, 0x30]));
        assert_eq!(s.js_frames.len(), 2);
        assert_eq!((s.js_frames[0].shared, s.js_frames[0].flags, s.js_frames[1].depth), (0x1001, JS_FRAME_LEAF_STACK, 2));
        // The offset slot's word again: no Smi (a baseline frame's), or the Smi of its value.
        assert_eq!((s.js_frames[0].bytecode_offset, s.js_frames[1].bytecode_offset), (NOT_A_SMI, 9 << 32));
        assert_eq!(s.leaf_words, vec![0xa, 0xb, 0xc]);
        assert_eq!(s.attrs, vec![0, 1, b'x'], "attrs still come last");
        e.js_frame_count = e.js.len() as u16 + 1;
        assert!(Event::decode(&bytes(&e)).is_err(), "more JS frames than the event holds");
    }

    #[test]
    fn off_cpu_events_carry_duration_and_preemption() {
        let mut e = raw(CtxState::Valid, 1, &[]);
        (e.kind, e.flags, e.value) = (1, 1, 50_000_000);
        let s = Event::decode(&bytes(&e)).unwrap();
        assert_eq!((s.kind, s.off_cpu_ns(), s.preempted), (EventKind::OffCpu, Some(50_000_000), true));
        let j = s.to_json(None);
        assert_eq!((j["kind"].as_str(), j["duration_ns"].as_u64(), j["preempted"].as_bool()), (Some("off_cpu"), Some(50_000_000), Some(true)));
    }

    #[test]
    fn invalid_and_torn_samples_carry_no_span() {
        let s = Event::decode(&bytes(&raw(CtxState::Invalid, 0, &[]))).unwrap();
        assert_eq!(s.span(), None);
        assert_eq!(s.header.unwrap().valid, 0);
        let t = Event::decode(&bytes(&raw(CtxState::Torn, 1, &[1, 0]))).unwrap();
        assert_eq!(t.span(), None);
        assert!(t.attrs.is_empty());
        assert_eq!(t.to_json(None)["trace_id"], Value::Null);
    }

    #[test]
    fn bad_events_are_rejected_with_reason() {
        assert!(Event::decode(&[0; 10]).unwrap_err().to_string().contains("expected 80 to 5192"));
        let mut short = bytes(&raw(CtxState::Valid, 1, &[0, 2, b'/', b'a']));
        short.pop();
        assert!(Event::decode(&short).unwrap_err().to_string().contains("its head declares"), "a record shorter than its head says is refused");
        let mut e = raw(CtxState::Valid, 1, &[]);
        e.state = 42;
        assert_eq!(Event::decode(&bytes(&e)).unwrap_err(), EventError::State(42));
        e.state = CtxState::Valid as u8;
        e.kind = 9;
        assert_eq!(Event::decode(&bytes(&e)).unwrap_err(), EventError::Kind(9));
    }
}
