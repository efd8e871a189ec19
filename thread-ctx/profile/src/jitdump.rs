//! V8's jitdump: the `jit-PID.dump` file `node --perf-prof` writes into the
//! process's working directory (and maps, so tools find it in
//! /proc/PID/maps). Each piece of generated code gets a `JIT_CODE_LOAD`
//! record (address, size, the same name the perf map would carry) and, before
//! it, a `JIT_CODE_DEBUG_INFO` record: V8's source position table, one
//! (address, line, column, script) entry where each stretch of instructions
//! starts. That is what names a sampled JS frame down to its line.
//!
//! The file is written by the target, so it is read as hostile input: every
//! read is bounds-checked, nothing panics, no allocation is sized by a count
//! the file chose (only by bytes actually present), and a record that makes
//! no sense stops reading rather than being guessed at. [`JitDump::parse`]
//! (bytes in, tables out) is the whole parser, for tests and fuzzing;
//! [`JitDumpFile`] feeds it the file's new bytes as V8 appends them.
//!
//! What the debug entries are worth depends on the tier that made the code
//! (the marker in its name, see [`positions_of_tier`]), measured on Node 20,
//! 22, 24 and 26 (docs/source-lines.md):
//! - optimized code (Maglev `+`, TurboFan `*`): entries are keyed by machine
//!   code offset, as the format says: exact;
//! - baseline code (Sparkplug `^`): V8 writes the bytecode's table, keyed by
//!   *bytecode* offset (0x0-0x4d for 0x29c bytes of code), so every sample past
//!   the first few bytes would land on the last entry, the function's `return`.
//!   Nothing V8 writes maps that code to bytecode, so such code keeps its
//!   function's line only;
//! - interpreted code (`~`, the per-function trampolines of
//!   `--interpreted-frames-native-stack`): no entries; the function's line.
//!
//! Optimized code also carries the positions of the functions inlined into
//! it, named by the inlined function's script and line: an entry whose script
//! is not the function's, or whose line comes before the function's start, is
//! another function's, and falls back to the function's line.
//!
//! Two quirks of V8's writer are handled here:
//! - debug entry addresses are biased by 0x40 (the ELF header `perf inject`
//!   puts before the code), see [`V8_DEBUG_ADDR_BIAS`];
//! - up to Node 24, the script name after each debug entry can be raw heap
//!   bytes (with NULs inside) of the name's length instead of the name, so
//!   an entry cannot be split at the first NUL: the split is the NUL after
//!   which the next entry's address follows (entries rise through one code
//!   object), and such names are not trusted.

use super::frame::SourcePos;
use super::perf_map::{parse_v8_name, JsFunction};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// What V8 adds to every debug entry's address (`kElfHeaderSize`).
pub const V8_DEBUG_ADDR_BIAS: u64 = 0x40;
/// A record larger than this stops reading (V8's largest code objects are far smaller).
pub const MAX_RECORD_BYTES: u32 = 64 << 20;
/// Bytes read from the file per refresh.
const MAX_READ_BYTES: u64 = MAX_RECORD_BYTES as u64 + 16;
/// Code ranges kept; past this, new code is not learned (reported).
pub const MAX_RANGES: usize = 1 << 20;
/// Line entries kept over all ranges (12 bytes each); past this, new code keeps its name only.
pub const MAX_LINE_ENTRIES: usize = 4 << 20;
/// A function's instructions span less than this: bounds where the next debug entry may be.
const MAX_CODE_SPAN: u64 = 64 << 20;
/// The longest function name kept (V8's include the script path).
const MAX_NAME_BYTES: usize = 4096;

const HEADER_BYTES: usize = 40;
const RECORD_HEADER_BYTES: usize = 16;
const MAGIC_LE: u32 = 0x4A69_5444; // "JiTD" as a little-endian u32 ("DTiJ" in the file)

/// The largest record type (`JIT_CODE_*`) perf defines; a larger one is not a record header.
const MAX_RECORD_TYPE: u32 = 8;
/// How far past a record's declared end its successor is looked for (see [`JitDump::resync`]).
const MAX_RESYNC_BYTES: usize = 64 << 10;
/// Consecutive records are written within this of each other (timestamps are CLOCK_MONOTONIC ns).
const MAX_TIMESTAMP_STEP_NS: u64 = 24 * 3600 * 1_000_000_000;

