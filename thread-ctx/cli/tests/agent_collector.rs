//! `thread-ctx agent` end to end, as root (eBPF), into a real OpenTelemetry Collector (built from
//! Go modules by scripts/build-collector.sh) whose file exporter writes what it receives:
//! - a Node service (the OpenTelemetry SDK, our context manager, record attribute http.route)
//!   burns two named JS functions in two spans: >= 90 % of each function's samples that reach
//!   the Collector link to its own span, with its route; the resource carries the service's
//!   service.name and process.pid; mappings carry GNU build ids; JS frames are `v8js`. Over gRPC
//!   and over OTLP/HTTP;
//! - a service started after the agent is found; one that exits mid-window has its last samples
//!   delivered; SIGTERM sends the last window and exits 0;
//! - the Collector absent at start, killed and restarted, or accepting connections and never
//!   answering: sampling goes on, the agent's memory stays bounded, windows arrive once it is
//!   back or are dropped with a count.
//!
//! - `--alloc`: the NodeSDK service whose span A allocates three times what span B allocates
//!   (fixtures/alloc_spans.js) sends allocation samples as two sibling profiles
//!   (alloc_objects/count, alloc_space/bytes) that reach the Collector linked to their spans
//!   (at least 80 %), A / B bytes within [2.0, 4.5], the allocating function named in at least 50 % of the
//!   stacks; `report` reads them back (allocation table, flame graph of one route's bytes); the
//!   uprobe of a service on another `node` is detached when it exits, and none is left once the
//!   agent exits.
//!
//! Other Node processes on the host are sampled too (host-wide discovery): only this test's own
//! pids are asserted about.

mod alloc_common;
use thread_ctx_test_support::collector as collector_common;
use thread_ctx_test_support::process as common;
mod profile_common;

use collector_common::{Collector, ResolvedSample, SilentListener};
use common::{ebpf_or_skip, one_at_a_time, WriterProcess, STARTUP};
use profile_common::{spans, workload, SpanLine};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(90);

/// A running `thread-ctx agent`; its stderr lines arrive on `lines`. Killed on drop.
struct Agent {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Agent {
    fn start(args: &[&str]) -> Agent {
        let mut child = Command::new(env!("CARGO_BIN_EXE_thread-ctx"))
            .arg("agent")
            .args(args)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting thread-ctx agent");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Agent { child, lines, seen: Vec::new() }
    }

