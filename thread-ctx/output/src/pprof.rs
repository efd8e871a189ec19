//! `--pprof FILE`: the profile as gzipped pprof (profile.proto). One pprof
//! sample per entry (stack x thread x span x attributes), with string labels
//! `trace_id`, `span_id`, the record's attributes under their own keys,
//! `thread.id`, `thread.name`, the process context's `service.name`, and
//! `off_cpu` (blocked/preempted) on off-CPU samples. Values: samples/count and
//! cpu/nanoseconds, plus off_cpu_switches/count and off_cpu/nanoseconds when
//! off-CPU time was traced, and alloc_objects/count and alloc_space/bytes when
//! allocations were (as Go's and Node's heap profiles name them). Also reads
//! such a file back (`thread-ctx flamegraph`).

use super::file_error::{FileError, Result};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use foldhash::{HashMap, HashMapExt};
use prost::Message;
use std::io::{Read, Write};
use thread_ctx_discovery::ids::{hex, parse_hex};
use thread_ctx_model::symbolized::StackFrame;
use thread_ctx_model::{Entry, Frame, FrameKind, Measure, Profile, SampleKind, SourcePos};

/// pprof's messages, generated from proto/pprof/profile.proto by build.rs.
mod pb {
    include!(concat!(env!("OUT_DIR"), "/perftools.profiles.rs"));
}

pub const LABEL_TRACE_ID: &str = "trace_id";
pub const LABEL_SPAN_ID: &str = "span_id";
pub const LABEL_THREAD_ID: &str = "thread.id";
pub const LABEL_THREAD_NAME: &str = "thread.name";
pub const LABEL_SERVICE_NAME: &str = "service.name";
pub const LABEL_OFF_CPU: &str = "off_cpu";
/// Every label key that is not a record attribute.
const OWN_LABELS: [&str; 6] = [LABEL_TRACE_ID, LABEL_SPAN_ID, LABEL_THREAD_ID, LABEL_THREAD_NAME, LABEL_SERVICE_NAME, LABEL_OFF_CPU];
use thread_ctx_model::symbolized::{KERNEL_MAPPING, KERNEL_START};

/// What the profile says about its recording.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    pub service_name: Option<String>,
    /// Wall-clock start, ns since the Unix epoch.
    pub start_unix_ns: i64,
    pub duration_ns: i64,
    pub comments: Vec<String>,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    ids: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.id("");
        s
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        self.table.push(s.to_string());
        self.ids.insert(s.to_string(), self.table.len() as i64 - 1);
        self.table.len() as i64 - 1
    }
}

