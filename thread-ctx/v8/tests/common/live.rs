//! A live node process seen from outside, as the sampler sees it: stop its
//! main thread (ptrace), walk its frame pointers reading each frame's slots
//! (and, through the frame's JSFunction, its SharedFunctionInfo) the way the
//! BPF program does, let it run again, then name the frames from its memory
//! (process_vm_readv) with the crate's [`Namer`].

#![allow(dead_code)]

use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use thread_ctx_v8::memory::{Fault, HeapMemory};
use thread_ctx_v8::symbols::VaddrRange;
use thread_ctx_v8::tagged::{is_heap_object, untag};
use thread_ctx_v8::{FrameInput, Layout, LeafRegisters, PcRegion, PostmortemSymbols};

/// Another process's memory, read with process_vm_readv.
pub struct ProcessMemory {
    pub pid: i32,
}

impl HeapMemory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let fault = Fault { addr, len: buf.len() };
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() };
        // SAFETY: both iovecs describe valid lengths; the local one is our own buffer.
        let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n != buf.len() as isize {
            return Err(fault);
        }
        Ok(())
    }
}

/// Writes `v` at `addr` in process `pid` (process_vm_writev): how the hostile tests lie.
pub fn write_u64(pid: i32, addr: u64, v: u64) -> bool {
    let b = v.to_le_bytes();
    let local = libc::iovec { iov_base: b.as_ptr() as *mut libc::c_void, iov_len: 8 };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: 8 };
    // SAFETY: both iovecs describe 8 bytes; the local one is our own buffer.
    unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) == 8 }
}

pub fn read_u64(mem: &ProcessMemory, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    mem.read(addr, &mut b).ok()?;
    Some(u64::from_le_bytes(b))
}

/// One line of /proc/PID/maps.
#[derive(Debug, Clone)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub exec: bool,
    pub offset: u64,
    pub path: String,
}

pub fn read_maps(pid: i32) -> Vec<Mapping> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path = f.collect::<Vec<_>>().join(" ");
            let (s, e) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                exec: perms.contains('x'),
                offset: u64::from_str_radix(offset, 16).ok()?,
                path,
            })
        })
        .collect()
}

/// Where the node binary's code is: its load segments, bytecode handlers and builtins.
pub struct NodeImage {
    pub path: PathBuf,
    /// (file offset, vaddr, file size) of each PT_LOAD.
    pub segments: Vec<(u64, u64, u64)>,
    pub handlers: VaddrRange,
    pub builtins: VaddrRange,
}

impl NodeImage {
    pub fn new(path: &Path, symbols: &PostmortemSymbols) -> Self {
        let data = std::fs::read(path).unwrap();
        let elf = ElfFile64::<Endianness>::parse(data.as_slice()).unwrap();
        let endian = elf.endian();
        let segments = elf
            .elf_program_headers()
            .iter()
            .filter(|p| p.p_type(endian) == object::elf::PT_LOAD)
            .map(|p| (p.p_offset(endian), p.p_vaddr(endian), p.p_filesz(endian)))
            .collect();
        let _ = elf.entry();
        NodeImage { path: path.to_path_buf(), segments, handlers: symbols.bytecode_handlers.unwrap(), builtins: symbols.builtins.unwrap() }
    }

    fn vaddr_of_offset(&self, offset: u64) -> Option<u64> {
        self.segments.iter().find(|(o, _, n)| offset >= *o && offset < o + n).map(|(o, v, _)| v + (offset - o))
    }

    /// Where `pc` is. V8 may remap the embedded builtins next to its code range (a second
    /// mapping of the node file at another address): the file offset says which builtin.
    pub fn region(&self, maps: &[Mapping], pc: u64) -> PcRegion {
        let Some(m) = maps.iter().find(|m| m.start <= pc && pc < m.end) else { return PcRegion::Native };
        if !m.exec {
            return PcRegion::Native;
        }
        if m.path.is_empty() {
            return PcRegion::Jit { floor: m.start };
        }
        let node = std::fs::canonicalize(&self.path).unwrap_or(self.path.clone());
        if std::fs::canonicalize(&m.path).map(|p| p == node).unwrap_or(false) {
            if let Some(v) = self.vaddr_of_offset(pc - m.start + m.offset) {
                if self.handlers.contains(v) {
                    return PcRegion::BytecodeHandler;
                }
                if self.builtins.contains(v) {
                    return PcRegion::Builtin;
                }
            }
        }
        PcRegion::Native
    }
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct Regs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub orig_rax: u64,
    pub rip: u64,
    pub cs: u64,
    pub eflags: u64,
    pub rsp: u64,
    pub ss: u64,
    pub fs_base: u64,
    pub gs_base: u64,
    pub ds: u64,
    pub es: u64,
    pub fs: u64,
    pub gs: u64,
}

