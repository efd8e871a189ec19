//! A target's file-system credentials, and opening a file with them.
//!
//! The reader runs as root (or with `CAP_DAC_READ_SEARCH`), which skips the
//! kernel's read and search permission checks: a path a target names (a
//! source map, its perf map) would otherwise open even when the target's own
//! user may not read it. Linux checks an open against the calling *thread's*
//! fs uid, fs gid and supplementary groups, so [`FsCredentials::run_as`] runs
//! the open on a thread that holds the target's: the raw `setgroups`,
//! `setfsgid` and `setfsuid` system calls change the calling thread only
//! (glibc's `setgroups()` wrapper would change every thread of the process),
//! and an fs uid changed from 0 to another drops `CAP_DAC_OVERRIDE`,
//! `CAP_DAC_READ_SEARCH` and the other file-permission capabilities from that
//! thread's effective set (capabilities(7)). The reader's own threads never
//! change credentials: nothing to restore, nothing to leak into another open.
//!
//! One such thread is kept per set of credentials (at most [`MAX_OPENERS`]):
//! the agent opens each script that has frames in a window once per window,
//! and a thread made for each open cost 88 µs where one kept costs 26 µs (the
//! open itself 2–4 µs; 2,000 opens of one file, on this busy 2-vCPU machine).

use std::collections::HashMap;
use std::io;
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};

/// Threads kept, one per set of credentials; past this they all end and start again as needed
/// (a host's services run as a few users, not 64).
pub const MAX_OPENERS: usize = 64;

/// How long an open may take: past it the caller gets an error, and the thread, blocked in a
/// file system that does not answer (a FUSE mount of the target's), is left to it; the next open
/// with those credentials gets a thread of its own, so one hung file blocks no other.
pub const OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// Threads left blocked that way (and not back yet); past this, opens as another user fail at once
/// (their frames keep their generated names) rather than leave more threads behind.
pub const MAX_BLOCKED_OPENERS: usize = 8;

static BLOCKED_OPENERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

type Job = Box<dyn FnOnce() + Send>;

/// The opener threads, by the credentials they hold.
static OPENERS: Mutex<Option<HashMap<FsCredentials, mpsc::Sender<Job>>>> = Mutex::new(None);

/// Who the kernel checks a process's opens as: `/proc/PID/status`'s fourth
/// `Uid:` and `Gid:` fields (the fs ids) and its `Groups:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FsCredentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, sorted.
    pub groups: Vec<u32>,
}

