//! Hostile targets: real processes (tests/fixtures/hostile_target.c) that
//! publish data built to hurt a reader running as root — a lying OTEL_CTX
//! header, a malformed payload, records whose sizes lie, ELF objects whose
//! tables point outside the file or claim gigabytes, perf maps that are
//! garbage, FIFOs or symlinks, names full of terminal escapes. The reader
//! must not panic, hang or balloon: it reports each lie in one line, reads
//! whatever is still true in the same process, and reads a good process
//! next to them as usual.

use common::*;
use prost::Message;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use thread_ctx_discovery::process_context_proto::{any_value, string_value, AnyValue, ArrayValue, KeyValue, ProcessContext};
use thread_ctx_test_support::process as common;

fn work_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("thread-ctx-hostile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// The hostile target, named like node so the reader treats it as a V8
/// process and goes for its perf map (a process chooses its own name).
fn hostile_exe() -> &'static PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let exe = work_dir().join("node-hostile");
        let src = test_file("fixtures/hostile_target.c");
        cc(&["-O1", "-Wall", "-o", exe.to_str().unwrap(), src.to_str().unwrap(), "-ldl", "-lpthread"]);
        exe
    })
}

/// A hostile target: the writer library loaded and one honest record, plus `lies`.
struct Hostile {
    w: WriterProcess,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        // A perf map the target left (a 3 GiB sparse file, a FIFO, a symlink).
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", self.w.pid));
    }
}

fn hostile(lies: &[&str]) -> Hostile {
    let lib = fixtures().lib_tlsdesc.to_str().unwrap().to_string();
    let mut args = vec!["--lib", lib.as_str()];
    args.extend_from_slice(lies);
    Hostile { w: c_writer(hostile_exe(), &args, &[]) }
}

struct Measured {
    run: ReaderRun,
    max_rss_kib: i64,
    seconds: f64,
}

/// Runs `thread-ctx ARGS` and measures its peak RSS; fails (instead of hanging
/// the suite) if it has not exited within `limit`.
// The child is reaped by wait4 (for its rusage), which clippy does not see.
#[allow(clippy::zombie_processes)]
fn measured(args: &[&str], limit: Duration) -> Measured {
    let started = Instant::now();
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_thread-ctx")).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("running thread-ctx");
    let pid = child.id() as libc::pid_t;
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let mut status = 0;
    // SAFETY: rusage is plain data filled by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`thread-ctx {}` did not finish within {limit:?}: it hung on a hostile target", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -libc::WTERMSIG(status) };
    let run = ReaderRun { code, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
    assert!(!run.stderr.contains("panicked") && code >= 0, "`thread-ctx {}` crashed (status {code}):\n{}", args.join(" "), run.stderr);
    Measured { run, max_rss_kib: usage.ru_maxrss, seconds: started.elapsed().as_secs_f64() }
}

fn dump_json(pid: i32) -> Value {
    let m = measured(&["dump", "--json", &pid.to_string()], Duration::from_secs(60));
    assert_eq!(m.run.code, 0, "dump of hostile pid {pid}:\n{}\n{}", m.run.stdout, m.run.stderr);
    serde_json::from_str(&m.run.stdout).unwrap()
}

/// The honest record on the main thread reads back whatever else the process lies about.
fn assert_honest_record_read(v: &Value, h: &Hostile) {
    let w = only_writer(v);
    assert!(w["path"].as_str().unwrap().ends_with("libtlsdesc.so"), "{w:#}");
    assert_dump_matches(v, &h.w.published[..1]);
}

fn payload_file(name: &str, bytes: &[u8]) -> String {
    let p = work_dir().join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

/// An AnyValue nested in `depth` arrays: past prost's recursion limit.
fn deeply_nested(depth: usize) -> Vec<u8> {
    let mut v = string_value("leaf");
    for _ in 0..depth {
        v = AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values: vec![v] })) };
    }
    let kv = KeyValue { key: "deep".into(), value: Some(v) };
    ProcessContext { resource: None, attributes: vec![kv] }.encode_to_vec()
}

