//! Fuzz target `cron`: see [`baton_fuzz::cron`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_fuzz::cron(data));
