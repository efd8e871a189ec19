#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| thread_ctx_fuzz::perf_map(data));