#[test]
fn lying_process_contexts_are_one_line_each_and_the_records_still_read() {
    let deep = payload_file("deep.pb", &deeply_nested(200));
    // A length-delimited field claiming 4 GiB, in 8 bytes.
    let huge_len = payload_file("huge-len.pb", &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, b'a', b'b']);
    let cases: [(&[&str], &str); 6] = [
        (&["--ctx-huge-size"], "payload size 4294967280 exceeds the 65536-byte limit"),
        (&["--ctx-outside"], "reading 100 bytes at 0x10 (OTEL_CTX payload): Bad address"),
        (&["--ctx-garbage", &deep], "recursion limit reached"),
        (&["--ctx-garbage", &huge_len], "is not a ProcessContext protobuf"),
        (&["--ctx-unpublished"], "stayed at published-at 0"),
        // Each costs the reader its wait for a publication: only the first few are tried.
        (&["--ctx-many"], "stayed at published-at 0"),
    ];
    for (lie, expected) in cases {
        let h = hostile(lie);
        let started = Instant::now();
        let v = dump_json(h.w.pid);
        assert!(started.elapsed() < Duration::from_secs(20), "{lie:?}: dump took {:?}", started.elapsed());
        let err = v["process_context_error"].as_str().unwrap_or_else(|| panic!("{lie:?}: expected a process context error: {v:#}"));
        assert!(err.contains(expected), "{lie:?}: expected {expected:?} in {err:?}");
        assert!(v["process_context"].is_null());
        assert_honest_record_read(&v, &h);
        let text = thread_ctx(&["inspect", &h.w.pid.to_string()]);
        assert_eq!(text.code, 0, "{lie:?}: {}{}", text.stdout, text.stderr);
        let lines: Vec<&str> = text.stdout.lines().filter(|l| l.contains("process context")).collect();
        assert_eq!(lines.len(), 1, "{lie:?}: one line about the context: {}", text.stdout);
        assert!(lines[0].starts_with("process context: UNREADABLE: ") && lines[0].contains(expected), "{lie:?}: {}", lines[0]);
    }
}

#[test]
fn lying_records_are_rows_with_problems_and_the_honest_one_is_valid() {
    let h = hostile(&["--lying-record"]);
    let m = measured(&["validate", "--json", &h.w.pid.to_string()], Duration::from_secs(60));
    assert_eq!(m.run.code, 1, "malformed records make validate exit 1:\n{}\n{}", m.run.stdout, m.run.stderr);
    let v: Value = serde_json::from_str(&m.run.stdout).unwrap();
    assert_honest_record_read(&v, &h);
    let row =
        |name: &str| v["threads"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("no row {name}: {v:#}")).clone();
    // attrs size 612 at the end of a page: the copy faults and says where.
    let page_end = row("hx-page-end");
    assert_eq!(page_end["state"], "error", "{page_end:#}");
    let why = page_end["problems"].to_string();
    assert!(why.contains("reading 612 bytes") && why.contains("record attrs-data") && why.contains("Bad address"), "{why}");
    // A key no key map has, then an entry running past the attrs size.
    let lying = row("hx-lying");
    assert_eq!(lying["state"], "malformed", "{lying:#}");
    assert_eq!((lying["attrs"][0]["key_index"].as_u64(), lying["attrs"][0]["value"].as_str()), (Some(200), Some("abc")));
    assert!(lying["attrs"][0]["key"].is_null());
    assert!(lying["problems"].to_string().contains("value needs 250 bytes, 1 left"), "{lying:#}");
}

/// Offset of section `name`'s header in an ELF file.
fn section_header_offset(elf: &[u8], name: &str) -> usize {
    use object::read::elf::{ElfFile64, FileHeader};
    use object::{Object, ObjectSection};
    let file = ElfFile64::<object::Endianness>::parse(elf).unwrap();
    let s = file.section_by_name(name).unwrap_or_else(|| panic!("no {name} section"));
    let h = file.elf_header();
    let e = file.endian();
    h.e_shoff(e) as usize + s.index().0 * h.e_shentsize(e) as usize
}

