//! Names, with no profiling flags, on every supported Node, seen from outside
//! (ptrace stops, frames walked as the sampler walks them, names read from the
//! heap): declared, assigned, arrow, method and anonymous functions, `eval`
//! (a function made by it, and its top level), `new Function`, an ES module's
//! function (its `file://` URL), a worker thread's function, and a small
//! function TurboFan inlined into its caller, named as a frame of its own
//! inside the caller with its own line.
//!
//! Then agreement with V8's own perf map: the same fixture with
//! `--perf-basic-prof` as well, every JS frame in generated code named from
//! the heap must agree with the perf map on function and script (≥ 99 %).

mod common;

use common::live::*;
use common::{node_binary, symbols};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use thread_ctx_v8::{JsFrame, Layout, Namer, PcRegion, PostmortemSymbols};

/// Samples wanted per phase.
const WANTED: usize = 30;
/// Samples wanted of the inlined function: its 90 % bound is the tightest.
const WANTED_INLINED: usize = 60;
const CAP: Duration = Duration::from_secs(90);

#[derive(Clone, Copy)]
enum Script {
    /// The fixture file itself (or another file of the fixtures).
    File(&'static str),
    /// `eval at ...`, `new Function at ...`: starts with this and ends with `FILE:LINE)`.
    Made(&'static str, &'static str),
}

struct Expect {
    phase: &'static str,
    function: &'static str,
    script: Script,
    /// The marker of the sampled line, when the loop is in the fixture's own text.
    line: Option<&'static str>,
}

const EXPECTED: &[Expect] = &[
    Expect { phase: "declared", function: "declared", script: Script::File("names.js"), line: Some("declared") },
    Expect { phase: "assigned", function: "assigned", script: Script::File("names.js"), line: Some("assigned") },
    Expect { phase: "arrow", function: "arrow", script: Script::File("names.js"), line: Some("arrow") },
    Expect { phase: "method", function: "handle", script: Script::File("names.js"), line: Some("method") },
    Expect { phase: "anonymous", function: "anonymous", script: Script::File("names.js"), line: Some("anonymous") },
    Expect { phase: "eval", function: "evaledFn", script: Script::Made("eval at <anonymous> (", "const evaled = eval("), line: None },
    Expect {
        phase: "new Function",
        function: "anonymous",
        script: Script::Made("new Function at <anonymous> (", "const made = new Function("),
        line: None,
    },
    Expect { phase: "eval top level", function: "eval", script: Script::Made("eval at topLevelEval (", "const topLevelEval ="), line: None },
    Expect { phase: "ES module", function: "fromModule", script: Script::File("names_module.mjs"), line: None },
];

fn script_ok(expect: Script, got: Option<&str>, fixture_file: &std::path::Path) -> bool {
    let Some(got) = got else { return false };
    match expect {
        Script::File("names_module.mjs") => got.starts_with("file:///") && got.ends_with("/names_module.mjs"),
        Script::File(name) => got.ends_with(&format!("/{name}")),
        Script::Made(prefix, line_of) => {
            let text = std::fs::read_to_string(fixture_file).unwrap();
            let line = text.lines().position(|l| l.contains(line_of)).unwrap() + 1;
            got.starts_with(prefix) && got.ends_with(&format!("/names.js:{line})"))
        }
    }
}

/// The busiest thread of `pid` other than its main thread: the worker.
fn busiest_other_thread(pid: i32) -> Option<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&tid| tid != pid)
        .max_by_key(|tid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap_or_default();
            let after = stat.rsplit(')').next().unwrap_or("");
            let f: Vec<&str> = after.split_whitespace().collect();
            f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0) + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
        })
}

struct Setup {
    layout: Layout,
    syms: PostmortemSymbols,
    node: NodeImage,
    bin: std::path::PathBuf,
}

fn setup(major: u32) -> Option<Setup> {
    let bin = node_binary(major)?;
    let syms = symbols(&bin);
    let layout = Layout::checked(&syms).unwrap();
    let node = NodeImage::new(&bin, &syms);
    Some(Setup { layout, syms, node, bin })
}

/// The named frames of one stop, innermost first (functions inlined into a frame come before it),
/// with the region and pc each was named at.
fn named_stack(namer: &mut Namer, mem: &ProcessMemory, frames: &[WalkedFrame]) -> Vec<(JsFrame, PcRegion, u64)> {
    frames
        .iter()
        .filter_map(|f| f.js.as_ref())
        .filter_map(|input| namer.name(mem, input).ok().map(|n| (n, input.region)))
        .flat_map(|(n, region)| n.frames.into_iter().map(move |f| (f, region, n.pc)))
        .collect()
}