impl FsCredentials {
    /// The credentials of process `pid`.
    pub fn of(pid: i32) -> io::Result<FsCredentials> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        Self::parse(&status).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("/proc/{pid}/status has no Uid:, Gid: and Groups: lines of four, four and any ids"))
        })
    }

    fn parse(status: &str) -> Option<FsCredentials> {
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::split_whitespace);
        let fourth = |name: &str| field(name)?.nth(3)?.parse().ok();
        let mut groups = field("Groups:")?.map(str::parse).collect::<Result<Vec<u32>, _>>().ok()?;
        groups.sort_unstable();
        groups.dedup();
        Some(FsCredentials { uid: fourth("Uid:")?, gid: fourth("Gid:")?, groups })
    }

    /// Runs `open` with these credentials, on the thread that holds them (see the module's
    /// comment). A target whose fs uid is root keeps what root reads: `open` runs here, as the caller.
    pub fn run_as<T: Send + 'static>(&self, open: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.uid == 0 {
            return open();
        }
        let blocked = BLOCKED_OPENERS.load(Relaxed);
        if blocked >= MAX_BLOCKED_OPENERS {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{blocked} opens as a target never answered (a file system that hangs?): no more files are opened as another user"),
            ));
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move || {
            // No one waits any more: this open was counted as blocked, and has come back.
            if tx.send(open()).is_err() {
                BLOCKED_OPENERS.fetch_sub(1, Relaxed);
            }
        });
        self.opener()?.send(job).map_err(|_| io::Error::other("the thread opening files as the target has ended"))?;
        match rx.recv_timeout(OPEN_TIMEOUT) {
            Ok(answer) => answer,
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(io::Error::other("the open as the target gave no answer (it panicked)")),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                BLOCKED_OPENERS.fetch_add(1, Relaxed);
                OPENERS.lock().unwrap_or_else(PoisonError::into_inner).as_mut().map(|o| o.remove(self));
                Err(io::Error::new(io::ErrorKind::TimedOut, format!("the open as the target did not answer within {OPEN_TIMEOUT:?}")))
            }
        }
    }

    /// The thread holding these credentials, started when there is none.
    fn opener(&self) -> io::Result<mpsc::Sender<Job>> {
        let mut openers = OPENERS.lock().unwrap_or_else(PoisonError::into_inner);
        let openers = openers.get_or_insert_with(HashMap::new);
        if let Some(jobs) = openers.get(self) {
            return Ok(jobs.clone());
        }
        if openers.len() >= MAX_OPENERS {
            openers.clear(); // their threads end once their queued opens are done
        }
        let (jobs, queue) = mpsc::channel::<Job>();
        let (taken_tx, taken) = mpsc::sync_channel(1);
        let creds = self.clone();
        // 64 KiB: the thread only makes system calls (the default 2 MiB is address space for nothing).
        std::thread::Builder::new().name("open-as-target".into()).stack_size(64 << 10).spawn(move || {
            let held = creds.take();
            let ok = held.is_ok();
            let _ = taken_tx.send(held);
            if ok {
                for job in queue {
                    // A job that panics drops its answer's sender (its caller gets an error); the
                    // thread goes on serving the others.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            }
        })?;
        taken.recv().map_err(|_| io::Error::other("the thread opening files as the target ended at its start"))??;
        openers.insert(self.clone(), jobs.clone());
        Ok(jobs)
    }

    /// Gives the calling thread these credentials, and checks that it holds them: a reader
    /// without `CAP_SETUID`/`CAP_SETGID` cannot take another user's, and must not open as itself.
    fn take(&self) -> io::Result<()> {
        let refused = |what: &str, id: String| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("could not take the target's {what} {id} to open its file as it would (the reader needs CAP_SETUID and CAP_SETGID)"),
            )
        };
        if own_groups()? != self.groups {
            // SAFETY: a valid array of `len` gids; the raw call changes this thread only.
            let r = unsafe { libc::syscall(libc::SYS_setgroups, self.groups.len(), self.groups.as_ptr()) };
            if r != 0 {
                return Err(refused("supplementary groups", format!("{:?}", self.groups)));
            }
        }
        // setfsuid/setfsgid report no error: they return the previous id, and an invalid id
        // (u32::MAX) changes nothing, so a second call reads back what the thread now holds.
        // SAFETY: plain integer arguments; these calls change this thread's credentials only.
        let (gid, uid) = unsafe {
            libc::syscall(libc::SYS_setfsgid, self.gid);
            libc::syscall(libc::SYS_setfsuid, self.uid);
            (libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32, libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32)
        };
        if gid != self.gid {
            return Err(refused("fs gid", self.gid.to_string()));
        }
        if uid != self.uid {
            return Err(refused("fs uid", self.uid.to_string()));
        }
        Ok(())
    }
}