/// A copy of the test writer library whose section `name` says `offset` and `size`.
fn lying_elf(file: &str, name: &str, offset: Option<u64>, size: u64, pad_to: Option<u64>) -> String {
    let mut elf = std::fs::read(&fixtures().lib_tlsdesc).unwrap();
    let sh = section_header_offset(&elf, name);
    if let Some(o) = offset {
        elf[sh + 24..sh + 32].copy_from_slice(&o.to_le_bytes());
    }
    elf[sh + 32..sh + 40].copy_from_slice(&size.to_le_bytes());
    let path = work_dir().join(file);
    std::fs::write(&path, &elf).unwrap();
    if let Some(len) = pad_to {
        // A hole: gigabytes "in the file" that cost the target nothing.
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len).unwrap();
    }
    path.to_str().unwrap().to_string()
}

#[test]
fn lying_elf_objects_are_skipped_in_one_line_and_the_real_writer_resolves() {
    let real_len = std::fs::metadata(&fixtures().lib_tlsdesc).unwrap().len();
    let truncated = work_dir().join("truncated.so");
    std::fs::write(&truncated, &std::fs::read(&fixtures().lib_tlsdesc).unwrap()[..3000]).unwrap();
    let gib = 1u64 << 30;
    let cases = [
        (lying_elf("dynsym-outside.so", ".dynsym", Some(real_len + 4096), 24 * 100, None), ".dynsym"),
        (lying_elf("dynsym-huge.so", ".dynsym", Some(0x1000_0000), 3 * gib / 4, Some(gib)), ".dynsym"),
        (lying_elf("rela-huge.so", ".rela.dyn", None, 24 << 32, None), "relocation table"),
        (lying_elf("rela-sparse.so", ".rela.dyn", Some(0x1000_0000), 24 << 25, Some(gib)), "relocation table"),
        (truncated.to_str().unwrap().to_string(), "section headers"),
    ];
    for (file, reason) in &cases {
        let h = hostile(&["--map", file]);
        let m = measured(&["inspect", "--json", &h.w.pid.to_string()], Duration::from_secs(60));
        assert_eq!(m.run.code, 0, "{file}: {}{}", m.run.stdout, m.run.stderr);
        assert!(m.max_rss_kib < 100 << 10, "{file}: inspect peaked at {} MiB: sizes in the file decided an allocation", m.max_rss_kib >> 10);
        let v: Value = serde_json::from_str(&m.run.stdout).unwrap();
        let skipped: Vec<&str> =
            v["skipped_objects"].as_array().unwrap().iter().filter_map(Value::as_str).filter(|s| s.contains(file.as_str())).collect();
        assert_eq!(skipped.len(), 1, "{file}: one skipped-object line expected: {v:#}");
        assert!(skipped[0].contains("not a usable ELF object") && skipped[0].contains(reason), "{file}: {}", skipped[0]);
        let w = only_writer(&v);
        assert!(w["path"].as_str().unwrap().ends_with("libtlsdesc.so"), "{w:#}");
        let text = thread_ctx(&["inspect", &h.w.pid.to_string()]);
        assert_eq!(text.stdout.lines().filter(|l| l.starts_with("skipped object: ") && l.contains(file.as_str())).count(), 1, "{}", text.stdout);
    }
}

#[test]
fn terminal_escapes_in_target_names_are_printed_escaped() {
    let h = hostile(&["--evil-names"]);
    for sub in ["inspect", "dump"] {
        let r = thread_ctx(&[sub, &h.w.pid.to_string()]);
        assert_eq!(r.code, 0, "{sub}: {}{}", r.stdout, r.stderr);
        assert!(
            !r.stdout.contains('\x1b') && !r.stdout.contains('\x07'),
            "{sub} sent the target's escape sequences to the terminal:\n{:?}",
            r.stdout
        );
    }
    let dump = thread_ctx(&["dump", &h.w.pid.to_string()]).stdout;
    assert!(dump.contains("hx-\\u{1b}[31mred"), "{dump}");
    let v = dump_json(h.w.pid);
    assert_eq!(v["process_context"]["resource"]["service.name"], "\x1b]0;pwned\x07\x1b[2J", "JSON keeps the value, escaped by JSON itself");
}

