//! Reads every thread's record: ptrace-stop the thread, take its thread pointer,
//! find its slot, copy the TLS pointer, the header and the attrs, detach.

use crate::ctx_record::{decode_attrs, Attr, Header, HEADER_SIZE, MAX_ATTRS_SIZE};
use crate::discover::Unresolved;
use crate::error::{Error, ErrorKind, Result};
use crate::ids::hex;
use crate::nodejs::layout::LayoutError;
use crate::nodejs::walk::{read_struct, record_address, Miss};
use crate::ptrace::ptrace_stop::StoppedThread;
use crate::ptrace::tls_slot::{slot_address, Slot};
use crate::remote_memory::RemoteMemory;
use crate::{Discovery, Writer};
use serde::Serialize;

/// What one thread's record (for one writer object) holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// valid == 1 and every rule holds.
    Valid,
    /// TLS pointer NULL, valid == 0, or no TLS block for the module yet.
    NoContext,
    /// The record breaks a rule (see `problems`).
    Malformed,
    /// The thread exited while being read.
    Exited,
    /// The thread could not be read (ptrace refused, unreadable memory...).
    Error,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThreadRecord {
    pub tid: i32,
    pub name: String,
    /// Path of the writer object this record belongs to.
    pub writer: String,
    pub state: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_pointer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flags: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attrs_size: Option<u16>,
    pub attrs: Vec<Attr>,
    /// Why the state is NoContext / Malformed / Error / Exited.
    pub problems: Vec<String>,
    /// A `nodejs_v1_dev` writer's walk that found no record: what stopped it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodejs_miss: Option<Miss>,
    /// State `Error` or `Exited`: what the failure means (refused, gone, ...).
    #[serde(skip)]
    pub error_kind: Option<ErrorKind>,
    /// CLOCK_MONOTONIC ns (process.hrtime's clock, as a sample's `time_ns`) at a moment the
    /// thread was stopped for this read: what it was running then is what the record must show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at_ns: Option<u64>,
}

impl ThreadRecord {
    fn new(tid: i32, name: &str, writer: &str, state: State) -> Self {
        ThreadRecord {
            tid,
            name: name.to_string(),
            writer: writer.to_string(),
            state,
            thread_pointer: None,
            record_address: None,
            trace_id: None,
            span_id: None,
            flags: None,
            valid: None,
            attrs_size: None,
            attrs: Vec::new(),
            problems: Vec::new(),
            nodejs_miss: None,
            error_kind: None,
            stopped_at_ns: None,
        }
    }
}

/// Thread ids of the process, sorted.
pub fn list_threads(pid: i32) -> Result<Vec<i32>> {
    let path = format!("/proc/{pid}/task");
    let dir = std::fs::read_dir(&path).map_err(|cause| Error::Process { pid, path: path.clone(), cause })?;
    let mut tids: Vec<i32> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    tids.sort_unstable();
    Ok(tids)
}

pub fn thread_name(pid: i32, tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default()
}

/// One row per (thread, writer object); threads are read one at a time.
pub fn read_all_threads(d: &Discovery) -> Result<Vec<ThreadRecord>> {
    let mem = RemoteMemory::new(d.pid);
    let mut out = Vec::new();
    for tid in list_threads(d.pid)? {
        let name = thread_name(d.pid, tid);
        out.extend(read_thread(&mem, tid, &name, &d.writers, d.key_map()));
    }
    Ok(out)
}

fn read_thread(mem: &RemoteMemory, tid: i32, name: &str, writers: &[Writer], key_map: Option<&[String]>) -> Vec<ThreadRecord> {
    let failed = |e: Error| {
        let state = if matches!(e, Error::ThreadExited { .. }) { State::Exited } else { State::Error };
        writers
            .iter()
            .map(|w| {
                let mut r = ThreadRecord::new(tid, name, &w.path, state.clone());
                r.problems.push(e.to_string());
                r.error_kind = Some(e.kind());
                r
            })
            .collect()
    };
    let stopped = match StoppedThread::stop(tid) {
        Ok(s) => s,
        Err(e) => return failed(e),
    };
    let tp = match stopped.thread_pointer() {
        Ok(tp) => tp,
        Err(e) => return failed(e),
    };
    let stopped_at_ns = monotonic_ns();
    let rows = writers
        .iter()
        .map(|w| {
            let mut r = ThreadRecord::new(tid, name, &w.path, State::NoContext);
            r.thread_pointer = Some(format!("{tp:#x}"));
            r.stopped_at_ns = stopped_at_ns;
            if let Err(e) = fill_record(&mut r, mem, tp, w, key_map) {
                r.state = State::Error;
                r.problems.push(e.to_string());
                r.error_kind = Some(e.kind());
            }
            r
        })
        .collect();
    drop(stopped); // detach only after every read of this thread
    rows
}

