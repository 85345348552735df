//! Fuzz target `events`: see [`baton_fuzz::events`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_fuzz::events(data));
