//! Discovery: every mapped ELF object that defines a thread-context TLS symbol
//! (`otel_thread_ctx_v1`, or `otel_thread_ctx_nodejs_v1` gated on the
//! `nodejs_v1_dev` schema), its access model and the access resolved in the
//! live process, plus the process context (and, for a nodejs writer, the V8
//! layout its walk uses). This is what `inspect` prints and what `dump`,
//! `record` and the agent start from.

use crate::elf_tls_symbol::{scan_all, TlsSymbol, WriterObject};
use crate::error::{Error, ErrorKind, Result};
use crate::maps::{read_maps, Mapping};
use crate::nodejs::layout::{layout_for, LayoutError, NodejsLayout, SCHEMA_VERSION as NODEJS_SCHEMA};
use crate::process_context::{read_process_context, ProcessContextInfo};
use crate::remote_memory::RemoteMemory;
use crate::tls_access::TlsAccess;
use crate::tls_model::{classify, load_bias, resolve, TlsModel};
use crate::v8_version::{V8Version, V8VersionError};
use crate::{elf_reader, process, tls_model};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One writer object in the target process.
#[derive(Debug, Clone)]
pub struct Writer {
    /// Path as the maps file names it.
    pub path: String,
    pub load_bias: u64,
    pub object: WriterObject,
    /// None when no supported relocation reaches the symbol (e.g. local dynamic).
    pub model: Option<TlsModel>,
    /// Runtime address of the descriptor / GOT slot used, when the model has one.
    pub got_address: Option<u64>,
    /// The resolved access, or why it could not be resolved.
    pub access: std::result::Result<TlsAccess, Unresolved>,
    /// For an `otel_thread_ctx_nodejs_v1` writer: the V8 layout its walk uses,
    /// or why it is refused (schema not declared, unknown or implausible layout).
    /// None for an `otel_thread_ctx_v1` writer.
    pub nodejs: Option<std::result::Result<NodejsLayout, LayoutError>>,
}

/// Why a writer object's TLS access is not known.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unresolved {
    #[error(
        "no TLSDESC, DTPMOD64 or TPOFF64 relocation reaches the symbol and it is not in an executable's PT_TLS (local dynamic is not supported by OTEP 4947)"
    )]
    NoRelocation,
    #[error("no mapping of the object matches a PT_LOAD segment, cannot compute the load bias")]
    NoLoadBias,
    #[error(transparent)]
    Resolve(Arc<Error>),
}

/// Why the sampler cannot read records through a writer object.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unusable {
    #[error(transparent)]
    Access(Unresolved),
    #[error(transparent)]
    Layout(LayoutError),
}

/// How a process's threads reach their record: the TLS slot every thread
/// finds through `access`, and for a `nodejs_v1_dev` writer the V8 layout of
/// the walk from the struct in that slot to the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordReach {
    pub access: TlsAccess,
    pub nodejs: Option<NodejsLayout>,
}

impl RecordReach {
    /// An `otel_thread_ctx_v1` writer's: the slot holds the record pointer.
    pub fn tls(access: TlsAccess) -> Self {
        RecordReach { access, nodejs: None }
    }
}

impl Writer {
    /// How threads reach their record through this writer; None when it is unusable.
    pub fn record_reach(&self) -> Option<RecordReach> {
        let access = *self.access.as_ref().ok()?;
        match &self.nodejs {
            None => Some(RecordReach::tls(access)),
            Some(Ok(layout)) => Some(RecordReach { access, nodejs: Some(*layout) }),
            Some(Err(_)) => None,
        }
    }

    /// Its symbol's name, for messages.
    pub fn symbol_name(&self) -> &'static str {
        self.object.symbol.name()
    }

    /// Why the sampler cannot read records through it, if it cannot.
    pub fn unusable(&self) -> Option<Unusable> {
        match (&self.access, &self.nodejs) {
            (Err(e), _) => Some(Unusable::Access(e.clone())),
            (Ok(_), Some(Err(e))) => Some(Unusable::Layout(e.clone())),
            _ => None,
        }
    }
}

/// A mapped object that could not be opened or parsed: the others are read.
#[derive(Debug, Clone)]
pub struct SkippedObject {
    /// The object's path, as the maps file names it.
    pub path: String,
    pub error: Arc<Error>,
}

impl std::fmt::Display for SkippedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

#[derive(Debug, Clone)]
pub struct Discovery {
    pub pid: i32,
    pub writers: Vec<Writer>,
    /// Mapped objects that could not be opened or parsed (not fatal).
    pub skipped_objects: Vec<SkippedObject>,
    /// None: no OTEL_CTX mapping. Some(Err): one exists but could not be read.
    pub process_context: Option<std::result::Result<ProcessContextInfo, Arc<Error>>>,
}

