//! A real OpenTelemetry Collector for the OTLP tests: the distribution built from Go modules by
//! `scripts/build-collector.sh` (collector/), started on free loopback ports with its own
//! directory and the repository's `collector/config.yaml`, whose file exporter writes every
//! profiles request it receives as length-prefixed protobuf. [`Collector::received`] decodes that
//! file back into `ProfilesData` messages, and [`Received::samples`] resolves their dictionary
//! indices into plain values for assertions (both with `thread_ctx_otlp::received`, which
//! `thread-ctx report` uses too).
//!
//! Also [`SilentListener`], an endpoint that accepts connections and never answers.

use std::cell::Cell;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use thread_ctx_otlp::profiles::ProfilesData;
use thread_ctx_otlp::received::{decode_file_exporter, resolve};
// (Not every test file that includes this module names all of them.)
#[allow(unused_imports)]
pub use thread_ctx_otlp::received::{ResolvedFrame, ResolvedMapping, ResolvedSample};

/// How long a Collector may take to start on a busy machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long to retry a start whose port is taken.
const PORT_RETRY: Duration = Duration::from_secs(20);
/// The line the Collector logs once every component has started.
const READY_LINE: &str = "Everything is ready";

/// The Collector binary: `$OTELCOL_BIN`, or the one `scripts/build-collector.sh` builds.
pub fn collector_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("OTELCOL_BIN") {
        return bin.into();
    }
    let bin = crate::workspace_root().join("target/otelcol/otelcol-thread-ctx");
    assert!(
        bin.exists(),
        "the OTLP tests need the OpenTelemetry Collector at {}: build it with `bash scripts/build-collector.sh` \
         (scripts/setup.sh does; it needs Go 1.26+)",
        bin.display()
    );
    bin
}

