//! A thread blocked outside JS, on every supported Node whose layout says where
//! its isolate keeps the last exit from JS: one process per version blocks its
//! main thread in Atomics.wait, a synchronous fs read, a synchronous child
//! process and a native addon's sleep, in phases this test follows from the
//! fixture's output. Its main thread is stopped from outside (ptrace) in each
//! phase again and again; the frame-pointer walk stops in libc, and goes on from
//! the isolate's `c_entry_fp` as the sampler's does; at least 90 % of each
//! phase's samples must name the function that blocked, at the line of its
//! blocking call. This is each version's check of [`IsolateLayout`]'s offset and
//! of the thread-local isolate's place, which no `v8dbg_*` symbol publishes.
//!
//! [`IsolateLayout`]: thread_ctx_v8::layout::IsolateLayout

mod common;

use common::live::*;
use common::{node_binary, symbols};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use thread_ctx_v8::Namer;

/// Samples wanted per route.
const WANTED: usize = 30;
/// However busy the machine, the test stops sampling a version after this long.
const CAP: Duration = Duration::from_secs(60);
const ROUTES: [(&str, &str); 4] =
    [("Atomics", "blockInAtomicsWait"), ("Fs", "blockInFsRead"), ("Exec", "blockInChildProcess"), ("Addon", "blockInAddon")];

/// The fixture's addon, built once against the Node-API headers of `node`'s release.
fn addon(node: &Path, dir: &Path) -> PathBuf {
    let include = node.parent().unwrap().join("../include/node");
    let out = dir.join("blocking_addon.node");
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-I"])
        .arg(&include)
        .arg("-o")
        .arg(&out)
        .arg(fixture("blocking_addon.c"))
        .output()
        .expect("running the C compiler `cc` (install gcc)");
    assert!(cc.status.success(), "cc blocking_addon.c: {}", String::from_utf8_lossy(&cc.stderr));
    out
}

#[derive(Default, Debug)]
struct Tally {
    samples: usize,
    right: usize,
    seen: HashMap<String, usize>,
}

fn run(major: u32, dir: &Path) -> Vec<String> {
    let Some(bin) = node_binary(major) else { return vec![] };
    let syms = symbols(&bin);
    let layout = thread_ctx_v8::Layout::checked(&syms).unwrap();
    let (Some(_), Some(tp_offset)) = (layout.isolate, syms.current_isolate_tp_offset) else {
        println!("Node {major}: {} keeps no thread-local isolate this reader follows: blocked threads keep their native frames only", layout.version);
        assert!(
            layout.isolate.is_none(),
            "Node {major}: its layout says where the isolate keeps c_entry_fp, but the binary has no thread-local g_current_isolate_"
        );
        return vec![];
    };
    let addon = addon(&bin, dir);
    let script = fixture("blocked.js");
    let routes: Vec<&str> = ROUTES.iter().map(|(r, _)| *r).collect();
    let mut target = Target::spawn(&bin, &[], &script, &[&routes.join(","), "300", addon.to_str().unwrap(), dir.to_str().unwrap()]);
    target.wait_line("ready");
    let mem = ProcessMemory { pid: target.pid() };
    let node = NodeImage::new(&bin, &syms);
    let mut namer = Namer::new(layout.clone(), syms.bytecode_sizes.clone());
    let mut tallies: HashMap<String, Tally> = HashMap::new();
    let start = Instant::now();
    let mut maps = read_maps(target.pid());
    let mut maps_read = Instant::now();
    let done = |t: &HashMap<String, Tally>| routes.iter().all(|r| t.get(*r).is_some_and(|x| x.samples >= WANTED));
    while !done(&tallies) && start.elapsed() < CAP {
        if maps_read.elapsed() > Duration::from_millis(500) {
            maps = read_maps(target.pid());
            maps_read = Instant::now();
        }
        let Some((phase, frames)) = target.sample(|regs| walk_through_exit(&mem, regs, &layout, tp_offset, &node, &maps)) else { continue };
        std::thread::sleep(Duration::from_millis(7));
        let Some(&(_, function)) = ROUTES.iter().find(|(r, _)| *r == phase) else { continue };
        let line = marked_line(&script, &phase);
        let names: Vec<(String, u32)> = frames
            .iter()
            .filter_map(|f| f.js.as_ref())
            .filter_map(|input| namer.name(&mem, input).ok())
            .flat_map(|n| n.frames)
            .filter(|f| f.script.as_deref().is_some_and(|s| s.ends_with("blocked.js")))
            .map(|f| (f.function, f.line.unwrap_or(0)))
            .collect();
        let t = tallies.entry(phase).or_default();
        t.samples += 1;
        t.right += names.iter().any(|(f, l)| f == function && *l == line) as usize;
        let first = names.first().map_or("(no JS frame)".to_string(), |(f, l)| format!("{f}:{l}"));
        *t.seen.entry(first).or_default() += 1;
    }
    let mut failures = Vec::new();
    let mut report = format!("Node {major}: {:.1} s\n", start.elapsed().as_secs_f64());
    for (route, function) in ROUTES {
        let t = tallies.remove(route).unwrap_or_default();
        report += &format!("  {route}: {}/{} name {function}:{}; innermost: {:?}\n", t.right, t.samples, marked_line(&script, route), t.seen);
        if t.samples < WANTED {
            failures.push(format!("Node {major} {route}: only {} samples in {} s", t.samples, CAP.as_secs()));
        } else if t.right * 100 < t.samples * 90 {
            failures.push(format!("Node {major} {route}: {}/{} samples name {function} at its line", t.right, t.samples));
        }
    }
    println!("{report}");
    failures
}

#[test]
fn a_blocked_thread_names_the_function_that_blocked_on_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for major in common::majors() {
        failures.extend(run(major, dir.path()));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