const JIT_CODE_LOAD: u32 = 0;
const JIT_CODE_MOVE: u32 = 1;
const JIT_CODE_DEBUG_INFO: u32 = 2;

/// Where one stretch of a code object's instructions came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LineEntry {
    /// Offset of the stretch's first instruction from the code's start.
    offset: u32,
    line: u32,
    column: u32,
}

/// One piece of generated code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitCode {
    pub end: u64,
    pub func: JsFunction,
    /// Sorted by offset; empty without debug info (then only the function is known).
    lines: Vec<LineEntry>,
}

/// How far the debug entries of a tier's code can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierPositions {
    /// Keyed by machine-code offset (Maglev, TurboFan, and code without a tier marker).
    MachineCode,
    /// Keyed by bytecode offset (Sparkplug): not a position of the sampled instruction.
    Bytecode,
    /// Interpreted: V8 writes none.
    None,
}

/// What V8's tier marker (`JsFunction::tier`) says about its code's debug entries.
pub fn positions_of_tier(tier: Option<char>) -> TierPositions {
    match tier {
        Some('^') => TierPositions::Bytecode,
        Some('~') => TierPositions::None,
        _ => TierPositions::MachineCode,
    }
}

/// A debug record's entries and the script each names (an index into `scripts`;
/// None when the name is not trustworthy), waiting for the code load they describe.
#[derive(Debug, Clone, Default)]
struct DebugRecord {
    code_addr: u64,
    lines: Vec<LineEntry>,
    script_of: Vec<Option<u32>>,
    scripts: Vec<String>,
}

/// What the dump says about the code of one process.
#[derive(Debug, Default, Clone)]
pub struct JitDump {
    by_start: BTreeMap<u64, JitCode>,
    header_seen: bool,
    /// The last debug record, waiting for the code load it describes.
    pending_debug: Option<DebugRecord>,
    line_entries: usize,
    /// Records read (of any type).
    pub records: u64,
    /// Code loads whose line table was left out (a cap was reached, or the debug record made no sense).
    pub lines_dropped: u64,
    /// Code loads of baseline (Sparkplug) code whose bytecode-keyed entries were left out.
    pub baseline_tables_dropped: u64,
    /// Entries of optimized code left out as an inlined function's position.
    pub inlined_entries_dropped: u64,
    /// Why reading stopped for good (a malformed header or record), if it did.
    pub stopped: Option<String>,
    /// Times a record's declared size did not lead to the next record and reading resynchronized.
    pub resyncs: u64,
    /// The last record's timestamp (headers far from it are not V8's).
    last_timestamp: Option<u64>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

impl JitDump {
    /// Parses a whole dump (or the part written so far).
    pub fn parse(bytes: &[u8]) -> JitDump {
        let mut d = JitDump::default();
        d.feed(bytes);
        d
    }

    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }

