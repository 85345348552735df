//! The rows every consumed event is checked against: the event types registered DSL documents
//! consume (`dwl/`) and their schedules (`dws/`), kept decoded. Every batch that writes or
//! removes a DSL document also moves the DSL generation row on ([`bump`]); a read decodes the
//! rows again only when the stored generation is not the one its copy was decoded at, so it
//! answers what the replica holds.

use cluster::storage::{Batch, Tree};
use proto::model::DslSchedule;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The DSL generation: a big-endian counter moved on by every batch that changes a document.
pub(super) const GENERATION_KEY: &[u8] = b"dwg";

/// Moves the generation on in `batch`.
pub(super) fn bump(state: &Tree, batch: &mut Batch) {
    super::set_counter(batch, GENERATION_KEY, generation(state).wrapping_add(1));
}

/// The stored generation (0 before any document was written).
pub(super) fn generation(state: &Tree) -> u64 {
    super::counter(state, GENERATION_KEY)
}

/// The rows as decoded at one generation.
#[derive(Debug, Default, Clone)]
pub(super) struct Decoded {
    pub generation: u64,
    pub types: Arc<BTreeSet<String>>,
    pub schedules: Arc<Vec<DslSchedule>>,
}
