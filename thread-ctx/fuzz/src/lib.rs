//! Fuzz targets: every parser of data a target process controls, as a
//! function of bytes. libFuzzer drives them (`fuzz_targets/`, run by
//! `scripts/fuzz.sh`); `thread-ctx/cli/tests/fuzz_corpus.rs` includes this same file
//! and replays the kept corpus through them on stable Rust, in
//! `cargo test -p thread-ctx`.
//!
//! A target fails by panicking: on its own (an index out of range, an
//! overflow in a debug build) or on a property asserted here.

use std::io::Cursor;
use thread_ctx_discovery::build_id::{build_id_of, MAX_BUILD_ID_BYTES};
use thread_ctx_discovery::ctx_record::{self, decode_attrs};
use thread_ctx_discovery::elf_reader::{ElfData, MAX_TOTAL_BYTES};
use thread_ctx_discovery::elf_tls_symbol::{self, LoadSegment, TlsReloc, TlsRelocKind, TlsSegment, TlsSymbol, WriterObject};
use thread_ctx_discovery::error::{Error, Result};
use thread_ctx_discovery::maps::{parse_maps, Mapping};
use thread_ctx_discovery::process_context::{self, ContextHeader, MAX_PAYLOAD};
use thread_ctx_discovery::ptrace::tls_slot::slot_address;
use thread_ctx_discovery::remote_memory::TargetMemory;
use thread_ctx_discovery::tls_model::{classify, load_bias, resolve, TlsModel};
use thread_ctx_discovery::TlsAccess;
use thread_ctx_output::summary::{GroupBy, RunInfo, Summary};
use thread_ctx_profile::perf_map::{parse_v8_name, PerfMap, MAX_FUNCTIONS};
use thread_ctx_profile::Decoder;
use thread_ctx_sampler::event::EVENT_SIZE;
use thread_ctx_sampler::{Event, SamplerOptions};

/// A fuzz target: one input, any outcome but a panic.
pub type Target = fn(&[u8]);

/// Every target by name (the corpus directory under `thread-ctx/fuzz/corpus/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("maps", maps),
    ("process_context", process_context),
    ("ctx_record", ctx_record),
    ("sample_event", sample_event),
    ("elf_object", elf_object),
    ("tls_resolve", tls_resolve),
    ("perf_map", perf_map),
];

fn key_map() -> Vec<String> {
    vec!["http.route".into(), "http.request.method".into()]
}

fn mapping(start: u64, end: u64, name: &str) -> Mapping {
    Mapping { start, end, perms: "r--p".into(), offset: 0, dev: "00:01".into(), inode: 1, name: name.into() }
}

/// `/proc/PID/maps` text.
pub fn maps(data: &[u8]) {
    let Ok(maps) = parse_maps(&String::from_utf8_lossy(data), "fuzz") else { return };
    for m in &maps {
        assert!(m.start <= m.end, "{m:?}");
        let _ = (m.path(), m.is_file_backed(), m.contains(m.start), process_context::is_context_mapping(m));
    }
}

/// An OTEP 4719 header (the first 32 bytes) and a payload (the rest).
pub fn process_context(data: &[u8]) {
    let mut header = [0u8; process_context::HEADER_SIZE];
    let n = data.len().min(header.len());
    header[..n].copy_from_slice(&data[..n]);
    if let Ok(h) = ContextHeader::parse(&header) {
        assert!(h.payload_size <= MAX_PAYLOAD);
    }
    // The payload is decoded whatever the header says, so inputs need not get the header right first.
    let payload = data.get(process_context::HEADER_SIZE..).unwrap_or(&[]);
    if payload.len() > MAX_PAYLOAD as usize {
        return;
    }
    let h = ContextHeader { version: 2, payload_size: payload.len() as u32, published_at_ns: 1, payload_addr: 0 };
    let m = mapping(0x1000, 0x2000, "/memfd:OTEL_CTX (deleted)");
    if let Ok(info) = process_context::decode(&m, h, payload) {
        let _ = serde_json::to_string(&info);
    }
}

/// An OTEP 4947 record: the 28-byte header, then attrs-data.
pub fn ctx_record(data: &[u8]) {
    let mut hb = [0u8; ctx_record::HEADER_SIZE];
    let n = data.len().min(hb.len());
    hb[..n].copy_from_slice(&data[..n]);
    let h = ctx_record::Header::parse(&hb);
    let _ = h.problems();
    let rest = data.get(ctx_record::HEADER_SIZE..).unwrap_or(&[]);
    let attrs = &rest[..rest.len().min(h.attrs_size as usize)];
    let keys = key_map();
    let (entries, _) = decode_attrs(attrs, Some(&keys));
    assert!(entries.len() <= attrs.len() / 2, "every entry takes at least 2 bytes");
    assert!(entries.iter().map(|e| e.value.len()).sum::<usize>() <= attrs.len() * 3, "values come from the input");
}