    /// Consumes the file header (first call) and then every complete record
    /// at the start of `bytes`, which continue where the last call stopped.
    /// Returns how many bytes were consumed: the caller passes the rest again,
    /// with what was appended since.
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        let mut at = 0;
        if self.stopped.is_some() {
            return 0;
        }
        if !self.header_seen {
            let Some(magic) = u32_at(bytes, 0) else { return 0 };
            if magic != MAGIC_LE {
                self.stopped = Some(format!("not a little-endian jitdump (magic {magic:#010x})"));
                return 0;
            }
            let (Some(version), Some(size)) = (u32_at(bytes, 4), u32_at(bytes, 8)) else { return 0 };
            if version != 1 || (size as usize) < HEADER_BYTES || size > 4096 {
                self.stopped = Some(format!("unsupported jitdump header (version {version}, {size} bytes)"));
                return 0;
            }
            if bytes.len() < size as usize {
                return 0;
            }
            self.header_seen = true;
            at = size as usize;
        }
        while let (Some(kind), Some(size)) = (u32_at(bytes, at), u32_at(bytes, at + 4)) {
            if !self.plausible_header(bytes, at) {
                match self.resync(bytes, at) {
                    Some(Ok(next)) => {
                        // The record before declared fewer bytes than V8 wrote: its debug entries are not trusted.
                        self.pending_debug = None;
                        self.resyncs += 1;
                        at = next;
                        continue;
                    }
                    Some(Err(())) => self.stopped = Some(format!("record of type {kind} at byte {at} of the new data declares {size} bytes")),
                    None => {} // not enough bytes yet to find the next record
                }
                break;
            }
            let Some(body) = bytes.get(at + RECORD_HEADER_BYTES..at + size as usize) else { break };
            self.last_timestamp = u64_at(bytes, at + 8);
            self.record(kind, body);
            self.records += 1;
            at += size as usize;
        }
        at
    }

    /// A record header at `at` that can be V8's: a known type, a size within bounds, and a
    /// timestamp within a day of the last record's.
    fn plausible_header(&self, bytes: &[u8], at: usize) -> bool {
        let (Some(kind), Some(size)) = (u32_at(bytes, at), u32_at(bytes, at + 4)) else { return false };
        let time_fits = match (self.last_timestamp, u64_at(bytes, at + 8)) {
            (Some(last), Some(t)) => t.abs_diff(last) <= MAX_TIMESTAMP_STEP_NS,
            _ => true,
        };
        kind <= MAX_RECORD_TYPE && (RECORD_HEADER_BYTES as u32..=MAX_RECORD_BYTES).contains(&size) && time_fits
    }

    /// V8 14 (Node 26) can declare a debug record a few bytes shorter than it writes (cross-script
    /// inlining: 3,272 declared, 3,275 written), so the next header is not where the size says.
    /// The next plausible header within [`MAX_RESYNC_BYTES`] whose own successor is plausible
    /// too is where reading goes on. None: not enough bytes yet;
    /// Err: nothing there.
    fn resync(&self, bytes: &[u8], at: usize) -> Option<Result<usize, ()>> {
        let window_end = at.saturating_add(MAX_RESYNC_BYTES);
        for q in at + 1..window_end.min(bytes.len()) {
            if !self.plausible_header(bytes, q) {
                continue;
            }
            let next = q + u32_at(bytes, q + 4)? as usize;
            if next + RECORD_HEADER_BYTES > bytes.len() {
                return None; // a candidate whose successor is not written yet: wait for it
            }
            if self.plausible_header(bytes, next) {
                return Some(Ok(q));
            }
        }
        (bytes.len() >= window_end).then_some(Err(()))
    }

    fn record(&mut self, kind: u32, body: &[u8]) {
        match kind {
            JIT_CODE_DEBUG_INFO => {
                let Some(code_addr) = u64_at(body, 0) else { return };
                match parse_debug_entries(body, code_addr) {
                    Some(record) => self.pending_debug = Some(record),
                    None => {
                        self.pending_debug = None;
                        self.lines_dropped += 1;
                    }
                }
            }
            JIT_CODE_LOAD => self.code_load(body),
            JIT_CODE_MOVE => self.code_move(body),
            _ => {} // close, unwinding info, and types this reader does not know
        }
    }

    /// pid u32, tid u32, vma u64, code_addr u64, code_size u64, code_index u64, name\0, code bytes.
    fn code_load(&mut self, body: &[u8]) {
        let (Some(code_addr), Some(code_size)) = (u64_at(body, 16), u64_at(body, 24)) else { return };
        let name_bytes = body.get(40..).unwrap_or(&[]);
        let name_end = name_bytes.iter().take(MAX_NAME_BYTES).position(|&b| b == 0).unwrap_or(name_bytes.len().min(MAX_NAME_BYTES));
        let func = parse_v8_name(&String::from_utf8_lossy(&name_bytes[..name_end]));
        let Some(end) = code_addr.checked_add(code_size.max(1)) else { return };
        let mut lines = match self.pending_debug.take() {
            Some(record) if record.code_addr == code_addr => self.own_positions(&func, record),
            _ => Vec::new(),
        };
        if self.line_entries + lines.len() > MAX_LINE_ENTRIES {
            self.lines_dropped += u64::from(!lines.is_empty());
            lines = Vec::new();
        }
        // Entries past the code (the table also covers data after the instructions) are dropped.
        lines.retain(|l| (l.offset as u64) < code_size.max(1));
        self.insert(code_addr, JitCode { end, func, lines });
    }

    /// pid u32, tid u32, vma u64, old_code_addr u64, new_code_addr u64, code_size u64, code_index u64.
    /// The entries of `record` that are positions in `func` itself (see the module's notes).
    fn own_positions(&mut self, func: &JsFunction, mut record: DebugRecord) -> Vec<LineEntry> {
        match positions_of_tier(func.tier) {
            TierPositions::MachineCode => {}
            TierPositions::Bytecode => {
                self.baseline_tables_dropped += u64::from(!record.lines.is_empty());
                return Vec::new();
            }
            TierPositions::None => return Vec::new(),
        }
        for (entry, script) in record.lines.iter_mut().zip(&record.script_of) {
            let other_script = match (script, &func.script) {
                (Some(i), Some(own)) => record.scripts.get(*i as usize).is_some_and(|s| s != own),
                _ => false,
            };
            let before_start = func.line.is_some_and(|start| entry.line > 0 && entry.line < start);
            if other_script || before_start {
                entry.line = 0; // looked up as "no position": the function's line
                self.inlined_entries_dropped += 1;
            }
        }
        record.lines
    }

    fn code_move(&mut self, body: &[u8]) {
        let (Some(old), Some(new), Some(size)) = (u64_at(body, 16), u64_at(body, 24), u64_at(body, 32)) else { return };
        let Some(mut code) = self.by_start.remove(&old) else { return };
        self.line_entries -= code.lines.len();
        let Some(end) = new.checked_add(size.max(1)) else { return };
        code.end = end;
        self.insert(new, code);
    }

    fn insert(&mut self, start: u64, code: JitCode) {
        // Code space is reused after GC: a newer load replaces whatever it overlaps.
        let overlapping: Vec<u64> = self.by_start.range(..code.end).rev().take_while(|(_, c)| c.end > start).map(|(s, _)| *s).collect();
        for s in overlapping {
            if let Some(old) = self.by_start.remove(&s) {
                self.line_entries -= old.lines.len();
            }
        }
        if self.by_start.len() >= MAX_RANGES {
            self.stopped.get_or_insert_with(|| format!("more than {MAX_RANGES} code objects; newer ones are not named"));
            return;
        }
        self.line_entries += code.lines.len();
        self.by_start.insert(start, code);
    }

    /// The function at `addr`, and the source position there when the dump has a line table.
    pub fn lookup(&self, addr: u64) -> Option<(&JsFunction, Option<SourcePos>)> {
        let (start, code) = self.by_start.range(..=addr).next_back()?;
        if addr >= code.end {
            return None;
        }
        let offset = addr - start;
        let i = code.lines.partition_point(|l| l.offset as u64 <= offset);
        let pos = i
            .checked_sub(1)
            .map(|i| code.lines[i])
            .filter(|l| l.line > 0)
            .map(|l| SourcePos { line: l.line, column: (l.column > 0).then_some(l.column) });
        Some((&code.func, pos))
    }
}