#[derive(Default, Debug)]
struct Tally {
    samples: usize,
    right: usize,
    seen: HashMap<String, usize>,
}

fn names(major: u32) {
    let Some(s) = setup(major) else { return };
    let script = fixture("names.js");
    // TurboFan (not Maglev) is the tier whose inlining is asked for: a V8 with Maglev tiers up through it first.
    let flags: &[&str] = if thread_ctx_v8::supported::for_node(major).unwrap().maglev { &["--no-maglev"] } else { &[] };
    let mut target = Target::spawn(&s.bin, flags, &script, &["250"]);
    target.wait_line("ready");
    let pid = target.pid();
    let worker = busiest_other_thread(pid).expect("the worker thread");
    let mem = ProcessMemory { pid };
    let mut namer = Namer::new(s.layout.clone(), s.syms.bytecode_sizes.clone());
    let mut tallies: HashMap<&str, Tally> = HashMap::new();
    let mut inlined = Tally::default();
    let mut in_worker = Tally::default();
    let start = Instant::now();
    let mut maps = read_maps(pid);
    let enough = |t: &HashMap<&str, Tally>, i: &Tally, w: &Tally| {
        EXPECTED.iter().all(|e| t.get(e.phase).is_some_and(|x| x.samples >= WANTED)) && i.samples >= WANTED_INLINED && w.samples >= WANTED
    };
    let mut round = 0u64;
    while !enough(&tallies, &inlined, &in_worker) && start.elapsed() < CAP {
        round += 1;
        if round.is_multiple_of(50) {
            maps = read_maps(pid);
        }
        if round.is_multiple_of(4) && in_worker.samples < WANTED {
            if let Some(frames) = while_stopped(worker, |regs| walk(&mem, regs, &s.layout, &s.node, &maps)) {
                let stack = named_stack(&mut namer, &mem, &frames);
                if let Some((f, _, _)) = stack.first() {
                    in_worker.samples += 1;
                    let line = marked_line(&fixture("names_worker.js"), "worker");
                    in_worker.right += (f.function == "inWorker"
                        && script_ok(Script::File("names_worker.js"), f.script.as_deref(), &script)
                        && f.line == Some(line)) as usize;
                    *in_worker.seen.entry(format!("{}:{:?}", f.function, f.line)).or_default() += 1;
                }
            }
            continue;
        }
        let Some((phase, frames)) = target.sample(|regs| walk(&mem, regs, &s.layout, &s.node, &maps)) else { continue };
        std::thread::sleep(Duration::from_millis(2));
        let stack = named_stack(&mut namer, &mem, &frames);
        let Some((first, _, _)) = stack.first() else { continue };
        // Between two calls the phase's driver runs (its loop, Date.now): not the function under test.
        if first.function == "main" || !first.script.as_deref().is_some_and(|s| s.contains("/fixtures/")) {
            continue;
        }
        if phase == "inlined" {
            inlined.samples += 1;
            let small_line = marked_line(&script, "inlined");
            let ok = first.function == "small"
                && first.inlined
                && first.line == Some(small_line)
                && stack.get(1).is_some_and(|(c, _, _)| c.function == "caller");
            inlined.right += ok as usize;
            *inlined.seen.entry(format!("{}:{:?} inlined {} {:?}", first.function, first.line, first.inlined, first.tier)).or_default() += 1;
            continue;
        }
        let Some(e) = EXPECTED.iter().find(|e| e.phase == phase) else { continue };
        let t = tallies.entry(e.phase).or_default();
        t.samples += 1;
        let line_ok = e.line.is_none_or(|m| first.line == Some(marked_line(&script, m)));
        t.right += (first.function == e.function && script_ok(e.script, first.script.as_deref(), &script) && line_ok) as usize;
        *t.seen
            .entry(format!("{} {:?}:{:?}", first.function, first.script.as_deref().map(|p| p.rsplit('/').next().unwrap_or(p)), first.line))
            .or_default() += 1;
    }
    let mut report = format!(
        "Node {major} ({}), {:.1} s, namer {:?}, caches {:?}\n",
        s.layout.version,
        start.elapsed().as_secs_f64(),
        namer.stats,
        namer.cache_sizes()
    );
    let mut failures = Vec::new();
    let mut check = |what: &str, t: &Tally, percent: usize, wanted: usize| {
        report += &format!("  {what}: {}/{} right; {:?}\n", t.right, t.samples, t.seen);
        if t.samples < wanted || t.right * 100 < t.samples * percent {
            failures.push(format!("{what}: {}/{} right (need {percent} % of at least {wanted})", t.right, t.samples));
        }
    };
    for e in EXPECTED {
        check(e.phase, tallies.get(e.phase).unwrap_or(&Tally::default()), 95, WANTED);
    }
    check("inlined into its caller", &inlined, 90, WANTED_INLINED);
    check("worker thread", &in_worker, 95, WANTED);
    println!("{report}");
    assert!(failures.is_empty(), "{}\n{report}", failures.join("\n"));
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

/// (function, script) of a perf map name like `JS:*'handle /app/a.js:30:9` (V8 10 writes
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

/// Our frame and the perf map's name agree: same function and script, where the perf
/// map names eval'd code with an empty script and leaves what V8 did not name empty.
fn agree(ours: &JsFrame, perf: &(String, String)) -> bool {
    let (pf, ps) = perf;
    let made = ours.script.as_deref().is_some_and(|s| s.starts_with("eval at ") || s.starts_with("new Function at "));
    let script_ok = if made { ps.is_empty() } else { ours.script.as_deref() == Some(ps.as_str()) };
    let function_ok = ours.function == *pf || (pf.is_empty() && matches!(ours.function.as_str(), "(anonymous)" | "eval" | "anonymous"));
    script_ok && function_ok
}

fn agreement(major: u32) {
    let Some(s) = setup(major) else { return };
    let script = fixture("names.js");
    let spawned = Instant::now();
    // --logfile=/dev/null: with the perf map flags Node 24+ also writes an isolate log into the working directory.
    let mut target = Target::spawn(&s.bin, &["--perf-basic-prof", "--logfile=/dev/null"], &script, &["150"]);
    target.wait_line("ready");
    let ready = spawned.elapsed();
    let pid = target.pid();
    let mem = ProcessMemory { pid };
    let mut namer = Namer::new(s.layout.clone(), s.syms.bytecode_sizes.clone());
    let (mut compared, mut agreed, mut no_entry) = (0usize, 0usize, 0usize);
    let mut disagreements: HashMap<String, usize> = HashMap::new();
    let mut missing: HashMap<String, usize> = HashMap::new();
    let start = Instant::now();
    let mut maps = read_maps(pid);
    let mut map = perf_map(pid);
    let mut round = 0u64;
    while compared < 200 && start.elapsed() < CAP {
        round += 1;
        if round.is_multiple_of(50) {
            maps = read_maps(pid);
            map = perf_map(pid);
        }
        let Some((_, frames)) = target.sample(|regs| walk(&mem, regs, &s.layout, &s.node, &maps)) else { continue };
        std::thread::sleep(Duration::from_millis(2));
        for input in frames.iter().filter_map(|f| f.js.as_ref()).filter(|i| matches!(i.region, PcRegion::Jit { .. })) {
            let Ok(named) = namer.name(&mem, input) else { continue };
            // The frame's own function: the perf map names code objects, not what they inlined.
            let ours = named.frames.last().unwrap();
            let Some(perf) = map.range(..=named.pc).next_back().filter(|(_, (end, _))| named.pc < *end).and_then(|(_, (_, n))| perf_name(n)) else {
                no_entry += 1; // compiled since the map was last read
                *missing
                    .entry(format!("{}@{:?} {:?}", ours.function, ours.script.as_deref().map(|p| p.rsplit('/').next().unwrap_or(p)), ours.tier))
                    .or_default() += 1;
                continue;
            };
            compared += 1;
            if agree(ours, &perf) {
                agreed += 1;
            } else {
                *disagreements.entry(format!("ours {}@{:?} perf {:?}", ours.function, ours.script, perf)).or_default() += 1;
            }
        }
    }
    let report = format!(
        "Node {major}: {agreed}/{compared} JS frames agree with the perf map ({no_entry} not in it yet), {:.1} s sampling, {:.1} s to start; {disagreements:?}; not in the map: {missing:?}",
        start.elapsed().as_secs_f64(),
        ready.as_secs_f64()
    );
    println!("{report}");
    assert!(compared >= 200, "{report}");
    assert!(agreed * 100 >= compared * 99, "{report}");
}

fn run(major: u32) {
    names(major);
    agreement(major);
}

/// One version at a time: each runs busy processes, and two cores shared by five
/// versions' targets made every one of them slower than all of them in turn.
#[test]
fn names_on_every_node() {
    for major in common::majors() {
        run(major);
    }
}