/// A process without a usable writer object, and what the user can do about it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriterError {
    #[error(transparent)]
    None(#[from] NoWriter),
    #[error("process {pid}: no thread-context writer can be read: {}", why.iter().map(|(symbol, path, e)| format!("{symbol} in {path}: {e}")).collect::<Vec<_>>().join("; "))]
    Unusable { pid: i32, why: Vec<(&'static str, String, Unusable)> },
}

impl WriterError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            WriterError::None(e) => e.kind(),
            WriterError::Unusable { .. } => ErrorKind::Other,
        }
    }
}

/// No mapped object defines a thread-context symbol, as far as they could be read.
#[derive(Debug, Clone)]
pub struct NoWriter {
    pub pid: i32,
    /// Its command name, when readable.
    pub comm: Option<String>,
    /// Objects the reader was not allowed to read: the symbol may be in one of them.
    pub denied: Vec<SkippedObject>,
    /// This project's addon is mapped but could not be read.
    pub unreadable_addon: Option<SkippedObject>,
}

impl NoWriter {
    /// No permission when some objects could not be read for want of it, else no writer.
    pub fn kind(&self) -> ErrorKind {
        if self.denied.is_empty() {
            ErrorKind::NoWriter
        } else {
            ErrorKind::NoPermission
        }
    }
}

impl std::error::Error for NoWriter {}

impl std::fmt::Display for NoWriter {
    /// What was wrong; with objects denied, the caller says who may read them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = match &self.comm {
            Some(c) => format!("process {} ({})", self.pid, crate::printable::printable(c)),
            None => format!("process {}", self.pid),
        };
        if let Some(first) = self.denied.first() {
            let more = if self.denied.len() > 1 { format!(" and {} more", self.denied.len() - 1) } else { String::new() };
            return write!(f, "{who}: its mapped objects could not all be read to look for otel_thread_ctx_v1 ({first}{more})");
        }
        let hint = match &self.unreadable_addon {
            Some(o) => format!("its otel-thread-ctx addon could not be read: {o}"),
            None => "load otel-thread-ctx in it: `require('otel-thread-ctx')` and install its context manager \
                     (`register()`, or `new ThreadContextManager()` passed to the SDK); its addon defines the symbol"
                .into(),
        };
        write!(f, "{who} has no otel_thread_ctx_v1 or otel_thread_ctx_nodejs_v1 (no mapped ELF object defines either): {hint}")
    }
}

impl Discovery {
    /// The attribute key map from the process context, when published.
    pub fn key_map(&self) -> Option<&[String]> {
        self.context().and_then(|pc| pc.attribute_key_map.as_deref())
    }

    /// The process context, when published and readable.
    pub fn context(&self) -> Option<&ProcessContextInfo> {
        self.process_context.as_ref().and_then(|r| r.as_ref().ok())
    }

    /// `service.name` of the process context's resource.
    pub fn service_name(&self) -> Option<&str> {
        self.context()?.resource.get("service.name")?.as_str()
    }

    /// The writer object the sampler reads: the first usable one, a
    /// `nodejs_v1_dev` writer first when the process context declares that
    /// schema, else an `otel_thread_ctx_v1` one. Ok(None) without any writer;
    /// Err (naming each writer and why) when writers exist but none is usable.
    /// With several (e.g. two addons) only one is sampled: a thread has one
    /// record per writer object.
    pub fn sampled_writer(&self) -> std::result::Result<&Writer, WriterError> {
        if self.writers.is_empty() {
            return Err(self.no_writer().into());
        }
        let nodejs_first = self.context().and_then(|pc| pc.schema_version.as_deref()) == Some(NODEJS_SCHEMA);
        let preferred = |w: &&Writer| (w.object.symbol == TlsSymbol::NodejsV1) == nodejs_first;
        let usable = |w: &&Writer| w.unusable().is_none();
        match self.writers.iter().filter(usable).find(preferred).or_else(|| self.writers.iter().find(usable)) {
            Some(w) => Ok(w),
            None => Err(WriterError::Unusable {
                pid: self.pid,
                why: self.writers.iter().filter_map(|w| Some((w.symbol_name(), w.path.clone(), w.unusable()?))).collect(),
            }),
        }
    }

    /// What to tell the user of a process without a writer object: why none was found.
    pub fn no_writer(&self) -> NoWriter {
        let denied = self.skipped_objects.iter().filter(|o| o.error.kind() == ErrorKind::NoPermission).cloned().collect();
        let unreadable_addon = self.skipped_objects.iter().find(|o| o.path.contains("otel-thread-ctx")).cloned();
        NoWriter { pid: self.pid, comm: process::comm(self.pid), denied, unreadable_addon }
    }
}

