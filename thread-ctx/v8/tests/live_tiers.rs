//! Every tier, no profiling flags, on every supported Node: one process per
//! version runs one function per tier (node's tier filters pin each to its
//! tier), each with two hot loops on different lines, in phases this test
//! follows from the fixture's output. Its main thread is stopped from outside
//! (ptrace) again and again; its frames are walked as the sampler walks them
//! and named from its heap. Per tier and loop, at least 95 % of the samples
//! must name that tier's function at that loop's line, and 90 % must say the
//! tier (the rest: samples taken before the function reached it, or in a
//! builtin that hides the pc). Every sample of the thread in the phase counts: a
//! frame the namer missed is not dropped, and a sample with no loops* frame
//! named is a wrong one; only one stopped in the phase's driver (the script's
//! top level, between two calls) is left out, and those stay under 5 %.
//!
//! Maglev is not built into Node 18, 20 and 22 (`v8_enable_maglev: 0`): it is
//! tested on 24 and 26 only.

mod common;

use common::live::*;
use common::{node_binary, symbols};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use thread_ctx_v8::code::Tier;
use thread_ctx_v8::{Layout, Namer};

/// Samples wanted per tier and loop.
const WANTED: usize = 40;
/// However busy the machine, the test stops sampling after this long.
const CAP: Duration = Duration::from_secs(90);

#[derive(Default, Debug)]
struct Tally {
    samples: usize,
    right_function_and_line: usize,
    right_tier: usize,
    /// Stopped in the driver between two calls (not in the denominator).
    driver: usize,
    seen: HashMap<String, usize>,
}

fn tier_of(name: &str) -> Tier {
    match name {
        "Interpreted" => Tier::Interpreted,
        "Baseline" => Tier::Baseline,
        "Maglev" => Tier::Maglev,
        _ => Tier::Turbofan,
    }
}

fn run(major: u32) {
    let Some(bin) = node_binary(major) else { return };
    let syms = symbols(&bin);
    let layout = Layout::checked(&syms).unwrap();
    let node = NodeImage::new(&bin, &syms);
    let maglev = thread_ctx_v8::supported::for_node(major).unwrap().maglev;
    let tiers: Vec<&str> = if maglev { vec!["Interpreted", "Baseline", "Maglev", "Turbofan"] } else { vec!["Interpreted", "Baseline", "Turbofan"] };
    let mut flags = vec!["--sparkplug-filter=loopsBaseline", "--turbo-filter=loopsTurbofan"];
    if maglev {
        flags.push("--maglev-filter=loopsMaglev");
    }
    let script = fixture("tiers.js");
    let mut target = Target::spawn(&bin, &flags, &script, &[&tiers.join(","), "250"]);
    target.wait_line("ready");
    let mem = ProcessMemory { pid: target.pid() };
    let mut namer = Namer::new(layout.clone(), syms.bytecode_sizes.clone());
    let mut tallies: HashMap<String, Tally> = HashMap::new();
    let start = Instant::now();
    let mut maps = read_maps(target.pid());
    let mut maps_read = Instant::now();
    let done = |t: &HashMap<String, Tally>| {
        tiers.iter().all(|tier| ["A", "B"].iter().all(|l| t.get(&format!("{tier} {l}")).is_some_and(|x| x.samples >= WANTED)))
    };
    while !done(&tallies) && start.elapsed() < CAP {
        if maps_read.elapsed() > Duration::from_millis(500) {
            maps = read_maps(target.pid());
            maps_read = Instant::now();
        }
        let Some((phase, frames)) = target.sample(|regs| walk(&mem, regs, &layout, &node, &maps)) else { continue };
        std::thread::sleep(Duration::from_millis(3));
        let (tier, lp) = phase.split_once(' ').unwrap();
        let wanted_function = format!("loops{tier}");
        let wanted_line = marked_line(&script, &phase);
        // The innermost frame named loops*: the function under test; a miss on the way is kept
        // to say why a sample had none.
        let mut misses = Vec::new();
        let mut named = Vec::new();
        for input in frames.iter().filter_map(|f| f.js.as_ref()) {
            match namer.name(&mem, input) {
                Ok(n) => named.extend(n.frames),
                Err(miss) => misses.push(miss),
            }
        }
        let t = tallies.entry(format!("{tier} {lp}")).or_default();
        let Some(f) = named.iter().find(|f| f.function.starts_with("loops")) else {
            if named.iter().any(|f| f.script.as_deref().is_some_and(|s| s.ends_with("/tiers.js"))) {
                t.driver += 1;
            } else {
                t.samples += 1;
                *t.seen.entry(format!("no loops* frame named (misses {misses:?})")).or_default() += 1;
            }
            continue;
        };
        t.samples += 1;
        t.right_function_and_line += (f.function == wanted_function && f.line == Some(wanted_line)) as usize;
        t.right_tier += (f.tier == Some(tier_of(tier))) as usize;
        *t.seen.entry(format!("{}:{} {:?}", f.function, f.line.unwrap_or(0), f.tier)).or_default() += 1;
    }
    let mut report = format!("Node {major} ({}), {:.1} s, namer {:?}\n", layout.version, start.elapsed().as_secs_f64(), namer.stats);
    let mut failures = Vec::new();
    for tier in &tiers {
        for lp in ["A", "B"] {
            let key = format!("{tier} {lp}");
            let t = tallies.remove(&key).unwrap_or_default();
            report += &format!(
                "  {key}: {} samples, {} right function+line, {} right tier ({} in the driver, not counted); {:?}\n",
                t.samples, t.right_function_and_line, t.right_tier, t.driver, t.seen
            );
            // A call runs ~1 ms or more and the driver microseconds between two: more in the
            // driver is a walk that lost the function's frame.
            if t.driver * 100 > (t.samples + t.driver) * 5 {
                failures.push(format!("{key}: {} of {} samples in the driver, not in loops{tier}", t.driver, t.samples + t.driver));
            }
            if t.samples < WANTED {
                failures.push(format!("{key}: only {} samples in {} s", t.samples, CAP.as_secs()));
            } else {
                if t.right_function_and_line * 100 < t.samples * 95 {
                    failures.push(format!("{key}: {}/{} on loops{tier} at its line", t.right_function_and_line, t.samples));
                }
                if t.right_tier * 100 < t.samples * 90 {
                    failures.push(format!("{key}: {}/{} in tier {tier}", t.right_tier, t.samples));
                }
            }
        }
    }
    println!("{report}");
    assert!(failures.is_empty(), "{}\n{report}", failures.join("\n"));
}

/// One version at a time: each runs busy processes, and two cores shared by five
/// versions' targets made every one of them slower than all of them in turn.
#[test]
fn every_tier_on_every_node() {
    for major in common::majors() {
        run(major);
    }
}
