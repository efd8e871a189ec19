//! GNU build ids (`.note.gnu.build-id`) of mapped ELF objects, which
//! profiles put on their mappings (pprof `Mapping.build_id`, OTLP
//! `process.executable.build_id.gnu`) so a backend can find the matching
//! symbols. Cached per object (device, inode): every Node process on a host
//! maps the same `node`.

use super::maps::Mapping;
use object::read::elf::{ElfFile64, SectionHeader};
use object::{elf, Endianness, ReadCache};
use std::collections::HashMap;
use std::fs::File;
use std::sync::Mutex;

/// A note section larger than this is not a build-id note (they are 36 bytes for a SHA-1 id).
const MAX_NOTE_BYTES: u64 = 4096;
/// Objects remembered; past this the cache starts over (bounded memory on a host with churn).
const MAX_CACHED: usize = 4096;

type Key = (String, u64);
static CACHE: Mutex<Option<HashMap<Key, Option<String>>>> = Mutex::new(None);

/// Lower-case hex build id of the object behind `m` in process `pid`, if it has one.
pub fn build_id(pid: i32, m: &Mapping) -> Option<String> {
    if !m.is_file_backed() {
        return None;
    }
    let key = (m.dev.clone(), m.inode);
    if let Some(hit) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).get(&key) {
        return hit.clone();
    }
    // map_files reaches deleted files and other mount namespaces; fall back to the path.
    let found = read_build_id(&format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
        .or_else(|| read_build_id(&format!("/proc/{pid}/root{}", m.path())))
        .map(|id| crate::ids::hex(&id));
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() >= MAX_CACHED {
        cache.clear();
    }
    cache.insert(key, found.clone());
    found
}

/// The build id bytes of the ELF file at `path`; None when it has none or is no 64-bit ELF.
pub fn read_build_id(path: &str) -> Option<Vec<u8>> {
    let file = File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let cache = ReadCache::new(file);
    let elf = ElfFile64::<Endianness, _>::parse(&cache).ok()?;
    let endian = elf.endian();
    let data = elf.data();
    for section in elf.elf_section_table().iter() {
        if section.sh_type(endian) != elf::SHT_NOTE || section.sh_size(endian) > MAX_NOTE_BYTES {
            continue;
        }
        let Ok(Some(mut notes)) = section.notes(endian, data) else { continue };
        while let Ok(Some(note)) = notes.next() {
            if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
                return Some(note.desc().to_vec());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_build_id_as_readelf_shows_it() {
        let exe = std::env::current_exe().unwrap();
        let ours = read_build_id(exe.to_str().unwrap());
        let readelf = std::process::Command::new("readelf").args(["-n"]).arg(&exe).output();
        let Ok(out) = readelf else { return }; // binutils not installed: nothing to compare with
        let text = String::from_utf8_lossy(&out.stdout);
        let expected = text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).map(str::to_string);
        assert_eq!(ours.map(|id| crate::ids::hex(&id)), expected);
        assert_eq!(read_build_id("/nonexistent"), None);
        assert_eq!(read_build_id("/proc/self/status"), None, "not an ELF file");
    }
}
