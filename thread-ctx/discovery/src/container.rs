//! Where a process runs: its pid inside its own PID namespace (`NSpid` of
//! `/proc/PID/status`) and the container and Kubernetes pod its cgroup path
//! names (`/proc/PID/cgroup`). Profiles name a process by the pid this reader
//! sees (the host's, for an agent with the host's PID namespace); a service in
//! a container knows itself by the namespace pid and its container id, and a
//! Collector's `k8sattributes` processor finds its pod by `k8s.pod.uid` or
//! `container.id` (the OpenTelemetry semantic conventions' names).
//!
//! Cgroup path shapes recognised (cgroup v2's `0::` line first, then v1's):
//!
//! | runtime, cgroup driver | the process's cgroup |
//! |---|---|
//! | Docker, systemd | `/system.slice/docker-<id>.scope` |
//! | Docker, cgroupfs | `/docker/<id>` |
//! | containerd (Kubernetes), systemd | `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid, _ for ->.slice/cri-containerd-<id>.scope` |
//! | containerd (Kubernetes), cgroupfs | `/kubepods/burstable/pod<uid>/<id>` |
//! | CRI-O, systemd | `…/kubepods-besteffort-pod<uid>.slice/crio-<id>.scope` |
//! | Podman | `…/libpod-<id>.scope` (or `…/libpod-<id>.scope/container`) |
//! | nerdctl | `/system.slice/nerdctl-<id>.scope`, `/default/<id>` |
//!
//! `<id>` is 64 lowercase hex digits. Guaranteed pods have no QoS level
//! (`kubepods-pod<uid>.slice`, `/kubepods/pod<uid>/`). A reader in a cgroup
//! namespace of its own (a container with a private cgroupns) sees paths
//! relative to its namespace's root, climbing out with `..`
//! (`/../../kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope`): the
//! components that name the container are still there. The innermost match
//! wins (Docker in Docker: the inner container). A runtime's monitor process
//! (`crio-conmon-<id>.scope`, `libpod-conmon-<id>.scope`) is not the container.
//! A systemd service, a user session or the root cgroup name no container.

use crate::error::{Error, Result};
use std::io::Read;

/// The namespace pid and container identity of one process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The process's pid in its innermost PID namespace, when that is not the
    /// reader's (`process.vpid`).
    pub namespace_pid: Option<i32>,
    pub container: ContainerIdentity,
}

/// What a cgroup path says about the container a process runs in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerIdentity {
    /// `container.id`: the runtime's full id (64 hex digits).
    pub id: Option<String>,
    /// `container.runtime.name`: `docker`, `containerd`, `cri-o` or `podman`,
    /// when the path says which.
    pub runtime: Option<&'static str>,
    /// `k8s.pod.uid`: the pod's UID (`8-4-4-4-12` hex, with dashes).
    pub pod_uid: Option<String>,
}

/// `/proc/PID/status` and `/proc/PID/cgroup` are written by the kernel, but
/// their length depends on the target: cgroup names (up to 255 bytes each) are
/// chosen by whoever creates them, a delegated subtree may nest deeply, and
/// cgroup v1 adds a line per hierarchy. Real files are under 2 KiB.
pub const MAX_PROC_FILE_BYTES: u64 = 64 << 10;

/// The namespace pid and container identity of process `pid`. A missing
/// cgroup file (a kernel without cgroups) is no container, not an error.
pub fn read_placement(pid: i32) -> Result<Placement> {
    let status = read_bounded(pid, "status")?;
    let container = match read_bounded(pid, "cgroup") {
        Ok(text) => container_of_cgroups(&text),
        Err(Error::Process { cause, .. }) if cause.kind() == std::io::ErrorKind::NotFound => ContainerIdentity::default(),
        Err(e) => return Err(e),
    };
    Ok(Placement { namespace_pid: namespace_pid(&status), container })
}

