//! A service as a container runtime starts it, built here from the kernel's own parts: its own
//! PID namespace (`unshare --pid --fork --mount-proc`, so it is pid 1 there) in a cgroup v2 group
//! whose path has the shape Kubernetes' containerd gives a container
//! (`kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope`). As root, the reader must
//! name it by the host's pid with its namespace pid beside it, and find its container and pod:
//! in the library's placement, in `record`'s summary, and in the resource the agent sends a real
//! OpenTelemetry Collector, which `thread-ctx report --pid HOST_PID` then finds.

use thread_ctx_test_support::collector as collector_common;
use thread_ctx_test_support::process as common;

use collector_common::Collector;
use common::*;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(90);
use thread_ctx_discovery::container::read_placement;

const CONTAINER_ID: &str = "5e1c0a7b9d2f4e6a8c0b1d3f5a7c9e1b2d4f6a8c0e2b4d6f8a1c3e5b7d9f0a2c";
const POD_UID: &str = "7d4f5c2a-1b3e-4f6a-9c8d-0e1f2a3b4c5d";

/// The cgroup v2 hierarchy's mount point (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a
/// hybrid host), from our own mountinfo.
fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|l| {
        let (mount, fs) = l.split_once(" - ")?;
        let point = mount.split_whitespace().nth(4)?;
        (fs.split_whitespace().next() == Some("cgroup2")).then(|| PathBuf::from(point))
    })
}

/// A cgroup of the Kubernetes containerd shape under a group of this test's own, removed (with
/// the processes in it killed) on drop.
struct ContainerCgroup {
    top: PathBuf,
    leaf: PathBuf,
}

impl ContainerCgroup {
    /// `test` tells apart the groups of tests that run at once in this process.
    fn create(mount: &Path, test: &str) -> ContainerCgroup {
        let top = mount.join(format!("thread-ctx-test-{}-{test}", std::process::id()));
        let pod = top.join(format!("kubepods-besteffort-pod{}.slice", POD_UID.replace('-', "_")));
        let leaf = pod.join(format!("cri-containerd-{CONTAINER_ID}.scope"));
        std::fs::create_dir_all(&leaf).unwrap_or_else(|e| panic!("creating {}: {e}", leaf.display()));
        ContainerCgroup { top, leaf }
    }
}

impl Drop for ContainerCgroup {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.leaf.join("cgroup.procs")) {
            for pid in procs.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        // A group can be removed once its last process is gone, leaf first.
        for dir in [self.leaf.clone(), self.leaf.parent().unwrap().to_path_buf(), self.top.clone()] {
            while std::fs::remove_dir(&dir).is_err() && dir.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The service: our addon publishing a span from the main thread, which then burns CPU; it
/// prints its own pid (as its namespace sees it) and "ready".
const SERVICE: &str = r#"
  const ctx = require(process.argv[1]);
  ctx.publishProcessContext();
  ctx.setSpanContext('4bf92f3577b34da6a3ce929d0e0e4736', '00f067aa0ba902b7', 1);
  console.log(`pid ${process.pid}`);
  console.log('ready');
  let x = 0;
  for (;;) for (let i = 0; i < 1e6; i++) x += Math.sqrt(i);
"#;

struct ContainedService {
    unshare: Child,
    /// The node process, by the host's pid.
    host_pid: i32,
    /// Its pid as it sees it.
    namespace_pid: i32,
}

impl Drop for ContainedService {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions. pid 1 of the namespace dying ends the namespace.
        unsafe { libc::kill(self.host_pid, libc::SIGKILL) };
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// Starts the service in its own PID namespace, inside `cgroup`.
fn start_contained(cgroup: &Path) -> ContainedService {
    let procs = cgroup.join("cgroup.procs");
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "node", "-e", SERVICE, package_dir().to_str().unwrap()])
        .env("OTEL_SERVICE_NAME", "contained-shop")
        .stdout(Stdio::piped());
    // SAFETY: between fork and exec only open/write/close (async-signal-safe), through std::fs.
    unsafe {
        cmd.pre_exec(move || std::fs::write(&procs, "0"));
    }
    let mut unshare = cmd.spawn().expect("unshare (util-linux) runs");
    let mut lines = BufReader::new(unshare.stdout.take().unwrap()).lines();
    let mut namespace_pid = 0;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(p) = line.strip_prefix("pid ") {
            namespace_pid = p.parse().unwrap();
        }
        if line == "ready" {
            break;
        }
    }
    // unshare --fork: node is unshare's one child.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", unshare.id())).unwrap();
    let host_pid = children.split_whitespace().next().and_then(|p| p.parse().ok()).expect("node under unshare");
    ContainedService { unshare, host_pid, namespace_pid }
}

