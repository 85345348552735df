//! Fuzz target `http_bodies`: see [`baton_fuzz::http_bodies`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_fuzz::http_bodies(data));