/// A free loopback port (bound and released: another process could take it in between, which
/// [`Collector::start`] survives). Taken below the kernel's ephemeral range when there is room:
/// a test that stops its Collector keeps its ports for the restart, and in the meantime the
/// kernel could hand the same port to another test's `bind(0)` or to a connection's source
/// port. Here nothing else picks it: ports go round from a per-process offset, each once.
pub fn free_port() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    const FIRST: usize = 10_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<usize>().ok())
        .unwrap_or(32_768);
    if ephemeral_low > FIRST + 1_000 {
        let span = ephemeral_low - FIRST;
        let offset = std::process::id() as usize * 211;
        for _ in 0..span {
            let port = (FIRST + (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One Collector process (or none yet / any more), with fixed ports across restarts so that an
/// exporter configured once reaches every incarnation.
pub struct Collector {
    bin: PathBuf,
    dir: tempfile::TempDir,
    config: PathBuf,
    pub grpc_port: u16,
    pub http_port: u16,
    child: Option<Child>,
    /// Incarnations so far: each writes its own output and log file.
    generation: u32,
    /// An endpoint was handed out: the ports must not move any more.
    pinned: Cell<bool>,
}

impl Collector {
    /// A Collector on free ports with the repository's configuration, started and ready.
    pub fn running() -> Collector {
        let mut c = Collector::new();
        c.start();
        c
    }

    /// Chosen ports and a directory, not started: for tests where the endpoint is down at first.
    /// (No `Default`: it takes ports and makes a directory, it is not a value.)
    #[allow(clippy::new_without_default)]
    pub fn new() -> Collector {
        let config = std::fs::read_to_string(crate::workspace_root().join("collector/config.yaml")).unwrap();
        Collector::with_config(&config)
    }

    /// Like [`Collector::new`] with another configuration (YAML). It may use
    /// `${env:OTELCOL_GRPC_ENDPOINT}`, `${env:OTELCOL_HTTP_ENDPOINT}` and `${env:OTELCOL_OUTPUT}`.
    pub fn with_config(yaml: &str) -> Collector {
        let dir = tempfile::Builder::new().prefix("otelcol-").tempdir_in(crate::target_tmpdir()).unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(&config, yaml).unwrap();
        Collector {
            bin: collector_binary(),
            dir,
            config,
            grpc_port: free_port(),
            http_port: free_port(),
            child: None,
            generation: 0,
            pinned: Cell::new(false),
        }
    }

    /// `http://127.0.0.1:PORT` of the gRPC receiver.
    pub fn grpc_endpoint(&self) -> String {
        self.pinned.set(true);
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// `http://127.0.0.1:PORT` of the HTTP receiver: a base URL (the exporter adds
    /// `/v1development/profiles`).
    pub fn http_endpoint(&self) -> String {
        self.pinned.set(true);
        format!("http://127.0.0.1:{}", self.http_port)
    }

    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Starts a new incarnation and waits until it is ready. If a port was taken meanwhile by
    /// someone else: before any endpoint was handed out it moves to new ports; after, it tries
    /// the same ports again for a while (an exporter is configured with them).
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "the Collector is already running");
        let start = Instant::now();
        loop {
            self.generation += 1;
            let log_path = self.log_path(self.generation);
            let log = std::fs::File::create(&log_path).unwrap();
            let child = Command::new(&self.bin)
                .arg("--config")
                .arg(&self.config)
                .arg("--feature-gates=+service.profilesSupport")
                .env("OTELCOL_GRPC_ENDPOINT", format!("127.0.0.1:{}", self.grpc_port))
                .env("OTELCOL_HTTP_ENDPOINT", format!("127.0.0.1:{}", self.http_port))
                .env("OTELCOL_OUTPUT", self.output_path(self.generation))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", self.bin.display()));
            self.child = Some(child);
            match self.wait_ready() {
                Ok(()) => return,
                Err(log) if log.contains("address already in use") && start.elapsed() < PORT_RETRY => {
                    self.kill();
                    if self.pinned.get() {
                        std::thread::sleep(Duration::from_millis(500));
                    } else {
                        self.grpc_port = free_port();
                        self.http_port = free_port();
                    }
                }
                Err(log) => panic!("the Collector did not start:\n{log}"),
            }
        }
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            let log = self.log();
            if log.contains(READY_LINE) {
                return Ok(());
            }
            if !self.is_running() {
                self.child = None;
                return Err(log);
            }
            if start.elapsed() > START_TIMEOUT {
                self.kill();
                return Err(format!("not ready after {START_TIMEOUT:?}:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it gracefully (SIGTERM): it drains its pipeline and closes its output.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on the pid of our own child, not yet reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while child.try_wait().ok().flatten().is_none() {
                if start.elapsed() > Duration::from_secs(30) {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.wait();
        }
    }

    /// Kills it (SIGKILL): what a crash looks like to the exporter.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills it and starts a new incarnation on the same ports.
    pub fn restart(&mut self) {
        self.kill();
        self.start();
    }

    /// The log of the current (or last) incarnation.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path(self.generation)).unwrap_or_default()
    }

    fn log_path(&self, generation: u32) -> PathBuf {
        self.dir.path().join(format!("collector-{generation}.log"))
    }

    fn output_path(&self, generation: u32) -> PathBuf {
        self.dir.path().join(format!("received-{generation}.pb"))
    }

    /// The file the current (or last) incarnation's file exporter writes.
    pub fn output_file(&self) -> PathBuf {
        self.output_path(self.generation)
    }

    /// Everything every incarnation wrote so far, in order.
    pub fn received(&self) -> Received {
        let mut messages = Vec::new();
        for generation in 1..=self.generation {
            let Ok(bytes) = std::fs::read(self.output_path(generation)) else { continue };
            messages.extend(decode_file(&bytes));
        }
        Received { messages }
    }

    /// Polls [`received`](Self::received) until `done` holds, for at most `timeout`; panics
    /// with what arrived (and the log) otherwise.
    pub fn wait_for(&self, timeout: Duration, what: &str, done: impl Fn(&Received) -> bool) -> Received {
        let start = Instant::now();
        loop {
            let received = self.received();
            if done(&received) {
                return received;
            }
            if start.elapsed() > timeout {
                panic!(
                    "waited {timeout:?} for the Collector to receive {what}; it has {} messages with {} samples.\nlog:\n{}",
                    received.messages.len(),
                    received.samples().len(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The file exporter's `proto` format, decoded by the library (`thread-ctx report` reads it the
/// same way). A message still being written (an incomplete tail) is left for the next read.
pub fn decode_file(bytes: &[u8]) -> Vec<ProfilesData> {
    decode_file_exporter(bytes).unwrap_or_else(|e| panic!("{e:#}")).messages
}

/// What the Collector received: one `ProfilesData` per request it exported (the file exporter
/// writes each batch it gets as it got it).
#[derive(Debug, Default)]
pub struct Received {
    pub messages: Vec<ProfilesData>,
}

impl Received {
    /// Every sample of every message, with its indices resolved; panics on a malformed message.
    pub fn samples(&self) -> Vec<ResolvedSample> {
        self.messages.iter().flat_map(|m| resolve(m).unwrap_or_else(|e| panic!("a malformed message: {e:#}"))).collect()
    }
}

/// A TCP endpoint that accepts connections and never reads or answers: what an exporter sees
/// from a hung Collector or a black-holing proxy.
pub struct SilentListener {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SilentListener {
    pub fn start() -> SilentListener {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (Arc::clone(&accepted), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut open: Vec<TcpStream> = Vec::new(); // held open, never read
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        a.fetch_add(1, Ordering::Relaxed);
                        open.push(stream);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        SilentListener { addr, accepted, stop, thread: Some(thread) }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for SilentListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
