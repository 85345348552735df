//! Gateways through which work enters a node besides the HTTP API: QUIC workers ([`worker`]).

pub mod worker;
