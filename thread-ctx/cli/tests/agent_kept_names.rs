//! Names kept across the agent's windows stay right, as root (eBPF), into a real Collector: a
//! node process burns, phase after phase, a new function of the same shape (fixtures/kept_names.js:
//! each made by `new Function`, deoptimized halfway, then dropped and collected with compaction,
//! so that a later phase's objects may take the addresses of an earlier phase's), sampled at
//! 499 Hz in 1 s windows:
//! - every sample naming a phase's function was taken while that phase ran (a name kept past
//!   its objects' death would name a later phase's samples by an earlier function);
//! - the agent kept names across windows (its status line counts JS frames reused after their
//!   check), so the test is about the kept names, not a fresh naming each window.
//!
//! Whether a later phase's frame ever gets an earlier one's key depends on where V8 puts its
//! objects: a build whose checks always passed also passed this test in a run here (no key
//! collided). The check itself is tested where the heap is made to order: thread-ctx-v8's
//! `dependencies` tests replace a function and a code object under a kept name.

use thread_ctx_test_support::collector as collector_common;
use thread_ctx_test_support::process as common;
mod profile_common;

use collector_common::Collector;
use common::{ebpf_or_skip, one_at_a_time};
use profile_common::fixture;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(120);
/// Phases whose function must have been sampled before the check.
const PHASES: usize = 8;
/// A sample's time against its phase's bounds (Date.now() in the fixture, the sample's own clock).
const SLACK_MS: u64 = 50;

/// A child whose stdout (or stderr) lines are collected; killed on drop.
struct Running {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Running {
    fn start(mut cmd: Command, stderr: bool) -> Running {
        let mut child = if stderr { cmd.stdout(Stdio::null()).stderr(Stdio::piped()) } else { cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()) }
            .spawn()
            .expect("spawning");
        let out: Box<dyn std::io::Read + Send> = if stderr { Box::new(child.stderr.take().unwrap()) } else { Box::new(child.stdout.take().unwrap()) };
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Running { child, lines }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (name, start ms, end ms) of each phase the fixture finished.
fn phases(lines: &[String]) -> Vec<(String, u64, u64)> {
    lines
        .iter()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 4 && w[0] == "phase").then(|| (w[1].to_string(), w[2].parse().unwrap(), w[3].parse().unwrap()))
        })
        .collect()
}

/// The status line's running count of kept JS names reused (0 before any).
fn js_reused(stderr: &[String]) -> u64 {
    stderr
        .iter()
        .rev()
        .find_map(|l| l.split_once("names kept across windows: JS frames ").map(|(_, r)| r.split(" reused").next().unwrap_or("").to_string()))
        .and_then(|r| r.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn kept_names_never_outlive_the_code_they_were_named_from() {
    let test = "kept_names_never_outlive_the_code_they_were_named_from";
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let collector = Collector::running();
    let mut node = Command::new("node");
    node.args(["--expose-gc", "--allow-natives-syntax", "--compact-on-every-full-gc"]).arg(fixture("kept_names.js")).args(["1200", "1000"]);
    let service = Running::start(node, false);
    let pid = service.child.id().to_string();
    let bin = std::env::var_os("THREAD_CTX_AGENT").map(PathBuf::from).unwrap_or_else(|| env!("CARGO_BIN_EXE_thread-ctx").into());
    let mut agent = Command::new(bin);
    agent
        .args(["agent", "--interval", "1s", "--hz", "499", "--pid", &pid, "--endpoint", &collector.grpc_endpoint(), "--protocol", "grpc"])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    let agent = Running::start(agent, true);

    let sampled_phases = |r: &collector_common::Received| {
        let names: std::collections::BTreeSet<String> =
            r.samples().iter().flat_map(|s| s.frames.iter().filter(|f| f.function.starts_with("gen")).map(|f| f.function.clone())).collect();
        names.len()
    };
    let received = collector.wait_for(WAIT, "samples of enough phases' functions, and kept names reused", |r| {
        sampled_phases(r) >= PHASES && js_reused(&agent.lines()) > 0
    });
    let stderr = agent.lines();
    let phases = phases(&service.lines());
    let (mut right, mut wrong) = (0, Vec::new());
    for s in received.samples() {
        let Some(f) = s.frames.iter().find(|f| f.function.starts_with("gen")) else { continue };
        let Some((_, start, end)) = phases.iter().find(|(n, _, _)| *n == f.function) else { continue }; // its phase not over yet
        for &t in &s.timestamps_unix_nano {
            let ms = t / 1_000_000;
            if ms + SLACK_MS >= *start && ms <= end + SLACK_MS {
                right += 1;
            } else {
                wrong.push(format!("{} at {ms} (its phase {start}..{end})", f.function));
            }
        }
    }
    eprintln!("{test}: {right} samples named by their phase's function, {} not; JS frames reused: {}", wrong.len(), js_reused(&stderr));
    assert!(right >= 100, "too few samples of the phases' functions ({right}):\n{}", stderr.join("\n"));
    assert!(wrong.is_empty(), "samples named by a function not running then: {:?}\n{}", &wrong[..wrong.len().min(10)], stderr.join("\n"));
    assert!(js_reused(&stderr) > 0, "no kept name was reused:\n{}", stderr.join("\n"));
}
