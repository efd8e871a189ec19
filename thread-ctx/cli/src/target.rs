//! The process a command reads, found the way every command finds it, and what the command tells
//! its user when it cannot be read: the library's typed error says what went wrong (its kind
//! gives the exit code), this file says who may read the target and how.

use crate::exit_codes::TargetError;
use anyhow::Result;
use thread_ctx_discovery::error::{Error, ErrorKind};
use thread_ctx_discovery::{process, Discovery, NoWriter};
#[cfg(feature = "ebpf")]
use thread_ctx_discovery::{Writer, WriterError};
#[cfg(feature = "ebpf")]
use thread_ctx_sampler::error::PRIVILEGE_HINT;

/// How a command reads its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// /proc and ptrace (`inspect`, `dump`, `validate`): root or the target's own user may.
    Ptrace,
    /// eBPF (`record`): only root, whoever owns the target.
    #[cfg(feature = "ebpf")]
    Ebpf,
}

/// Who may read process `pid` this way.
pub fn permission_hint(pid: i32, access: Access) -> String {
    match (access, process::owner_uid(pid)) {
        #[cfg(feature = "ebpf")]
        (Access::Ebpf, _) => PRIVILEGE_HINT.to_string(),
        (Access::Ptrace, Some(uid)) => format!("run thread-ctx as root (sudo) or as the target's user (uid {uid})"),
        (Access::Ptrace, None) => "run thread-ctx as root (sudo) or as the target's user".into(),
    }
}

/// Discovery of process `pid`, which must exist now.
pub fn discover(pid: i32, access: Access) -> Result<Discovery> {
    thread_ctx_discovery::discover(pid).map_err(|e| explain(e, pid, access))
}

/// `e`, met reading process `pid`, as its user should read it.
pub fn explain(e: Error, pid: i32, access: Access) -> anyhow::Error {
    let message = match e.kind() {
        ErrorKind::NoPermission => {
            let what = match &e {
                Error::Process { path, cause, .. } | Error::Io { path, cause } => format!("cannot read {path} ({cause})"),
                _ => e.to_string(),
            };
            format!("{what}: {}", permission_hint(pid, access))
        }
        ErrorKind::TargetGone if matches!(e, Error::NoProcess { .. }) => e.to_string(),
        ErrorKind::TargetGone => format!("process {pid} exited before it could be read ({e})"),
        _ => return anyhow::Error::new(e).context(format!("discovering otel_thread_ctx_v1 in process {pid}")),
    };
    TargetError { kind: e.kind(), message }.into()
}

/// The writer object the sampler reads, or why there is none.
#[cfg(feature = "ebpf")]
pub fn sampled_writer(d: &Discovery, access: Access) -> Result<&Writer> {
    d.sampled_writer().map_err(|e| match e {
        WriterError::None(none) => no_writer(none, access),
        e => e.into(),
    })
}

/// A process without a writer: what to load in it, or, when objects could not be read for want
/// of permission (the symbol may be in one of them), who may read them.
pub fn no_writer(e: NoWriter, access: Access) -> anyhow::Error {
    if e.kind() != ErrorKind::NoPermission {
        return e.into();
    }
    let message = format!("{e}: {}; with capabilities instead of root, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH", permission_hint(e.pid, access));
    TargetError { kind: ErrorKind::NoPermission, message }.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit_codes::{code_of, EXIT_NO_PERMISSION, EXIT_NO_SYMBOL, EXIT_TARGET_GONE};
    use std::io;
    use std::sync::Arc;
    use thread_ctx_discovery::SkippedObject;

    #[test]
    fn denied_and_gone_targets_say_what_to_do_and_keep_their_kind() {
        let denied = Error::Process { pid: 1, path: "/proc/1/maps".into(), cause: io::Error::from_raw_os_error(libc::EACCES) };
        let e = explain(denied, 1, Access::Ptrace);
        assert_eq!(code_of(&e), EXIT_NO_PERMISSION);
        assert!(e.to_string().starts_with("cannot read /proc/1/maps (Permission denied (os error 13)): run thread-ctx as root (sudo)"), "{e}");
        let denied = Error::Process { pid: 1, path: "/proc/1/maps".into(), cause: io::Error::from_raw_os_error(libc::EACCES) };
        let e = explain(denied, 1, Access::Ebpf);
        assert!(e.to_string().contains("eBPF needs root") && !e.to_string().contains("target's user"), "{e}");
        assert_eq!(code_of(&explain(Error::NoProcess { pid: 7 }, 7, Access::Ptrace)), EXIT_TARGET_GONE);
    }

    #[cfg(feature = "ebpf")]
    #[test]
    fn objects_unreadable_for_want_of_permission_are_a_permission_error() {
        let skipped = |path: &str, errno| SkippedObject {
            path: path.into(),
            error: Arc::new(Error::io(format!("/proc/9/root{path}"), io::Error::from_raw_os_error(errno))),
        };
        let d = |objects: Vec<SkippedObject>| Discovery { pid: i32::MAX, writers: vec![], skipped_objects: objects, process_context: None };
        let denied = d(vec![skipped("/srv/app/addon.node", libc::EACCES), skipped("/x.so", libc::EIO)]);
        let e = sampled_writer(&denied, Access::Ptrace).unwrap_err();
        assert_eq!(code_of(&e), EXIT_NO_PERMISSION);
        let text = e.to_string();
        assert!(text.contains("addon.node: Permission denied") && text.contains("CAP_DAC_READ_SEARCH"), "{text}");
        assert_eq!(code_of(&sampled_writer(&d(vec![skipped("/x.so", libc::EPERM)]), Access::Ptrace).unwrap_err()), EXIT_NO_PERMISSION);
        let absent = sampled_writer(&d(vec![skipped("/x.so", libc::ENOENT)]), Access::Ptrace).unwrap_err();
        assert_eq!(code_of(&absent), EXIT_NO_SYMBOL);
        assert!(absent.to_string().contains("load otel-thread-ctx in it"), "{absent}");
    }
}
