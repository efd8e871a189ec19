//! A hostile user's service, sampled from outside by root (eBPF): a Node process of uid 65534,
//! made with the package's addon, whose scripts name source maps it may not read and maps that
//! are not files. `thread-ctx record`, as root, reads each map as the process's own user would:
//!
//! - `own.js` names its own map (0600, uid 65534), by a relative URL: applied (`OWN.ts`), so
//!   the test cannot pass by applying no map at all;
//! - `secret.js` names, by a `file://` URL, a valid map of root's (0600, in a 0700 directory):
//!   not applied; its frame keeps the generated name, nothing of the map reaches the output, and
//!   one note names the map and why;
//! - `linked.js` names a symlink to a readable map, `fifo.js` a FIFO: refused, without a hang.
//!
//! On Node 20 and Node 24 (both installed by scripts/setup.sh).

use thread_ctx_test_support::process::{self as common, NodeRuntime};

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const NOBODY: u32 = 65534;
const HOT: [&str; 4] = ["hotOwn", "hotSecret", "hotLinked", "hotFifo"];

/// A map of a script of `lines` lines to `source`, line for line.
fn line_map(source: &str, lines: usize) -> String {
    let mappings = std::iter::once("AAAA").chain(std::iter::repeat_n("AACA", lines - 1)).collect::<Vec<_>>().join(";");
    format!(r#"{{"version":3,"sources":["{source}"],"names":[],"mappings":"{mappings}"}}"#)
}

/// A script whose function `name` burns ~`ms` of CPU per call, ending with a `sourceMappingURL`.
fn script(name: &str, url: &str) -> String {
    format!(
        "'use strict';\nfunction {name}(ms) {{\n  const end = Date.now() + ms;\n  let x = 0;\n  while (Date.now() < end) {{\n    for (let i = 0; i < 1e4; i++) x += Math.sqrt(i);\n  }}\n  return x;\n}}\nmodule.exports = {name};\n//# sourceMappingURL={url}\n"
    )
}

fn write(path: &Path, text: &str, uid: u32, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The service's directory (0755, root's), its scripts and maps.
fn service_dir(dir: &Path) -> PathBuf {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = dir.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let lines = script("x", "x").lines().count();
    let secret_map = private.join("secret.map");
    write(&secret_map, &line_map("SECRET.ts", lines), 0, 0o600);
    write(&dir.join("own.js.map"), &line_map("OWN.ts", lines), NOBODY, 0o600);
    write(&dir.join("readable.map"), &line_map("LINKED.ts", lines), NOBODY, 0o644);
    std::os::unix::fs::symlink(dir.join("readable.map"), dir.join("linked.js.map")).unwrap();
    let fifo = std::ffi::CString::new(dir.join("fifo.js.map").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0, "mkfifo: {}", std::io::Error::last_os_error());
    write(&dir.join("own.js"), &script("hotOwn", "own.js.map"), NOBODY, 0o644);
    write(&dir.join("secret.js"), &script("hotSecret", &format!("file://{}", secret_map.display())), NOBODY, 0o644);
    write(&dir.join("linked.js"), &script("hotLinked", "linked.js.map"), NOBODY, 0o644);
    write(&dir.join("fifo.js"), &script("hotFifo", "fifo.js.map"), NOBODY, 0o644);
    std::fs::copy(package_dir().join("otel-thread-ctx.linux-x64-gnu.node"), dir.join("addon.node")).unwrap();
    std::fs::set_permissions(dir.join("addon.node"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let service = dir.join("service.js");
    let hot = HOT.iter().zip(["own", "secret", "linked", "fifo"]).map(|(f, s)| format!("const {f} = require('./{s}.js');\n")).collect::<String>();
    let calls = HOT.iter().map(|f| format!("{f}(5);")).collect::<String>();
    write(
        &service,
        &format!(
            "'use strict';\nrequire('./addon.node').setSpanContext('{}', '{}', 1);\n{hot}console.log('pid ' + process.pid);\nconsole.log('ready');\nfor (;;) {{ {calls} }}\n",
            "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
        ),
        NOBODY,
        0o644,
    );
    service
}

/// `runtime`'s node, where uid 65534 may run it: a checkout under a 0700 home is copied out.
fn node_for_nobody(runtime: &NodeRuntime, dir: &Path) -> PathBuf {
    let node = runtime.binary();
    let node = node.canonicalize().unwrap_or_else(|e| panic!("{}: {e}", node.display()));
    let others_may = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 != 0);
    if node.ancestors().all(others_may) {
        return node;
    }
    let copy = dir.join("node");
    std::fs::copy(&node, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    copy
}

/// Each hot function's frames in `record --format jsonl --frames` output: (file, generated file).
fn frames_of(jsonl: &str) -> BTreeMap<String, Vec<(String, Option<String>)>> {
    let mut by_name: BTreeMap<String, Vec<(String, Option<String>)>> = BTreeMap::new();
    for frame in jsonl.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).flat_map(|v| v["frames"].as_array().cloned().unwrap_or_default())
    {
        let Some(name) = frame["name"].as_str().filter(|n| HOT.contains(n)) else { continue };
        let file = frame["file"].as_str().unwrap_or_default().to_string();
        let generated = frame["generated"]["file"].as_str().map(str::to_string);
        let seen = by_name.entry(name.to_string()).or_default();
        if !seen.contains(&(file.clone(), generated.clone())) {
            seen.push((file, generated));
        }
    }
    by_name
}

fn a_root_only_map_is_not_applied_for_an_unprivileged_service(test: &str, runtime: NodeRuntime) {
    if !ebpf_or_skip(test) {
        return;
    }
    let _one = one_at_a_time();
    let tmp = tempfile::Builder::new().prefix("hostile-user").tempdir().unwrap();
    let service = service_dir(tmp.path());
    let node = node_for_nobody(&runtime, tmp.path());
    let mut cmd = std::process::Command::new(&node);
    cmd.args(runtime.flags).arg(&service).current_dir(tmp.path());
    as_nobody(&mut cmd);
    let w = start_process(cmd);
    let status = std::fs::read_to_string(format!("/proc/{}/status", w.pid)).unwrap();
    assert!(
        status.lines().any(|l| l.split_whitespace().eq(["Uid:", "65534", "65534", "65534", "65534"])),
        "the service runs as uid 65534:\n{status}"
    );

    let pid = w.pid.to_string();
    let mut named = BTreeMap::new();
    let r = thread_ctx_until(&["record", &pid, "--hz", "499", "--duration", "40s", "--format", "jsonl", "--frames"], |line| {
        if let Some(l) = line {
            for (name, files) in frames_of(l) {
                named.entry(name).or_insert(files);
            }
        }
        named.len() == HOT.len()
    });
    let agent = agent_windows(&pid, &tmp.path().join("pprof"));
    let without = record_without_setuid(&pid);
    drop(w);
    assert_eq!(r.code, 0, "{} record failed: {}", runtime.name(), r.stderr);
    let frames = frames_of(&r.stdout);
    let _ = writeln_stderr(&format!("{}: hot frames {frames:?}\nnotes:\n{}", runtime.name(), r.stderr));
    for name in HOT {
        assert!(frames.contains_key(name), "{}: no {name} frame within 40 s of samples: {frames:?}\n{}", runtime.name(), r.stderr);
    }
    let dir = tmp.path().display().to_string();
    // Frames the heap did not name (no file) say nothing either way; every named one must agree.
    let named_files = |name: &str| frames[name].iter().filter(|(f, _)| !f.is_empty()).cloned().collect::<Vec<_>>();
    let own = named_files("hotOwn");
    assert!(!own.is_empty() && own.iter().all(|f| *f == (format!("{dir}/OWN.ts"), Some(format!("{dir}/own.js")))), "its own map is applied: {own:?}");
    for (name, script) in [("hotSecret", "secret.js"), ("hotLinked", "linked.js"), ("hotFifo", "fifo.js")] {
        let files = named_files(name);
        assert!(!files.is_empty() && files.iter().all(|f| *f == (format!("{dir}/{script}"), None)), "{name} keeps its generated name: {files:?}");
    }
    assert!(!r.stdout.contains("SECRET") && !r.stderr.contains("SECRET.ts"), "nothing of the root-only map is shown");
    let note = |script: &str| r.stderr.lines().find(|l| l.contains(&format!("source map of {dir}/{script}"))).unwrap_or_default().to_string();
    let secret = note("secret.js");
    assert!(
        secret.contains(&format!("{dir}/private/secret.map")) && secret.contains("the process's user (fs uid 65534, fs gid 65534) may not read it"),
        "one note names the refused map and why: {secret:?}\n{}",
        r.stderr
    );
    assert_eq!(r.stderr.matches("secret.map").count(), 1, "said once: {}", r.stderr);
    assert!(note("linked.js").contains("symbolic links"), "the symlinked map is refused: {}", r.stderr);
    assert!(note("fifo.js").contains("not a regular file"), "the FIFO map is refused: {}", r.stderr);

    // Without CAP_SETUID and CAP_SETGID the reader cannot take the service's credentials: it
    // opens nothing for it (even its own map), and says which capabilities are missing.
    let (code, stdout, stderr) = without;
    assert_eq!(code, Some(0), "record without SETUID, SETGID: {stderr}");
    let own = frames_of(&stdout).remove("hotOwn").unwrap_or_default().into_iter().filter(|(f, _)| !f.is_empty()).collect::<Vec<_>>();
    assert!(
        !own.is_empty() && own.iter().all(|f| *f == (format!("{dir}/own.js"), None)),
        "no map applied without the capabilities: {own:?}\n{stderr}"
    );
    assert!(stderr.contains("the reader needs CAP_SETUID and CAP_SETGID"), "the note names the capabilities: {stderr}");

    // The agent, over several windows: the same names in what it exports, one log line.
    let (stderr, pprof) = agent;
    assert!(pprof.contains(&format!("{dir}/OWN.ts")), "the agent applies the service's own map:\n{stderr}");
    assert!(!pprof.contains("SECRET") && !pprof.contains("LINKED"), "nor any refused map's sources");
    let refused: Vec<&str> = stderr.lines().filter(|l| l.contains("secret.map")).collect();
    assert!(
        refused.len() == 1 && refused[0].contains("may not read it") && refused[0].contains(&format!("process {pid}:")),
        "one line for the process names the refused map and why: {refused:?}\n{stderr}"
    );
}

/// `record PID` for 3 s as root with the unit's capabilities but CAP_SETUID and CAP_SETGID:
/// its exit code, stdout (jsonl with frames) and stderr.
fn record_without_setuid(pid: &str) -> (Option<i32>, String, String) {
    let bounding = "--bounding-set=-all,+bpf,+perfmon,+sys_ptrace,+dac_read_search,+sys_resource,+syslog";
    let out = std::process::Command::new("setpriv")
        .args(["--inh-caps=-all", bounding])
        .arg(thread_ctx_test_support::thread_ctx_binary())
        .args(["record", pid, "--hz", "499", "--duration", "3s", "--format", "jsonl", "--frames"])
        .output()
        .expect("setpriv (util-linux) runs thread-ctx with fewer capabilities");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `agent --pid PID` for 4 windows of 1 s into `dir`: its stderr, and its pprof files' bytes
/// (gunzipped, strings as they are in the protobuf).
fn agent_windows(pid: &str, dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir).unwrap();
    let r = thread_ctx(&["agent", "--pid", pid, "--hz", "499", "--interval", "1s", "--duration", "4s", "--pprof-dir", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "agent failed: {}", r.stderr);
    let mut bytes = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.to_string_lossy().ends_with(".pb.gz") {
            let out = std::process::Command::new("gzip").arg("-dc").arg(&path).output().unwrap();
            assert!(out.status.success(), "gzip -dc {}", path.display());
            bytes.extend(out.stdout);
        }
    }
    assert!(!bytes.is_empty(), "the agent wrote no pprof file:\n{}", r.stderr);
    (r.stderr, String::from_utf8_lossy(&bytes).into_owned())
}

#[test]
fn a_root_only_map_is_not_applied_for_an_unprivileged_service_on_node_20() {
    a_root_only_map_is_not_applied_for_an_unprivileged_service(
        "a_root_only_map_is_not_applied_for_an_unprivileged_service_on_node_20",
        NodeRuntime { major: Some("20"), flags: &[] },
    );
}

#[test]
fn a_root_only_map_is_not_applied_for_an_unprivileged_service_on_node_24() {
    a_root_only_map_is_not_applied_for_an_unprivileged_service(
        "a_root_only_map_is_not_applied_for_an_unprivileged_service_on_node_24",
        NodeRuntime::NODE_24,
    );
}
