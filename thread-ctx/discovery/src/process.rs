//! Facts about a live process that commands name it by: whether it exists, which thread group a
//! task id belongs to, its name and its owner, read from /proc.

use std::os::unix::fs::MetadataExt;

/// The process (or task) `pid` exists now (a zombie counts).
pub fn exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The thread group a task id belongs to: `Some(pid)` when `tid` is a thread other than its
/// process's main thread (/proc/TID exists for every thread, though only processes are listed
/// in /proc).
pub fn thread_group_of(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let tgid: i32 = status.lines().find_map(|l| l.strip_prefix("Tgid:"))?.trim().parse().ok()?;
    (tgid != tid).then_some(tgid)
}

/// Its command name (`comm`), when it can be read.
pub fn comm(pid: i32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_string()).filter(|c| !c.is_empty())
}

/// The user that owns it, when it can be read.
pub fn owner_uid(pid: i32) -> Option<u32> {
    std::fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// "process 4242 (node)", or "process 4242" when its name cannot be read.
pub fn describe(pid: i32) -> String {
    match comm(pid) {
        Some(c) => format!("process {pid} ({})", crate::printable::printable(&c)),
        None => format!("process {pid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_thread_is_its_own_group_and_other_threads_name_theirs() {
        let me = std::process::id() as i32;
        assert!(exists(me));
        assert_eq!(thread_group_of(me), None);
        // SAFETY: gettid has no preconditions. (Tests run on threads other than main.)
        let thread = unsafe { libc::gettid() };
        assert_ne!(thread, me);
        assert_eq!(thread_group_of(thread), Some(me));
        // SAFETY: geteuid has no preconditions.
        assert_eq!(owner_uid(me), Some(unsafe { libc::geteuid() }));
        assert!(describe(me).starts_with(&format!("process {me} (")));
    }
}
