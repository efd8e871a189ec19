//! Gives back the agent's resident pages of the object files whose symbol
//! tables it reads. Blazesym maps each object whole (read-only, shared) and
//! reads `.symtab` and `.strtab` through that mapping; every page a lookup
//! touched stays in the agent's RSS until the object is closed: ~10 MiB per
//! `node` build (`/usr/bin/node` 20: 2.6 MB of `.symtab`, 7.5 MB of `.strtab`;
//! Node 24: 3.5 + 12 MB), reached gradually as more names are looked up. So
//! the agent's RSS would follow how many builds it tracks and for how long.
//! Dropping those pages after each window keeps only what one window touches.
//! They stay in the page cache: the next look is a minor fault, not a read.

use thread_ctx_discovery::maps::{read_maps, Mapping};

/// A file as the kernel identifies it, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedFile {
    pub dev: u64,
    pub inode: u64,
    pub size: u64,
}

fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64
}

/// True for blazesym's mapping of `file`: all of it, from offset 0, read-only and shared (memmap2's
/// `map`). The loader never maps an object shared (its segments are private, and RELRO's pages
/// are copies it wrote), so the pages of such a mapping are the file's own.
fn is_whole_file_mapping(m: &Mapping, file: &MappedFile, page: u64) -> bool {
    let Some((major, minor)) = m.dev.split_once(':') else { return false };
    let (Ok(major), Ok(minor)) = (u32::from_str_radix(major, 16), u32::from_str_radix(minor, 16)) else { return false };
    m.inode == file.inode
        && libc::makedev(major, minor) == file.dev
        && m.perms == "r--s"
        && m.offset == 0
        && m.end - m.start == file.size.div_ceil(page) * page
}

/// Drops this process's resident pages of every whole-file mapping of `files`; the bytes advised.
pub fn drop_resident_pages(files: &[MappedFile]) -> u64 {
    if files.is_empty() {
        return 0;
    }
    let Ok(maps) = read_maps(std::process::id() as i32) else { return 0 };
    let page = page_size();
    let mut advised = 0;
    for m in maps.iter().filter(|m| files.iter().any(|f| is_whole_file_mapping(m, f, page))) {
        let len = (m.end - m.start) as usize;
        // SAFETY: a read-only mapping of a whole file, never written (see
        // `is_whole_file_mapping`): MADV_DONTNEED only unmaps its pages, and the next read
        // faults the same bytes back from the page cache. Nothing else is touched.
        if unsafe { libc::madvise(m.start as *mut libc::c_void, len, libc::MADV_DONTNEED) } == 0 {
            advised += len as u64;
        }
    }
    advised
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    fn resident_kib(start: u64) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&format!("{start:x}-")));
        lines.find_map(|l| l.strip_prefix("Rss:")).map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap()).unwrap()
    }

    #[test]
    fn the_pages_of_a_whole_file_mapping_are_dropped_and_read_back_the_same() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let bytes: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
        file.write_all(&bytes).unwrap();
        let meta = file.as_file().metadata().unwrap();
        let len = bytes.len();
        // SAFETY: a new read-only mapping of a file this test owns (shared, as blazesym maps), unmapped below.
        let at =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, std::os::fd::AsRawFd::as_raw_fd(file.as_file()), 0) };
        assert_ne!(at, libc::MAP_FAILED);
        // SAFETY: `len` readable bytes at `at`, mapped above.
        let view = unsafe { std::slice::from_raw_parts(at as *const u8, len) };
        assert_eq!(view.iter().map(|&b| b as u64).sum::<u64>(), bytes.iter().map(|&b| b as u64).sum::<u64>());
        assert!(resident_kib(at as u64) >= 1024, "read whole: resident");
        let other = MappedFile { dev: meta.dev(), inode: meta.ino() + 1, size: meta.size() };
        assert_eq!(drop_resident_pages(&[other]), 0, "another file's mapping is left alone");
        let advised = drop_resident_pages(&[MappedFile { dev: meta.dev(), inode: meta.ino(), size: meta.size() }]);
        assert_eq!(advised, len as u64);
        assert_eq!(resident_kib(at as u64), 0, "dropped");
        assert_eq!(view, &bytes[..], "and read back the same");
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(at, len) };
    }
}