#[test]
fn a_pid_namespaced_service_in_a_container_cgroup_is_found_by_host_pid_with_its_container() {
    if !ebpf_or_skip("a_pid_namespaced_service_in_a_container_cgroup_is_found_by_host_pid_with_its_container") {
        return;
    }
    let mount = cgroup2_mount().expect("a cgroup2 hierarchy is mounted");
    let cgroup = ContainerCgroup::create(&mount, "placement");
    let service = start_contained(&cgroup.leaf);
    assert_eq!(service.namespace_pid, 1, "the service is pid 1 of its namespace");
    assert_ne!(service.host_pid, 1);

    let placement = read_placement(service.host_pid).unwrap();
    assert_eq!(placement.namespace_pid, Some(1), "NSpid of host pid {}", service.host_pid);
    assert_eq!(placement.container.id.as_deref(), Some(CONTAINER_ID));
    assert_eq!(placement.container.pod_uid.as_deref(), Some(POD_UID));
    assert_eq!(placement.container.runtime, Some("containerd"));
}

#[test]
fn the_agent_and_record_name_it_by_host_pid_with_its_namespace_pid_container_and_pod() {
    if !ebpf_or_skip("the_agent_and_record_name_it_by_host_pid_with_its_namespace_pid_container_and_pod") {
        return;
    }
    let _one = one_at_a_time();
    let mount = cgroup2_mount().expect("a cgroup2 hierarchy is mounted");
    let cgroup = ContainerCgroup::create(&mount, "agent");
    let service = start_contained(&cgroup.leaf);
    let host_pid = service.host_pid.to_string();

    // record: its first line names the process by host pid, and says where it runs.
    let r = thread_ctx(&["record", &host_pid, "--duration", "1s", "--hz", "99"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let first = r.stdout.lines().next().unwrap_or_default();
    let place = format!("pid {host_pid} (contained-shop) [pid 1 in its PID namespace, container {}, pod {POD_UID}]", &CONTAINER_ID[..12]);
    assert!(first.starts_with(&place), "{first}");

    // The agent: the resource the Collector receives.
    let collector = Collector::running();
    let endpoint = collector.grpc_endpoint();
    let agent = thread_ctx(&["agent", "--pid", &host_pid, "--interval", "1s", "--duration", "4s", "--endpoint", &endpoint, "--protocol", "grpc"]);
    assert_eq!(agent.code, 0, "{}", agent.stderr);
    let received =
        collector.wait_for(WAIT, "the contained service's samples", |r| r.samples().iter().any(|s| s.resource.get("process.pid") == Some(&host_pid)));
    let samples = received.samples();
    let resource = &samples.iter().find(|s| s.resource.get("process.pid") == Some(&host_pid)).unwrap().resource;
    for (key, value) in [
        ("process.pid", host_pid.as_str()),
        ("process.vpid", "1"),
        ("container.id", CONTAINER_ID),
        ("container.runtime.name", "containerd"),
        ("k8s.pod.uid", POD_UID),
        ("service.name", "contained-shop"),
    ] {
        assert_eq!(resource.get(key).map(String::as_str), Some(value), "{key} in {resource:?}");
    }
    assert!(
        !samples.iter().any(|s| s.resource.get("process.pid").map(String::as_str) == Some("1")),
        "no profile names the namespace pid as process.pid"
    );

    // report finds it by the pid the agent logged, and shows the rest.
    let file = collector.output_file();
    let report = thread_ctx(&["report", "--otlp", file.to_str().unwrap(), "--pid", &host_pid]);
    assert_eq!(report.code, 0, "{}\n{}", report.stdout, report.stderr);
    assert!(report.stdout.contains(&format!("pid {host_pid} (contained-shop)")), "{}", report.stdout);
    for shown in
        [format!("process.pid={host_pid}"), "process.vpid=1".into(), format!("container.id={CONTAINER_ID}"), format!("k8s.pod.uid={POD_UID}")]
    {
        assert!(report.stdout.contains(&shown), "{shown} in\n{}", report.stdout);
    }
}
