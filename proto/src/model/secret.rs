//! A secret of the replicated store as the meta group keeps it: sealed (AES-256-GCM) under a
//! key the operator gives every node (`baton server --secrets-key-file`), bound to its name.
//! The key never enters the log or the stores, so the Raft log, snapshots and the sled trees
//! hold only the sealed bytes.

use super::EpochMs;
use serde::{Deserialize, Serialize};

/// One sealed secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedSecret {
    pub name: String,
    /// Which of the operator's keys sealed it (the first 8 bytes of the key's SHA-256, hex).
    pub key_id: String,
    /// The 12-byte nonce, then the ciphertext and its 16-byte tag.
    pub sealed: Vec<u8>,
    pub update_time: EpochMs,
    pub updated_by: String,
}
