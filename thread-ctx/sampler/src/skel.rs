//! The skeleton libbpf-cargo generated from bpf/sampler.bpf.c (see build.rs):
//! typed maps, programs, the .rodata config and the ABI's C types.
#![allow(clippy::all, dead_code, missing_docs, non_camel_case_types, non_snake_case, unused_qualifications)]

include!(concat!(env!("OUT_DIR"), "/sampler.skel.rs"));
