//! Files a target process names or writes for its profilers (V8's perf map,
//! a jitdump, its scripts and their source maps), opened the way a root
//! reader must open files an untrusted process controls:
//!
//! - with the target's file-system credentials ([`FsCredentials`]: its fs
//!   uid, fs gid and groups, on a thread of their own), so what its user may
//!   not read, the reader does not read for it (a root target reads as root);
//! - inside the target's own root (`/proc/PID/root`) with `openat2`'s
//!   `RESOLVE_IN_ROOT`, so a symlink in the target's /tmp cannot lead into
//!   ours, and without following a symlink as the last component;
//! - non-blocking, and only regular files (a FIFO would hang the reader, a
//!   device would never end);
//! - for files it writes, owned by the target's user or root (another user
//!   cannot plant the file for a pid before the target writes it);
//! - read up to a bound, keeping the newest bytes (the files are appended to).

use crate::fs_credentials::FsCredentials;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path`, a file of process `pid`, as the process would: `/proc/PID/root/...` resolves
/// inside the target's root; `/proc/PID/map_files/...` is the very file the process maps
/// (followed: it is a link to that inode, not to a name); any other path is opened as is, never
/// through a final symlink. Fails unless it is a regular file owned by the target's uid or root.
pub fn open(pid: i32, path: &Path) -> io::Result<File> {
    let file = open_any_owner(pid, path)?;
    let meta = file.metadata()?;
    let owner = std::fs::metadata(format!("/proc/{pid}"))?.uid();
    if meta.uid() != owner && meta.uid() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} belongs to uid {}, not to the process's uid {owner} (or root): not trusted", path.display(), meta.uid()),
        ));
    }
    Ok(file)
}

/// [`open`] without the owner check: for files the target read itself (its scripts and their
/// source maps), whose owner says nothing about who planted them. Still opened with the target's
/// credentials: a map it names but may not read is refused with `PermissionDenied`, saying whose.
pub fn open_any_owner(pid: i32, path: &Path) -> io::Result<File> {
    let root = format!("/proc/{pid}/root");
    let file = if path.starts_with(format!("/proc/{pid}/map_files")) {
        // The inode the process maps: it opened it for reading itself (reading map_files needs
        // CAP_SYS_ADMIN, which the target's fs uid would not drop; its own uid cannot anyway).
        std::fs::OpenOptions::new().read(true).custom_flags(FLAGS & !libc::O_NOFOLLOW).open(path)?
    } else {
        let creds = FsCredentials::of(pid)?;
        let as_target = |e: io::Error| match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("the process's user (fs uid {}, fs gid {}) may not read it: {e}", creds.uid, creds.gid),
            ),
            _ => e,
        };
        if let Ok(inside) = path.strip_prefix(&root) {
            // The magic link is followed here, with the reader's own credentials (ptrace access
            // to the process); the walk inside the root then runs with the target's.
            let (dir, inside) = (open_root(&root)?, inside.to_path_buf());
            creds.run_as(move || open_in_root(&dir, &inside)).map_err(as_target)?
        } else {
            let path = path.to_path_buf();
            creds.run_as(move || open_nofollow(libc::AT_FDCWD, &path)).map_err(as_target)?
        }
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a regular file", path.display())));
    }
    Ok(file)
}

const FLAGS: libc::c_int = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;

/// `/proc/PID/root` as a directory to resolve from (O_PATH: the directory itself is not read;
/// following the magic link is the point).
fn open_root(root: &str) -> io::Result<File> {
    let c = cstring(Path::new(root))?;
    // SAFETY: a valid NUL-terminated path; the fd is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn open_in_root(dir: &File, inside: &Path) -> io::Result<File> {
    let c = cstring(inside)?;
    // SAFETY: open_how is plain integers; zero is "no flags" for the fields not set.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = FLAGS as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 with a valid dirfd, NUL-terminated path and an open_how of the size passed.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dir.as_raw_fd(), c.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    };
    if fd >= 0 {
        // SAFETY: fd is a fresh descriptor we own.
        return Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) }));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    // Kernels before 5.6: no openat2; at least never follow the final symlink.
    open_nofollow(dir.as_raw_fd(), inside)
}

fn open_nofollow(dirfd: libc::c_int, path: &Path) -> io::Result<File> {
    let c = cstring(path)?;
    // SAFETY: a valid dirfd (or AT_FDCWD) and a NUL-terminated path.
    let fd = unsafe { libc::openat(dirfd, c.as_ptr(), FLAGS) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn cstring(p: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The last `max` bytes of `file` (all of it when smaller), and how many
/// bytes before them were skipped.
pub fn read_tail(mut file: File, max: u64) -> io::Result<(Vec<u8>, u64)> {
    let len = file.metadata()?.len();
    let skipped = len.saturating_sub(max);
    file.seek(SeekFrom::Start(skipped))?;
    let mut bytes = Vec::new();
    // take(): the file may grow while we read; never more than the bound.
    file.take(max).read_to_end(&mut bytes)?;
    Ok((bytes, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_of_the_process_owner_open() {
        let pid = std::process::id() as i32;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("perf.map");
        std::fs::write(&file, b"1000 10 a\n").unwrap();
        let in_root = Path::new(&format!("/proc/{pid}/root")).join(file.strip_prefix("/").unwrap());
        assert!(open(pid, &in_root).is_ok(), "own file through our own root");
        assert!(open(pid, &file).is_ok());

        let link = dir.path().join("link.map");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(open(pid, &link).unwrap_err().raw_os_error(), Some(libc::ELOOP), "final symlink not followed");

        let fifo = dir.path().join("fifo.map");
        let c = cstring(&fifo).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open(pid, &fifo).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(open(pid, Path::new("/dev/zero")).unwrap_err().to_string().contains("not a regular file"));

        // A mapped file through map_files (reading map_files needs CAP_SYS_ADMIN).
        if unsafe { libc::geteuid() } == 0 {
            let f = File::open(&file).unwrap();
            let len = 10;
            let at = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, f.as_raw_fd(), 0) };
            assert_ne!(at, libc::MAP_FAILED);
            let start = at as usize;
            let page_end = start + 4096;
            let via = format!("/proc/{pid}/map_files/{start:x}-{page_end:x}");
            let mut text = String::new();
            open(pid, Path::new(&via)).unwrap().read_to_string(&mut text).unwrap();
            assert_eq!(text, "1000 10 a\n");
            unsafe { libc::munmap(at, len) };
        }

        // Planted by another user: only root can make one here.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&file, Some(12345), None).unwrap();
            let e = open(pid, &file).unwrap_err();
            assert!(e.to_string().contains("belongs to uid 12345"), "{e}");
            assert!(open_any_owner(pid, &file).is_ok(), "a script or source map of any owner is read (as the target: root here)");
            assert!(open_any_owner(pid, &link).is_err() && open_any_owner(pid, &fifo).is_err(), "but never through a symlink, nor a FIFO");
        }
    }

    /// A process of uid 65534 names files in its root: its own opens, a root-only one (0600 in a
    /// 0700 directory) is refused saying whose credentials refused it, and the same path opens
    /// for a root process (this one).
    #[test]
    fn files_open_with_the_target_credentials() {
        use std::os::unix::process::CommandExt;
        let Some(crate::fs_credentials::tests::NobodysFiles { dir, secret, own, .. }) =
            crate::fs_credentials::tests::nobodys_files("files_open_with_the_target_credentials")
        else {
            return;
        };
        let link = dir.path().join("link.map");
        std::os::unix::fs::symlink(&own, &link).unwrap();

        let mut child = std::process::Command::new("sleep").arg("60").uid(65534).gid(65534).spawn().unwrap();
        let pid = child.id() as i32;
        let in_root = |p: &Path| in_root_of(pid, p);
        let refused = open_any_owner(pid, &in_root(&secret)).unwrap_err();
        let plain = open_any_owner(pid, &secret).unwrap_err();
        let opened = open(pid, &in_root(&own)).map(|_| ()).and(open(pid, &own).map(|_| ()));
        let linked = open_any_owner(pid, &in_root(&link)).unwrap_err();
        let _ = child.kill();
        let _ = child.wait();
        for e in [&refused, &plain] {
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
            assert!(e.to_string().contains("the process's user (fs uid 65534, fs gid 65534) may not read it"), "{e}");
        }
        assert!(opened.is_ok(), "its own file, through its root and as a path: {opened:?}");
        assert_eq!(linked.raw_os_error(), Some(libc::ELOOP), "a symlink to its own file is still refused: {linked}");
        let me = std::process::id() as i32;
        assert!(open_any_owner(me, &in_root_of(me, &secret)).is_ok(), "a root process reads what root reads");
    }

    fn in_root_of(pid: i32, p: &Path) -> std::path::PathBuf {
        Path::new(&format!("/proc/{pid}/root")).join(p.strip_prefix("/").unwrap())
    }

    #[test]
    fn tail_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_tail(File::open(&p).unwrap(), 4).unwrap(), (b"6789".to_vec(), 6));
        assert_eq!(read_tail(File::open(&p).unwrap(), 100).unwrap(), (b"0123456789".to_vec(), 0));
    }
}