impl Regs {
    /// x86-64 register number `code` (V8's numbering: rax 0 … r15 15).
    pub fn by_code(&self, code: u8) -> u64 {
        match code {
            0 => self.rax,
            1 => self.rcx,
            2 => self.rdx,
            3 => self.rbx,
            4 => self.rsp,
            5 => self.rbp,
            6 => self.rsi,
            7 => self.rdi,
            8 => self.r8,
            9 => self.r9,
            10 => self.r10,
            11 => self.r11,
            12 => self.r12,
            13 => self.r13,
            14 => self.r14,
            _ => self.r15,
        }
    }
}

/// Stops thread `tid`, runs `f` with its registers while it is stopped, lets it run.
pub fn while_stopped<T>(tid: i32, f: impl FnOnce(&Regs) -> T) -> Option<T> {
    // SAFETY: ptrace requests on a thread we may trace; regs is a valid buffer of the kernel's struct.
    unsafe {
        if libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0) != 0 {
            return None;
        }
        libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0);
        let mut status = 0;
        libc::waitpid(tid, &mut status, libc::__WALL);
        let mut regs = Regs::default();
        let ok = libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut Regs) == 0;
        let out = ok.then(|| f(&regs));
        libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0);
        out
    }
}

/// A frame of the walk: its pc, and for a frame whose slots look like a JS frame's, what the sampler reads.
#[derive(Debug, Clone)]
pub struct WalkedFrame {
    pub pc: u64,
    pub fp: u64,
    pub js: Option<FrameInput>,
}

/// Frames walked at most.
pub const MAX_FRAMES: usize = 127;

/// Walks the stopped thread's frame pointers as the BPF program does: one read of the
/// frame's slots and links per frame, and for a frame whose context and function slots
/// hold tagged pointers, one read of its JSFunction's SharedFunctionInfo.
pub fn walk(mem: &ProcessMemory, regs: &Regs, layout: &Layout, node: &NodeImage, maps: &[Mapping]) -> Vec<WalkedFrame> {
    let mut out = Vec::new();
    walk_into(&mut out, regs.rip, regs.rbp, mem, regs, layout, node, maps);
    out
}

/// Where the thread's innermost exit frame is (its isolate's c_entry_fp), and its caller (return
/// address, frame pointer), checked as the BPF walk checks them: on the thread's stack above its
/// stack pointer, its marker an exit frame type. None: the thread is not in C++ called from JS.
pub fn exit_frame(mem: &ProcessMemory, regs: &Regs, layout: &Layout, isolate_tp_offset: i64) -> Option<(u64, u64, u64)> {
    let c_entry_fp = layout.isolate?.c_entry_fp;
    let isolate = read_u64(mem, regs.fs_base.wrapping_add(isolate_tp_offset as u64)).filter(|&i| i >= 0x1000)?;
    let exit_fp = read_u64(mem, isolate + c_entry_fp)?;
    if exit_fp <= regs.rsp || exit_fp - regs.rsp > 8 << 20 || exit_fp % 8 != 0 {
        return None;
    }
    let marker = read_u64(mem, exit_fp.wrapping_add(layout.fp_context as u64))?;
    let (caller_fp, ret) = (read_u64(mem, exit_fp)?, read_u64(mem, exit_fp + 8)?);
    let exit_type = marker >> 1;
    let ok = marker & 1 == 0 && exit_type < 64 && layout.frame_types.exit_mask() & (1 << exit_type) != 0 && caller_fp > exit_fp && ret != 0;
    ok.then_some((exit_fp, ret, caller_fp))
}

/// [`walk`], going on from the thread's last exit from JS when it found no JS frame, as the
/// BPF walk does (v8_frames.bpf.h).
pub fn walk_through_exit(
    mem: &ProcessMemory,
    regs: &Regs,
    layout: &Layout,
    isolate_tp_offset: i64,
    node: &NodeImage,
    maps: &[Mapping],
) -> Vec<WalkedFrame> {
    let mut out = walk(mem, regs, layout, node, maps);
    if out.iter().any(|f| f.js.is_some()) {
        return out;
    }
    let Some((exit_fp, ret, caller_fp)) = exit_frame(mem, regs, layout, isolate_tp_offset) else { return out };
    if out.last().is_some_and(|f| f.fp >= exit_fp) {
        out.truncate(1);
    }
    walk_into(&mut out, ret, caller_fp, mem, regs, layout, node, maps);
    out
}

