//! What the agent reads once per `node` object (by build id), not once per process: the
//! allocation probe's offset and the V8 layout, each from the object's symbol tables (a parse
//! of node's ~100 MB executable: ~0.3 s of CPU per process before this was shared, 20 services
//! given by `--pid` parsed it 20 times). Every discovery of the agent shares one table: the
//! `--pid` processes read at start and the host-wide discovery worker, and a worker that
//! replaces a stuck one.

use std::sync::{Arc, Mutex};
use thread_ctx_sampler::alloc_probe::{ProbeSite, ProbeSiteError, ProbeSites};
use thread_ctx_sampler::{V8FramesError, V8Process, V8Sites};

#[derive(Default)]
struct Sites {
    probe: ProbeSites,
    v8: V8Sites,
}

/// The table, shared by every reader of the agent.
#[derive(Clone, Default)]
pub struct ObjectSites(Arc<Mutex<Sites>>);

/// What sampling a process needs of its `node` object.
pub struct ProcessSites {
    /// Where its allocations are probed (asked for only with allocations on).
    pub alloc: Option<Result<ProbeSite, ProbeSiteError>>,
    /// Its V8 layout, to read its JS frames (or why not).
    pub v8: Result<V8Process, V8FramesError>,
}

impl ObjectSites {
    /// The sites of process `pid`. A reader stuck in a target's read may hold the table for
    /// good (it is left behind, not killed): the others then read with a table of their own.
    pub fn of(&self, pid: u32, alloc: bool) -> ProcessSites {
        let mut own = None;
        let mut guard = self.0.try_lock().ok();
        let sites = match guard.as_deref_mut() {
            Some(shared) => shared,
            None => own.insert(Sites::default()),
        };
        ProcessSites { alloc: alloc.then(|| sites.probe.site(pid)), v8: sites.v8.process(pid) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_table_does_not_block_another_reader() {
        let sites = ObjectSites::default();
        let _held = sites.0.lock().unwrap();
        let other = sites.clone();
        let found = std::thread::spawn(move || other.of(std::process::id(), false)).join().unwrap();
        assert!(matches!(found.v8, Err(V8FramesError::NoV8 { .. })), "read with a table of its own");
        assert!(found.alloc.is_none());
    }
}
