//! GNU build ids (`.note.gnu.build-id`) of mapped ELF objects, which
//! profiles put on their mappings (pprof `Mapping.build_id`, OTLP
//! `process.executable.build_id.gnu`) so a backend can find the matching
//! symbols. Cached per object (device, inode): every Node process on a host
//! maps the same `node`.

use super::elf_reader::{self, ElfData};
use super::maps::Mapping;
use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, NoteIterator, ProgramHeader, SectionHeader};
use object::read::ReadCacheOps;
use object::Endianness;
use std::collections::HashMap;
use std::sync::Mutex;

/// A note section larger than this is not a build-id note (they are 36 bytes for a SHA-1 id).
const MAX_NOTE_BYTES: u64 = 4096;
/// Longest id kept: SHA-1 ids are 20 bytes, `--build-id=0xHEX` ids whatever the linker was given.
pub const MAX_BUILD_ID_BYTES: usize = 64;
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
    build_id_of(&elf_reader::open(path).ok()??)
}

/// The GNU build id in an ELF object's notes (sections, else PT_NOTE
/// segments: a stripped object may have no section headers), a pure function
/// of the file's bytes (fuzzed). A note section larger than a build-id note
/// can be, or an id longer than any hash, is not one.
pub fn build_id_of<R: ReadCacheOps>(data: &ElfData<R>) -> Option<Vec<u8>> {
    let header = FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let in_notes = |notes: Option<NoteIterator<'_, FileHeader64<Endianness>>>| -> Option<Vec<u8>> {
        let mut notes = notes?;
        while let Ok(Some(note)) = notes.next() {
            if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
                let id = note.desc();
                return (!id.is_empty() && id.len() <= MAX_BUILD_ID_BYTES).then(|| id.to_vec());
            }
        }
        None
    };
    if let Ok(sections) = header.sections(endian, data) {
        let small_notes = sections.iter().filter(|s| s.sh_type(endian) == elf::SHT_NOTE && s.sh_size(endian) <= MAX_NOTE_BYTES);
        if let Some(id) = small_notes.filter_map(|s| in_notes(s.notes(endian, data).ok()?)).next() {
            return Some(id);
        }
    }
    let segments = header.program_headers(endian, data).ok()?;
    let small_notes = segments.iter().filter(|p| p.p_type(endian) == elf::PT_NOTE && p.p_filesz(endian) <= MAX_NOTE_BYTES);
    small_notes.filter_map(|p| in_notes(p.notes(endian, data).ok()?)).next()
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