/// code_addr u64, nr_entry u64, then per entry: addr u64, line i32, column i32,
/// script name\0 (`\xff\0`: the previous entry's). None when the record does not hold together.
fn parse_debug_entries(body: &[u8], code_addr: u64) -> Option<DebugRecord> {
    const FIXED: usize = 16;
    let count = u64_at(body, 8)?;
    // Every entry takes at least its fixed part and a NUL: a count the bytes cannot hold is a lie.
    if count > ((body.len() - 16) / (FIXED + 1)) as u64 {
        return None;
    }
    let mut out = Vec::with_capacity(count as usize);
    let (mut script_of, mut scripts) = (Vec::with_capacity(count as usize), Vec::new());
    let mut current: Option<u32> = None;
    let mut at = 16;
    for i in 0..count {
        let addr = u64_at(body, at)?;
        let (line, column) = (u32_at(body, at + 8)?, u32_at(body, at + 12)?);
        at += FIXED;
        let offset = addr.checked_sub(code_addr)?.checked_sub(V8_DEBUG_ADDR_BIAS)?;
        let name_end = if i + 1 < count { name_end_before_next(body, at, addr)? } else { name_end_at_tail(body, at)? };
        let name = &body[at..name_end];
        if name != b"\xff" {
            current = trusted_script_name(name).map(|n| {
                if scripts.last() != Some(&n) {
                    scripts.push(n);
                }
                (scripts.len() - 1) as u32
            });
        }
        script_of.push(current);
        at = name_end + 1;
        // Lines and columns are V8's 0-based values plus one: a negative one means "none".
        let (line, column) = (if (line as i32) > 0 { line } else { 0 }, if (column as i32) > 0 { column } else { 0 });
        out.push(LineEntry { offset: u32::try_from(offset).ok()?, line, column });
    }
    // Entries rise with the instructions; anything else is not a table to trust.
    out.windows(2).all(|w| w[0].offset <= w[1].offset).then_some(DebugRecord { code_addr, lines: out, script_of, scripts })
}

