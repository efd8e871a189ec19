//! One pass of `report --otlp` over a Collector profiles file: each process's summary table and
//! top frames added up entry by entry as its samples are resolved, with the attribute keys its
//! samples carry and whether any had a trace (what chooses the table's rows). No entry is kept
//! unless asked for (the files `--pprof`/`--flamegraph`/`--folded` draw, and a `--trace`/`--span`/
//! `--attr` selection, need the process's whole profile): memory holds one message, each process's
//! frames, mappings and threads, and the tables' rows, not an entry per (stack, span) pair (a file
//! whose every sample was a new pair took 611 MiB for 31 MiB when each was kept).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use thread_ctx_model::{Entry, Profile};
use thread_ctx_otlp::framed::Framed;
use thread_ctx_otlp::into_profile::{ProcessKey, Processes, ReceivedProcess};
use thread_ctx_otlp::received::{rescan_exporter_file, resolve_each, scan_exporter_file, ResolvedSample};
use thread_ctx_output::file_error::{FileError, Result};
use thread_ctx_output::summary::{GroupBy, Summary};
use thread_ctx_output::top::TopFrames;

/// What a pass added up of one process.
pub struct Tally {
    pub summary: Summary,
    pub top: TopFrames,
    /// Attribute keys its samples carry (a few: the package's `attributes`).
    pub keys: BTreeSet<String>,
    /// Some sample had a trace id.
    pub traced: bool,
}

impl Tally {
    pub fn new(by: &GroupBy) -> Tally {
        Tally { summary: Summary::new(by.clone()), top: TopFrames::new(by.clone()), keys: BTreeSet::new(), traced: false }
    }

    fn add(&mut self, p: &Profile, e: &Entry) {
        self.summary.add_entry(e);
        self.top.add_entry(p, e);
        self.traced |= e.trace_id.is_some();
        for (k, _) in &e.attrs {
            if !self.keys.contains(k) {
                self.keys.insert(k.clone());
            }
        }
    }
}

/// What a pass read: the file's framing, the processes (most CPU samples first) and the tally of
/// each process it added up.
pub struct Pass {
    pub file: Framed,
    pub processes: Vec<(ProcessKey, ReceivedProcess)>,
    pub tallies: HashMap<ProcessKey, Tally>,
    pub by: GroupBy,
}

/// What a pass adds up: rows by `by`, for the processes `tallied` lets through; `keep` says which
/// samples' entries the profiles keep (by the sample's resource); `within`: only the first bytes
/// a previous pass read.
pub struct PassPlan<'a> {
    pub by: GroupBy,
    pub tallied: &'a dyn Fn(&ProcessKey) -> bool,
    pub keep: &'a dyn Fn(&ResolvedSample) -> bool,
    pub within: Option<u64>,
}

/// Reads `path` one message at a time ([`scan_exporter_file`]), each sample resolved and added
/// as it comes.
pub fn read(path: &Path, plan: &PassPlan) -> Result<Pass> {
    let mut processes = Processes::default();
    let mut tallies: HashMap<ProcessKey, Tally> = HashMap::new();
    let mut messages = 0usize;
    let mut each = |m| {
        messages += 1;
        resolve_each(&m, |s| {
            processes.add_with(&s, (plan.keep)(&s), |key, p, e| {
                if !(plan.tallied)(key) {
                    return;
                }
                match tallies.get_mut(key) {
                    Some(t) => t.add(p, e),
                    None => tallies.entry(key.clone()).or_insert_with(|| Tally::new(&plan.by)).add(p, e),
                }
            })
        })
        .map_err(|e| FileError::Invalid(format!("{}: message {messages}: {e}", path.display())))
    };
    let file = match plan.within {
        Some(bytes) => rescan_exporter_file(path, bytes, &mut each)?,
        None => scan_exporter_file(path, &mut each)?,
    };
    Ok(Pass { file, processes: processes.finish_keyed(), tallies, by: plan.by.clone() })
}
