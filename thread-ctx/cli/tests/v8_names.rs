//! JS frames named from V8's own frames and heap, no profiling flags, sampled
//! from outside by the eBPF sampler (`thread-ctx record --format jsonl
//! --frames`, as root):
//! - every kind of name (declared, assigned, arrow, method, anonymous), `eval`
//!   and `new Function` shown as such, an ES module's `file://` URL, a worker
//!   thread's function, each at its loop's line in ≥ 95 % of its phase's samples
//!   (every sample of the thread in the phase counts, one with nothing of the
//!   fixture named as a wrong one; only the phase's driver between two calls,
//!   named `main`, is left out, and must stay under 5 %);
//! - a small function TurboFan inlined into its caller, named as a frame of its
//!   own inside the caller at its own line in ≥ 90 % of its samples;
//! - a busy HTTP service (the demo's, NodeSDK and the HTTP instrumentation,
//!   under load): ≥ 99 % of its JS frames named by function, script and line;
//! - a NestJS service (TypeScript, NodeSDK auto-instrumentation) recorded from its first request:
//!   in each 5 s of its first 20 s, ≤ 5 % of the samples that hold a JS frame hold an unnamed
//!   one (before TurboFan inlines its middleware its stacks are ~90 JS frames deep);
//! - a node without `v8dbg_*` symbols: its frames come from the perf map, and
//!   the recording says why once.

use thread_ctx_test_support::process as common;
mod profile_common;

use common::*;
use profile_common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Samples wanted per phase, and of the inlined function (its 90 % bound is the tightest).
const WANTED: usize = 30;
const WANTED_INLINED: usize = 60;
/// Recordings stop once every phase has its samples, or after this long (a busy machine).
const CAP: Duration = Duration::from_secs(120);
/// Samples this close to a phase's start may belong to the one before (the line is printed first).
const EDGE_NS: u64 = 5_000_000;