/// Walks from (`pc`, `fp`), appending to `out` (its length is the next frame's depth).
#[allow(clippy::too_many_arguments)]
fn walk_into(out: &mut Vec<WalkedFrame>, pc: u64, fp: u64, mem: &ProcessMemory, regs: &Regs, layout: &Layout, node: &NodeImage, maps: &[Mapping]) {
    let (mut pc, mut fp) = (pc, fp);
    let low = layout.fp_bytecode_offset.min(layout.fp_bytecode_array).min(layout.fp_function).min(layout.fp_context);
    while out.len() < MAX_FRAMES {
        let depth = out.len();
        let mut slots = [0u8; 56];
        let base = fp.wrapping_add(low as u64);
        if fp == 0 || mem.read(base, &mut slots).is_err() {
            out.push(WalkedFrame { pc, fp, js: None });
            break;
        }
        let at = |off: i64| u64::from_le_bytes(slots[(off - low) as usize..(off - low) as usize + 8].try_into().unwrap());
        let (context, function) = (at(layout.fp_context), at(layout.fp_function));
        let js = (is_heap_object(context) && is_heap_object(function))
            .then(|| read_u64(mem, untag(function).unwrap() + layout.js_function_shared))
            .flatten()
            .map(|shared| FrameInput {
                pc,
                region: node.region(maps, pc),
                leaf: depth == 0,
                shared,
                bytecode_array: at(layout.fp_bytecode_array),
                bytecode_offset: at(layout.fp_bytecode_offset),
                registers: (depth == 0).then(|| LeafRegisters {
                    bytecode_array: regs.by_code(layout.reg_bytecode_array),
                    bytecode_offset: regs.by_code(layout.reg_bytecode_offset),
                    return_candidates: (0..3)
                        .filter_map(|i| read_u64(mem, regs.rsp + 8 * i))
                        .filter_map(|w| match node.region(maps, w) {
                            PcRegion::Jit { floor } => Some((w, floor)),
                            _ => None,
                        })
                        .collect(),
                }),
            });
        out.push(WalkedFrame { pc, fp, js });
        let (next_fp, ret) = (at(0), at(8));
        if next_fp <= fp || ret == 0 {
            break;
        }
        (pc, fp) = (ret, next_fp);
    }
}

/// A node process running a fixture. Its output is read by the test's own
/// thread, without blocking: a "phase X" line is written (synchronously, to a
/// pipe) before phase X starts, so lines drained while the target is stopped
/// say which phase it was stopped in.
pub struct Target {
    pub child: Child,
    stdout: std::process::ChildStdout,
    pending: Vec<u8>,
    pub lines: Vec<String>,
    /// The last "phase X" line's X, and how many phase lines came so far.
    phase: (u32, String),
}

impl Target {
    pub fn spawn(node: &Path, flags: &[&str], script: &Path, args: &[&str]) -> Target {
        use std::os::fd::AsRawFd;
        let mut child = Command::new(node).args(flags).arg(script).args(args).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let fd = stdout.as_raw_fd();
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
        }
        Target { child, stdout, pending: Vec::new(), lines: Vec::new(), phase: (0, String::new()) }
    }

    /// Reads whatever the target wrote since the last call.
    pub fn drain(&mut self) {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
        while let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(&self.pending[..i]).into_owned();
            self.pending.drain(..=i);
            if let Some(x) = line.strip_prefix("phase ") {
                // "phase NAME @NS": the time it started is for eBPF tests, not this one.
                let name = x.rsplit_once(" @").map_or(x, |(n, _)| n);
                self.phase = (self.phase.0 + 1, name.to_string());
            }
            self.lines.push(line);
        }
    }

    /// The current phase and how many phase lines came so far (as of the last drain).
    pub fn phase(&self) -> (u32, String) {
        self.phase.clone()
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits for a line equal to `what` (60 s at most).
    pub fn wait_line(&mut self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.drain();
            if self.lines.iter().any(|l| l == what) {
                return;
            }
            assert!(Instant::now() < deadline, "the fixture never printed {what:?}");
            assert!(self.child.try_wait().ok().flatten().is_none(), "the fixture exited before printing {what:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the main thread and runs `f` on it, if the phase did not change
    /// around the stop: the phase it ran in, and what `f` returned.
    pub fn sample<T>(&mut self, f: impl FnOnce(&Regs) -> T) -> Option<(String, T)> {
        self.drain();
        let before = self.phase.0;
        let pid = self.pid();
        let out = while_stopped(pid, |regs| {
            // Stopped: no more writes; a line drained now was written before the stop.
            self.drain();
            f(regs)
        })?;
        (self.phase.0 == before && !self.phase.1.is_empty()).then(|| (self.phase.1.clone(), out))
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fixtures' directory.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The 1-based line of `file` that ends with the comment `// MARK`.
pub fn marked_line(file: &Path, mark: &str) -> u32 {
    let text = std::fs::read_to_string(file).unwrap();
    let needle = format!("// {mark}");
    text.lines().position(|l| l.trim_end().ends_with(&needle)).unwrap_or_else(|| panic!("no line marked {mark} in {}", file.display())) as u32 + 1
}
