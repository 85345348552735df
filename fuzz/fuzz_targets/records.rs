//! Fuzz target `records`: see [`baton_fuzz::records`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_fuzz::records(data));
