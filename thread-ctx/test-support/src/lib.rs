//! What the integration tests of several crates share, so that each crate's library tests live in
//! that crate (`cargo test -p thread-ctx-otlp` runs the Collector tests): writer processes and
//! their fixtures, and the `thread-ctx` binary run on them ([`process`]), the process contexts
//! they publish ([`process_context`]); the real Collector
//! ([`collector`]) and an example request ([`otlp_request`]), feature `otlp`; the eBPF sampler
//! run on a pid ([`sampler`]), feature `sampler`; what a workload logged of its spans
//! ([`timeline`]). A dev-dependency only: no library depends on it.
//!
//! The fixtures (C and JS writers, services) stay beside the binary's tests, in
//! `thread-ctx/cli/tests/`; the paths cargo gives an integration test at build time (its target
//! directory, the binary) are found here at run time instead, from the test's own executable.

#[cfg(feature = "otlp")]
pub mod collector;
#[cfg(feature = "otlp")]
pub mod otlp_request;
pub mod process;
pub mod process_context;
#[cfg(feature = "sampler")]
pub mod sampler;
pub mod timeline;

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

/// The profile directory the running test was built into (`target/release/`): a test's
/// executable is in its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own executable");
    exe.parent().and_then(Path::parent).expect("a test executable in target/PROFILE/deps/").to_path_buf()
}

/// A directory for the test's files, as cargo's `CARGO_TARGET_TMPDIR` (`target/tmp/`).
pub fn target_tmpdir() -> PathBuf {
    let dir = profile_dir().parent().expect("target/").join("tmp");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// The `thread-ctx` binary of the same build (what cargo gives the binary's own tests as
/// `CARGO_BIN_EXE_thread-ctx`); fails clearly when it is not built.
pub fn thread_ctx_binary() -> PathBuf {
    let bin = profile_dir().join("thread-ctx");
    assert!(bin.exists(), "expected the thread-ctx binary at {}: build it (cargo build -p thread-ctx) or run the test from its crate", bin.display());
    bin
}