/// CLOCK_MONOTONIC now, in ns.
fn monotonic_ns() -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Why one thread's record could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadFailure {
    #[error("writer not resolved: {0}")]
    Unresolved(Unresolved),
    #[error("writer not read: {0}")]
    NoLayout(LayoutError),
    #[error("nodejs_v1_dev walk: {0}")]
    Walk(String),
    #[error("record at {0:#x} wraps around the address space")]
    Wraps(u64),
    #[error(transparent)]
    Read(#[from] Error),
}

impl ReadFailure {
    fn kind(&self) -> ErrorKind {
        match self {
            ReadFailure::Read(e) => e.kind(),
            _ => ErrorKind::Other,
        }
    }
}

fn fill_record(r: &mut ThreadRecord, mem: &RemoteMemory, tp: u64, w: &Writer, key_map: Option<&[String]>) -> std::result::Result<(), ReadFailure> {
    let access = w.access.as_ref().map_err(|e| ReadFailure::Unresolved(e.clone()))?;
    let slot = match slot_address(access, tp, mem)? {
        Slot::At(a) => a,
        Slot::Absent(why) => {
            r.problems.push(why);
            return Ok(());
        }
    };
    let ptr = match &w.nodejs {
        None => mem.read_u64(slot, "otel_thread_ctx_v1 slot")?,
        Some(layout) => {
            let layout = layout.as_ref().map_err(|e| ReadFailure::NoLayout(e.clone()))?;
            match read_struct(mem, slot).and_then(|s| record_address(mem, &s, layout)) {
                Ok(ptr) => ptr,
                Err((miss, why)) => {
                    r.nodejs_miss = Some(miss);
                    match miss {
                        _ if miss.is_no_context() => {}
                        Miss::FrameFault => return Err(ReadFailure::Walk(why)),
                        _ => r.state = State::Malformed,
                    }
                    r.problems.push(why);
                    return Ok(());
                }
            }
        }
    };
    if ptr == 0 {
        r.problems.push("TLS pointer is NULL".into());
        return Ok(());
    }
    r.record_address = Some(format!("{ptr:#x}"));
    if ptr % 2 != 0 {
        r.state = State::Malformed;
        r.problems.push(format!("record address {ptr:#x} is not 2-byte aligned"));
        return Ok(());
    }
    let mut hb = [0u8; HEADER_SIZE];
    mem.read(ptr, &mut hb, "record header")?;
    let h = Header::parse(&hb);
    r.valid = Some(h.valid);
    if h.valid == 0 {
        r.problems.push("valid = 0".into());
        return Ok(());
    }
    r.trace_id = Some(hex(&h.trace_id));
    r.span_id = Some(hex(&h.span_id));
    r.flags = Some(h.flags);
    r.attrs_size = Some(h.attrs_size);
    r.problems = h.problems();
    if h.valid == 1 && h.attrs_size > 0 && h.attrs_size as usize <= MAX_ATTRS_SIZE {
        // attrs_size is bounded just above; the address is the target's.
        let at = ptr.checked_add(HEADER_SIZE as u64).ok_or(ReadFailure::Wraps(ptr))?;
        let data = mem.read_vec(at, h.attrs_size as usize, "record attrs-data")?;
        let (attrs, problems) = decode_attrs(&data, key_map);
        r.attrs = attrs;
        r.problems.extend(problems);
    }
    r.state = if r.problems.is_empty() { State::Valid } else { State::Malformed };
    Ok(())
}