fn node(major: &str) -> PathBuf {
    NodeRuntime { major: Some(Box::leak(major.to_string().into_boxed_str())), flags: &[] }.binary()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

fn names_fixture() -> PathBuf {
    repo_root().join("thread-ctx/v8/tests/fixtures/names.js")
}

/// The 1-based line of `file` ending with `// MARK`.
fn marked_line(file: &Path, mark: &str) -> u64 {
    let src = std::fs::read_to_string(file).unwrap();
    src.lines().position(|l| l.trim_end().ends_with(&format!("// {mark}"))).unwrap_or_else(|| panic!("no line marked {mark}")) as u64 + 1
}

/// The 1-based line of names.js containing `text`.
fn line_with(text: &str) -> u64 {
    let src = std::fs::read_to_string(names_fixture()).unwrap();
    src.lines().position(|l| l.contains(text)).unwrap_or_else(|| panic!("no line with {text}")) as u64 + 1
}

/// What a phase's innermost fixture frame must be: function, script check, line marker.
struct Expect {
    phase: &'static str,
    function: &'static str,
    script: fn(&str) -> bool,
    line: Option<&'static str>,
}

fn names_js(s: &str) -> bool {
    s.ends_with("/fixtures/names.js")
}

fn made_by(prefix: &str, line_of: &str, s: &str) -> bool {
    s.starts_with(prefix) && s.ends_with(&format!("/names.js:{})", line_with(line_of)))
}

const EXPECTED: &[Expect] = &[
    Expect { phase: "declared", function: "declared", script: names_js, line: Some("declared") },
    Expect { phase: "assigned", function: "assigned", script: names_js, line: Some("assigned") },
    Expect { phase: "arrow", function: "arrow", script: names_js, line: Some("arrow") },
    Expect { phase: "method", function: "handle", script: names_js, line: Some("method") },
    Expect { phase: "anonymous", function: "anonymous", script: names_js, line: Some("anonymous") },
    Expect { phase: "eval", function: "evaledFn", script: |s| made_by("eval at <anonymous> (", "const evaled = eval(", s), line: None },
    Expect {
        phase: "new Function",
        function: "anonymous",
        script: |s| made_by("new Function at <anonymous> (", "const made = new Function(", s),
        line: None,
    },
    Expect { phase: "eval top level", function: "eval", script: |s| made_by("eval at topLevelEval (", "const topLevelEval =", s), line: None },
    Expect { phase: "ES module", function: "fromModule", script: |s| s.starts_with("file:///") && s.ends_with("/names_module.mjs"), line: None },
];

#[derive(Default, Debug)]
struct Tally {
    samples: usize,
    right: usize,
    seen: BTreeMap<String, usize>,
}

impl Tally {
    fn add(&mut self, ok: bool, what: String) {
        self.samples += 1;
        self.right += ok as usize;
        *self.seen.entry(what).or_default() += 1;
    }
}

fn frames(sample: &Value) -> &[Value] {
    sample["frames"].as_array().map_or(&[], Vec::as_slice)
}

fn describe(f: &Value) -> String {
    let file = f["file"].as_str().unwrap_or("-");
    format!("{} {}:{}", f["name"].as_str().unwrap_or("?"), file.rsplit('/').next().unwrap_or(file), f["line"])
}

fn names(major: &str) {
    let mut cmd = Command::new(node(major));
    // TurboFan (not Maglev) is the tier whose inlining is asked for: a V8 with Maglev tiers up through it first.
    if thread_ctx_v8::supported::for_node(major.parse().unwrap()).expect("a supported Node").maglev {
        cmd.arg("--no-maglev");
    }
    cmd.arg(fixture("v8_names.js")).arg(repo_root()).arg("200");
    let w = start_writer(cmd, false);
    let script = names_fixture();
    let worker_line = marked_line(&repo_root().join("thread-ctx/v8/tests/fixtures/names_worker.js"), "worker");
    let small_line = marked_line(&script, "inlined");
    let mut phases = Phases::new(EDGE_NS);
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    let (mut inlined, mut worker) = (Tally::default(), Tally::default());
    // Per phase, the main thread's samples in the phase's driver (not in the function).
    let mut driver: BTreeMap<String, usize> = BTreeMap::new();
    let start = Instant::now();
    let enough = |t: &BTreeMap<&str, Tally>, i: &Tally, w: &Tally| {
        EXPECTED.iter().all(|e| t.get(e.phase).is_some_and(|x| x.samples >= WANTED)) && i.samples >= WANTED_INLINED && w.samples >= WANTED
    };
    let mut recordings = 0;
    while !enough(&tallies, &inlined, &worker) && start.elapsed() < CAP {
        recordings += 1;
        for sample in record_frames(&w, &format!("Node {major}"), &["--hz", "499"], &mut phases) {
            let fixture_frames: Vec<&Value> =
                frames(&sample).iter().filter(|f| f["file"].as_str().is_some_and(|p| p.contains("/fixtures/") || p.contains(" at "))).collect();
            let main_thread = sample["tid"].as_i64() == Some(w.pid as i64);
            let Some(first) = fixture_frames.first() else {
                // Nothing of the fixture named. On the main thread, in a phase: a wrong sample of it.
                let Some(phase) = phases.at(sample["time_ns"].as_u64().unwrap_or(0)).filter(|_| main_thread) else { continue };
                let leaf = frames(&sample).first().map(describe).unwrap_or_else(|| "no frames".into());
                let what = format!("unnamed (leaf {leaf})");
                match phase {
                    "inlined" => inlined.add(false, what),
                    phase => {
                        if let Some(e) = EXPECTED.iter().find(|e| e.phase == phase) {
                            tallies.entry(e.phase).or_default().add(false, what);
                        }
                    }
                }
                continue;
            };
            let name = first["name"].as_str().unwrap_or("");
            if !main_thread {
                // Another thread of the process: the worker's loop when it is in a fixture's code.
                let ok =
                    name == "inWorker" && first["file"].as_str().is_some_and(|f| f.ends_with("/names_worker.js")) && first["line"] == worker_line;
                worker.add(ok, describe(first));
                continue;
            }
            let Some(phase) = phases.at(sample["time_ns"].as_u64().unwrap_or(0)) else { continue };
            // Between two calls the phase's driver runs (its loop, Date.now): not the function under test.
            if name == "main" {
                *driver.entry(phase.to_string()).or_default() += 1;
                continue;
            }
            if phase == "inlined" {
                let ok = name == "small" && first["line"] == small_line && fixture_frames.get(1).is_some_and(|c| c["name"] == "caller");
                inlined.add(ok, format!("{} < {}", describe(first), fixture_frames.get(1).map(|f| describe(f)).unwrap_or_default()));
                continue;
            }
            let Some(e) = EXPECTED.iter().find(|e| e.phase == phase) else { continue };
            let line_ok = e.line.is_none_or(|m| first["line"] == marked_line(&script, m));
            let ok = name == e.function && first["file"].as_str().is_some_and(e.script) && line_ok;
            tallies.entry(e.phase).or_default().add(ok, describe(first));
        }
    }
    let mut report = format!("Node {major}: {recordings} recordings, {:.1} s\n", start.elapsed().as_secs_f64());
    let mut failures = Vec::new();
    let mut check = |what: &str, t: &Tally, percent: usize, wanted: usize| {
        report += &format!("  {what}: {}/{} right; {:?}\n", t.right, t.samples, t.seen);
        if t.samples < wanted || t.right * 100 < t.samples * percent {
            failures.push(format!("Node {major} {what}: {}/{} right (need {percent} % of at least {wanted})", t.right, t.samples));
        }
    };
    for e in EXPECTED {
        check(e.phase, tallies.get(e.phase).unwrap_or(&Tally::default()), 95, WANTED);
    }
    check("inlined into its caller", &inlined, 90, WANTED_INLINED);
    check("worker thread", &worker, 95, WANTED);
    // A call runs far longer than the driver between two: more in the driver is a walk that
    // lost the function's frame.
    for (phase, t) in EXPECTED.iter().map(|e| (e.phase, tallies.get(e.phase))).chain([("inlined", Some(&inlined))]) {
        let (d, n) = (driver.get(phase).copied().unwrap_or(0), t.map_or(0, |t| t.samples));
        report += &format!("  {phase}: {d} samples in the driver\n");
        if d * 100 > (d + n) * 5 {
            failures.push(format!("Node {major} {phase}: {d} of {} samples in the driver `main`, not in the function", d + n));
        }
    }
    let _ = writeln_stderr(&report);
    assert!(failures.is_empty(), "{}\n{report}", failures.join("\n"));
}

/// A child process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A frame of V8's: named from the heap (or a perf map), or what an unnamed one shows as:
/// generated code by its mapping, an interpreted frame by the interpreter's entry builtin.
fn is_js_frame(f: &Value) -> bool {
    let name = f["name"].as_str().unwrap_or("");
    f["kind"] == "js" || name == "[anon:jit]" || name.starts_with("Builtins_InterpreterEntryTrampoline")
}

fn named(f: &Value) -> bool {
    f["kind"] == "js" && f["file"].as_str().is_some_and(|s| !s.is_empty()) && f["line"].as_u64().is_some()
}

/// The demo's HTTP service under load from another process, plain `node`: ≥ 99 % of its JS
/// frames named by function, script and line.
/// An HTTP service (`script`, printing `{"pid":..,"port":..}` first) on a free port, and the load
/// of `v8_http_load.js` on it (`load` its arguments after the port: concurrency, paths); both end
/// with the returned guards (the load's stdin is ours).
fn service_under_load(major: &str, script: &Path, name: &str, load: &[&str]) -> (Killed, Killed, u64) {
    let service = Command::new(node(major))
        .arg(script)
        .env("PORT", "0")
        .env("OTEL_SERVICE_NAME", name)
        .env("OTEL_TRACES_EXPORTER", "none")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", script.display()));
    let mut service = Killed(service);
    let mut line = String::new();
    BufReader::new(service.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let started: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{} printed {line:?}: {e}", script.display()));
    let (pid, port) = (started["pid"].as_u64().unwrap(), started["port"].as_u64().unwrap());
    let load = Command::new(node(major)).arg(fixture("v8_http_load.js")).arg(port.to_string()).args(load).stdin(Stdio::piped()).spawn();
    (service, Killed(load.expect("starting the load")), pid)
}

fn http_service(major: &str) {
    let (mut service, _load, pid) = service_under_load(major, &repo_root().join("demo/service.js"), "v8-names-http", &[]);
    std::thread::sleep(Duration::from_secs(2));
    let (mut js, mut ok) = (0usize, 0usize);
    let mut unnamed: BTreeMap<String, usize> = BTreeMap::new();
    let start = Instant::now();
    while js < 3000 && start.elapsed() < CAP {
        let r = thread_ctx(&["record", &pid.to_string(), "--hz", "499", "--duration", "3s", "--format", "jsonl", "--frames"]);
        assert_eq!(r.code, 0, "Node {major}: record failed: {}", r.stderr);
        for sample in r.stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
            let all = frames(&sample);
            for (i, f) in all.iter().enumerate().filter(|(_, f)| is_js_frame(f)) {
                js += 1;
                if named(f) {
                    ok += 1;
                } else {
                    let around = |j: Option<usize>| j.and_then(|j| all.get(j)).map(describe).unwrap_or_default();
                    *unnamed
                        .entry(format!("{} (called by {}, calling {})", describe(f), around(Some(i + 1)), around(i.checked_sub(1))))
                        .or_default() += 1;
                }
            }
        }
    }
    let report = format!("Node {major}: {ok}/{js} JS frames of the demo service named, {:.1} s; unnamed: {unnamed:?}", start.elapsed().as_secs_f64());
    let _ = writeln_stderr(&report);
    assert!(js >= 3000, "{report}");
    assert!(ok * 100 >= js * 99, "{report}");
    assert!(service.0.try_wait().unwrap().is_none(), "the service is still up");
}

/// The end-to-end tests' NestJS service, recorded from its first request for 20 s under load:
/// in each 5 s, ≤ 5 % of the samples with a JS frame have an unnamed JS frame. (A NestJS request
/// at warm-up is ~90 JS frames deep: when the sampler read 64, a third to half of the first
/// seconds' samples had outer frames left as `[anon:jit]`.) A run that gets fewer than 100 such
/// samples in a slice (a busy machine) is run again, three times at most.
fn nest_service_from_its_first_seconds(major: &str) {
    let main = repo_root().join("__test__/e2e/nest/dist/main.js");
    assert!(main.exists(), "{} is missing: bash scripts/setup.sh installs and compiles the NestJS fixture", main.display());
    let mut reports = Vec::new();
    for attempt in 1..=3 {
        let (_service, _load, pid) = service_under_load(major, &main, "v8-names-nest", &["4", "/price/sku-1,/orders/7,/quote/sku-2"]);
        let r = thread_ctx(&["record", &pid.to_string(), "--hz", "99", "--duration", "20s", "--format", "jsonl", "--frames"]);
        assert_eq!(r.code, 0, "Node {major}: record failed: {}", r.stderr);
        // Per 5 s slice: (samples with a JS frame, of them with an unnamed one).
        let mut slices = [(0usize, 0usize); 4];
        let mut unnamed: BTreeMap<String, usize> = BTreeMap::new();
        let samples: Vec<Value> = r.stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
        let time = |s: &Value| s["time_unix_nano"].as_u64().or_else(|| s["time_unix_nano"].as_str()?.parse().ok());
        let t0 = samples.iter().filter_map(time).min().unwrap_or(0);
        for sample in &samples {
            let Some(t) = time(sample) else { continue };
            let js: Vec<&Value> = frames(sample).iter().filter(|f| is_js_frame(f)).collect();
            if js.is_empty() {
                continue;
            }
            let slice = &mut slices[(((t - t0) / 5_000_000_000) as usize).min(3)];
            slice.0 += 1;
            if let Some(f) = js.iter().find(|f| !named(f)) {
                slice.1 += 1;
                *unnamed.entry(describe(f)).or_default() += 1;
            }
        }
        let shown: Vec<String> = slices.iter().enumerate().map(|(i, (n, bad))| format!("{}-{} s: {bad}/{n}", i * 5, i * 5 + 5)).collect();
        let report = format!("Node {major}, run {attempt}: samples with an unnamed JS frame {}; unnamed: {unnamed:?}", shown.join(", "));
        let _ = writeln_stderr(&report);
        reports.push(report.clone());
        if slices.iter().any(|(n, _)| *n < 100) {
            continue; // too few samples to tell 5 %: the machine was busy
        }
        for (i, (n, bad)) in slices.iter().enumerate() {
            assert!(
                bad * 20 <= *n,
                "{}-{} s of the NestJS service: more than 5 % of its samples have an unnamed JS frame: {report}",
                i * 5,
                i * 5 + 5
            );
        }
        return;
    }
    panic!("the machine was too busy: three runs had a 5 s slice with fewer than 100 samples with a JS frame:\n{}", reports.join("\n"));
}

#[test]
fn node_20_names_a_nest_service_from_its_first_seconds() {
    if !ebpf_or_skip("node_20_names_a_nest_service_from_its_first_seconds") {
        return;
    }
    let _one = one_at_a_time();
    nest_service_from_its_first_seconds("20");
}

macro_rules! node_version {
    ($names:ident, $http:ident, $major:literal) => {
        #[test]
        fn $names() {
            if !ebpf_or_skip(stringify!($names)) {
                return;
            }
            let _one = one_at_a_time();
            names($major);
        }

        #[test]
        fn $http() {
            if !ebpf_or_skip(stringify!($http)) {
                return;
            }
            let _one = one_at_a_time();
            http_service($major);
        }
    };
}

node_version!(node_20_names_every_kind_of_function, node_20_names_the_frames_of_a_busy_http_service, "20");
node_version!(node_24_names_every_kind_of_function, node_24_names_the_frames_of_a_busy_http_service, "24");

#[test]
fn a_node_without_v8dbg_symbols_falls_back_to_the_perf_map_and_says_so_once() {
    let test = "a_node_without_v8dbg_symbols_falls_back_to_the_perf_map_and_says_so_once";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let dir = scratch(test);
    let bin = node_without_v8dbg(&node("22"), &dir);
    let mut cmd = Command::new(&bin.0);
    cmd.args(["--perf-basic-prof", "--logfile=/dev/null"]).arg(fixture("v8_names.js")).arg(repo_root()).arg("200");
    let w = start_writer(cmd, false);
    let r = thread_ctx_until(&["record", &w.pid.to_string(), "--hz", "199", "--duration", "20s", "--format", "jsonl", "--frames"], |out| {
        out.is_some_and(|o| o.contains("\"inWorker\""))
    });
    assert_eq!(r.code, 0, "record failed: {}", r.stderr);
    let note = "no v8dbg symbols (a build without V8's postmortem metadata): falling back to the perf map and jitdump for JS frames";
    assert_eq!(r.stderr.matches(note).count(), 1, "said once: {}", r.stderr);
    let frame = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .flat_map(|v| v["frames"].as_array().cloned().unwrap_or_default())
        .find(|f| f["name"] == "inWorker")
        .expect("an inWorker frame, named from the perf map");
    assert!(frame["file"].as_str().is_some_and(|f| f.ends_with("/names_worker.js")), "{frame}");
}

/// V8's perf map of `pid`: code ranges and their `KIND:NAME SCRIPT:LINE:COL` (a later line wins).
fn perf_map(pid: i32) -> BTreeMap<u64, (u64, String)> {
    let text = std::fs::read(format!("/tmp/perf-{pid}.map")).unwrap_or_default();
    let mut map: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for line in String::from_utf8_lossy(&text).lines() {
        let mut f = line.splitn(3, ' ');
        let (Some(start), Some(size), Some(name)) = (f.next(), f.next(), f.next()) else { continue };
        let (Ok(start), Ok(size)) = (u64::from_str_radix(start, 16), u64::from_str_radix(size, 16)) else { continue };
        let end = start + size.max(1);
        let overlapping: Vec<u64> = map.range(..end).rev().take_while(|(_, (e, _))| *e > start).map(|(s, _)| *s).collect();
        for o in overlapping {
            map.remove(&o);
        }
        map.insert(start, (end, name.to_string()));
    }
    map
}

/// (function, script) of a perf map name like `JS:*handle /app/a.js:30:9` (V8 10 writes
/// `LazyCompile:*handle /app/a.js:30`); None for builtins and stubs.
fn perf_name(name: &str) -> Option<(String, String)> {
    let (kind, rest) = name.split_once(':')?;
    if !matches!(kind, "JS" | "LazyCompile" | "Function" | "Script" | "Eval") {
        return None;
    }
    // V8 14 marks on-stack-replacement code `o` before the tier: `JS:o*name`.
    let rest = rest.strip_prefix('o').filter(|r| r.starts_with(['~', '^', '+', '*'])).unwrap_or(rest);
    let rest = rest.trim_start_matches(['~', '^', '+', '*', '\'']);
    let (function, location) = rest.rsplit_once(' ').unwrap_or(("", rest));
    let mut script = location;
    for _ in 0..2 {
        if let Some((s, n)) = script.rsplit_once(':') {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                script = s;
            }
        }
    }
    Some((function.to_string(), script.to_string()))
}

