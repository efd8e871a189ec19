#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| thread_ctx_v8_fuzz::v8_heap(data));
