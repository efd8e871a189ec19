//! Discovery: every mapped ELF object that defines `otel_thread_ctx_v1`, its
//! access model and the access resolved in the live process, plus the process
//! context. This is what `inspect` prints and what `dump`, `record` and the
//! agent start from.

pub mod build_id;
pub mod container;
pub mod elf_reader;
pub mod elf_tls_symbol;
pub mod host_scan;
pub mod maps;
pub mod process_context;
pub mod process_context_proto;
pub mod remote_memory;
pub mod tls_access;
pub mod tls_model;

use crate::error::Result;
use elf_tls_symbol::{scan_file, WriterObject};
use maps::{read_maps, Mapping};
use process_context::{read_process_context, ProcessContextInfo};
use remote_memory::RemoteMemory;
use std::collections::BTreeMap;
use tls_access::TlsAccess;
use tls_model::{classify, load_bias, resolve, TlsModel};

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
    pub access: std::result::Result<TlsAccess, String>,
}

#[derive(Debug, Clone)]
pub struct Discovery {
    pub pid: i32,
    pub writers: Vec<Writer>,
    /// Mapped objects that could not be opened or parsed (not fatal).
    pub skipped_objects: Vec<String>,
    /// None: no OTEL_CTX mapping. Some(Err): one exists but could not be read.
    pub process_context: Option<std::result::Result<ProcessContextInfo, String>>,
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

    /// The writer object the sampler reads: the first whose access resolved.
    /// Ok(None) without any writer; Err (naming each writer and why) when
    /// writers exist but none resolved. With several (e.g. two addons) only
    /// one is sampled: a thread has one record pointer per writer object.
    pub fn sampled_writer(&self) -> std::result::Result<Option<&Writer>, String> {
        if self.writers.is_empty() {
            return Ok(None);
        }
        match self.writers.iter().find(|w| w.access.is_ok()) {
            Some(w) => Ok(Some(w)),
            None => {
                let why: Vec<String> = self.writers.iter().map(|w| format!("{}: {}", w.path, w.access.as_ref().unwrap_err())).collect();
                Err(format!("process {}: otel_thread_ctx_v1 found but its TLS access could not be resolved: {}", self.pid, why.join("; ")))
            }
        }
    }
}

pub fn discover(pid: i32) -> Result<Discovery> {
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
    for ((_, _, path), mappings) in &objects {
        let first = mappings[0];
        // map_files reaches deleted files and other mount namespaces; fall back to the path.
        let via_map_files = format!("/proc/{pid}/map_files/{:x}-{:x}", first.start, first.end);
        let scanned = scan_file(&via_map_files, path).or_else(|_| scan_file(&format!("/proc/{pid}/root{path}"), path));
        let object = match scanned {
            Ok(Some(o)) => o,
            Ok(None) => continue,
            Err(e) => {
                skipped_objects.push(e.to_string());
                continue;
            }
        };
        writers.push(resolve_writer(path, object, mappings, &mem, page_size));
    }

    let process_context = read_process_context(pid, &maps).map_err(|e| e.to_string()).transpose();
    Ok(Discovery { pid, writers, skipped_objects, process_context })
}

fn resolve_writer(path: &str, object: WriterObject, mappings: &[&Mapping], mem: &RemoteMemory, page: u64) -> Writer {
    let bias = load_bias(&object, mappings, page);
    let classified = classify(&object);
    let mut writer = Writer {
        path: path.to_string(),
        load_bias: bias.unwrap_or(0),
        model: classified.map(|c| c.0),
        got_address: None,
        access: Err(String::new()),
        object,
    };
    writer.access = match (classified, bias) {
        (None, _) => Err("no TLSDESC, DTPMOD64 or TPOFF64 relocation reaches the symbol and it is not in an \
                          executable's PT_TLS (local dynamic is not supported by OTEP 4947)"
            .into()),
        (_, None) => Err("no mapping of the object matches a PT_LOAD segment, cannot compute the load bias".into()),
        (Some((model, reloc)), Some(bias)) => {
            writer.got_address = reloc.map(|r| bias.wrapping_add(r.vaddr));
            resolve(&writer.object, model, reloc, bias, mappings, mem, path).map_err(|e| e.to_string())
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
