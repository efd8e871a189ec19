//! The agent's discovery thread: every scan it checks which tracked
//! processes exited, re-reads their process contexts (a service registers
//! attribute keys as it goes) and, host-wide, looks for new processes that
//! publish span context. It tells the sampling loop what it found through a
//! channel; every read of a target runs under its [`Heartbeat`], one process
//! at a time, so the loop can tell a stuck read from a slow scan.

use super::object_sites::ObjectSites;
use super::registry::{Registry, State};
use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use thread_ctx_discovery::host_scan::{HostScanner, ProcessKey};
use thread_ctx_discovery::maps::read_maps;
use thread_ctx_discovery::process_context::{read_process_context, ContextHeader, HEADER_SIZE};
use thread_ctx_discovery::process_context_proto::Resource;
use thread_ctx_discovery::remote_memory::RemoteMemory;
use thread_ctx_discovery::resource::resource_of;
use thread_ctx_discovery::{discover, Discovery};
use thread_ctx_profile::pipeline::watchdog::Heartbeat;
use thread_ctx_sampler::alloc_probe::{ProbeSite, ProbeSiteError};
use thread_ctx_sampler::{V8FramesError, V8Process};

/// What discovery tells the sampling loop.
pub enum Found {
    /// A process to sample, with its resource.
    /// `alloc_site`: where its allocations are probed (allocations on), found here so that
    /// the sampling thread never reads the target.
    /// `v8`: its V8 layout, for reading its JS frames (or why not), found here too.
    Track {
        key: ProcessKey,
        discovery: Box<Discovery>,
        resource: Resource,
        alloc_site: Option<Result<ProbeSite, ProbeSiteError>>,
        v8: Result<V8Process, V8FramesError>,
    },
    /// It publishes but cannot be sampled (why).
    Refused { key: ProcessKey, reason: String },
    /// A tracked process exited.
    Exited { key: ProcessKey },
    /// A tracked process's context changed: new key map and resource.
    Updated { key: ProcessKey, key_map: Option<Vec<String>>, resource: Resource },
}

/// What the discovery thread needs; cloned for each worker the loop starts.
#[derive(Clone)]
pub struct DiscoveryConfig {
    pub scan_interval: Duration,
    /// Look for new processes host-wide (else only the given pids are watched).
    pub host_wide: bool,
    pub host_name: String,
    /// Allocations are sampled: find each process's allocation probe site.
    pub alloc: bool,
    /// Probe sites and V8 layouts by `node` object (each read once).
    pub sites: ObjectSites,
}

/// Runs one discovery worker until it is retired or the loop hangs up.
pub fn run(config: DiscoveryConfig, registry: Arc<Registry>, beat: Heartbeat, to_loop: Sender<Found>) {
    beat.bind_current_thread();
    let mut worker = Worker { config, registry, beat, to_loop, scanner: HostScanner::new(), contexts: HashMap::new() };
    loop {
        let next = Instant::now() + worker.config.scan_interval;
        if worker.beat.retired() || worker.registry.stopping() || !worker.scan() {
            return;
        }
        // A retired worker (replaced while stuck) finds out when it wakes: it has nothing to send meanwhile.
        if worker.registry.sleep_until(next) {
            return;
        }
    }
}

struct Worker {
    config: DiscoveryConfig,
    registry: Arc<Registry>,
    beat: Heartbeat,
    to_loop: Sender<Found>,
    scanner: HostScanner,
    /// Per tracked pid: where its process context's header is and the version last reported
    /// (a rescan reads those 32 bytes, not the whole maps), or when its maps were last read
    /// for one it had not published yet.
    contexts: HashMap<u32, Context>,
}

#[derive(Clone, Copy)]
enum Context {
    At { address: u64, published_at_ns: u64 },
    None { looked: Instant },
}

/// A tracked process without a process context is looked at again this often.
const CONTEXT_RECHECK: Duration = Duration::from_secs(30);

impl Worker {
    /// One scan; false when this worker should stop.
    fn scan(&mut self) -> bool {
        for key in self.registry.with(State::Tracked) {
            if !key.alive() {
                self.contexts.remove(&key.pid);
                if !self.send(Found::Exited { key }) {
                    return false;
                }
                continue;
            }
            if let Some(update) = self.context_update(key) {
                if !self.send(update) {
                    return false;
                }
            }
        }
        self.registry.forget_exited();
        if !self.config.host_wide {
            return true;
        }
        let registry = self.registry.clone();
        let beat = self.beat.clone();
        let found = self.scanner.scan_each(&|pid| registry.knows(pid), &mut |key, look| {
            let _busy = beat.busy(key, "reading its maps");
            look()
        });
        for key in found {
            if self.beat.retired() {
                return false;
            }
            // Pending before the loop hears of it: the next scan must not report it again.
            self.registry.set(key, State::Pending);
            let message = {
                let _busy = self.beat.busy(key, "finding its writer and process context");
                self.discover(key)
            };
            if !self.send(message) {
                return false;
            }
        }
        true
    }

    fn discover(&mut self, key: ProcessKey) -> Found {
        match discover(key.pid as i32) {
            Ok(d) => {
                let context = match d.context() {
                    Some(pc) => Context::At { address: pc.address, published_at_ns: pc.published_at_ns },
                    None => Context::None { looked: Instant::now() },
                };
                self.contexts.insert(key.pid, context);
                let resource = resource_of(&d, &self.config.host_name);
                let sites = self.config.sites.of(key.pid, self.config.alloc);
                Found::Track { key, discovery: Box::new(d), resource, alloc_site: sites.alloc, v8: sites.v8 }
            }
            Err(e) => Found::Refused { key, reason: e.to_string() },
        }
    }

    /// The process's context, when it was published again since last reported.
    fn context_update(&mut self, key: ProcessKey) -> Option<Found> {
        let _busy = self.beat.busy(key, "reading its process context");
        match self.contexts.get(&key.pid) {
            Some(Context::At { address, published_at_ns }) => {
                let mut header = [0u8; HEADER_SIZE];
                let unchanged = RemoteMemory::new(key.pid as i32)
                    .read(*address, &mut header, "OTEL_CTX header")
                    .ok()
                    .and_then(|_| ContextHeader::parse(&header).ok())
                    .is_some_and(|h| h.published_at_ns == *published_at_ns);
                if unchanged {
                    return None;
                }
            }
            Some(Context::None { looked }) if looked.elapsed() < CONTEXT_RECHECK => return None,
            _ => {}
        }
        let maps = read_maps(key.pid as i32).ok()?;
        let Some(pc) = read_process_context(key.pid as i32, &maps).ok()? else {
            self.contexts.insert(key.pid, Context::None { looked: Instant::now() });
            return None;
        };
        if matches!(self.contexts.get(&key.pid), Some(Context::At { published_at_ns, .. }) if *published_at_ns == pc.published_at_ns) {
            return None;
        }
        self.contexts.insert(key.pid, Context::At { address: pc.address, published_at_ns: pc.published_at_ns });
        let key_map = pc.attribute_key_map.clone();
        let d = Discovery { pid: key.pid as i32, writers: Vec::new(), skipped_objects: Vec::new(), process_context: Some(Ok(pc)) };
        Some(Found::Updated { key, key_map, resource: resource_of(&d, &self.config.host_name) })
    }

    /// Sends to the loop unless this worker was retired; false when it should stop.
    fn send(&self, message: Found) -> bool {
        !self.beat.retired() && self.to_loop.send(message).is_ok()
    }
}
