//! Each tracked process's CPU throttling over a window: its cgroup's `cpu.stat` read at each
//! window's end (`thread_ctx_discovery::cgroup_cpu`, cgroup v1 or v2), less the reading at the
//! window before. A process's first window has no reading before it and says nothing. A few
//! small files per process per window (20 services every 10 s: 2 reads a second).

use std::collections::HashMap;
use std::io::Read;
use thread_ctx_discovery::cgroup_cpu::{read_throttling, CpuThrottling};
use thread_ctx_profile::window::Window;

/// The agent's mounts, where the `cpu` controller is (read once: they do not move under a
/// running agent); a few KiB, bounded.
fn own_mountinfo() -> String {
    let mut bytes = Vec::new();
    if let Ok(f) = std::fs::File::open("/proc/self/mountinfo") {
        let _ = f.take(1 << 20).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

pub struct ThrottlingReader {
    mountinfo: String,
    /// The last reading of each process of the last window: no more entries than processes.
    last: HashMap<u32, CpuThrottling>,
}

impl ThrottlingReader {
    pub fn new() -> ThrottlingReader {
        ThrottlingReader { mountinfo: own_mountinfo(), last: HashMap::new() }
    }

    /// Sets each process's throttling over the window, where its cgroup can be read.
    pub fn annotate(&mut self, w: &mut Window) {
        let mut now = HashMap::with_capacity(w.processes.len());
        for p in &mut w.processes {
            let Some(reading) = read_throttling(p.pid as i32, &self.mountinfo) else { continue };
            p.cpu_throttling = self.last.get(&p.pid).and_then(|before| reading.since(before));
            if !p.exited {
                now.insert(p.pid, reading);
            }
        }
        self.last = now;
    }
}
