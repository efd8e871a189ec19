//! A live target whose frames and heap lie: its main thread is stopped, the
//! JS frames' slots and the objects they lead to are overwritten with lies
//! (pointers to the wrong objects, to themselves, to the stack and to code;
//! huge lengths and counts), and the frames are walked and named again while
//! it is still stopped. Every naming ends within its read budget, as a name or
//! a counted miss, with no panic and no hang; the target is then killed.

mod common;

use common::live::*;
use common::{node_binary, symbols};
use std::time::{Duration, Instant};
use thread_ctx_v8::tagged::{smi_word, untag};
use thread_ctx_v8::{Layout, Namer};

fn run(major: u32) {
    let Some(bin) = node_binary(major) else { return };
    let syms = symbols(&bin);
    let layout = Layout::checked(&syms).unwrap();
    let node = NodeImage::new(&bin, &syms);
    let mut target = Target::spawn(&bin, &[], &fixture("two_loops.js"), &["100"]);
    target.wait_line("ready");
    let pid = target.pid();
    let mem = ProcessMemory { pid };
    let maps = read_maps(pid);
    let mut namer = Namer::new(layout.clone(), syms.bytecode_sizes.clone());
    let (mut named, mut missed, mut slowest) = (0, 0, Duration::ZERO);
    // The walk and every naming happen with the thread stopped: its memory says what the lies left.
    let outcome = while_stopped(pid, |regs| {
        let honest = walk(&mem, regs, &layout, &node, &maps);
        let l = &layout;
        let fp_slot = |fp: u64, off: i64| fp.wrapping_add(off as u64);
        for (i, f) in honest.iter().enumerate() {
            let Some(input) = &f.js else { continue };
            let sfi = untag(input.shared).unwrap_or(0);
            let scope_info = read_u64(&mem, sfi + l.sfi_name_or_scope_info).unwrap_or(0);
            let script = read_u64(&mem, sfi + l.sfi_script).unwrap_or(0);
            let source = untag(script).ok().and_then(|s| read_u64(&mem, s + l.script_source)).unwrap_or(0);
            let lies: Vec<(u64, u64)> = match i % 4 {
                // The SharedFunctionInfo names itself; its script is its bytecode.
                0 => vec![(sfi + l.sfi_name_or_scope_info, input.shared), (sfi + l.sfi_script, input.bytecode_array)],
                // The ScopeInfo claims 2^30 context locals; the source claims 2^31 - 1 characters.
                1 => vec![
                    (untag(scope_info).unwrap_or(0) + 8 + 8 * l.scope_info.context_local_count_index, smi_word(1 << 30)),
                    (untag(source).unwrap_or(0) + l.string.length, 0x7fff_ffff),
                ],
                // The bytecode's position table is the bytecode; the frame's offset is huge.
                2 => vec![
                    (untag(input.bytecode_array).unwrap_or(0) + l.bytecode_position_table, input.bytecode_array),
                    (fp_slot(f.fp, l.fp_bytecode_offset), smi_word(i32::MAX)),
                ],
                // The frame's function is its context; its bytecode array points at the stack.
                _ => vec![(fp_slot(f.fp, l.fp_function), fp_slot(f.fp, l.fp_context)), (fp_slot(f.fp, l.fp_bytecode_array), f.fp | 1)],
            };
            for (addr, v) in lies {
                if addr > 0x1000 {
                    write_u64(pid, addr, v);
                }
            }
        }
        // And code: every InstructionStream header's back pointer in the first JIT mapping, wrong.
        for m in maps.iter().filter(|m| m.exec && m.path.is_empty()).take(1) {
            let mut a = m.start + 64;
            while a + 64 < m.end.min(m.start + (1 << 20)) {
                if read_u64(&mem, a - 32).is_some_and(thread_ctx_v8::tagged::is_heap_object) {
                    write_u64(pid, a - 24, smi_word(7));
                }
                a += 64;
            }
        }
        let lying = walk(&mem, regs, &layout, &node, &maps);
        for input in honest.iter().chain(lying.iter()).filter_map(|f| f.js.as_ref()) {
            for _ in 0..2 {
                let t = Instant::now();
                match namer.name(&mem, input) {
                    Ok(_) => named += 1,
                    Err(_) => missed += 1,
                }
                slowest = slowest.max(t.elapsed());
            }
        }
    });
    assert!(outcome.is_some(), "Node {major}: could not stop the target");
    println!("Node {major}: {named} named, {missed} missed ({:?}), slowest naming {slowest:?}", namer.stats.misses);
    assert!(named + missed > 0, "Node {major}: no JS frame to lie about");
    // The worst lie is a source of 2^31 characters: its first 16 Mi (script::MAX_SOURCE_CHARS) are read,
    // ~0.3 s when they are node's own sources paged in from its binary.
    let bound = if cfg!(debug_assertions) { Duration::from_secs(10) } else { Duration::from_secs(2) };
    assert!(slowest < bound, "Node {major}: a naming took {slowest:?}");
    assert_eq!(namer.stats.named + namer.stats.missed(), (named + missed) as u64);
}

#[test]
fn lying_frames_and_heap_of_a_live_target() {
    for major in [18, 22, 26] {
        run(major);
    }
}
