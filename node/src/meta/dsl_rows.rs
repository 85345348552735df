//! The rows every consumed event is checked against: the event types registered DSL documents
//! consume (`dwl/`) and their schedules (`dws/`), kept decoded. Every batch that writes or
//! removes a DSL document also moves the DSL generation row on ([`bump`]); a read decodes the
//! rows again only when the stored generation is not the one its copy was decoded at, so it
//! answers what the replica holds.

use super::{dsl_key, dsl_listens_key, dsl_schedule_key, remove_existing, DSL_PREFIX};
use cluster::storage::{Batch, Tree};
use proto::limits::DSL_WORKFLOWS_MAX;
use proto::model::{DslSchedule, DslWorkflow};
use proto::record::{self, MetaOutcome};
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

/// Stores a DSL document under its namespace, name and version, unless it is a new version and
/// the meta group holds [`DSL_WORKFLOWS_MAX`] already (`Full`: nothing is written).
pub(super) fn put(
    state: &Tree,
    batch: &mut Batch,
    def: &DslWorkflow,
    overwrite: bool,
) -> MetaOutcome {
    let key = dsl_key(&def.namespace, &def.name, &def.version);
    let held = state.get(&key).ok().flatten();
    let held = held.and_then(|bytes| record::decode::<DslWorkflow>(&bytes).ok());
    match &held {
        Some(old) if old.document != def.document && !overwrite => return MetaOutcome::Exists,
        None if state.scan_prefix(DSL_PREFIX).count() >= DSL_WORKFLOWS_MAX => {
            return MetaOutcome::Full
        }
        _ => {}
    }
    batch.insert(key, record::encode(def));
    let listens = dsl_listens_key(&def.namespace, &def.name, &def.version);
    if def.listens.is_empty() {
        batch.remove(listens);
    } else {
        batch.insert(listens, record::encode(&def.listens));
    }
    let schedule = dsl_schedule_key(&def.namespace, &def.name, &def.version);
    match DslSchedule::of(def) {
        Some(s) => batch.insert(schedule, record::encode(&s)),
        None => batch.remove(schedule),
    }
    if held.is_some_and(|old| old.document.get("schedule") != def.document.get("schedule")) {
        // Groups half-gathered under another strategy start afresh; gathered ones still start.
        super::gather_rows::reset(state, batch, &def.key());
    }
    bump(state, batch);
    MetaOutcome::Applied
}

/// Removes a DSL document's version, with its rows and what its `schedule.on` gathered.
pub(super) fn delete(
    state: &Tree,
    batch: &mut Batch,
    namespace: &str,
    name: &str,
    version: &str,
) -> MetaOutcome {
    batch.remove(dsl_listens_key(namespace, name, version));
    batch.remove(dsl_schedule_key(namespace, name, version));
    super::gather_rows::remove(state, batch, &format!("{namespace}/{name}/{version}"));
    bump(state, batch);
    remove_existing(state, batch, dsl_key(namespace, name, version))
}

/// The rows as decoded at one generation.
#[derive(Debug, Default, Clone)]
pub(super) struct Decoded {
    pub generation: u64,
    pub types: Arc<BTreeSet<String>>,
    pub schedules: Arc<Vec<DslSchedule>>,
}
