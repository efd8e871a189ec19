//! Compiles the eBPF programs with clang: bpf/sampler.bpf.c (CPU samples) into
//! $OUT_DIR/sampler.bpf.o and bpf/off_cpu.bpf.c (sched_switch) into
//! $OUT_DIR/off_cpu.bpf.o, which src/sampler/loader.rs embeds. CO-RE: the
//! objects carry BTF relocations that libbpf resolves against the running
//! kernel's BTF at load time, so no vmlinux.h is needed here.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    const PROGRAMS: [&str; 2] = ["sampler", "off_cpu"];
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    for f in ["bpf/sampler.bpf.c", "bpf/off_cpu.bpf.c", "bpf/ctx_reader.bpf.h", "bpf/sampler_abi.h"] {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-env-changed=CLANG");

    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    if arch != "x86_64" {
        // The program reads task->thread.fsbase (x86-64 only); the loader reports this at run time.
        println!("cargo:warning=eBPF sampler is x86-64 only; `thread-ctx record` will refuse to run on {arch}");
        for p in PROGRAMS {
            std::fs::write(out_dir.join(format!("{p}.bpf.o")), b"").unwrap();
        }
        return;
    }
    for p in PROGRAMS {
        compile(&format!("bpf/{p}.bpf.c"), &out_dir.join(format!("{p}.bpf.o")));
    }
}

fn compile(source: &str, out: &std::path::Path) {
    // libbpf-sys (a direct dependency with `links = "bpf"`) exports its vendored headers.
    let libbpf_include = env::var("DEP_BPF_INCLUDE")
        .expect("DEP_BPF_INCLUDE unset: reader/Cargo.toml must depend on libbpf-sys directly for bpf/bpf_helpers.h");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let result = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror", "-D__TARGET_ARCH_x86"])
        .arg(format!("-I{libbpf_include}"))
        // <linux/bpf.h> needs <asm/types.h>, which Debian keeps under the multiarch directory.
        .arg("-I/usr/include/x86_64-linux-gnu")
        .args(["-c", source, "-o"])
        .arg(out)
        .output();
    match result {
        Err(e) => panic!(
            "cannot run `{clang}` ({e}): the eBPF sampler needs clang with the BPF target \
             (Debian: apt-get install -y clang libelf-dev zlib1g-dev pkg-config; or set CLANG=/path/to/clang)"
        ),
        Ok(o) if !o.status.success() => panic!(
            "`{clang}` failed to compile {source} (needs clang >= 11 and linux-libc-dev headers):\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => {}
    }
}
