//! Prints what the namer makes of a live process's frames (debugging aids,
//! ignored unless run by hand), e.g. `V8_PROBE_NODE=24 V8_PROBE_FLAGS="--no-turbofan"
//! cargo test -p thread-ctx-v8 --test live_probe -- --ignored --nocapture`.
//! V8_PROBE_SCRIPT (absolute path; default tests/fixtures/two_loops.js),
//! V8_PROBE_ARGS, V8_PROBE_SAMPLES (default 8).

mod common;

use common::live::*;
use common::{node_binary, symbols};
use thread_ctx_v8::code::{find, LearnedMaps};
use thread_ctx_v8::heap::Heap;
use thread_ctx_v8::memory::{Budget, Metered};
use thread_ctx_v8::{Layout, Namer, PcRegion, PostmortemSymbols};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

/// The target the environment describes, started and ready.
fn start() -> (Target, Layout, PostmortemSymbols, NodeImage) {
    let major: u32 = env("V8_PROBE_NODE").parse().unwrap_or(24);
    let flags = env("V8_PROBE_FLAGS");
    let args = env("V8_PROBE_ARGS");
    let script = std::env::var("V8_PROBE_SCRIPT").map(std::path::PathBuf::from).unwrap_or_else(|_| fixture("two_loops.js"));
    let bin = node_binary(major).unwrap();
    let syms = symbols(&bin);
    let layout = Layout::checked(&syms).unwrap();
    let node = NodeImage::new(&bin, &syms);
    let mut target = Target::spawn(&bin, &flags.split_whitespace().collect::<Vec<_>>(), &script, &args.split_whitespace().collect::<Vec<_>>());
    target.wait_line("ready");
    (target, layout, syms, node)
}

#[test]
#[ignore]
fn probe() {
    let (mut target, layout, syms, node) = start();
    let mem = ProcessMemory { pid: target.pid() };
    let mut namer = Namer::new(layout.clone(), syms.bytecode_sizes.clone());
    let samples: usize = env("V8_PROBE_SAMPLES").parse().unwrap_or(8);
    for _ in 0..samples {
        let maps = read_maps(target.pid());
        let Some((phase, frames)) = target.sample(|regs| walk(&mem, regs, &layout, &node, &maps)) else { continue };
        println!("== sample phase {phase}");
        for f in frames.iter().take(12) {
            match &f.js {
                Some(input) => match namer.name(&mem, input) {
                    Ok(n) => println!("  {:#x} {:?} -> {:?}", f.pc, input.region, n.frames),
                    Err(m) => println!("  {:#x} {:?} miss {m}", f.pc, input.region),
                },
                None => println!("  {:#x} native", f.pc),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    println!("stats {:?} caches {:?}", namer.stats, namer.cache_sizes());
}

/// Like `probe`, printing for each frame in generated code the code object found.
#[test]
#[ignore]
fn probe_codes() {
    let (mut target, layout, syms, node) = start();
    let mem = ProcessMemory { pid: target.pid() };
    let mut namer = Namer::new(layout.clone(), syms.bytecode_sizes.clone());
    let samples: usize = env("V8_PROBE_SAMPLES").parse().unwrap_or(20);
    for _ in 0..samples {
        let maps = read_maps(target.pid());
        let Some((phase, frames)) = target.sample(|regs| walk(&mem, regs, &layout, &node, &maps)) else { continue };
        println!("== sample phase {phase}");
        for input in frames.iter().take(3).filter_map(|f| f.js.as_ref()) {
            if let PcRegion::Jit { floor } = input.region {
                let m = Metered::new(&mem, Budget::FRAME);
                match find(&Heap::new(&m, &layout), input.pc, floor, &mut LearnedMaps::default()) {
                    Ok(c) => println!(
                        "  pc {:#x} code {:#x}+{:#x} {:?} fn {:?} shared {:#x} table {} inlining {}",
                        input.pc,
                        c.start,
                        input.pc - c.start,
                        c.tier,
                        c.function.map(|f| format!("{f:#x}")),
                        input.shared,
                        c.table.len(),
                        c.inlining.len()
                    ),
                    Err(m) => println!("  pc {:#x} miss {m}", input.pc),
                }
            }
            println!(
                "    -> {:?}",
                namer.name(&mem, input).map(|n| n.frames.iter().map(|f| format!("{}:{:?}", f.function, f.line)).collect::<Vec<_>>())
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(60));
    }
}
