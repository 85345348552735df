//! Fuzz target `frames`: see [`baton_fuzz::frames`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_fuzz::frames(data));