/// A ring-buffer event (zero-padded or cut to the event size), decoded and
/// summarized as `record` does.
pub fn sample_event(data: &[u8]) {
    let _ = Event::decode(data);
    let mut raw = vec![0u8; EVENT_SIZE];
    let n = data.len().min(EVENT_SIZE);
    raw[..n].copy_from_slice(&data[..n]);
    let Ok(e) = Event::decode(&raw) else { return };
    let keys = key_map();
    let _ = (e.to_json(Some(&keys)), e.span());
    let opts = SamplerOptions { hz: 49, user_stacks: true, kernel_stacks: true, off_cpu: true, alloc: true };
    let sample = Decoder::new(Some(&keys), &opts).decode(&e);
    for by in [GroupBy::Span, GroupBy::Trace, GroupBy::Attr("http.route".into())] {
        let mut summary = Summary::new(by);
        summary.add(&sample);
        let info = RunInfo { pid: 1, tid: None, hz: 49, cpus: 2, seconds: 1.0, dropped: 0, service_name: Some("fuzz"), placement: None, top: 10 };
        let _ = summary.render(&info, None);
    }
}

/// An ELF object as a mapped file: scanned for every thread-context symbol,
/// each one's access classified and resolved against the file's own bytes as
/// memory, and its build id read.
pub fn elf_object(data: &[u8]) {
    let elf = ElfData::new(Cursor::new(data));
    for obj in elf_tls_symbol::scan_all(&elf, "fuzz").unwrap_or_default() {
        let base = 0x7f00_0000_0000;
        let m = Mapping { perms: "r-xp".into(), ..mapping(base, base + 0x10000, "/fuzz.so") };
        if let Some((model, reloc)) = classify(&obj) {
            let bias = load_bias(&obj, &[&m], 4096).unwrap_or(base);
            let _ = resolve(&obj, model, reloc, bias, &[&m], &Image { base, bytes: data }, "fuzz");
        }
    }
    assert!(elf.spent() <= MAX_TOTAL_BYTES);
    let elf = ElfData::new(Cursor::new(data));
    if let Some(id) = build_id_of(&elf) {
        assert!(!id.is_empty() && id.len() <= MAX_BUILD_ID_BYTES);
    }
}

/// The live half of discovery and the per-thread slot lookup, following
/// pointers through a memory image (`data` itself, mapped at `IMAGE_BASE`):
/// TLSDESC descriptors, GOT pairs, the DTV walk, PT_TLS arithmetic.
pub fn tls_resolve(data: &[u8]) {
    const IMAGE_BASE: u64 = 0x10000;
    let mem = Image { base: IMAGE_BASE, bytes: data };
    let mut words = data.chunks(8).map(|c| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    });
    let mut next = move || words.next().unwrap_or(0);
    let (tp, module_id, offset) = (next(), next(), next());
    for access in [TlsAccess::glibc_dtv(module_id, offset), TlsAccess::Static { tp_offset: offset as i64 }] {
        let _ = slot_address(&access, tp, &mem);
        let _ = slot_address(&access, IMAGE_BASE.wrapping_add(tp % 4096), &mem);
    }
    let reloc = |kind| TlsReloc { kind, vaddr: 0, addend: 0 };
    let mut obj = WriterObject {
        symbol: if next() % 2 == 0 { TlsSymbol::ThreadCtxV1 } else { TlsSymbol::NodejsV1 },
        symbol_value: next(),
        executable_like: true,
        relocations: vec![reloc(TlsRelocKind::TlsDesc), reloc(TlsRelocKind::TpOff64), reloc(TlsRelocKind::DtpMod64)],
        load_segments: vec![LoadSegment { vaddr: next(), file_offset: next(), memsz: next() }],
        tls_segment: Some(TlsSegment { memsz: next(), align: next() }),
    };
    for r in obj.relocations.iter_mut() {
        r.vaddr = next();
    }
    let m = mapping(next(), next(), "/fuzz.so");
    let bias = load_bias(&obj, &[&m], 4096).unwrap_or_else(&mut next);
    for (model, r) in [
        (TlsModel::TlsDesc, Some(obj.relocations[0])),
        (TlsModel::InitialExec, Some(obj.relocations[1])),
        (TlsModel::GeneralDynamic, Some(obj.relocations[2])),
        (TlsModel::LocalExec, None),
    ] {
        if let Ok(TlsAccess::Static { tp_offset }) = resolve(&obj, model, r, bias, &[&m], &mem, "fuzz") {
            assert!(tp_offset < 0, "x86-64 static TLS offsets are negative");
        }
    }
    let _ = classify(&obj);
}

/// V8 perf map text.
pub fn perf_map(data: &[u8]) {
    let map = PerfMap::parse(data);
    assert!(map.len() <= MAX_FUNCTIONS);
    for c in data.chunks(8).take(64) {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        let _ = map.lookup(u64::from_le_bytes(b));
    }
    let _ = parse_v8_name(&String::from_utf8_lossy(data));
}

/// A target's memory: `bytes` at `base`; any read outside them faults.
struct Image<'a> {
    base: u64,
    bytes: &'a [u8],
}

impl TargetMemory for Image<'_> {
    fn read(&self, addr: u64, buf: &mut [u8], what: &str) -> Result<()> {
        let start = addr.checked_sub(self.base).and_then(|o| usize::try_from(o).ok());
        match start.and_then(|s| self.bytes.get(s..s.checked_add(buf.len())?)) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::RemoteRead {
                pid: 0,
                addr,
                len: buf.len(),
                what: what.into(),
                cause: std::io::Error::from_raw_os_error(14), // EFAULT
            }),
        }
    }
}
