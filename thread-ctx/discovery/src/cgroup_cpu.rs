//! How long a process's cgroup was throttled by its CPU quota: the `cpu.stat` of the cgroup
//! `/proc/PID/cgroup` names, in whichever hierarchy has the `cpu` controller.
//!
//! | hierarchy | file | throttled time | periods throttled |
//! |---|---|---|---|
//! | cgroup v2 (`0::/path`) | `<cgroup2 mount>/path/cpu.stat` | `throttled_usec` (µs) | `nr_throttled` |
//! | cgroup v1 (`N:cpu,cpuacct:/path`) | `<cpu mount>/path/cpu.stat` | `throttled_time` (ns) | `nr_throttled` |
//!
//! A quota is set on a container's cgroup or on one of its ancestors (a Kubernetes pod's), and
//! each level counts the throttling of its own quota: the process's cgroup and its ancestors up
//! to the hierarchy's root are read, and the one throttled longest is the process's. A process
//! whose cgroup cannot be read (gone, another mount namespace's, no `cpu` controller) has none.

use std::io::Read;
use std::path::{Path, PathBuf};

/// A cgroup's CPU throttling, cumulative since the cgroup was made (or, as a difference of two
/// readings, over a window).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuThrottling {
    /// The cgroup, as `/proc/PID/cgroup` names it (relative to the hierarchy's root).
    pub cgroup: String,
    /// 1 or 2.
    pub version: u8,
    /// Quota periods in which it was throttled.
    pub nr_throttled: u64,
    /// Time it was throttled, ns (summed over CPUs by the kernel).
    pub throttled_ns: u64,
}

impl CpuThrottling {
    /// The throttling between an earlier reading of the same cgroup and this one (None when the
    /// cgroup changed, or its counters went back: a new cgroup of the same name).
    pub fn since(&self, earlier: &CpuThrottling) -> Option<CpuThrottling> {
        (self.cgroup == earlier.cgroup && self.version == earlier.version).then_some(())?;
        Some(CpuThrottling {
            cgroup: self.cgroup.clone(),
            version: self.version,
            nr_throttled: self.nr_throttled.checked_sub(earlier.nr_throttled)?,
            throttled_ns: self.throttled_ns.checked_sub(earlier.throttled_ns)?,
        })
    }
}

/// `cpu.stat` is a few short lines written by the kernel; a cgroup path is at most a few KiB.
const MAX_FILE_BYTES: u64 = 64 << 10;

/// Where the `cpu` controller is mounted, read from a `/proc/self/mountinfo`: (version, mount point).
pub fn cpu_mounts(mountinfo: &str) -> Vec<(u8, PathBuf)> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else { continue };
        let Some(mount_point) = pre.split(' ').nth(4) else { continue };
        let mut fields = post.split(' ');
        let (fs_type, options) = (fields.next().unwrap_or(""), fields.nth(1).unwrap_or(""));
        match fs_type {
            "cgroup2" => out.push((2, PathBuf::from(unescape(mount_point)))),
            "cgroup" if options.split(',').any(|o| o == "cpu") => out.push((1, PathBuf::from(unescape(mount_point)))),
            _ => {}
        }
    }
    out
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4).and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out + rest
}

/// The process's cgroup in the `cpu` controller's hierarchy of `version`, from its
/// `/proc/PID/cgroup`: v2's `0::` line, or the v1 line whose controllers include `cpu`.
pub fn cpu_cgroup(proc_cgroup: &str, version: u8) -> Option<&str> {
    proc_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let fits = match version {
            2 => id == "0" && controllers.is_empty(),
            _ => controllers.split(',').any(|c| c == "cpu"),
        };
        fits.then_some(path)
    })
}

/// Parses a `cpu.stat`: (periods throttled, ns throttled); None without the throttling lines
/// (a v2 cgroup whose `cpu` controller is off reports usage only).
pub fn parse_cpu_stat(text: &str, version: u8) -> Option<(u64, u64)> {
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<u64>().ok());
    let periods = field("nr_throttled")?;
    let ns = match version {
        2 => field("throttled_usec")?.checked_mul(1000)?,
        _ => field("throttled_time")?,
    };
    Some((periods, ns))
}

