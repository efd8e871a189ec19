//! Harness for the profile tests: the root check (skip visibly, or fail under
//! REQUIRE_EBPF=1), the Node workload (tests/fixtures/profile_workload.js),
//! and an independent pprof decoder: `gzip -dc` + `protoc --decode` with the
//! crate's proto/pprof/profile.proto, whose text output is parsed
//! here. None of it shares code with the encoder under test.
#![allow(dead_code)]

use crate::common::{start_writer, WriterProcess};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

/// A scratch directory for one test's files.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts the workload in `mode` (cpu | offcpu | lines) under plain `node`, no profiling flags:
/// its JS frames are named from V8's heap.
pub fn workload(mode: &str) -> WriterProcess {
    workload_flags(mode, &[], None)
}

/// The workload under `node FLAGS`, in `cwd` when given (`--perf-prof` writes its jitdump there).
pub fn workload_flags(mode: &str, node_flags: &[&str], cwd: Option<&Path>) -> WriterProcess {
    workload_on(Path::new("node"), mode, node_flags, cwd)
}

/// The workload under `node` (a path to one), as [`workload_flags`].
pub fn workload_on(node: &Path, mode: &str, node_flags: &[&str], cwd: Option<&Path>) -> WriterProcess {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap();
    assert!(root.join("otel-thread-ctx.linux-x64-gnu.node").exists(), "expected the addon in {}: run `npm run build` first", root.display());
    let mut cmd = Command::new(node);
    cmd.args(node_flags).arg(fixture("profile_workload.js")).arg(root).arg(mode);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    start_writer(cmd, false)
}

/// A "span NAME TRACE SPAN START END" line of the workload.
#[derive(Debug, Clone)]
pub struct SpanLine {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Span lines the workload printed so far, waiting up to `wait` for at least `min` of them.
pub fn spans(w: &WriterProcess, min: usize, wait: Duration) -> Vec<SpanLine> {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = if out.len() < min { w.lines.recv_timeout(left).ok() } else { w.lines.try_recv().ok() };
        let Some(line) = line else { break };
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f.len() == 6 && f[0] == "span", "workload printed an unexpected line: {line:?}");
        out.push(SpanLine {
            name: f[1].into(),
            trace_id: f[2].into(),
            span_id: f[3].into(),
            start_ns: f[4].parse().unwrap(),
            end_ns: f[5].parse().unwrap(),
        });
    }
    assert!(out.len() >= min, "expected at least {min} span lines from the workload within {wait:?}, got {out:?}");
    out
}

/// One message of protoc's text format: fields in order, scalars as text.
#[derive(Debug, Default, Clone)]
pub struct Msg {
    pub fields: Vec<(String, Field)>,
}

#[derive(Debug, Clone)]
pub enum Field {
    Scalar(String),
    Msg(Msg),
}

impl Msg {
    pub fn msgs<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Msg> + 'a {
        self.fields.iter().filter(move |(n, _)| n == name).filter_map(|(_, f)| match f {
            Field::Msg(m) => Some(m),
            Field::Scalar(_) => None,
        })
    }

    pub fn scalars<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields.iter().filter(move |(n, _)| n == name).filter_map(|(_, f)| match f {
            Field::Scalar(s) => Some(s.as_str()),
            Field::Msg(_) => None,
        })
    }

    /// An integer field; proto3 leaves zeros out, so absent is 0.
    pub fn int(&self, name: &str) -> i64 {
        self.scalars(name).last().map(|s| s.parse().unwrap_or_else(|_| panic!("{name}: {s:?} is not an integer"))).unwrap_or(0)
    }

    pub fn ints(&self, name: &str) -> Vec<i64> {
        self.scalars(name).map(|s| s.parse().unwrap()).collect()
    }
}