/// A script name as V8 writes it when it writes the name (a path or URL), else None (heap bytes).
fn trusted_script_name(bytes: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(bytes).ok()?;
    let plausible = !s.is_empty() && s.len() <= MAX_NAME_BYTES && !s.chars().any(char::is_control) && (s.contains('/') || s.contains(':'));
    plausible.then(|| s.to_string())
}

/// The NUL ending the name that starts at `at`: the first one after which the
/// next entry's address (at or after this entry's, within one code object) follows.
fn name_end_before_next(body: &[u8], at: usize, addr: u64) -> Option<usize> {
    let mut from = at;
    loop {
        let nul = from + body.get(from..)?.iter().position(|&b| b == 0)?;
        if let Some(next) = u64_at(body, nul + 1) {
            if next >= addr && next - addr < MAX_CODE_SPAN {
                return Some(nul);
            }
        }
        from = nul + 1;
    }
}

/// The last entry's name ends at the first NUL followed only by the record's zero padding (< 8 bytes).
fn name_end_at_tail(body: &[u8], at: usize) -> Option<usize> {
    let mut from = at;
    loop {
        let nul = from + body.get(from..)?.iter().position(|&b| b == 0)?;
        let rest = &body[nul + 1..];
        if rest.len() < 8 && rest.iter().all(|&b| b == 0) {
            return Some(nul);
        }
        from = nul + 1;
    }
}

/// A process's jitdump on disk, read as it grows (opened as the process, see
/// [`thread_ctx_discovery::target_file`]).
pub struct JitDumpFile {
    pid: i32,
    path: PathBuf,
    /// Bytes of the file consumed so far.
    offset: u64,
    /// Bytes the next record needs past `offset`, once its header was seen: the file is
    /// not read again before it has them (a record that never completes costs one read).
    awaiting: u64,
    pub dump: JitDump,
}