    /// Waits for a stderr line containing `what`, returning it.
    fn wait_line(&mut self, what: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self.seen.iter().find(|l| l.contains(what)) {
                return l.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("the agent printed no line with {what:?} within {timeout:?}; it printed:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// Status lines so far.
    fn windows(&mut self) -> Vec<String> {
        while let Ok(l) = self.lines.try_recv() {
            self.seen.push(l);
        }
        self.seen.iter().filter(|l| l.contains(": window ")).cloned().collect()
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
    }

    /// SIGTERM, then the exit code and everything it printed.
    fn terminate(mut self) -> (Option<i32>, String) {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "the agent did not exit within 30 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader thread ends at EOF (the channel then disconnects): wait for its last lines
        // rather than a fixed while, which a busy host can outlast.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(30)) {
            self.seen.push(l);
        }
        (status.code(), self.seen.join("\n"))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Samples of process `pid` the Collector has received.
fn samples_of(c: &Collector, pid: i32) -> Vec<ResolvedSample> {
    c.received().samples().into_iter().filter(|s| s.resource.get("process.pid") == Some(&pid.to_string())).collect()
}

fn in_function(s: &ResolvedSample, f: &str) -> bool {
    s.frames.iter().any(|fr| fr.function == f)
}

/// The GNU build id `readelf -n` reports for a file.
fn readelf_build_id(path: &str) -> Option<String> {
    let out = Command::new("readelf").args(["-n", path]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
}

/// Checks the samples of the workload `w` whose spans are `spans`; returns a summary line.
fn check_attribution(samples: &[ResolvedSample], w: &WriterProcess, spans: &[SpanLine]) -> String {
    let by_name = |n: &str| spans.iter().find(|s| s.name == n).unwrap_or_else(|| panic!("no span {n} in {spans:?}")).clone();
    let mut figures = Vec::new();
    for (func, span, route) in [("burnAlpha", by_name("alpha"), "/alpha"), ("burnBeta", by_name("beta"), "/beta")] {
        let with: Vec<&ResolvedSample> = samples.iter().filter(|s| in_function(s, func)).collect();
        let count = |ss: &[&ResolvedSample]| -> usize { ss.iter().map(|s| s.values.len().max(1)).sum() };
        let right: Vec<&ResolvedSample> = with
            .iter()
            .filter(|s| {
                s.link.as_ref().map(|(t, sp)| (hex(t), hex(sp))) == Some((span.trace_id.clone(), span.span_id.clone()))
                    && s.attributes.get("http.route").map(String::as_str) == Some(route)
            })
            .copied()
            .collect();
        let (total, ok) = (count(&with), count(&right));
        assert!(total >= 20, "expected at least 20 samples in {func} at the Collector, got {total}");
        assert!(ok * 10 >= total * 9, "{func}: only {ok} of {total} samples link to span {} {} with route {route}", span.trace_id, span.span_id);
        for s in &with {
            assert_eq!(s.resource.get("service.name").map(String::as_str), Some("profile-fixture"), "resource of {func}'s samples: {:?}", s.resource);
            assert_eq!(s.attributes.get("thread.id"), Some(&w.pid.to_string()), "{func} runs on the main thread: {:?}", s.attributes);
            assert!(s.attributes.contains_key("thread.name"), "thread.name: {:?}", s.attributes);
            assert_eq!(s.timestamps_unix_nano.len(), s.values.len(), "one timestamp per value");
            let f = s.frames.iter().find(|f| f.function == func).unwrap();
            assert_eq!(f.attributes.get("profile.frame.type").map(String::as_str), Some("v8js"), "frame type of {func}");
            assert!(f.file.ends_with("profile_workload.js"), "{func} is in {}", f.file);
        }
        figures.push(format!("{func}: {ok}/{total} samples link to its span"));
    }
    // Native frames of node point at node's mapping, which carries its build id.
    let node = std::fs::read_link(format!("/proc/{}/exe", w.pid)).unwrap().to_string_lossy().into_owned();
    let expected = readelf_build_id(&node);
    let mapping = samples
        .iter()
        .flat_map(|s| &s.frames)
        .filter_map(|f| f.mapping.as_ref())
        .find(|m| m.filename == node)
        .unwrap_or_else(|| panic!("no frame in {node}'s mapping"));
    assert_eq!(mapping.attributes.get("process.executable.build_id.gnu").cloned(), expected, "build id of {node}");
    figures.join("; ")
}

fn attribution_over(protocol: &str) {
    let test = format!("agent_attribution_over_{}", protocol.replace('/', "_"));
    if !ebpf_or_skip(&test) {
        return;
    }
    let _one = one_at_a_time();
    let collector = Collector::running();
    let endpoint = if protocol == "grpc" { collector.grpc_endpoint() } else { collector.http_endpoint() };
    let w = workload("cpu");
    let spans = spans(&w, 2, STARTUP);
    let mut agent = Agent::start(&["--interval", "1s", "--hz", "99", "--endpoint", &endpoint, "--protocol", protocol]);
    agent.wait_line(&format!("tracking process {}", w.pid), WAIT);
    let enough = |r: &collector_common::Received| {
        let mine: Vec<ResolvedSample> = r.samples().into_iter().filter(|s| s.resource.get("process.pid") == Some(&w.pid.to_string())).collect();
        ["burnAlpha", "burnBeta"].iter().all(|f| mine.iter().filter(|s| in_function(s, f)).map(|s| s.values.len()).sum::<usize>() >= 60)
    };
    collector.wait_for(WAIT, "60 samples of each burning function", enough);
    let (code, stderr) = agent.terminate();
    assert_eq!(code, Some(0), "SIGTERM ends the agent with 0:\n{stderr}");
    let samples = samples_of(&collector, w.pid);
    let summary = check_attribution(&samples, &w, &spans);
    eprintln!("{test}: {summary}");
}

#[test]
fn agent_attribution_over_grpc() {
    attribution_over("grpc");
}

#[test]
fn agent_attribution_over_http() {
    attribution_over("http/protobuf");
}

#[test]
fn services_come_and_go_and_sigterm_flushes() {
    let test = "services_come_and_go_and_sigterm_flushes";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let collector = Collector::running();
    let mut agent = Agent::start(&["--interval", "3s", "--hz", "99", "--endpoint", &collector.grpc_endpoint(), "--protocol", "grpc"]);
    agent.wait_line(": window ", WAIT);
    // Started after the agent: found by the next scan (at most 3 s later, the interval).
    let mut w = workload("cpu");
    spans(&w, 2, STARTUP);
    let started = Instant::now();
    agent.wait_line(&format!("tracking process {}", w.pid), Duration::from_secs(30));
    let found_after = started.elapsed();
    collector
        .wait_for(WAIT, "samples of the late service", |r| r.samples().iter().any(|s| s.resource.get("process.pid") == Some(&w.pid.to_string())));
    // Exits mid-window: its samples up to the exit still arrive.
    std::thread::sleep(Duration::from_millis(1500));
    let pid = w.pid;
    w.child.kill().unwrap();
    w.child.wait().unwrap();
    let killed_at = unix_ns();
    agent.wait_line(&format!("process {pid} exited"), Duration::from_secs(30));
    let last = collector.wait_for(WAIT, "the exited service's last window", |r| {
        r.samples()
            .iter()
            .filter(|s| s.resource.get("process.pid") == Some(&pid.to_string()))
            .flat_map(|s| s.timestamps_unix_nano.clone())
            .max()
            .is_some_and(|t| t + 1_000_000_000 >= killed_at)
    });
    let latest = last
        .samples()
        .iter()
        .filter(|s| s.resource.get("process.pid") == Some(&pid.to_string()))
        .flat_map(|s| s.timestamps_unix_nano.clone())
        .max()
        .unwrap();
    // SIGTERM mid-window: the window so far goes out before exit 0.
    let w2 = workload("cpu");
    spans(&w2, 2, STARTUP);
    agent.wait_line(&format!("tracking process {}", w2.pid), Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(1500));
    let term_at = unix_ns();
    let (code, stderr) = agent.terminate();
    assert_eq!(code, Some(0), "SIGTERM ends the agent with 0:\n{stderr}");
    assert!(stderr.contains("stopped; exported"), "a final line says what was exported:\n{stderr}");
    // Samples of the last half second before SIGTERM can only come from the window it flushed.
    let after = collector.wait_for(Duration::from_secs(30), "the window SIGTERM ended", |r| {
        r.samples()
            .iter()
            .filter(|s| s.resource.get("process.pid") == Some(&w2.pid.to_string()))
            .flat_map(|s| s.timestamps_unix_nano.clone())
            .any(|t| t + 500_000_000 >= term_at)
    });
    let newest = after
        .samples()
        .iter()
        .filter(|s| s.resource.get("process.pid") == Some(&w2.pid.to_string()))
        .flat_map(|s| s.timestamps_unix_nano.clone())
        .max()
        .unwrap();
    eprintln!(
        "{test}: late service found {:.1}s after it started; exited service's last sample {:.2}s before its kill; SIGTERM'd service's last sample {:.2}s before SIGTERM",
        found_after.as_secs_f64(),
        (killed_at as f64 - latest as f64) / 1e9,
        (term_at as f64 - newest as f64) / 1e9
    );
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// The number after `label` in the last status line, e.g. "queue full 3".
fn last_count(windows: &[String], label: &str) -> u64 {
    windows
        .last()
        .and_then(|l| l.split(label).nth(1))
        .and_then(|rest| rest.trim_start().split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn collector_down_restarted_or_silent_sampling_goes_on() {
    let test = "collector_down_restarted_or_silent_sampling_goes_on";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let w = workload("cpu");
    spans(&w, 2, STARTUP);
    // Not running when the agent starts.
    let mut collector = Collector::new();
    let mut agent = Agent::start(&[
        "--interval",
        "1s",
        "--hz",
        "99",
        "--pid",
        &w.pid.to_string(),
        "--endpoint",
        &collector.grpc_endpoint(),
        "--protocol",
        "grpc",
    ]);
    while agent.windows().len() < 3 {
        agent.wait_line(": window ", WAIT);
        std::thread::sleep(Duration::from_millis(200));
    }
    let windows = agent.windows();
    assert!(windows.iter().all(|l| !l.contains(" 0 CPU samples")), "sampling goes on while the Collector is down:\n{}", windows.join("\n"));
    // Comes up: the queued windows arrive.
    collector.start();
    collector.wait_for(WAIT, "windows queued while it was down", |r| {
        r.samples().iter().any(|s| s.resource.get("process.pid") == Some(&w.pid.to_string()))
    });
    // Killed and restarted: delivery resumes.
    collector.kill();
    std::thread::sleep(Duration::from_secs(3));
    collector.start();
    let restarted_at = unix_ns();
    collector.wait_for(WAIT, "windows after the restart", |r| {
        r.samples()
            .iter()
            .filter(|s| s.resource.get("process.pid") == Some(&w.pid.to_string()))
            .flat_map(|s| s.timestamps_unix_nano.clone())
            .any(|t| t > restarted_at)
    });
    let (code, stderr) = agent.terminate();
    assert_eq!(code, Some(0), "{stderr}");

    // An endpoint that accepts connections and never answers: windows pile up to the queue's
    // bound and the oldest are dropped with a count; memory stays bounded.
    let silent = SilentListener::start();
    let mut agent =
        Agent::start(&["--interval", "1s", "--hz", "99", "--pid", &w.pid.to_string(), "--endpoint", &silent.endpoint(), "--protocol", "grpc"]);
    let mut rss = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while last_count(&agent.windows(), "queue full ") == 0 {
        assert!(Instant::now() < deadline, "no window dropped for a full queue within 120 s:\n{}", agent.windows().join("\n"));
        agent.wait_line(": window ", WAIT);
        rss.push(agent.rss_kib());
        std::thread::sleep(Duration::from_millis(500));
    }
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        rss.push(agent.rss_kib());
    }
    let windows = agent.windows();
    assert!(windows.iter().rev().take(3).all(|l| !l.contains(" 0 CPU samples")), "sampling goes on:\n{}", windows.join("\n"));
    let max_rss = rss.iter().copied().max().unwrap_or(0);
    assert!(max_rss < 200 * 1024, "agent RSS {max_rss} KiB while the endpoint never answers (bounded queue)");
    let (code, stderr) = agent.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(silent.connections() > 0, "the agent did connect");
    eprintln!("{test}: {} windows, dropped for a full queue: {}, max RSS {} KiB", windows.len(), last_count(&windows, "queue full "), max_rss);
}

/// Builds and starts tests/fixtures/uffd_ctx.c: a process whose OTEL_CTX page blocks every read from outside.
fn blocking_target() -> WriterProcess {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("agent-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("uffd_ctx");
    common::cc(&["-O1", "-Wall", "-o", exe.to_str().unwrap(), common::test_file("fixtures/uffd_ctx.c").to_str().unwrap()]);
    common::start_writer(Command::new(&exe), false)
}

#[test]
fn a_target_that_blocks_reads_is_skipped_and_every_window_still_reports() {
    let test = "a_target_that_blocks_reads_is_skipped_and_every_window_still_reports";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let hostile = blocking_target();
    // Given by pid, it cannot be read: the agent says so and does not start.
    let out = Command::new(env!("CARGO_BIN_EXE_thread-ctx"))
        .args(["agent", "--pid", &hostile.pid.to_string(), "--process-timeout", "1s", "--duration", "5s", "--pprof-dir", env!("CARGO_TARGET_TMPDIR")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("the target blocks the read"), "--pid of a blocking target: {:?}\n{stderr}", out.status);

    // Host-wide: discovery blocks on it, is replaced after --process-timeout, and meanwhile
    // every window still ends with its status line and the service's samples reach the Collector.
    let collector = Collector::running();
    let w = workload("cpu");
    spans(&w, 2, STARTUP);
    let mut agent =
        Agent::start(&["--interval", "1s", "--hz", "99", "--process-timeout", "8s", "--endpoint", &collector.grpc_endpoint(), "--protocol", "grpc"]);
    let note = agent.wait_line(&format!("process {}: skipped: discovery blocked", hostile.pid), WAIT);
    let windows_at_note = agent.windows().len();
    let noted_at = unix_ns();
    agent.wait_line(&format!("tracking process {}", w.pid), WAIT);
    // A status line per window: 5 more windows of 1 s take well under 30 s even on a busy host.
    let deadline = Instant::now() + Duration::from_secs(30);
    while agent.windows().len() < windows_at_note + 5 {
        assert!(Instant::now() < deadline, "status lines stopped after the blocked read:\n{}", agent.seen.join("\n"));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(agent.windows().iter().any(|l| l.contains(", 1 stuck)")), "the window counts the stuck process:\n{}", agent.seen.join("\n"));
    collector.wait_for(WAIT, "samples taken after the blocked read was given up", |r| {
        r.samples()
            .iter()
            .filter(|s| s.resource.get("process.pid") == Some(&w.pid.to_string()))
            .flat_map(|s| s.timestamps_unix_nano.clone())
            .any(|t| t > noted_at)
    });
    let (code, stderr) = agent.terminate();
    assert_eq!(code, Some(0), "SIGTERM ends the agent with 0 though a worker is still blocked:\n{stderr}");
    eprintln!("{test}: {note}");
}

#[test]
fn agent_alloc_samples_reach_the_collector_linked_to_their_spans() {
    let test = "agent_alloc_samples_reach_the_collector_linked_to_their_spans";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let collector = Collector::running();
    let w = alloc_common::service(&alloc_common::node_of("20"), &[]);
    // A second service on another node binary: its own uprobe, detached when it exits.
    let other = alloc_common::service(&alloc_common::node_of("22"), &[]);
    let before = alloc_common::alloc_uprobe_links();
    let (pid, other_pid) = (w.pid.to_string(), other.pid.to_string());
    let endpoint = collector.grpc_endpoint();
    let mut agent = Agent::start(&[
        "--alloc",
        "--interval",
        "1s",
        "--hz",
        "99",
        "--endpoint",
        &endpoint,
        "--protocol",
        "grpc",
        "--pid",
        &pid,
        "--pid",
        &other_pid,
    ]);
    let tracking = agent.wait_line(&format!("tracking process {pid}"), WAIT);
    assert!(tracking.contains("allocations probed"), "{tracking}");
    agent.wait_line(&format!("tracking process {other_pid}"), WAIT);
    assert_eq!(alloc_common::alloc_uprobe_links(), before + 2, "one uprobe per node binary");
    drop(other);
    agent.wait_line(&format!("process {other_pid} exited"), WAIT);
    assert_eq!(alloc_common::alloc_uprobe_links(), before + 1, "the exited service's uprobe is detached while the agent runs");

    let space_values = |r: &collector_common::Received| -> usize {
        r.samples().iter().filter(|s| s.resource.get("process.pid") == Some(&pid) && s.sample_type.0 == "alloc_space").map(|s| s.values.len()).sum()
    };
    collector.wait_for(WAIT, "allocation samples", |r| space_values(r) >= alloc_common::WANT);
    let (code, stderr) = agent.terminate();
    assert_eq!(code, Some(0), "SIGTERM ends the agent with 0:\n{stderr}");
    assert_eq!(alloc_common::alloc_uprobe_links(), before, "no uprobe left once the agent exited");

    let samples = samples_of(&collector, w.pid);
    let of_type = |t: &str| -> Vec<&ResolvedSample> { samples.iter().filter(|s| s.sample_type.0 == t).collect() };
    let (space, objects) = (of_type("alloc_space"), of_type("alloc_objects"));
    assert_eq!(space.first().map(|s| s.sample_type.1.as_str()), Some("bytes"));
    assert_eq!(objects.first().map(|s| s.sample_type.1.as_str()), Some("count"));
    let counted: i64 = objects.iter().flat_map(|s| &s.values).sum();
    assert_eq!(counted as usize, space.iter().map(|s| s.values.len()).sum::<usize>(), "alloc_objects counts the samples alloc_space weighs");
    let attribution = alloc_common::Attribution::of(space.iter().flat_map(|s| {
        let route = s.attributes.get("http.route").cloned();
        let f = if route.as_deref() == Some("/a") { "allocateInSpanA" } else { "allocateInSpanB" };
        let (span, named) = (s.link.is_some(), in_function(s, f));
        s.values.iter().map(move |v| (route.clone(), span, *v as u64, named))
    }));
    let figures = attribution.check("at the Collector");
    for s in &space {
        assert_eq!(s.resource.get("service.name").map(String::as_str), Some("alloc-spans"), "{:?}", s.resource);
        assert_eq!(s.timestamps_unix_nano.len(), s.values.len(), "one timestamp per allocation sample");
    }

    // `report` reads them back: the allocation table by route, and one route's flame graph of bytes.
    let file = collector.output_file();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("a.svg");
    let r = common::thread_ctx(&[
        "report",
        "--otlp",
        file.to_str().unwrap(),
        "--pid",
        &pid,
        "--attr",
        "http.route=/a",
        "--flamegraph",
        svg.to_str().unwrap(),
        "--kind",
        "alloc",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ratio = alloc_common::table_mb(&r.stdout, "/a") / alloc_common::table_mb(&r.stdout, "/b");
    assert!((2.0..=4.5).contains(&ratio), "report: MB of /a / MB of /b = {ratio:.2}:\n{}", r.stdout);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("Allocated bytes") && text.contains("allocateInSpanA") && !text.contains("allocateInSpanB"), "flame graph of /a's bytes");
    eprintln!("{test}: {figures}; report: A/B MB {ratio:.2}");
}