/// Undoes protoc's C-style string escapes (\" \\ \n \t \' and octal bytes).
fn unescape(quoted: &str) -> String {
    let s = quoted.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or_else(|| panic!("expected a quoted string: {quoted}"));
    let (mut bytes, mut it) = (Vec::new(), s.bytes().peekable());
    while let Some(b) = it.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        match it.next() {
            Some(b'n') => bytes.push(b'\n'),
            Some(b't') => bytes.push(b'\t'),
            Some(b'r') => bytes.push(b'\r'),
            Some(d @ b'0'..=b'7') => {
                let mut v = (d - b'0') as u32;
                for _ in 0..2 {
                    match it.peek() {
                        Some(&n @ b'0'..=b'7') => {
                            v = v * 8 + (n - b'0') as u32;
                            it.next();
                        }
                        _ => break,
                    }
                }
                bytes.push(v as u8);
            }
            Some(other) => bytes.push(other),
            None => panic!("dangling escape in {quoted}"),
        }
    }
    String::from_utf8(bytes).unwrap_or_else(|e| panic!("string {quoted} is not UTF-8: {e}"))
}

pub fn parse_text_format(text: &str) -> Msg {
    let mut stack = vec![Msg::default()];
    let mut names: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line == "}" {
            let done = stack.pop().unwrap();
            stack.last_mut().expect("unbalanced }").fields.push((names.pop().unwrap(), Field::Msg(done)));
        } else if let Some(name) = line.strip_suffix(" {") {
            names.push(name.to_string());
            stack.push(Msg::default());
        } else {
            let (name, value) = line.split_once(": ").unwrap_or_else(|| panic!("unexpected protoc output line {line:?}"));
            let value = if value.starts_with('"') { unescape(value) } else { value.to_string() };
            stack.last_mut().unwrap().fields.push((name.to_string(), Field::Scalar(value)));
        }
    }
    assert_eq!(stack.len(), 1, "unbalanced protoc output");
    stack.pop().unwrap()
}