fn read_small(path: &Path) -> Option<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(MAX_FILE_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The throttling of the cgroup `cgroup` (a path under `mount`) or of the ancestor throttled
/// longest, up to the hierarchy's root.
pub fn throttling_under(mount: &Path, version: u8, cgroup: &str) -> Option<CpuThrottling> {
    let mut best: Option<CpuThrottling> = None;
    let mut path = cgroup.trim_end_matches('/').to_string();
    // Paths are relative to the hierarchy's root; `..` (a reader in a cgroup namespace of its
    // own) cannot be followed from this mount.
    if path.split('/').any(|c| c == "..") {
        return None;
    }
    loop {
        let dir = mount.join(path.trim_start_matches('/'));
        if let Some((nr_throttled, throttled_ns)) = read_small(&dir.join("cpu.stat")).and_then(|t| parse_cpu_stat(&t, version)) {
            if best.as_ref().is_none_or(|b| throttled_ns > b.throttled_ns) {
                best = Some(CpuThrottling { cgroup: if path.is_empty() { "/".into() } else { path.clone() }, version, nr_throttled, throttled_ns });
            }
        }
        match path.rfind('/') {
            Some(i) if !path.is_empty() => path.truncate(i),
            _ => break,
        }
    }
    best
}

/// The throttling of process `pid`'s cgroup (or its most throttled ancestor), read through
/// this reader's mounts (`mountinfo`, its `/proc/self/mountinfo`); None when none can be read.
pub fn read_throttling(pid: i32, mountinfo: &str) -> Option<CpuThrottling> {
    let cgroups = read_small(Path::new(&format!("/proc/{pid}/cgroup")))?;
    for (version, mount) in cpu_mounts(mountinfo) {
        if let Some(t) = cpu_cgroup(&cgroups, version).and_then(|cg| throttling_under(&mount, version, cg)) {
            return Some(t);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // This machine's: cgroup v1 controllers under a tmpfs, and v2's hierarchy at `unified`.
    const MOUNTINFO_V1: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
        33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    const MOUNTINFO_V2: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

    #[test]
    fn the_cpu_controller_is_found_in_either_hierarchy() {
        assert_eq!(cpu_mounts(MOUNTINFO_V1), [(1, PathBuf::from("/sys/fs/cgroup/cpu")), (2, PathBuf::from("/sys/fs/cgroup/unified"))]);
        assert_eq!(cpu_mounts(MOUNTINFO_V2), [(2, PathBuf::from("/sys/fs/cgroup"))]);
        assert_eq!(cpu_mounts("36 25 0:31 / /a\\040b rw - cgroup cgroup rw,cpu,cpuacct\n"), [(1, PathBuf::from("/a b"))]);
    }

    #[test]
    fn a_process_cgroup_per_hierarchy() {
        let v1 = "9:name=systemd:/\n2:cpuacct:/\n1:cpu,cpuacct:/kubepods/burstable/pod1/abc\n0::/\n";
        assert_eq!(cpu_cgroup(v1, 1), Some("/kubepods/burstable/pod1/abc"));
        assert_eq!(cpu_cgroup(v1, 2), Some("/"));
        assert_eq!(cpu_cgroup("0::/system.slice/docker-1.scope\n", 2), Some("/system.slice/docker-1.scope"));
        assert_eq!(cpu_cgroup("4:memory:/x\n", 1), None);
    }

    #[test]
    fn cpu_stat_of_v1_and_v2() {
        // cgroup v1's `cpu` controller (this machine's, with a quota of 0.1 CPU and a busy loop).
        let v1 = "nr_periods 22\nnr_throttled 20\nthrottled_time 1323300117\nnr_bursts 0\nburst_time 0\n";
        assert_eq!(parse_cpu_stat(v1, 1), Some((20, 1_323_300_117)));
        // cgroup v2 with the `cpu` controller on: microseconds.
        let v2 =
            "usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\nnr_periods 30\nnr_throttled 12\nthrottled_usec 812345\nnr_bursts 0\nburst_usec 0\n";
        assert_eq!(parse_cpu_stat(v2, 2), Some((12, 812_345_000)));
        // v2 without it (usage only), and v1's file read as v2.
        assert_eq!(parse_cpu_stat("usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\n", 2), None);
        assert_eq!(parse_cpu_stat(v1, 2), None);
    }

    #[test]
    fn the_most_throttled_of_a_cgroup_and_its_ancestors_from_fixture_files() {
        let root = std::env::temp_dir().join(format!("cgroup-cpu-{}", std::process::id()));
        let pod = root.join("kubepods/pod1");
        let container = pod.join("abc");
        std::fs::create_dir_all(&container).unwrap();
        // The quota is the pod's (v2): the container's own cgroup counts none.
        std::fs::write(root.join("cpu.stat"), "usage_usec 1\n").unwrap();
        std::fs::write(pod.join("cpu.stat"), "usage_usec 9\nnr_periods 50\nnr_throttled 7\nthrottled_usec 2500\n").unwrap();
        std::fs::write(container.join("cpu.stat"), "usage_usec 9\nnr_periods 50\nnr_throttled 0\nthrottled_usec 0\n").unwrap();
        let t = throttling_under(&root, 2, "/kubepods/pod1/abc").unwrap();
        assert_eq!(t, CpuThrottling { cgroup: "/kubepods/pod1".into(), version: 2, nr_throttled: 7, throttled_ns: 2_500_000 });
        assert_eq!(throttling_under(&root, 2, "/../escape"), None, "a path out of the mount is not followed");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_window_is_the_difference_of_two_readings() {
        let a = CpuThrottling { cgroup: "/x".into(), version: 1, nr_throttled: 5, throttled_ns: 1_000 };
        let b = CpuThrottling { nr_throttled: 9, throttled_ns: 4_000, ..a.clone() };
        assert_eq!(b.since(&a), Some(CpuThrottling { nr_throttled: 4, throttled_ns: 3_000, ..a.clone() }));
        assert_eq!(a.since(&b), None, "counters that went back: a new cgroup");
        assert_eq!(CpuThrottling { cgroup: "/y".into(), ..b }.since(&a), None);
    }

    /// cgroup v1 live where this machine has it: a process in a cgroup with a quota, burning
    /// CPU, is read as throttled (as root; skipped elsewhere, saying so).
    #[test]
    fn a_live_process_under_a_v1_quota_is_throttled() {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let Some((_, mount)) = cpu_mounts(&mountinfo).into_iter().find(|(v, _)| *v == 1) else {
            eprintln!("SKIPPED a_live_process_under_a_v1_quota_is_throttled: no cgroup v1 cpu hierarchy here (the fixture tests cover v1 and v2)");
            return;
        };
        let dir = mount.join(format!("thread-ctx-test-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir) {
            // Root is what CI runs as: there it must work.
            assert!(std::env::var("REQUIRE_EBPF").as_deref() != Ok("1"), "REQUIRE_EBPF=1 but no cgroup can be made in {}: {e}", mount.display());
            eprintln!("SKIPPED a_live_process_under_a_v1_quota_is_throttled: cannot make a cgroup in {} ({e}; not root?)", mount.display());
            return;
        }
        std::fs::write(dir.join("cpu.cfs_quota_us"), "10000").unwrap();
        let mut child = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).unwrap();
        let start = std::time::Instant::now();
        let mut got = None;
        // A 10 % quota throttles a busy loop in every 100 ms period: a second is plenty, 10 s on a busy machine.
        while start.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(300));
            got = read_throttling(child.id() as i32, &mountinfo).filter(|t| t.nr_throttled >= 3);
            if got.is_some() {
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir(&dir);
        let t = got.expect("a busy loop under a 10 % quota was not read as throttled within 10 s");
        assert_eq!((t.version, t.cgroup.as_str()), (1, format!("/thread-ctx-test-{}", std::process::id()).as_str()));
        assert!(t.throttled_ns > 0);
    }
}
