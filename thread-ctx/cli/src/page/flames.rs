//! The flame graphs the page draws, from the profiles file `report --otlp` reads (read the same
//! way: one message at a time, each sample added to its process's profile): the folded stacks
//! of one request (its trace id), one route or one holder (its `http.route`), of one kind of
//! samples, across every process that sent them, each process a root of its own. The frames
//! are named as the agent sent them (TypeScript through source maps) and as `report --otlp
//! --folded` writes them.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use thread_ctx_discovery::ids::parse_hex;
use thread_ctx_model::Filter;
use thread_ctx_otlp::into_profile::{Processes, ReceivedProcess};
use thread_ctx_otlp::received::{resolve_each, scan_exporter_file};
use thread_ctx_output::file_error::{FileError, Result};
use thread_ctx_output::flame;
use thread_ctx_output::kind::Kind;
use thread_ctx_output::summary::ROUTE_KEY;

/// Stacks drawn at most, the heaviest: a flame graph of more is not read, only waited for.
const STACKS_SHOWN: usize = 3000;

/// What a flame graph is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Of {
    Trace,
    Route,
}

impl Of {
    pub fn parse(s: &str) -> Option<Of> {
        match s {
            "trace" => Some(Of::Trace),
            "route" | "holder" => Some(Of::Route),
            _ => None,
        }
    }
}

/// The kinds the page offers, by the name it gives them (`report --kind`'s).
pub const KINDS: [Kind; 3] = [Kind::Cpu, Kind::OffCpu, Kind::Alloc];

pub fn kind(name: &str) -> Option<Kind> {
    KINDS.into_iter().find(|k| k.name() == name)
}

pub struct Flames {
    processes: Vec<ReceivedProcess>,
}

impl Flames {
    pub fn read(path: &Path) -> Result<Flames> {
        let mut received = Processes::default();
        let mut messages = 0usize;
        scan_exporter_file(path, |m| {
            messages += 1;
            resolve_each(&m, |s| received.add(&s)).map_err(|e| FileError::Invalid(format!("{}: message {messages}: {e}", path.display())))
        })?;
        Ok(Flames { processes: received.finish() })
    }

    /// The kinds of samples the profiles hold, by name.
    pub fn kinds(&self) -> Vec<&'static str> {
        KINDS.into_iter().filter(|k| self.processes.iter().any(|p| p.profile.entries.iter().any(|e| k.shows(e)))).map(Kind::name).collect()
    }

    /// `{"unit", "total", "stacks": [[folded, value]...], "left_out"}`: the heaviest stacks of
    /// what `of` `key` names, rooted at their process; None when `key` is not an id or a route.
    pub fn folded(&self, of: Of, key: &str, kind: Kind) -> Option<Value> {
        let filter = match of {
            Of::Trace => Filter { trace_id: Some(parse_hex::<16>(key).ok()?), ..Filter::default() },
            Of::Route => Filter { attrs: vec![(ROUTE_KEY.to_string(), key.to_string())], ..Filter::default() },
        };
        let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
        for p in &self.processes {
            let root = match (p.service_name(), p.pid()) {
                (Some(s), Some(pid)) => format!("{s} (pid {pid})"),
                (Some(s), None) => s.to_string(),
                (None, Some(pid)) => format!("pid {pid}"),
                (None, None) => "process".to_string(),
            }
            .replace(';', ":");
            for line in flame::folded(&p.profile, &filter, kind) {
                let Some((stack, value)) = line.rsplit_once(' ') else { continue };
                *stacks.entry(format!("{root};{stack}")).or_default() += value.parse::<u64>().unwrap_or(0);
            }
        }
        let total: u64 = stacks.values().sum();
        let mut v: Vec<(String, u64)> = stacks.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let left_out = v.len().saturating_sub(STACKS_SHOWN);
        v.truncate(STACKS_SHOWN);
        Some(json!({"unit": kind.unit(), "kind": kind.name(), "total": total, "stacks": v, "left_out": left_out}))
    }
}