#[test]
fn garbage_fifo_and_symlinked_perf_maps_neither_hang_nor_balloon_a_recording() {
    if !ebpf_or_skip("garbage_fifo_and_symlinked_perf_maps_neither_hang_nor_balloon_a_recording") {
        return;
    }
    let _one = one_at_a_time();
    let cases = [("garbage", None), ("fifo", Some("is not a regular file")), ("symlink", Some("Too many levels of symbolic links"))];
    for (kind, note) in cases {
        let h = hostile(&["--perf-map", kind]);
        let pid = h.w.pid.to_string();
        let m = measured(&["record", &pid, "--duration", "1s"], Duration::from_secs(90));
        assert_eq!(m.run.code, 0, "{kind}: {}{}", m.run.stdout, m.run.stderr);
        assert!(m.max_rss_kib < 200 << 10, "{kind}: record peaked at {} MiB", m.max_rss_kib >> 10);
        assert!(m.seconds < 60.0, "{kind}: record took {:.1} s", m.seconds);
        // What is said of the map itself: the target is named like node but has no v8dbg symbols,
        // so the note that its JS frames fall back to the perf map is right, and not about the map.
        let warnings: Vec<&str> = m.run.stderr.lines().filter(|l| l.contains("perf map") && !l.contains("falling back to the perf map")).collect();
        match note {
            None => assert!(warnings.is_empty(), "{kind}: a garbage map still loads (its bad lines skipped): {warnings:?}"),
            // Said when recording starts (and repeated in the profile's notes at the end).
            Some(n) => assert!(
                !warnings.is_empty() && warnings.iter().all(|w| w.contains("is unreadable") && w.contains(n)),
                "{kind}: expected the perf map to be reported unreadable ({n}): {}",
                m.run.stderr
            ),
        }
    }
}

#[test]
fn a_good_process_reads_as_usual_next_to_every_hostile_one() {
    let deep = payload_file("deep-lib.pb", &deeply_nested(200));
    let lie = lying_elf("dynsym-outside-lib.so", ".dynsym", Some(1 << 40), 24 * 100, None);
    let bad: Vec<(Hostile, bool)> = [
        (vec!["--ctx-huge-size", "--lying-record"], true),
        (vec!["--ctx-garbage", deep.as_str(), "--map", lie.as_str()], true),
        (vec!["--ctx-outside", "--perf-map", "garbage"], true),
        (vec!["--ctx-unpublished", "--perf-map", "fifo"], true),
        (vec!["--evil-names", "--perf-map", "symlink"], false),
    ]
    .iter()
    .map(|(lies, context_lies)| (hostile(lies), *context_lies))
    .collect();
    let f = fixtures();
    let good = c_writer(&f.writer_dl, &["--dlopen", f.lib_tlsdesc.to_str().unwrap(), "--attrs"], &[]);
    // One reader over all of them, as the agent's discovery pass is: each bad one
    // costs one error, the next is read as if nothing happened.
    for (h, context_lies) in &bad {
        let pid = h.w.pid;
        let d = thread_ctx_discovery::discover(pid).unwrap_or_else(|e| panic!("discovery of hostile pid {pid} failed whole: {e}"));
        assert_eq!(matches!(d.process_context, Some(Err(_))), *context_lies, "pid {pid}: {:?}", d.process_context);
        assert!(d.sampled_writer().is_ok(), "the honest writer of pid {pid} still resolves");
        let threads = thread_ctx_discovery::ptrace::read_all_threads(&d).unwrap();
        assert!(threads.iter().any(|t| t.tid == pid && t.state == thread_ctx_discovery::ptrace::State::Valid), "pid {pid}: {threads:#?}");
        let symbolizer = thread_ctx_profile::Symbolizer::new(pid).unwrap();
        assert!(symbolizer.runs_v8(), "the hostile target passes for node, so its perf map is read");
    }
    let d = thread_ctx_discovery::discover(good.pid).unwrap();
    assert!(d.skipped_objects.is_empty(), "{:?}", d.skipped_objects);
    assert!(d.sampled_writer().unwrap().access.is_ok());
    let v = json_of("validate", good.pid, 0);
    assert_dump_matches(&v, &good.published);
}
