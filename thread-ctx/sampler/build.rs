//! Compiles the eBPF programs in src/bpf/ (sampler.bpf.c and the headers it
//! includes) with clang into a libbpf-cargo skeleton, $OUT_DIR/sampler.skel.rs,
//! whose typed maps, programs, config and event type replace lookups by name.
//! CO-RE: libbpf resolves the programs' BTF relocations against the running
//! kernel at load time, so no vmlinux.h is needed.

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::PathBuf;

const BPF_DIR: &str = "src/bpf";
const BPF_MAIN: &str = "src/bpf/sampler.bpf.c";

fn main() {
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    // The whole folder: a header added to it is watched without a change here.
    println!("cargo:rerun-if-changed={BPF_DIR}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    if arch != "x86_64" {
        // The program reads task->thread.fsbase; the loader refuses other architectures at run time.
        println!("cargo:warning=the eBPF sampler is x86-64 only; `thread-ctx record` and `agent` will refuse to run on {arch}");
    }
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // libbpf-cargo adds -g -O2 -target bpf and libbpf's own headers (bpf_helpers.h ...).
    let result = SkeletonBuilder::new()
        .source(BPF_MAIN)
        .clang(&clang)
        .clang_args([
            "-Wall",
            "-Werror",
            "-D__TARGET_ARCH_x86",
            // <linux/bpf.h> needs <asm/types.h>, which Debian keeps under the multiarch directory.
            "-I/usr/include/x86_64-linux-gnu",
        ])
        .build_and_generate(out_dir.join("sampler.skel.rs"));
    if let Err(e) = result {
        panic!(
            "building {BPF_MAIN} with `{clang}` failed: {e:#}\n\
             It needs clang >= 11 with the BPF target and the Linux UAPI headers \
             (Debian: apt-get install -y clang linux-libc-dev libelf-dev zlib1g-dev pkg-config; or set CLANG=/path/to/clang)"
        );
    }
}
