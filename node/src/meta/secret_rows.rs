//! The replicated secrets store's rows: `se/{name}`, each a [`SealedSecret`]. Only sealed bytes
//! are written; the apply never sees a key or a value.

use super::{read, remove_existing};
use cluster::storage::{Batch, Tree};
use proto::limits::SECRETS_MAX;
use proto::model::secret::SealedSecret;
use proto::record::{self, MetaOutcome};

pub(super) const PREFIX: &[u8] = b"se/";

fn key(name: &str) -> Vec<u8> {
    [PREFIX, name.as_bytes()].concat()
}

/// Stores `secret`; a new name past [`SECRETS_MAX`] is `Full` and writes nothing.
pub(super) fn put(state: &Tree, batch: &mut Batch, secret: SealedSecret) -> MetaOutcome {
    let key = key(&secret.name);
    let new = !matches!(state.contains_key(&key), Ok(true));
    if new && state.scan_prefix(PREFIX).count() >= SECRETS_MAX {
        return MetaOutcome::Full;
    }
    batch.insert(key, record::encode(&secret));
    MetaOutcome::Applied
}

pub(super) fn delete(state: &Tree, batch: &mut Batch, name: &str) -> MetaOutcome {
    remove_existing(state, batch, key(name))
}

/// The secret `name` as the replica holds it.
pub(super) fn get(state: &Tree, name: &str) -> Option<SealedSecret> {
    read(state, &key(name))
}

/// The names of every secret, sorted.
pub(super) fn names(state: &Tree) -> Vec<String> {
    let names = state.scan_prefix(PREFIX).filter_map(|row| row.ok());
    let names = names.filter_map(|(k, _)| String::from_utf8(k[PREFIX.len()..].to_vec()).ok());
    names.collect()
}