/// Our (function, script) and the perf map's agree: the perf map names eval'd code with an
/// empty script and leaves what V8 did not name empty.
fn agree(ours: (&str, &str), perf: &(String, String)) -> bool {
    let (pf, ps) = perf;
    let made = ours.1.starts_with("eval at ") || ours.1.starts_with("new Function at ");
    let script_ok = if made { ps.is_empty() } else { ours.1 == ps };
    let function_ok = ours.0 == pf || (pf.is_empty() && matches!(ours.0, "(anonymous)" | "eval" | "anonymous"));
    script_ok && function_ok
}

/// With `--perf-basic-prof` on as well, the JS frames the heap names agree with V8's perf map
/// on function and script (≥ 99 %): the outermost function at each address of the recording's
/// pprof (those inlined into it share its address) against the map's entry for that address.
fn agreement(major: &str) {
    let dir = scratch(&format!("v8-agreement-{major}"));
    let mut cmd = Command::new(node(major));
    cmd.args(["--perf-basic-prof", "--logfile=/dev/null"]).arg(fixture("v8_names.js")).arg(repo_root()).arg("150");
    let w = start_writer(cmd, false);
    let (mut compared, mut agreed, mut not_in_map) = (0usize, 0usize, 0usize);
    let mut disagreements: BTreeMap<String, usize> = BTreeMap::new();
    let mut missing: BTreeMap<String, usize> = BTreeMap::new();
    let start = Instant::now();
    let mut recording = 0;
    while compared < 500 && start.elapsed() < CAP {
        recording += 1;
        let pprof = dir.join(format!("r{recording}.pb.gz"));
        let r = thread_ctx(&["record", &w.pid.to_string(), "--hz", "499", "--duration", "3s", "--pprof", pprof.to_str().unwrap()]);
        assert_eq!(r.code, 0, "Node {major}: record failed: {}", r.stderr);
        let map = perf_map(w.pid);
        let m = pprof_message(&pprof);
        let strings: Vec<&str> = m.scalars("string_table").collect();
        let functions: BTreeMap<i64, (&str, &str)> =
            m.msgs("function").map(|f| (f.int("id"), (strings[f.int("name") as usize], strings[f.int("filename") as usize]))).collect();
        let locations: BTreeMap<i64, (u64, i64)> =
            m.msgs("location").map(|l| (l.int("id"), (l.int("address") as u64, l.msgs("line").next().map_or(0, |x| x.int("function_id"))))).collect();
        for sample in m.msgs("sample") {
            let ids = sample.ints("location_id");
            for (i, id) in ids.iter().enumerate() {
                let (addr, function) = locations[id];
                // The outermost function at an address: the next location is at another one.
                if ids.get(i + 1).is_some_and(|next| locations[next].0 == addr) {
                    continue;
                }
                let Some(&(name, file)) = functions.get(&function) else { continue };
                // Scripts only: native frames name their object, node's own JS (`node:...`) is left out.
                let script = file.ends_with(".js") || file.ends_with(".mjs") || file.starts_with("eval at ") || file.starts_with("new Function at ");
                if !script {
                    continue;
                }
                let Some(perf) = map.range(..=addr).next_back().filter(|(_, (end, _))| addr < *end).and_then(|(_, (_, n))| perf_name(n)) else {
                    not_in_map += 1; // interpreted (its pc is in the interpreter), or compiled after the map was read
                    *missing.entry(format!("{name}@{} {addr:x}", file.rsplit('/').next().unwrap_or(file))).or_default() += 1;
                    continue;
                };
                compared += 1;
                if agree((name, file), &perf) {
                    agreed += 1;
                } else {
                    *disagreements.entry(format!("ours {name}@{file} perf {perf:?}")).or_default() += 1;
                }
            }
        }
    }
    let report = format!(
        "Node {major}: {agreed}/{compared} JS frames agree with the perf map ({not_in_map} not in it), {:.1} s; {disagreements:?}; not in it: {missing:?}",
        start.elapsed().as_secs_f64()
    );
    let _ = writeln_stderr(&report);
    assert!(compared >= 500, "{report}");
    assert!(agreed * 100 >= compared * 99, "{report}");
}

#[test]
fn node_20_names_agree_with_the_perf_map() {
    if !ebpf_or_skip("node_20_names_agree_with_the_perf_map") {
        return;
    }
    let _one = one_at_a_time();
    agreement("20");
}

#[test]
fn node_24_names_agree_with_the_perf_map() {
    if !ebpf_or_skip("node_24_names_agree_with_the_perf_map") {
        return;
    }
    let _one = one_at_a_time();
    agreement("24");
}
