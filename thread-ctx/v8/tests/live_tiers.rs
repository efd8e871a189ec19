//! Every tier, no profiling flags, on every supported Node: one process per
//! version runs one function per tier (node's tier filters pin each to its
//! tier), each with two hot loops on different lines, in phases this test
//! follows from the fixture's output. Its main thread is stopped from outside
//! (ptrace) again and again; its frames are walked as the sampler walks them
//! and named from its heap. Per tier and loop, at least 95 % of the samples
//! must name that tier's function at that loop's line, and 90 % must say the
//! tier (the rest: samples taken before the function reached it, or in a
//! builtin that hides the pc).
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
        // The innermost frame named loops*: the function under test.
        let named = frames
            .iter()
            .filter_map(|f| f.js.as_ref())
            .filter_map(|input| namer.name(&mem, input).ok())
            .flat_map(|n| n.frames)
            .find(|f| f.function.starts_with("loops"));
        let Some(f) = named else { continue };
        let t = tallies.entry(format!("{tier} {lp}")).or_default();
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
                "  {key}: {} samples, {} right function+line, {} right tier; {:?}\n",
                t.samples, t.right_function_and_line, t.right_tier, t.seen
            );
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