/// Encodes every entry (uncompressed protobuf bytes).
pub fn encode(p: &Profile, meta: &Meta) -> Vec<u8> {
    let mut st = Strings::new();
    let mut out = pb::Profile::default();
    // Two values per measure, in Measure::ALL's order: its count, then its weight.
    let measures = p.measures();
    let types: Vec<(&str, &str)> = measures.iter().flat_map(|m| [m.count_type(), m.weight_type()]).collect();
    out.sample_type = types.iter().map(|(t, u)| pb::ValueType { r#type: st.id(t), unit: st.id(u) }).collect();
    out.default_sample_type = st.id("cpu");
    out.period_type = Some(pb::ValueType { r#type: st.id("cpu"), unit: st.id("nanoseconds") });
    out.period = p.cpu_period_ns as i64;
    out.time_nanos = meta.start_unix_ns;
    out.duration_nanos = meta.duration_ns;
    out.comment = meta.comments.iter().map(|c| st.id(c)).collect();
    out.tick_unit = st.id("nanoseconds");

    // Executable file mappings, then one for the kernel.
    let mut exec: Vec<_> = p.mappings.iter().filter(|m| m.is_file_backed() && m.perms.contains('x')).collect();
    exec.sort_by_key(|m| m.start);
    for (i, m) in exec.iter().enumerate() {
        out.mapping.push(pb::Mapping {
            id: i as u64 + 1,
            memory_start: m.start,
            memory_limit: m.end,
            file_offset: m.offset,
            filename: st.id(m.path()),
            build_id: p.build_id(m).map_or(0, |id| st.id(id)),
            has_functions: true,
            ..Default::default()
        });
    }
    let kernel_mapping = exec.len() as u64 + 1;
    let mapping_of = |addr: u64, kernel: bool| -> u64 {
        if kernel {
            return kernel_mapping;
        }
        let i = exec.partition_point(|m| m.start <= addr);
        if i > 0 && exec[i - 1].contains(addr) {
            i as u64
        } else {
            0
        }
    };

    let mut functions: HashMap<usize, u64> = HashMap::new();
    let mut locations: HashMap<StackFrame, u64> = HashMap::new();
    let mut kernel_used = false;
    for e in &p.entries {
        let mut ids = Vec::with_capacity(e.stack.len());
        for sf in &e.stack {
            let next = locations.len() as u64 + 1;
            let id = *locations.entry(*sf).or_insert_with(|| {
                let f = &p.frames[sf.frame];
                let next_fn = functions.len() as u64 + 1;
                let function_id = *functions.entry(sf.frame).or_insert_with(|| {
                    let name = st.id(&f.name);
                    out.function.push(pb::Function {
                        id: next_fn,
                        name,
                        // A source-mapped frame keeps its generated script and line here.
                        system_name: st.id(&f.system_name()),
                        filename: f.file.as_deref().map(|s| st.id(s)).unwrap_or(0),
                        start_line: f.line.unwrap_or(0) as i64,
                    });
                    next_fn
                });
                kernel_used |= sf.kernel;
                out.location.push(pb::Location {
                    id: next,
                    mapping_id: mapping_of(sf.addr, sf.kernel),
                    address: sf.addr,
                    // The sampled line and column (V8's jitdump), else the function's line.
                    line: vec![pb::Line {
                        function_id,
                        line: f.source_line().unwrap_or(0) as i64,
                        column: f.pos.and_then(|p| p.column).unwrap_or(0) as i64,
                    }],
                    ..Default::default()
                });
                next
            });
            ids.push(id);
        }
        let Some(m) = measures.iter().position(|m| *m == e.kind.measure()) else { continue };
        let mut value = vec![0i64; types.len()];
        (value[2 * m], value[2 * m + 1]) = (e.count as i64, e.weight as i64);
        let mut label = Vec::new();
        let mut str_label = |k: &str, v: &str| label.push(pb::Label { key: st.id(k), str: st.id(v), ..Default::default() });
        if let Some(t) = e.trace_id {
            str_label(LABEL_TRACE_ID, &hex(&t));
        }
        if let Some(s) = e.span_id {
            str_label(LABEL_SPAN_ID, &hex(&s));
        }
        for (k, v) in &e.attrs {
            str_label(k, v);
        }
        str_label(LABEL_THREAD_ID, &e.tid.to_string());
        if let Some(n) = p.thread_name(e.tid) {
            str_label(LABEL_THREAD_NAME, n);
        }
        if let Some(s) = &meta.service_name {
            str_label(LABEL_SERVICE_NAME, s);
        }
        if let Some(k) = e.kind.off_cpu_label() {
            str_label(LABEL_OFF_CPU, k);
        }
        let breakdown = breakdown(p, e, m, meta.start_unix_ns);
        out.sample.push(pb::Sample { location_id: ids, value, label, breakdown });
    }
    if kernel_used {
        out.mapping.push(pb::Mapping {
            id: kernel_mapping,
            memory_start: KERNEL_START,
            memory_limit: u64::MAX,
            filename: st.id(KERNEL_MAPPING),
            has_functions: true,
            ..Default::default()
        });
    }
    out.string_table = st.table;
    out.encode_to_vec()
}

/// When each sample of the entry happened (wall clock, ns after the profile's
/// start): for a CPU entry under `samples` (each counts 1), for an off-CPU
/// or allocation entry under its measure's two values, at index `2 * measure`
/// (each sample counts 1, and weighs its duration or bytes).
fn breakdown(p: &Profile, e: &Entry, measure: usize, start_unix_ns: i64) -> Vec<pb::Breakdown> {
    if e.times.is_empty() {
        return Vec::new();
    }
    let ticks: Vec<i64> = e.times.iter().map(|o| p.unix_ns(o.time_ns) as i64 - start_unix_ns).collect();
    if e.kind.is_cpu() {
        return vec![pb::Breakdown { ticks, ..Default::default() }];
    }
    let weights = e.times.iter().map(|o| o.weight as i64).collect();
    let mut out = vec![pb::Breakdown::default(); 2 * measure];
    out.push(pb::Breakdown { ticks: ticks.clone(), ..Default::default() });
    out.push(pb::Breakdown { ticks, value: weights, ..Default::default() });
    out
}

/// Writes the gzipped profile to `path`.
pub fn write_file(path: &std::path::Path, p: &Profile, meta: &Meta) -> Result<()> {
    let file = std::fs::File::create(path).map_err(|e| FileError::io("creating", path, e))?;
    write_gzipped(file, path, p, meta)
}

/// As [`write_file`], readable by its owner only (0600, also when it was there before): the
/// agent's files name other users' functions and source files.
pub fn write_private_file(path: &std::path::Path, p: &Profile, meta: &Meta) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|f| f.set_permissions(std::fs::Permissions::from_mode(0o600)).map(|_| f))
        .map_err(|e| FileError::io("creating", path, e))?;
    write_gzipped(file, path, p, meta)
}

fn write_gzipped(file: std::fs::File, path: &std::path::Path, p: &Profile, meta: &Meta) -> Result<()> {
    let mut gz = GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::default());
    gz.write_all(&encode(p, meta)).and_then(|_| gz.finish()?.flush()).map_err(|e| FileError::io("writing", path, e))
}

/// Reads a profile `encode` wrote (gzipped or not) back into entries.
pub fn read_file(path: &std::path::Path) -> Result<Profile> {
    let raw = std::fs::read(path).map_err(|e| FileError::io("reading", path, e))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        GzDecoder::new(raw.as_slice()).read_to_end(&mut out).map_err(|cause| FileError::Gzip { path: path.display().to_string(), cause })?;
        out
    } else {
        raw
    };
    decode(&bytes).map_err(FileError::in_file(path, "not a pprof profile"))
}

