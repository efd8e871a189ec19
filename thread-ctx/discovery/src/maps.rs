//! Parser for /proc/PID/maps: the mappings discovery walks to find ELF objects
//! and the OTEL_CTX process-context mapping.

use crate::error::{Error, Result};

/// One line of /proc/PID/maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    pub dev: String,
    pub inode: u64,
    /// Path or pseudo name (`[heap]`, `/memfd:OTEL_CTX (deleted)`); empty for anonymous.
    pub name: String,
}

impl Mapping {
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// True for mappings backed by a file on disk (inode set, absolute path).
    pub fn is_file_backed(&self) -> bool {
        self.inode != 0 && self.name.starts_with('/') && !self.name.starts_with("/memfd:")
    }

    /// The file path without the kernel's " (deleted)" suffix.
    pub fn path(&self) -> &str {
        self.name.strip_suffix(" (deleted)").unwrap_or(&self.name)
    }
}

/// Largest maps file read. The kernel writes it, but the process chooses how
/// many mappings (up to vm.max_map_count, 65530) and how long their paths are
/// (up to 4 KiB): that could be a quarter of a gigabyte. A large real process
/// has a few thousand lines of ~100 bytes.
pub const MAX_MAPS_BYTES: u64 = 32 << 20;

/// Reads and parses /proc/PID/maps.
pub fn read_maps(pid: i32) -> Result<Vec<Mapping>> {
    use std::io::Read;
    let path = format!("/proc/{pid}/maps");
    let fail = |cause| Error::Process { pid, path: path.clone(), cause };
    let mut bytes = Vec::new();
    let file = std::fs::File::open(&path).map_err(fail)?;
    file.take(MAX_MAPS_BYTES + 1).read_to_end(&mut bytes).map_err(fail)?;
    if bytes.len() as u64 > MAX_MAPS_BYTES {
        return Err(Error::TooLarge { what: path.clone(), limit: MAX_MAPS_BYTES });
    }
    // Paths are bytes: a file name that is not UTF-8 must not hide the whole process.
    parse_maps(&String::from_utf8_lossy(&bytes), &path)
}

/// Parses the text of a maps file; `origin` names it in errors.
pub fn parse_maps(text: &str, origin: &str) -> Result<Vec<Mapping>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| parse_line(line).ok_or_else(|| Error::MapsLine { path: origin.into(), line: line.into() }))
        .collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    // Five space-separated fields, then the name (which may itself contain spaces).
    let mut rest = line;
    let mut fields = [""; 5];
    for f in fields.iter_mut() {
        rest = rest.trim_start_matches(' ');
        let end = rest.find(' ').unwrap_or(rest.len());
        *f = &rest[..end];
        rest = &rest[end..];
    }
    let (start, end) = fields[0].split_once('-')?;
    let (start, end) = (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?);
    if start > end {
        return None;
    }
    Some(Mapping {
        start,
        end,
        perms: fields[1].to_string(),
        offset: u64::from_str_radix(fields[2], 16).ok()?,
        dev: fields[3].to_string(),
        inode: fields[4].parse().ok()?,
        name: rest.trim_start_matches(' ').to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_anon_and_spaced_names() {
        let text = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234  /usr/bin/my prog
7f0000000000-7f0000001000 rw-p 00000000 00:00 0 
7f0000002000-7f0000003000 r--p 00000000 00:01 77 /memfd:OTEL_CTX (deleted)
";
        let maps = parse_maps(text, "test").unwrap();
        assert_eq!(maps.len(), 3);
        assert_eq!(maps[0].name, "/usr/bin/my prog");
        assert!(maps[0].is_file_backed());
        assert_eq!(maps[1].name, "");
        assert_eq!(maps[2].path(), "/memfd:OTEL_CTX");
        assert!(!maps[2].is_file_backed());
        assert_eq!(maps[0].start, 0x55d0c0a00000);
    }

    #[test]
    fn rejects_garbage_naming_the_line() {
        let err = parse_maps("not a maps line\n", "/proc/1/maps").unwrap_err();
        assert!(err.to_string().contains("not a maps line"), "{err}");
        assert!(parse_maps("2000-1000 r--p 00000000 00:00 0\n", "m").is_err(), "end before start");
        assert!(parse_maps("1000-2000 r--p 0 00:00 99999999999999999999999 /x\n", "m").is_err(), "inode overflows");
    }

    #[test]
    fn odd_names_stay_names() {
        let long = format!("/{}", "a".repeat(5000));
        let text = [
            "1000-2000 r--p 00000000 08:01 5 /tmp/x (deleted) (deleted)\n",
            "2000-3000 r--p 00000000 08:01 6 /memfd:evil name (deleted)\n",
            &format!("3000-4000 r--p 00000000 08:01 7 {long}\n"),
            "4000-5000 r--p 00000000 08:01 8 /tmp/caf\u{fffd}\n",
        ]
        .concat();
        let maps = parse_maps(&text, "m").unwrap();
        assert_eq!(maps[0].path(), "/tmp/x (deleted)", "only the kernel's own suffix is taken off");
        assert!(!maps[1].is_file_backed());
        assert_eq!(maps[2].name.len(), 5001);
        assert_eq!(maps[3].path(), "/tmp/caf\u{fffd}");
    }
}