fn read_bounded(pid: i32, name: &str) -> Result<String> {
    let path = format!("/proc/{pid}/{name}");
    let fail = |cause| Error::Process { pid, path: path.clone(), cause };
    let mut bytes = Vec::new();
    std::fs::File::open(&path).map_err(fail)?.take(MAX_PROC_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(fail)?;
    if bytes.len() as u64 > MAX_PROC_FILE_BYTES {
        return Err(Error::TooLarge { what: path, limit: MAX_PROC_FILE_BYTES });
    }
    // cgroup names are bytes: one that is not UTF-8 must not hide the rest.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The innermost pid of the `NSpid:` line of a status file, when the process
/// has more than one (its PID namespace is not the reader's). The line lists
/// the pid in the namespace of the procfs read (the reader's view) first,
/// down to the process's own namespace last (Linux 4.1+).
pub fn namespace_pid(status: &str) -> Option<i32> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    let pids: Vec<i32> = line.split_whitespace().map(str::parse).collect::<std::result::Result<_, _>>().ok()?;
    match pids.as_slice() {
        [_, .., inner] => Some(*inner),
        _ => None,
    }
}

/// The container of a `/proc/PID/cgroup` file: from the cgroup v2 line
/// (`0::PATH`) when there is one, else from the first v1 line that names one.
pub fn container_of_cgroups(cgroup: &str) -> ContainerIdentity {
    let paths: Vec<&str> = cgroup.lines().filter_map(|l| l.splitn(3, ':').nth(2)).collect();
    let unified = cgroup.lines().find_map(|l| l.strip_prefix("0::"));
    if let Some(found) = unified.map(container_of_path).filter(|c| c.id.is_some() || c.pod_uid.is_some()) {
        return found;
    }
    paths.into_iter().map(container_of_path).find(|c| c.id.is_some() || c.pod_uid.is_some()).unwrap_or_default()
}

/// The container and pod one cgroup path names (see the module's table).
pub fn container_of_path(path: &str) -> ContainerIdentity {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != "..").collect();
    let mut found = ContainerIdentity::default();
    // Innermost first: the last container id and the pod nearest to it.
    for (depth, component) in components.iter().enumerate().rev() {
        if found.id.is_none() {
            if let Some((id, runtime)) = container_id_of(component, components.get(depth.wrapping_sub(1)).copied()) {
                found.id = Some(id);
                found.runtime = runtime;
                continue;
            }
        }
        if found.pod_uid.is_none() {
            found.pod_uid = pod_uid_of(component);
        }
    }
    found
}

/// Scope-unit prefixes that name a container, and the runtime each means.
const SCOPE_PREFIXES: [(&str, &str); 5] =
    [("cri-containerd-", "containerd"), ("docker-", "docker"), ("crio-", "cri-o"), ("libpod-", "podman"), ("nerdctl-", "containerd")];