/// The calling thread's supplementary groups, sorted.
fn own_groups() -> io::Result<Vec<u32>> {
    // SAFETY: a null list of length 0 asks for the count only.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut groups = vec![0; n as usize];
    // SAFETY: room for `n` gids.
    let n = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    groups.truncate(n as usize);
    groups.sort_unstable();
    groups.dedup();
    Ok(groups)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn status_lines_give_the_fs_ids_and_groups() {
        let status = "Name:\tnode\nUid:\t1000\t1000\t1000\t1001\nGid:\t100\t100\t100\t101\nGroups:\t27 4 27 \n";
        assert_eq!(FsCredentials::parse(status), Some(FsCredentials { uid: 1001, gid: 101, groups: vec![4, 27] }));
        let none = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n";
        assert_eq!(FsCredentials::parse(none), Some(FsCredentials { uid: 0, gid: 0, groups: vec![] }));
        assert_eq!(FsCredentials::parse("Uid:\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\n"), None, "three Uid fields");
        assert!(FsCredentials::of(std::process::id() as i32).is_ok());
    }

    /// Root-only and uid 65534's files, in a 0755 directory, for the tests of reads as a target.
    pub(crate) struct NobodysFiles {
        pub dir: tempfile::TempDir,
        /// 0700, root's.
        pub private: std::path::PathBuf,
        /// 0600 in `private`, root's.
        pub secret: std::path::PathBuf,
        /// 0600, of uid 65534.
        pub own: std::path::PathBuf,
    }

    /// [`NobodysFiles`], or None (after a skip, or a failure under REQUIRE_EBPF=1) when not root.
    pub(crate) fn nobodys_files(test: &str) -> Option<NobodysFiles> {
        // SAFETY: geteuid has no preconditions.
        let missing = (unsafe { libc::geteuid() } != 0).then_some("files of another uid and another fs uid need root (run the tests as root)");
        if !thread_ctx_test_support::process::can_run(test, missing) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &std::path::Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        mode(dir.path(), 0o755);
        let private = dir.path().join("private");
        std::fs::create_dir(&private).unwrap();
        mode(&private, 0o700);
        let secret = private.join("secret.map");
        std::fs::write(&secret, b"{}").unwrap();
        mode(&secret, 0o600);
        let own = dir.path().join("own.map");
        std::fs::write(&own, b"{}").unwrap();
        std::os::unix::fs::chown(&own, Some(65534), Some(65534)).unwrap();
        mode(&own, 0o600);
        Some(NobodysFiles { dir, private, secret, own })
    }

    /// The kernel's side of the mechanism, on this kernel: root whose thread took fs uid 65534
    /// cannot open a root-only file (its DAC capabilities dropped with the fs uid), opens a file of
    /// 65534, and the other threads, this one included, keep root's reads.
    #[test]
    fn another_fs_uid_loses_root_reads_on_its_thread_only() {
        let Some(NobodysFiles { dir: _dir, private, secret, own }) = nobodys_files("another_fs_uid_loses_root_reads_on_its_thread_only") else {
            return;
        };
        let open_secret = private.join("open-secret");
        std::fs::write(&open_secret, b"mode 0644, in a 0700 dir").unwrap();

        let nobody = FsCredentials { uid: 65534, gid: 65534, groups: vec![] };
        let open_as = |creds: &FsCredentials, p: &std::path::Path| {
            let p = p.to_path_buf();
            creds.run_as(move || std::fs::File::open(p))
        };
        let open = |p: &std::path::Path| open_as(&nobody, p);
        assert_eq!(open(&secret).unwrap_err().kind(), io::ErrorKind::PermissionDenied, "a 0600 root file");
        assert_eq!(open(&open_secret).unwrap_err().kind(), io::ErrorKind::PermissionDenied, "a 0700 root directory is not searched");
        assert!(open(&own).is_ok(), "its own 0600 file");
        assert!(std::fs::File::open(&secret).is_ok(), "this thread keeps root's reads");
        let root = FsCredentials { uid: 0, gid: 0, groups: vec![] };
        assert!(open_as(&root, &secret).is_ok(), "a root target keeps what root reads");

        // A group the target is in opens a 0640 file of that group; without the group, refused.
        std::fs::write(&secret, b"group 4242").unwrap();
        std::os::unix::fs::chown(&secret, Some(0), Some(4242)).unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
        let in_group = FsCredentials { uid: 65534, gid: 65534, groups: vec![4242] };
        assert!(open_as(&in_group, &secret).is_ok(), "supplementary group 4242 reads it");
        assert_eq!(open(&secret).unwrap_err().kind(), io::ErrorKind::PermissionDenied, "without group 4242");
        assert_eq!(own_groups().unwrap(), own_groups_of_process(), "this thread's groups untouched");
    }

    /// An open that panics is an error for its caller; the thread holding the credentials goes on.
    #[test]
    fn an_open_that_panics_is_an_error_and_the_next_opens() {
        let Some(files) = nobodys_files("an_open_that_panics_is_an_error_and_the_next_opens") else { return };
        let creds = FsCredentials { uid: 65534, gid: 65534, groups: vec![4243] };
        let e = creds.run_as(|| -> io::Result<()> { panic!("a panicking open") }).unwrap_err();
        assert!(e.to_string().contains("gave no answer"), "{e}");
        let own = files.own.clone();
        assert!(creds.run_as(move || std::fs::File::open(own)).is_ok(), "the thread still serves these credentials");
    }

    /// An open that blocks (a FIFO opened for reading with no writer, as a hung file system
    /// would) is an error after OPEN_TIMEOUT, and the next open with the same credentials answers.
    #[test]
    fn an_open_that_hangs_times_out_and_blocks_no_other() {
        let Some(files) = nobodys_files("an_open_that_hangs_times_out_and_blocks_no_other") else { return };
        let fifo = files.dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        let creds = FsCredentials { uid: 65534, gid: 65534, groups: vec![4244] };
        let started = std::time::Instant::now();
        let hung = fifo.clone();
        let e = creds.run_as(move || std::fs::File::open(hung)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(started.elapsed() < OPEN_TIMEOUT * 5, "answered after {:?}", started.elapsed());
        let own = files.own.clone();
        assert!(creds.run_as(move || std::fs::File::open(own)).is_ok(), "the next open has a thread of its own");
        // A writer releases the blocked thread, which is then no longer counted.
        assert_eq!(BLOCKED_OPENERS.load(std::sync::atomic::Ordering::Relaxed), 1);
        let _writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        let released = std::time::Instant::now();
        while BLOCKED_OPENERS.load(std::sync::atomic::Ordering::Relaxed) != 0 && released.elapsed() < OPEN_TIMEOUT {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(BLOCKED_OPENERS.load(std::sync::atomic::Ordering::Relaxed), 0, "the released thread is no longer counted");
    }

    fn own_groups_of_process() -> Vec<u32> {
        FsCredentials::of(std::process::id() as i32).unwrap().groups
    }
}
