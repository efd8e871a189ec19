//! Generates what the crate compiles in from non-Rust sources:
//! - the eBPF object, bpf/sampler.bpf.c (CPU samples and sched_switch),
//!   compiled by clang (CO-RE: libbpf resolves its BTF relocations against
//!   the running kernel at load time, so no vmlinux.h is needed) into a
//!   libbpf-cargo skeleton, $OUT_DIR/sampler.skel.rs, whose typed maps,
//!   programs, config and event type replace lookups by name;
//! - pprof's messages from proto/pprof/profile.proto, by prost-build with the
//!   pure-Rust protox parser (no protoc at build time).

use libbpf_cargo::SkeletonBuilder;
use std::env;
use std::path::PathBuf;

const BPF_SOURCES: [&str; 5] = ["bpf/sampler.bpf.c", "bpf/ctx_reader.bpf.h", "bpf/nodejs_record.bpf.h", "bpf/alloc_probe.bpf.h", "bpf/sampler_abi.h"];
const PROTO_ROOT: &str = "proto";
const PROTOS: [&str; 1] = ["pprof/profile.proto"];

fn main() {
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    for f in BPF_SOURCES {
        println!("cargo:rerun-if-changed={f}");
    }
    for p in PROTOS {
        println!("cargo:rerun-if-changed={PROTO_ROOT}/{p}");
    }
    println!("cargo:rerun-if-env-changed=CLANG");
    bpf_skeleton(&out_dir);
    protos();
}

fn bpf_skeleton(out_dir: &std::path::Path) {
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    if arch != "x86_64" {
        // The program reads task->thread.fsbase; the loader refuses other architectures at run time.
        println!("cargo:warning=the eBPF sampler is x86-64 only; `thread-ctx record` and `agent` will refuse to run on {arch}");
    }
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // libbpf-cargo adds -g -O2 -target bpf and libbpf's own headers (bpf_helpers.h ...).
    let result = SkeletonBuilder::new()
        .source(BPF_SOURCES[0])
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
            "building {} with `{clang}` failed: {e:#}\n\
             It needs clang >= 11 with the BPF target and the Linux UAPI headers \
             (Debian: apt-get install -y clang linux-libc-dev libelf-dev zlib1g-dev pkg-config; or set CLANG=/path/to/clang)",
            BPF_SOURCES[0]
        );
    }
}

fn protos() {
    let files = protox::compile(PROTOS, [PROTO_ROOT]).unwrap_or_else(|e| panic!("parsing {PROTO_ROOT}/: {e}"));
    prost_build::Config::new().compile_fds(files).unwrap_or_else(|e| panic!("generating pprof messages: {e}"));
}