impl JitDumpFile {
    pub fn new(pid: i32, path: PathBuf) -> JitDumpFile {
        JitDumpFile { pid, path, offset: 0, awaiting: 0, dump: JitDump::default() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what V8 appended since the last call. A file shorter than what
    /// was read was rewritten: it is read again from the start.
    pub fn refresh(&mut self) -> std::io::Result<()> {
        let mut f = thread_ctx_discovery::target_file::open_any_owner(self.pid, &self.path)?;
        let len = f.metadata()?.len();
        if len < self.offset {
            (self.offset, self.awaiting, self.dump) = (0, 0, JitDump::default());
        }
        if len - self.offset <= self.awaiting || self.dump.stopped.is_some() {
            return Ok(());
        }
        f.seek(SeekFrom::Start(self.offset))?;
        let mut buf = Vec::new();
        f.take((len - self.offset).min(MAX_READ_BYTES)).read_to_end(&mut buf)?;
        let used = self.dump.feed(&buf);
        self.offset += used as u64;
        // An incomplete record at the end: wait until the file holds all of it.
        let rest = &buf[used..];
        // (A header that is not V8's, being resynchronized past, waits for no size of its own.)
        self.awaiting = match (self.dump.header_seen && self.dump.plausible_header(rest, 0), u32_at(rest, 4)) {
            (true, Some(size)) => (size as u64).saturating_sub(1),
            _ => 0,
        };
        Ok(())
    }
}

/// The jitdump a process maps (V8 maps it so perf finds it): its path as
/// readable from here by the process's user, when the process has one.
pub fn path_for(pid: i32, maps: &[thread_ctx_discovery::maps::Mapping]) -> Option<PathBuf> {
    let m = maps.iter().find(|m| {
        let base = m.path().rsplit('/').next().unwrap_or("");
        base.strip_prefix("jit-").and_then(|r| r.strip_suffix(".dump")).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })?;
    // map_files reaches the file in other mount namespaces (and needs root); else through the process's root.
    [format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end), format!("/proc/{pid}/root{}", m.path())]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| thread_ctx_discovery::target_file::open_any_owner(pid, p).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump as V8 writes it: header, then per function a debug record and a load.
    struct Writer(Vec<u8>);

    impl Writer {
        fn new() -> Writer {
            let mut b = Vec::new();
            for v in [MAGIC_LE, 1, HEADER_BYTES as u32, 62, 0, 4242] {
                b.extend(v.to_le_bytes());
            }
            b.extend(0u64.to_le_bytes()); // timestamp
            b.extend(0u64.to_le_bytes()); // flags
            Writer(b)
        }

        fn record(&mut self, kind: u32, body: &[u8]) {
            self.0.extend(kind.to_le_bytes());
            self.0.extend(((RECORD_HEADER_BYTES + body.len()) as u32).to_le_bytes());
            // CLOCK_MONOTONIC ns, rising as V8's do.
            self.0.extend((5_000_000_000_000u64 + self.0.len() as u64).to_le_bytes());
            self.0.extend(body);
        }

        fn load(&mut self, addr: u64, size: u64, name: &str) {
            let mut b = Vec::new();
            b.extend(1u32.to_le_bytes());
            b.extend(1u32.to_le_bytes());
            for v in [addr, addr, size, 0] {
                b.extend(v.to_le_bytes());
            }
            b.extend(name.as_bytes());
            b.push(0);
            b.extend(vec![0xcc; size as usize]);
            self.record(JIT_CODE_LOAD, &b);
        }

        /// Entries (offset, line, column, name bytes without the NUL).
        fn debug(&mut self, addr: u64, entries: &[(u64, u32, u32, &[u8])]) {
            let mut b = Vec::new();
            b.extend(addr.to_le_bytes());
            b.extend((entries.len() as u64).to_le_bytes());
            for (off, line, col, name) in entries {
                b.extend((addr + V8_DEBUG_ADDR_BIAS + off).to_le_bytes());
                b.extend(line.to_le_bytes());
                b.extend(col.to_le_bytes());
                b.extend(*name);
                b.push(0);
            }
            while !(b.len() + RECORD_HEADER_BYTES).is_multiple_of(8) {
                b.push(0);
            }
            self.record(JIT_CODE_DEBUG_INFO, &b);
        }
    }

    fn pos(line: u32, column: u32) -> Option<SourcePos> {
        Some(SourcePos { line, column: Some(column) })
    }

    #[test]
    fn names_code_and_its_lines_and_later_code_replaces_what_it_overlaps() {
        let mut w = Writer::new();
        w.debug(0x1000, &[(0, 1, 14, b"/app/hot.js"), (0x10, 4, 5, b"\xff"), (0x40, 6, 23, b"\xff")]);
        w.load(0x1000, 0x80, "JS:*work /app/hot.js:1:14");
        w.load(0x2000, 0x20, "JS:~idle /app/hot.js:20:1");
        let d = JitDump::parse(&w.0);
        assert_eq!((d.len(), d.stopped.as_deref()), (2, None));
        let at = |a| d.lookup(a).map(|(f, p)| (f.name.clone(), f.line, p));
        assert_eq!(at(0x1000), Some(("work".into(), Some(1), pos(1, 14))));
        assert_eq!(at(0x103f), Some(("work".into(), Some(1), pos(4, 5))));
        assert_eq!(at(0x1040), Some(("work".into(), Some(1), pos(6, 23))));
        assert_eq!(at(0x1080), None, "past the code");
        assert_eq!(at(0x2010), Some(("idle".into(), Some(20), None)), "no debug info: the function only");

        let mut w2 = Writer(w.0.clone());
        w2.load(0x1040, 0x100, "JS:*other /app/b.js:3:1");
        let d = JitDump::parse(&w2.0);
        assert_eq!(d.lookup(0x1000), None, "replaced by overlapping newer code");
        assert_eq!(d.lookup(0x1050).unwrap().0.name, "other");
    }

    #[test]
    fn names_of_raw_heap_bytes_do_not_derail_the_entries() {
        // Node <= 24 writes the name's length of heap bytes, NULs included, in place of the name.
        let garbage: &[u8] = b"\xf7\x94\x02\x00\x00\x00\x00\x00\xea+\x1b?\x9bn";
        let mut w = Writer::new();
        w.debug(0x7f00_0000_1000, &[(0, 2, 11, garbage), (0x2, 4, 5, garbage), (0x30, 6, 23, garbage)]);
        w.load(0x7f00_0000_1000, 0x60, "JS:*work /app/hot.js:1:14");
        let d = JitDump::parse(&w.0);
        let at = |a| d.lookup(a).and_then(|(_, p)| p);
        assert_eq!((at(0x7f00_0000_1001), at(0x7f00_0000_1010), at(0x7f00_0000_1031)), (pos(2, 11), pos(4, 5), pos(6, 23)));
    }

    #[test]
    fn baseline_code_keeps_its_function_line_and_interpreted_code_has_none() {
        // As Node 20-26 write Sparkplug code: the bytecode's entries (offsets 0x0-0x4d) for 0x29c bytes.
        let mut w = Writer::new();
        w.debug(0x1000, &[(0, 2, 11, b"/app/two.js"), (0x6, 3, 16, b"\xff"), (0x27, 4, 16, b"\xff"), (0x48, 5, 3, b"\xff")]);
        w.load(0x1000, 0x29c, "JS:^twoLoops /app/two.js:1:18");
        w.debug(0x2000, &[(0, 2, 11, b"/app/two.js")]);
        w.load(0x2000, 0x378, "JS:~twoLoops /app/two.js:1:18");
        let d = JitDump::parse(&w.0);
        for addr in [0x1000, 0x1030, 0x1200, 0x2000, 0x2100] {
            let (f, p) = d.lookup(addr).unwrap();
            assert_eq!((f.name.as_str(), f.line, p), ("twoLoops", Some(1), None), "{addr:#x}: the function's line, never the table's");
        }
        assert_eq!(d.baseline_tables_dropped, 1);
        assert_eq!(positions_of_tier(Some('+')), TierPositions::MachineCode);
    }

    #[test]
    fn positions_of_inlined_functions_fall_back_to_the_function_line() {
        let mut w = Writer::new();
        w.debug(
            0x1000,
            &[
                (0, 5, 15, b"/app/inl.js"),
                (0x10, 7, 31, b"\xff"),
                (0x20, 2, 18, b"/app/helper.js"), // mix() of another script, inlined
                (0x30, 8, 16, b"/app/inl.js"),
                (0x40, 3, 13, b"\x10\n\x01"), // step() defined above outer(), name unreadable
            ],
        );
        w.load(0x1000, 0x80, "JS:*outer /app/inl.js:5:15");
        let d = JitDump::parse(&w.0);
        let at = |a| d.lookup(a).and_then(|(_, p)| p);
        assert_eq!((at(0x1000), at(0x1010), at(0x1030)), (pos(5, 15), pos(7, 31), pos(8, 16)));
        assert_eq!((at(0x1020), at(0x1040)), (None, None), "another function's lines are not outer's");
        assert_eq!(d.inlined_entries_dropped, 2);
    }

    #[test]
    fn a_record_declared_shorter_than_written_is_skipped_and_reading_goes_on() {
        // As Node 26 wrote it: a debug record of cross-script inlining 3 bytes longer than declared.
        let mut w = Writer::new();
        w.debug(0x1000, &[(0, 1, 14, b"node:internal/modules/cjs/loader"), (0x10, 4, 5, b"node:path")]);
        let declared_at = w.0.len() + 4;
        w.0.extend(b"r\0\0"); // the bytes V8 wrote past the declared size
        w.load(0x1000, 0x20, "JS:*work /app/hot.js:1:14");
        w.load(0x3000, 0x20, "JS:*next /app/hot.js:9:1");
        let d = JitDump::parse(&w.0);
        assert_eq!((d.stopped.as_deref(), d.resyncs), (None, 1), "declared size at byte {declared_at}");
        assert_eq!(d.lookup(0x1001).map(|(f, p)| (f.name.as_str(), p)), Some(("work", None)), "named, its suspect lines left out");
        assert_eq!(d.lookup(0x3001).unwrap().0.name, "next");
    }

    #[test]
    fn appended_bytes_are_read_as_they_come() {
        let mut w = Writer::new();
        w.debug(0x1000, &[(0, 3, 1, b"/a.js")]);
        w.load(0x1000, 0x10, "JS:*f /a.js:3:1");
        let bytes = w.0;
        let mut d = JitDump::default();
        let mut consumed = 0;
        for end in (0..=bytes.len()).step_by(7).chain([bytes.len()]) {
            consumed += d.feed(&bytes[consumed..end.max(consumed)]);
        }
        assert_eq!(consumed, bytes.len());
        assert_eq!(d.lookup(0x1005).map(|(f, p)| (f.name.clone(), p)), Some(("f".into(), pos(3, 1))));
    }

    #[test]
    fn the_file_is_read_as_it_grows_and_again_when_rewritten() {
        use std::io::Write;
        let mut w = Writer::new();
        w.debug(0x1000, &[(0, 3, 1, b"/a.js")]);
        w.load(0x1000, 0x10, "JS:*f /a.js:3:1");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jit-1.dump");
        let mut file = JitDumpFile::new(std::process::id() as i32, path.clone());
        assert!(file.refresh().is_err(), "no file yet");
        let cut = w.0.len() - 5; // the load record is incomplete
        std::fs::write(&path, &w.0[..cut]).unwrap();
        file.refresh().unwrap();
        assert!(file.dump.lookup(0x1005).is_none() && file.awaiting > 0, "waits for the rest of the record");
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&w.0[cut..]).unwrap();
        file.refresh().unwrap();
        assert_eq!(file.dump.lookup(0x1005).map(|(f, p)| (f.name.clone(), p)), Some(("f".into(), pos(3, 1))));
        // Rewritten shorter (a new process with the same pid): read from the start.
        let mut w2 = Writer::new();
        w2.load(0x5000, 0x10, "JS:*g /b.js:1:1");
        std::fs::write(&path, &w2.0).unwrap();
        file.refresh().unwrap();
        assert_eq!((file.dump.lookup(0x1005).is_none(), file.dump.lookup(0x5001).map(|(f, _)| f.name.clone())), (true, Some("g".into())));
    }

