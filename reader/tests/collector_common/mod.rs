//! A real OpenTelemetry Collector for the OTLP tests: the distribution built from Go modules by
//! `scripts/build-collector.sh` (collector/), started on free loopback ports with its own
//! directory and the repository's `collector/config.yaml`, whose file exporter writes every
//! profiles request it receives as length-prefixed protobuf. [`Collector::received`] decodes that
//! file back into `ProfilesData` messages, and [`Received::samples`] resolves their dictionary
//! indices into plain values for assertions.
//!
//! Also [`SilentListener`], an endpoint that accepts connections and never answers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prost::Message;
use thread_ctx::otlp::common::{any_value, AnyValue};
use thread_ctx::otlp::profiles::{ProfilesData, ProfilesDictionary};

/// How long a Collector may take to start on a busy machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The line the Collector logs once every component has started.
const READY_LINE: &str = "Everything is ready";

/// The Collector binary: `$OTELCOL_BIN`, or the one `scripts/build-collector.sh` builds.
pub fn collector_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("OTELCOL_BIN") {
        return bin.into();
    }
    let bin = workspace_root().join("target/otelcol/otelcol-thread-ctx");
    assert!(
        bin.exists(),
        "the OTLP tests need the OpenTelemetry Collector at {}: build it with `bash scripts/build-collector.sh` \
         (scripts/setup.sh does; it needs Go 1.26+)",
        bin.display()
    );
    bin
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A free loopback port (bound and released: another process could take it in between, which
/// [`Collector::start`] survives by retrying with new ports).
pub fn free_port() -> u16 {
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
}

impl Collector {
    /// A Collector on free ports with the repository's configuration, started and ready.
    pub fn running() -> Collector {
        let mut c = Collector::new();
        c.start();
        c
    }

    /// Chosen ports and a directory, not started: for tests where the endpoint is down at first.
    pub fn new() -> Collector {
        let config = std::fs::read_to_string(workspace_root().join("collector/config.yaml")).unwrap();
        Collector::with_config(&config)
    }

    /// Like [`Collector::new`] with another configuration (YAML). It may use
    /// `${env:OTELCOL_GRPC_ENDPOINT}`, `${env:OTELCOL_HTTP_ENDPOINT}` and `${env:OTELCOL_OUTPUT}`.
    pub fn with_config(yaml: &str) -> Collector {
        let dir = tempfile::Builder::new()
            .prefix("otelcol-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
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
        }
    }

    /// `http://127.0.0.1:PORT` of the gRPC receiver.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// `http://127.0.0.1:PORT` of the HTTP receiver: a base URL (the exporter adds
    /// `/v1development/profiles`).
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Starts a new incarnation (on the same ports) and waits until it is ready. If a port was
    /// taken meanwhile by someone else, it moves to new ports, up to three times; so read the
    /// endpoints after `start` when the first start may have to move.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "the Collector is already running");
        for attempt in 0..3 {
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
                Err(log) if log.contains("address already in use") && attempt < 2 => {
                    self.kill();
                    self.grpc_port = free_port();
                    self.http_port = free_port();
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

/// The file exporter's `proto` format: each message preceded by its size, 4 bytes big endian.
/// A message still being written (an incomplete tail) is left for the next read.
pub fn decode_file(mut bytes: &[u8]) -> Vec<ProfilesData> {
    let mut messages = Vec::new();
    while bytes.len() >= 4 {
        let size = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        let Some(message) = bytes.get(4..4 + size) else { break };
        messages.push(ProfilesData::decode(message).unwrap_or_else(|e| panic!("undecodable ProfilesData: {e}")));
        bytes = &bytes[4 + size..];
    }
    messages
}

/// What the Collector received: one `ProfilesData` per request it exported (the file exporter
/// writes each batch it gets as it got it).
#[derive(Debug, Default)]
pub struct Received {
    pub messages: Vec<ProfilesData>,
}

impl Received {
    /// Every sample of every message, with its indices resolved.
    pub fn samples(&self) -> Vec<ResolvedSample> {
        self.messages.iter().flat_map(resolve).collect()
    }
}

/// A sample with everything its indices point at, as plain values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedSample {
    /// The resource's attributes (values as text, see [`value_text`]).
    pub resource: BTreeMap<String, String>,
    pub scope_name: String,
    /// The profile's `sample_type` (type, unit) and `period_type` with `period`.
    pub sample_type: (String, String),
    pub period: (String, String, i64),
    pub profile_attributes: BTreeMap<String, String>,
    /// Leaf first, one entry per line of each location (inlined frames expand).
    pub frames: Vec<ResolvedFrame>,
    /// The link's trace and span id, `None` for index 0 (no link).
    pub link: Option<(Vec<u8>, Vec<u8>)>,
    pub attributes: BTreeMap<String, String>,
    pub values: Vec<i64>,
    pub timestamps_unix_nano: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedFrame {
    pub function: String,
    pub system_name: String,
    pub file: String,
    pub line: i64,
    pub address: u64,
    /// The location's attributes (e.g. `profile.frame.type`).
    pub attributes: BTreeMap<String, String>,
    /// `None` for mapping index 0.
    pub mapping: Option<ResolvedMapping>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedMapping {
    pub filename: String,
    pub memory_start: u64,
    pub memory_limit: u64,
    pub file_offset: u64,
    /// E.g. `process.executable.build_id.gnu`.
    pub attributes: BTreeMap<String, String>,
}

/// Resolves every sample of one message against its dictionary. Panics, naming the table, on
/// an index out of range: the message is malformed.
pub fn resolve(data: &ProfilesData) -> Vec<ResolvedSample> {
    let default = ProfilesDictionary::default();
    let d = data.dictionary.as_ref().unwrap_or(&default);
    let mut out = Vec::new();
    for rp in &data.resource_profiles {
        let resource: BTreeMap<String, String> = rp
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .map(|kv| {
                // The Collector moves resource attribute keys and string values into the
                // dictionary's string table (key_strindex, string_value_strindex).
                let key = if kv.key.is_empty() { string(d, kv.key_strindex) } else { kv.key.clone() };
                (key, kv.value.as_ref().map(|v| value_text(d, v)).unwrap_or_default())
            })
            .collect();
        for sp in &rp.scope_profiles {
            let scope_name = sp.scope.as_ref().map(|s| s.name.clone()).unwrap_or_default();
            for p in &sp.profiles {
                let vt = |v: &Option<thread_ctx::otlp::profiles::ValueType>| {
                    v.as_ref().map_or((String::new(), String::new()), |v| {
                        (string(d, v.type_strindex), string(d, v.unit_strindex))
                    })
                };
                let sample_type = vt(&p.sample_type);
                let (pt, pu) = vt(&p.period_type);
                let profile_attributes = attributes(d, &p.attribute_indices);
                for s in &p.samples {
                    let stack = at(&d.stack_table, s.stack_index, "stack_table");
                    let frames = stack
                        .location_indices
                        .iter()
                        .flat_map(|&li| location_frames(d, li))
                        .collect();
                    let link = (s.link_index != 0).then(|| {
                        let l = at(&d.link_table, s.link_index, "link_table");
                        (l.trace_id.clone(), l.span_id.clone())
                    });
                    out.push(ResolvedSample {
                        resource: resource.clone(),
                        scope_name: scope_name.clone(),
                        sample_type: sample_type.clone(),
                        period: (pt.clone(), pu.clone(), p.period),
                        profile_attributes: profile_attributes.clone(),
                        frames,
                        link,
                        attributes: attributes(d, &s.attribute_indices),
                        values: s.values.clone(),
                        timestamps_unix_nano: s.timestamps_unix_nano.clone(),
                    });
                }
            }
        }
    }
    out
}

fn location_frames(d: &ProfilesDictionary, index: i32) -> Vec<ResolvedFrame> {
    let loc = at(&d.location_table, index, "location_table");
    let mapping = (loc.mapping_index != 0).then(|| {
        let m = at(&d.mapping_table, loc.mapping_index, "mapping_table");
        ResolvedMapping {
            filename: string(d, m.filename_strindex),
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            attributes: attributes(d, &m.attribute_indices),
        }
    });
    let frame = |function: String, system_name: String, file: String, line: i64| ResolvedFrame {
        function,
        system_name,
        file,
        line,
        address: loc.address,
        attributes: attributes(d, &loc.attribute_indices),
        mapping: mapping.clone(),
    };
    if loc.lines.is_empty() {
        return vec![frame(String::new(), String::new(), String::new(), 0)];
    }
    loc.lines
        .iter()
        .map(|l| {
            let f = at(&d.function_table, l.function_index, "function_table");
            frame(
                string(d, f.name_strindex),
                string(d, f.system_name_strindex),
                string(d, f.filename_strindex),
                l.line,
            )
        })
        .collect()
}

fn attributes(d: &ProfilesDictionary, indices: &[i32]) -> BTreeMap<String, String> {
    indices
        .iter()
        .map(|&i| {
            let kv = at(&d.attribute_table, i, "attribute_table");
            (string(d, kv.key_strindex), kv.value.as_ref().map(|v| value_text(d, v)).unwrap_or_default())
        })
        .collect()
}

fn string(d: &ProfilesDictionary, index: i32) -> String {
    at(&d.string_table, index, "string_table").clone()
}

fn at<'a, T>(table: &'a [T], index: i32, name: &str) -> &'a T {
    usize::try_from(index)
        .ok()
        .and_then(|i| table.get(i))
        .unwrap_or_else(|| panic!("{name}[{index}] is out of range (the table has {} entries)", table.len()))
}

/// An attribute value as text: strings as they are (string-table references resolved), numbers
/// and booleans in decimal, bytes in hex, arrays and maps in a JSON-like form.
pub fn value_text(d: &ProfilesDictionary, v: &AnyValue) -> String {
    let text = |v: &AnyValue| value_text(d, v);
    match &v.value {
        None => String::new(),
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::StringValueStrindex(i)) => string(d, *i),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(f)) => f.to_string(),
        Some(any_value::Value::BytesValue(b)) => hex(b),
        Some(any_value::Value::ArrayValue(a)) => {
            format!("[{}]", a.values.iter().map(text).collect::<Vec<_>>().join(","))
        }
        Some(any_value::Value::KvlistValue(l)) => format!(
            "{{{}}}",
            l.values
                .iter()
                .map(|kv| {
                    let key = if kv.key.is_empty() { string(d, kv.key_strindex) } else { kv.key.clone() };
                    format!("{key}={}", kv.value.as_ref().map(text).unwrap_or_default())
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
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