pub fn decode(bytes: &[u8]) -> Result<Profile> {
    let pp = pb::Profile::decode(bytes).map_err(|cause| FileError::Decode { what: "a pprof Profile message".into(), cause })?;
    let s = |i: i64| -> Result<&str> {
        pp.string_table.get(i as usize).map(String::as_str).ok_or_else(|| FileError::Invalid(format!("string index {i} out of range")))
    };
    let types: Vec<&str> = pp.sample_type.iter().map(|t| s(t.r#type)).collect::<Result<_>>()?;
    let index_of = |name: &str| types.iter().position(|t| *t == name);
    let (Some(count_i), Some(cpu_i)) = (index_of("samples"), index_of("cpu")) else {
        return Err(FileError::Invalid(format!(
            "sample types {types:?}: expected samples/count and cpu/nanoseconds (a profile written by thread-ctx record)"
        )));
    };
    let off_i = index_of("off_cpu_switches").zip(index_of("off_cpu"));
    let alloc_i = index_of(Measure::Alloc.count_type().0).zip(index_of(Measure::Alloc.weight_type().0));

    let mut profile = Profile::default();
    profile.off_cpu_traced = off_i.is_some();
    profile.alloc_traced = alloc_i.is_some();
    profile.cpu_period_ns = pp.period.max(0) as u64;
    let mappings: HashMap<u64, &pb::Mapping> = pp.mapping.iter().map(|m| (m.id, m)).collect();
    let functions: HashMap<u64, &pb::Function> = pp.function.iter().map(|f| (f.id, f)).collect();
    let mut frames: HashMap<u64, StackFrame> = HashMap::new();
    for loc in &pp.location {
        let func = loc
            .line
            .first()
            .and_then(|l| functions.get(&l.function_id))
            .ok_or_else(|| FileError::Invalid(format!("location {} has no function", loc.id)))?;
        let mapping = mappings.get(&loc.mapping_id);
        let kernel = match mapping {
            Some(m) => s(m.filename)? == KERNEL_MAPPING,
            None => false,
        };
        let name = s(func.name)?.to_string();
        let file = (func.filename != 0).then(|| s(func.filename).map(str::to_string)).transpose()?;
        let bracketed = name.starts_with('[');
        let kind = if kernel {
            FrameKind::Kernel
        } else if mapping.is_some() {
            if bracketed {
                FrameKind::Unknown
            } else {
                FrameKind::Native
            }
        } else if bracketed && file.is_none() {
            FrameKind::Unknown
        } else {
            FrameKind::Js
        };
        let line = (func.start_line > 0).then_some(func.start_line as u32);
        // A JS location whose line differs from its function's start was sampled at that line.
        let at = loc.line.first().filter(|l| kind == FrameKind::Js && l.line > 0 && Some(l.line as u32) != line);
        let pos = at.map(|l| SourcePos { line: l.line as u32, column: (l.column > 0).then_some(l.column as u32) });
        let frame = profile.intern(Frame { kind, name, file, line, column: None, pos, generated: None, tier: None });
        frames.insert(loc.id, StackFrame { addr: loc.address, frame, kernel });
    }
    for smp in &pp.sample {
        let stack = smp
            .location_id
            .iter()
            .map(|id| frames.get(id).copied().ok_or_else(|| FileError::Invalid(format!("unknown location {id}"))))
            .collect::<Result<_>>()?;
        let v = |i: usize| smp.value.get(i).copied().unwrap_or(0).max(0) as u64;
        let mut e = Entry {
            kind: SampleKind::Cpu,
            stack,
            tid: 0,
            trace_id: None,
            span_id: None,
            attrs: vec![],
            count: v(count_i),
            weight: v(cpu_i),
            times: vec![],
        };
        let mut thread_name = None;
        for l in &smp.label {
            let (k, val) = (s(l.key)?, s(l.str)?);
            match k {
                LABEL_TRACE_ID => e.trace_id = parse_hex(val).ok(),
                LABEL_SPAN_ID => e.span_id = parse_hex(val).ok(),
                LABEL_THREAD_ID => e.tid = val.parse().unwrap_or(0),
                LABEL_THREAD_NAME => thread_name = Some(val.to_string()),
                LABEL_OFF_CPU => e.kind = if val == "preempted" { SampleKind::Preempted } else { SampleKind::Blocked },
                _ if OWN_LABELS.contains(&k) => {}
                _ => e.attrs.push((k.to_string(), val.to_string())),
            }
        }
        if let Some(name) = thread_name {
            profile.thread_names.insert(e.tid, name);
        }
        if let (true, Some((n, t))) = (e.kind.is_off_cpu(), off_i) {
            (e.count, e.weight) = (v(n), v(t));
        }
        // An allocation sample: no CPU or off-CPU value, allocation values.
        if let Some((n, b)) = alloc_i.filter(|&(n, _)| e.kind.is_cpu() && e.count == 0 && v(n) > 0) {
            (e.kind, e.count, e.weight) = (SampleKind::Alloc, v(n), v(b));
        }
        e.attrs.sort();
        profile.push_entry(e);
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_reads_back_what_encode_wrote() {
        let mut p = Profile::default();
        (p.off_cpu_traced, p.alloc_traced, p.cpu_period_ns) = (true, true, 10_000_000);
        p.mappings = vec![Profile::test_node_mapping()];
        p.thread_names.insert(42, "node".into());
        let frames = [
            (Frame::kernel("schedule"), 0xffff_ffff_8100_0000, true),
            (
                Frame { pos: Some(SourcePos { line: 5, column: Some(7) }), ..Frame::js("burn", Some("/app/a.js"), Some(3), None) },
                0x7f00_0000_0000,
                false,
            ),
            (Frame::js("[Symbol.iterator]", Some("/app/a.js"), Some(9), None), 0x7f00_0000_0100, false),
            (Frame::unknown("[anon:jit]".into(), None), 0x7f00_0000_0200, false),
            // Tables and flame graphs shorten C++ names (native_name.rs); pprof keeps them whole.
            (
                Frame::native("void v8::internal::Heap::Scavenge<int>(v8::internal::GarbageCollectionReason) const", Some("/usr/bin/node")),
                0x1080,
                false,
            ),
            (Frame::native("uv_run", Some("/usr/bin/node")), 0x1100, false),
        ];
        let stack: Vec<StackFrame> =
            frames.iter().map(|(f, addr, kernel)| StackFrame { addr: *addr, frame: p.intern(f.clone()), kernel: *kernel }).collect();
        let entry = |kind, count, weight| Entry {
            kind,
            tid: 42,
            weight,
            ..Entry::test(stack.clone(), Some((0xab, 0xcd)), &[("http.route", "/users/:id")], count)
        };
        p.push_entry(entry(SampleKind::Cpu, 3, 30_000_000));
        p.push_entry(entry(SampleKind::Blocked, 2, 75_000_000));
        p.push_entry(entry(SampleKind::Alloc, 4, 2_100_000));
        let meta = Meta { service_name: Some("shop".into()), ..Default::default() };
        let back = decode(&encode(&p, &meta)).unwrap();
        assert!(back.off_cpu_traced && back.alloc_traced && back.cpu_period_ns == 10_000_000);
        assert_eq!(back.thread_name(42), Some("node"));
        assert_eq!(back.entries.len(), 3);
        for (orig, got) in p.entries.iter().zip(&back.entries) {
            assert_eq!((got.kind, got.count, got.weight, got.tid), (orig.kind, orig.count, orig.weight, orig.tid));
            assert_eq!(
                (got.trace_id, got.span_id, &got.attrs),
                (orig.trace_id, orig.span_id, &orig.attrs),
                "service.name and thread labels are not attributes"
            );
            let kinds: Vec<(FrameKind, &str)> = got.stack.iter().map(|f| (back.frame(f).kind, back.frame(f).name.as_str())).collect();
            let expected: Vec<(FrameKind, &str)> = frames.iter().map(|(f, _, _)| (f.kind, f.name.as_str())).collect();
            assert_eq!(kinds, expected);
        }
        let burn = back.frames.iter().find(|f| f.name == "burn").unwrap();
        assert_eq!((burn.line, burn.pos), (Some(3), Some(SourcePos { line: 5, column: Some(7) })), "function line and sampled position");
        assert!(decode(b"\x0a\x02\x08\x01").unwrap_err().to_string().contains("string index"), "garbage is refused, not misread");
    }
}
