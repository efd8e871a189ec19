//! Host-wide discovery for the agent: which processes publish span context,
//! i.e. map an OTEP 4719 `OTEL_CTX` process context or an ELF object that
//! defines `otel_thread_ctx_v1`.
//!
//! A scan reads /proc/PID/maps of the processes it has to look at, and opens
//! an ELF object only the first time its (device, inode) shows up anywhere on
//! the host: every Node process maps the same `node` and the same addon, so
//! rescans stay cheap. Processes found not to publish are looked at again at
//! every scan while young (a service loads the addon some time after it
//! starts) and then only every [`OLD_RECHECK`].

use super::elf_tls_symbol::scan_file;
use super::maps::{parse_maps, Mapping};
use super::process_context::is_context_mapping;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Processes younger than this are looked at on every scan.
const YOUNG: Duration = Duration::from_secs(60);
/// How often an older process that does not publish is looked at again.
pub const OLD_RECHECK: Duration = Duration::from_secs(30);
/// Objects remembered; past this the cache starts over (bounded memory on hosts with churn).
const MAX_OBJECTS: usize = 16_384;
/// A maps file is read up to this size (a process with more mappings is looked at partly).
const MAX_MAPS_BYTES: u64 = 8 << 20;

/// A process, told apart from a later one that reuses its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessKey {
    pub pid: u32,
    /// Start time in clock ticks since boot (/proc/PID/stat field 22).
    pub start_ticks: u64,
}

impl ProcessKey {
    /// The process running under `pid` now, if any.
    pub fn of(pid: u32) -> Option<ProcessKey> {
        start_ticks(pid).map(|start_ticks| ProcessKey { pid, start_ticks })
    }

    /// The same process is still running.
    pub fn alive(&self) -> bool {
        start_ticks(self.pid) == Some(self.start_ticks)
    }
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    key: ProcessKey,
    next_look: Instant,
}

#[derive(Default)]
pub struct HostScanner {
    /// Whether an object (device, inode) defines otel_thread_ctx_v1.
    objects: HashMap<(String, u64), bool>,
    /// Processes found not to publish, and when to look again.
    quiet: HashMap<u32, Seen>,
    /// Objects opened by the last scans (for the status of a scan's cost).
    pub objects_opened: u64,
}

impl HostScanner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Processes that publish now and for which `known` says false, oldest pid first.
    pub fn scan(&mut self, known: &dyn Fn(u32) -> bool) -> Vec<ProcessKey> {
        self.scan_each(known, &mut |_, look| look())
    }

    /// [`HostScanner::scan`], with each look at one process (reading its maps,
    /// opening objects it maps for the first time) run inside `around`: the
    /// agent marks its worker busy with that process, so it can tell when a
    /// target blocks the read.
    pub fn scan_each(
        &mut self,
        known: &dyn Fn(u32) -> bool,
        around: &mut dyn FnMut(ProcessKey, &mut dyn FnMut() -> bool) -> bool,
    ) -> Vec<ProcessKey> {
        let now = Instant::now();
        let me = std::process::id();
        let uptime = uptime_ticks();
        let mut found = Vec::new();
        let mut live = Vec::new();
        let Ok(dir) = std::fs::read_dir("/proc") else { return found };
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            live.push(pid);
            if pid == me || known(pid) {
                continue;
            }
            let Some(key) = ProcessKey::of(pid) else { continue };
            if let Some(seen) = self.quiet.get(&pid) {
                if seen.key == key && now < seen.next_look {
                    continue;
                }
            }
            if around(key, &mut || self.publishes(pid)) {
                self.quiet.remove(&pid);
                found.push(key);
            } else {
                let young = uptime.zip(ticks_per_second()).is_some_and(|(up, hz)| up.saturating_sub(key.start_ticks) < YOUNG.as_secs() * hz);
                let next_look = if young { now } else { now + OLD_RECHECK };
                self.quiet.insert(pid, Seen { key, next_look });
            }
        }
        // Forget processes that are gone.
        live.sort_unstable();
        self.quiet.retain(|pid, _| live.binary_search(pid).is_ok());
        found.sort_by_key(|k| k.pid);
        found
    }

    /// `pid` maps a process context or an object defining otel_thread_ctx_v1.
    pub fn publishes(&mut self, pid: u32) -> bool {
        let Some(maps) = read_maps_bounded(pid) else { return false };
        if maps.iter().any(is_context_mapping) {
            return true;
        }
        maps.iter().filter(|m| m.is_file_backed() && m.perms.contains('x')).any(|m| self.defines_symbol(pid, m))
    }

    fn defines_symbol(&mut self, pid: u32, m: &Mapping) -> bool {
        let key = (m.dev.clone(), m.inode);
        if let Some(&known) = self.objects.get(&key) {
            return known;
        }
        self.objects_opened += 1;
        // map_files reaches deleted files and other mount namespaces; fall back to the path.
        let via_map_files = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
        let defines =
            scan_file(&via_map_files, m.path()).or_else(|_| scan_file(&format!("/proc/{pid}/root{}", m.path()), m.path())).map(|o| !o.is_empty());
        match defines {
            // The file itself is malformed (a lie in its tables): it stays so for this (device, inode).
            Err(crate::error::Error::Elf { .. }) => {
                self.remember(key, false);
                false
            }
            Ok(d) => {
                self.remember(key, d);
                d
            }
            // Unreadable now (a race with exit, no permission): not cached, looked at again later.
            Err(_) => false,
        }
    }

    fn remember(&mut self, object: (String, u64), defines: bool) {
        if self.objects.len() >= MAX_OBJECTS {
            self.objects.clear();
        }
        self.objects.insert(object, defines);
    }
}