/// A container id in one path component: `<prefix><id>.scope`, or a bare id
/// (cgroupfs drivers), whose runtime the parent component may tell
/// (`/docker/<id>`).
fn container_id_of(component: &str, parent: Option<&str>) -> Option<(String, Option<&'static str>)> {
    if let Some(unit) = component.strip_suffix(".scope") {
        for (prefix, runtime) in SCOPE_PREFIXES {
            if let Some(id) = unit.strip_prefix(prefix).filter(|id| is_container_id(id)) {
                return Some((id.to_string(), Some(runtime)));
            }
        }
        return None;
    }
    if !is_container_id(component) {
        return None;
    }
    let runtime = match parent {
        Some("docker") => Some("docker"),
        _ => None,
    };
    Some((component.to_string(), runtime))
}

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A pod UID in one path component: `pod<uid>` (cgroupfs driver) or a systemd
/// slice `kubepods[-<qos>]-pod<uid with _ for ->.slice`.
fn pod_uid_of(component: &str) -> Option<String> {
    let candidate = match component.strip_suffix(".slice") {
        Some(slice) if slice.starts_with("kubepods") => slice.rsplit('-').next()?.strip_prefix("pod")?.replace('_', "-"),
        Some(_) => return None,
        None => component.strip_prefix("pod")?.to_string(),
    };
    is_uuid(&candidate).then_some(candidate)
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5 && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970";
    const UID: &str = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
    const UID_SYSTEMD: &str = "0a1b2c3d_4e5f_6789_abcd_ef0123456789";

    fn v2(path: &str) -> ContainerIdentity {
        container_of_cgroups(&format!("0::{path}\n"))
    }

    fn identity(id: Option<&str>, runtime: Option<&'static str>, pod: Option<&str>) -> ContainerIdentity {
        ContainerIdentity { id: id.map(str::to_string), runtime, pod_uid: pod.map(str::to_string) }
    }

    #[test]
    fn docker_under_both_cgroup_drivers() {
        assert_eq!(v2(&format!("/system.slice/docker-{ID}.scope")), identity(Some(ID), Some("docker"), None));
        assert_eq!(v2(&format!("/docker/{ID}")), identity(Some(ID), Some("docker"), None));
    }

    #[test]
    fn kubernetes_containerd_under_both_cgroup_drivers_and_every_qos_class() {
        let systemd = format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/cri-containerd-{ID}.scope");
        assert_eq!(v2(&systemd), identity(Some(ID), Some("containerd"), Some(UID)));
        let guaranteed = format!("/kubepods.slice/kubepods-pod{UID_SYSTEMD}.slice/cri-containerd-{ID}.scope");
        assert_eq!(v2(&guaranteed), identity(Some(ID), Some("containerd"), Some(UID)));
        assert_eq!(v2(&format!("/kubepods/besteffort/pod{UID}/{ID}")), identity(Some(ID), None, Some(UID)));
        assert_eq!(v2(&format!("/kubepods/pod{UID}/{ID}")), identity(Some(ID), None, Some(UID)));
    }

    #[test]
    fn cri_o_and_its_monitor() {
        let pod = format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_SYSTEMD}.slice");
        assert_eq!(v2(&format!("{pod}/crio-{ID}.scope")), identity(Some(ID), Some("cri-o"), Some(UID)));
        // conmon runs in the pod's slice but is not the container.
        assert_eq!(v2(&format!("{pod}/crio-conmon-{ID}.scope")), identity(None, None, Some(UID)));
    }

    #[test]
    fn podman_rootful_and_rootless_with_its_inner_cgroup() {
        assert_eq!(v2(&format!("/machine.slice/libpod-{ID}.scope")), identity(Some(ID), Some("podman"), None));
        let rootless = format!("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container");
        assert_eq!(v2(&rootless), identity(Some(ID), Some("podman"), None));
        assert_eq!(v2(&format!("/machine.slice/libpod-conmon-{ID}.scope")), ContainerIdentity::default());
    }

    #[test]
    fn nerdctl() {
        assert_eq!(v2(&format!("/system.slice/nerdctl-{ID}.scope")), identity(Some(ID), Some("containerd"), None));
        assert_eq!(v2(&format!("/default/{ID}")), identity(Some(ID), None, None));
    }

    #[test]
    fn a_reader_in_its_own_cgroup_namespace_sees_paths_that_climb_out_with_dot_dot() {
        let systemd = format!("/../../kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice/cri-containerd-{ID}.scope");
        assert_eq!(v2(&systemd), identity(Some(ID), Some("containerd"), Some(UID)));
        // cgroupfs: the kubepods component itself may be above the namespace's root.
        assert_eq!(v2(&format!("/../../../burstable/pod{UID}/{ID}")), identity(Some(ID), None, Some(UID)));
    }

    #[test]
    fn the_innermost_container_wins() {
        let inner = "a".repeat(64);
        assert_eq!(v2(&format!("/docker/{ID}/docker/{inner}")), identity(Some(&inner), Some("docker"), None));
    }

    #[test]
    fn services_sessions_and_the_root_name_no_container() {
        for path in [
            "/",
            "/init.scope",
            "/system.slice/thread-ctx-agent.service",
            "/user.slice/user-1000.slice/user@1000.service/app.slice/app-tmux-0267755b.scope",
            "/user.slice/user-0.slice/session-3.scope",
            // not 64 hex digits: a name someone chose, not a runtime's id
            "/system.slice/docker-abc.scope",
            &format!("/docker/{}", ID.to_uppercase()),
            &format!("/docker/{ID}0"),
            // a pod-like name outside a kubepods slice
            &format!("/system.slice/foo-pod{UID_SYSTEMD}.slice"),
            "/kubepods/burstable/podnot-a-uid",
        ] {
            assert_eq!(v2(path), ContainerIdentity::default(), "{path}");
        }
    }

    #[test]
    fn cgroup_v1_lines_when_there_is_no_unified_one() {
        let v1 = format!(
            "12:memory:/kubepods/burstable/pod{UID}/{ID}\n11:cpu,cpuacct:/kubepods/burstable/pod{UID}/{ID}\n1:name=systemd:/kubepods/burstable/pod{UID}/{ID}\n"
        );
        assert_eq!(container_of_cgroups(&v1), identity(Some(ID), None, Some(UID)));
        // hybrid: an empty unified line (systemd's) falls back to v1
        let hybrid = format!("1:name=systemd:/system.slice/docker-{ID}.scope\n0::/\n");
        assert_eq!(container_of_cgroups(&hybrid), identity(Some(ID), Some("docker"), None));
    }

    #[test]
    fn hostile_cgroup_text_is_no_container_and_no_panic() {
        for text in ["", "\n\n", "garbage", "0::", "::::::", "0::/../../..", &"/".repeat(10_000), "0::/kubepods.slice/-.slice/pod.slice"] {
            assert_eq!(container_of_cgroups(text), ContainerIdentity::default(), "{text:?}");
        }
    }

    #[test]
    fn nspid_gives_the_innermost_pid_only_when_namespaced() {
        assert_eq!(namespace_pid("Name:\tnode\nPid:\t4242\nNSpid:\t4242\t1\n"), Some(1));
        assert_eq!(namespace_pid("NSpid:\t4242\t77\t1\n"), Some(1));
        assert_eq!(namespace_pid("NSpid:\t4242\n"), None);
        assert_eq!(namespace_pid("Pid:\t4242\n"), None, "kernels before 4.1 have no NSpid");
        assert_eq!(namespace_pid("NSpid:\t4242\tx\n"), None);
    }

    #[test]
    fn this_process_reads_its_own_placement() {
        let placement = read_placement(std::process::id() as i32).expect("our own /proc files");
        // The test runs in whatever container CI has: only what holds anywhere.
        assert_ne!(placement.namespace_pid, Some(std::process::id() as i32));
        assert!(matches!(read_placement(i32::MAX), Err(Error::Process { .. })));
    }
}