/// Everything a process publishes, read now; [`Error::NoProcess`] when it does not exist.
pub fn discover(pid: i32) -> Result<Discovery> {
    if !process::exists(pid) {
        return Err(Error::NoProcess { pid });
    }
    let maps = read_maps(pid)?;
    let mem = RemoteMemory::new(pid);
    let page_size = page_size();

    // Group file-backed mappings by object (device + inode + path).
    let mut objects: BTreeMap<(String, u64, String), Vec<&Mapping>> = BTreeMap::new();
    for m in maps.iter().filter(|m| m.is_file_backed()) {
        objects.entry((m.dev.clone(), m.inode, m.path().to_string())).or_default().push(m);
    }

    let mut writers = Vec::new();
    let mut skipped_objects = Vec::new();
    let mut v8_version: Option<std::result::Result<V8Version, V8VersionError>> = None;
    for ((_, _, path), mappings) in &objects {
        let first = mappings[0];
        // map_files reaches deleted files and other mount namespaces; fall back to the path.
        let via_map_files = format!("/proc/{pid}/map_files/{:x}-{:x}", first.start, first.end);
        let scanned = scan_object(&via_map_files, path).or_else(|_| scan_object(&format!("/proc/{pid}/root{path}"), path));
        let (found, v8_symbols) = match scanned {
            Ok(s) => s,
            Err(e) => {
                skipped_objects.push(SkippedObject { path: path.clone(), error: Arc::new(e) });
                continue;
            }
        };
        if let (Some(syms), None) = (v8_symbols, &v8_version) {
            let bias = tls_model::load_bias_of(&syms.load_segments, mappings, page_size);
            v8_version =
                Some(bias.ok_or_else(|| V8VersionError::NotMapped { path: path.clone() }).and_then(|b| crate::v8_version::read(&syms, b, &mem)));
        }
        writers.extend(found.into_iter().map(|object| resolve_writer(path, object, mappings, &mem, page_size)));
    }

    let process_context = read_process_context(pid, &maps).map_err(Arc::new).transpose();
    let mut d = Discovery { pid, writers, skipped_objects, process_context };
    let v8 = v8_version.unwrap_or(Err(V8VersionError::NoSymbols));
    for w in d.writers.iter_mut().filter(|w| w.object.symbol == TlsSymbol::NodejsV1) {
        w.nodejs = Some(nodejs_layout(d.process_context.as_ref(), v8.clone()));
    }
    Ok(d)
}

/// The `nodejs_v1_dev` gate and layout: the process context must declare the
/// schema (a struct nobody declared is not read), then [`layout_for`].
fn nodejs_layout(
    pc: Option<&std::result::Result<ProcessContextInfo, Arc<Error>>>,
    v8: std::result::Result<V8Version, V8VersionError>,
) -> std::result::Result<NodejsLayout, LayoutError> {
    let pc = match pc {
        None => return Err(LayoutError::NotDeclared),
        Some(Err(e)) => return Err(LayoutError::ContextUnreadable(e.clone())),
        Some(Ok(pc)) => pc,
    };
    match pc.schema_version.as_deref() {
        Some(NODEJS_SCHEMA) => layout_for(&pc.attributes, v8),
        other => Err(LayoutError::OtherSchema(other.map(str::to_string))),
    }
}

/// One open of a mapped object: the thread-context symbols it defines and
/// where it keeps V8's version numbers, if it does.
fn scan_object(open_path: &str, display: &str) -> Result<(Vec<WriterObject>, Option<crate::v8_version::VersionSymbols>)> {
    let Some(data) = elf_reader::open(open_path).map_err(|e| Error::io(open_path, e))? else {
        return Ok((Vec::new(), None));
    };
    let found = scan_all(&data, display)?;
    // Only objects that define the names are V8; a malformed table elsewhere is not this object's problem.
    let v8 = crate::v8_version::scan(&data, display).unwrap_or(None);
    Ok((found, v8))
}

fn resolve_writer(path: &str, object: WriterObject, mappings: &[&Mapping], mem: &RemoteMemory, page: u64) -> Writer {
    let bias = load_bias(&object, mappings, page);
    let classified = classify(&object);
    let mut writer = Writer {
        path: path.to_string(),
        load_bias: bias.unwrap_or(0),
        model: classified.map(|c| c.0),
        got_address: None,
        access: Err(Unresolved::NoRelocation),
        nodejs: None,
        object,
    };
    writer.access = match (classified, bias) {
        (None, _) => Err(Unresolved::NoRelocation),
        (_, None) => Err(Unresolved::NoLoadBias),
        (Some((model, reloc)), Some(bias)) => {
            writer.got_address = reloc.map(|r| bias.wrapping_add(r.vaddr));
            resolve(&writer.object, model, reloc, bias, mappings, mem, path).map_err(|e| Unresolved::Resolve(Arc::new(e)))
        }
    };
    writer
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}