fn read_maps_bounded(pid: u32) -> Option<Vec<Mapping>> {
    use std::io::Read;
    let path = format!("/proc/{pid}/maps");
    let mut bytes = Vec::new();
    std::fs::File::open(&path).ok()?.take(MAX_MAPS_BYTES).read_to_end(&mut bytes).ok()?;
    // File names are bytes: one that is not UTF-8 must not hide the process.
    // A line cut by the bound is dropped rather than misread.
    if bytes.len() as u64 >= MAX_MAPS_BYTES {
        let end = bytes.iter().rposition(|&b| b == b'\n').unwrap_or(0);
        bytes.truncate(end);
    }
    let text = String::from_utf8_lossy(&bytes);
    parse_maps(&text, &path).ok()
}

/// Start time of `pid` in clock ticks since boot, from /proc/PID/stat.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: fields count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// When `pid` started, on the wall clock (to a clock tick): as long ago as the boot clock says
/// (its start on that clock), back from now. Compared with the times of files it writes. The two
/// clocks are read back to back, after the process's start, so a preemption between the reads
/// (tens of ms on a loaded machine) cannot move the answer.
pub fn started_at(pid: u32) -> Option<std::time::SystemTime> {
    let start = start_ticks(pid)?;
    let hz = ticks_per_second()?;
    let boot_ns = boot_clock_ns()?;
    let now = std::time::SystemTime::now();
    now.checked_sub(std::time::Duration::from_nanos(boot_ns.saturating_sub(start * 1_000_000_000 / hz)))
}

fn ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then_some(hz as u64)
}

/// CLOCK_BOOTTIME in ns: the clock process start times in /proc/PID/stat count on.
fn boot_clock_ns() -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out pointer.
    (unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

fn uptime_ticks() -> Option<u64> {
    Some(boot_clock_ns()? * ticks_per_second()? / 1_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_start_time_is_stable_and_a_missing_pid_has_none() {
        let me = ProcessKey::of(std::process::id()).unwrap();
        assert!(me.alive());
        assert!(!ProcessKey { start_ticks: me.start_ticks + 1, ..me }.alive(), "a reused pid is another process");
        assert_eq!(start_ticks(u32::MAX), None);
        assert_eq!(started_at(u32::MAX), None);
    }

    #[test]
    fn a_child_started_now_started_after_this_process_and_before_now() {
        let before = std::time::SystemTime::now() - std::time::Duration::from_millis(20);
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let started = started_at(child.id());
        child.kill().unwrap();
        child.wait().unwrap();
        let started = started.expect("a live child has a start time");
        // One clock tick (10 ms at 100 Hz) of rounding either way.
        assert!(started >= before && started <= std::time::SystemTime::now() + std::time::Duration::from_millis(20), "{started:?}");
        // Both starts are known to a tick: a child started in this process's tick reads the same.
        let tick = std::time::Duration::from_nanos(1_000_000_000 / ticks_per_second().unwrap());
        assert!(started_at(std::process::id()).unwrap() <= started + tick);
    }

    #[test]
    fn a_process_without_the_symbol_does_not_publish() {
        // This test binary maps no otel_thread_ctx_v1 object and no OTEL_CTX.
        let mut s = HostScanner::new();
        assert!(!s.publishes(std::process::id()));
        let opened = s.objects_opened;
        assert!(!s.publishes(std::process::id()));
        assert_eq!(s.objects_opened, opened, "objects are opened once");
    }
}
