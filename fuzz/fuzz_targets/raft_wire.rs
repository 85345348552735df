//! Fuzz target `raft_wire`: see [`baton_fuzz::raft_wire`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| baton_fuzz::raft_wire(data));