    #[test]
    fn nonsense_stops_reading_without_panicking_or_allocating_what_it_claims() {
        let mut w = Writer::new();
        w.load(0x1000, 0x10, "JS:*ok /a.js:1:1");
        let good = w.0.clone();
        // A debug record claiming 2^60 entries in 16 bytes: dropped, the load after it still named.
        let mut lie = Writer(good.clone());
        let mut b = 0x3000u64.to_le_bytes().to_vec();
        b.extend((1u64 << 60).to_le_bytes());
        lie.record(JIT_CODE_DEBUG_INFO, &b);
        lie.load(0x3000, 0x10, "JS:*next /a.js:9:1");
        let d = JitDump::parse(&lie.0);
        assert_eq!((d.lines_dropped, d.lookup(0x3001).map(|(f, p)| (f.name.clone(), p))), (1, Some(("next".into(), None))));
        // A record smaller than its own header, and one larger than the cap, with nothing like a
        // record after them: reading waits for more bytes, then stops there.
        for size in [3u32, MAX_RECORD_BYTES + 1] {
            let mut bad = good.clone();
            bad.extend(JIT_CODE_LOAD.to_le_bytes());
            bad.extend(size.to_le_bytes());
            bad.extend([0u8; 64]);
            let d = JitDump::parse(&bad);
            assert_eq!((d.stopped.as_deref(), d.lookup(0x1000).unwrap().0.name.as_str()), (None, "ok"), "what came before stays");
            bad.extend(vec![0u8; MAX_RESYNC_BYTES]);
            let d = JitDump::parse(&bad);
            assert!(d.stopped.as_deref().is_some_and(|s| s.contains(&format!("declares {size} bytes"))), "{:?}", d.stopped);
        }
        assert!(JitDump::parse(b"JiTD\x01\0\0\0").stopped.unwrap().contains("not a little-endian jitdump"));
        // Every prefix and every single-byte corruption of a real-looking dump parses without panicking.
        let mut w = Writer::new();
        w.debug(0x1000, &[(0, 1, 14, b"/app/hot.js"), (0x10, 4, 5, b"\xff")]);
        w.load(0x1000, 0x20, "JS:*work /app/hot.js:1:14");
        for cut in 0..w.0.len() {
            JitDump::parse(&w.0[..cut]);
            for flip in [0x00, 0xff, 0x80] {
                let mut b = w.0.clone();
                b[cut] = flip;
                JitDump::parse(&b);
            }
        }
    }
}
