//! Builds the C file that defines `otel_thread_ctx_v1` and exports the symbol.
//!
//! rustc links cdylibs with a version script that hides every symbol it did not export itself, so
//! a C-defined TLS variable would not reach `.dynsym`. A second `--version-script` listing it as
//! global is merged by rust-lld (rustc 1.95's default linker for this target); GNU ld rejects two
//! version scripts, so this build needs rust-lld (the default) on Linux.

fn main() {
    napi_build::setup();

    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    println!("cargo:rerun-if-changed=src/tls_slot.c");
    println!("cargo:rerun-if-changed=src/exports.map");

    let mut build = cc::Build::new();
    build.file("src/tls_slot.c").pic(true).flag("-ftls-model=global-dynamic");
    if target_arch == "x86_64" {
        // TLSDESC: the access model OTEP 4947 recommends and every reader supports.
        build.flag("-mtls-dialect=gnu2");
    }
    build.compile("otel_thread_ctx_tls");

    if target_os == "linux" {
        let map = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("src/exports.map");
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", map.display());
    }
}