/// Decodes a gzipped pprof file with gzip and protoc, into protoc's text format parsed: every
/// field, for what [`PprofView`] leaves out.
pub fn pprof_message(path: &Path) -> Msg {
    let raw = Command::new("gzip").arg("-dc").arg(path).output().expect("running gzip");
    assert!(raw.status.success(), "gzip -dc {} failed: {}", path.display(), String::from_utf8_lossy(&raw.stderr));
    let mut protoc = Command::new("protoc")
        .arg("--decode=perftools.profiles.Profile")
        .arg(format!("--proto_path={}", Path::new(env!("CARGO_MANIFEST_DIR")).join("../output/proto/pprof").display()))
        .arg("profile.proto")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running protoc (Debian: apt-get install protobuf-compiler)");
    let mut stdin = protoc.stdin.take().unwrap();
    let input = raw.stdout;
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = protoc.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(out.status.success(), "protoc could not decode {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    parse_text_format(&String::from_utf8(out.stdout).unwrap())
}

/// A gzipped pprof file, decoded into the fields tests look at.
pub fn decode_pprof(path: &Path) -> PprofView {
    PprofView::new(pprof_message(path))
}

/// A decoded sample: its frames' function names and lines (leaf first), labels, values by
/// sample type, and when its events happened (the first breakdown's ticks).
#[derive(Debug, Clone)]
pub struct PSample {
    pub functions: Vec<String>,
    pub lines: Vec<i64>,
    pub labels: HashMap<String, String>,
    pub values: HashMap<String, i64>,
    pub ticks: Vec<i64>,
}

#[derive(Debug)]
pub struct PprofView {
    pub strings: Vec<String>,
    pub sample_types: Vec<(String, String)>,
    pub samples: Vec<PSample>,
    pub mappings: Vec<String>,
    /// Mapping filename -> build id ("" when it has none).
    pub build_ids: HashMap<String, String>,
    /// Function name -> (filename, start line).
    pub functions: HashMap<String, (String, i64)>,
    pub time_nanos: i64,
    pub duration_nanos: i64,
    pub tick_unit: String,
}

impl PprofView {
    fn new(m: Msg) -> PprofView {
        let strings: Vec<String> = m.scalars("string_table").map(str::to_string).collect();
        assert_eq!(strings.first().map(String::as_str), Some(""), "string_table[0] must be \"\"");
        let s = |i: i64| strings.get(i as usize).cloned().unwrap_or_else(|| panic!("string index {i} out of range"));
        let sample_types = m.msgs("sample_type").map(|t| (s(t.int("type")), s(t.int("unit")))).collect::<Vec<_>>();
        let funcs: HashMap<i64, &Msg> = m.msgs("function").map(|f| (f.int("id"), f)).collect();
        let functions = funcs.values().map(|f| (s(f.int("name")), (s(f.int("filename")), f.int("start_line")))).collect();
        let locs: HashMap<i64, (String, i64)> = m
            .msgs("location")
            .map(|l| {
                let line = l.msgs("line").next().unwrap_or_else(|| panic!("location {} has no line", l.int("id")));
                let f = funcs.get(&line.int("function_id")).unwrap_or_else(|| panic!("location {} names an unknown function", l.int("id")));
                (l.int("id"), (s(f.int("name")), line.int("line")))
            })
            .collect();
        let loc = |id: &i64| locs.get(id).unwrap_or_else(|| panic!("unknown location {id}")).clone();
        let samples = m
            .msgs("sample")
            .map(|smp| PSample {
                functions: smp.ints("location_id").iter().map(|id| loc(id).0).collect(),
                lines: smp.ints("location_id").iter().map(|id| loc(id).1).collect(),
                labels: smp.msgs("label").map(|l| (s(l.int("key")), s(l.int("str")))).collect(),
                values: sample_types.iter().map(|(t, _)| t.clone()).zip(smp.ints("value")).collect(),
                ticks: smp.msgs("breakdown").next().map(|b| b.ints("ticks")).unwrap_or_default(),
            })
            .collect();
        let mappings = m.msgs("mapping").map(|mp| s(mp.int("filename"))).collect();
        let build_ids = m.msgs("mapping").map(|mp| (s(mp.int("filename")), s(mp.int("build_id")))).collect();
        let (time_nanos, duration_nanos, tick_unit) = (m.int("time_nanos"), m.int("duration_nanos"), s(m.int("tick_unit")));
        PprofView { strings, sample_types, samples, mappings, build_ids, functions, time_nanos, duration_nanos, tick_unit }
    }
}

/// The phases a fixture printed so far ("phase NAME @NS" lines, NS on CLOCK_MONOTONIC: the clock
/// of the sampler's times), to tell which phase a sample fell in.
pub struct Phases {
    starts: Vec<(u64, String)>,
    /// Samples this close to a phase's start may belong to the one before (the line is printed first).
    edge_ns: u64,
}

impl Phases {
    pub fn new(edge_ns: u64) -> Phases {
        Phases { starts: Vec::new(), edge_ns }
    }

    /// Takes the phase lines `w` printed since the last call.
    pub fn drain(&mut self, w: &WriterProcess) {
        while let Ok(line) = w.lines.try_recv() {
            let (name, at) = line.strip_prefix("phase ").and_then(|x| x.rsplit_once(" @")).expect("a phase line");
            self.starts.push((at.parse().unwrap(), name.to_string()));
        }
    }

    /// The phase a sample taken at `t` fell in; None before the first phase, at a phase's edge, or
    /// in the last phase seen (it may have ended since).
    pub fn at(&self, t: u64) -> Option<&str> {
        let i = self.starts.iter().rposition(|(s, _)| *s <= t)?;
        (t - self.starts[i].0 >= self.edge_ns && i + 1 < self.starts.len()).then_some(self.starts[i].1.as_str())
    }
}

/// One `thread-ctx record PID ARGS --duration 3s --format jsonl --frames` of the phased fixture
/// `w` (its JS frames named from its heap, no fallback to the perf map), and the phase lines it
/// printed meanwhile: its samples. `what` names the run in messages.
pub fn record_frames(w: &WriterProcess, what: &str, args: &[&str], phases: &mut Phases) -> Vec<serde_json::Value> {
    let pid = w.pid.to_string();
    let mut all = vec!["record", pid.as_str()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--duration", "3s", "--format", "jsonl", "--frames"]);
    let r = crate::common::thread_ctx(&all);
    assert_eq!(r.code, 0, "{what}: record failed: {}", r.stderr);
    assert!(!r.stderr.contains("falling back to the perf map"), "{what}: {}", r.stderr);
    phases.drain(w);
    r.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}
