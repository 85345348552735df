//! Access control's rows: the token-signing key (`as`), applications (`ap/{id}`) and access keys
//! (`ak/{key id}`). Every batch that changes one moves the access generation row on; the API's
//! guard reads the rows decoded ([`AccessTable`]) and decodes them again only when the stored
//! generation moved, so a revocation applied on a replica is honoured by the next request there.

use super::{read, remove_existing};
use cluster::storage::{Batch, Tree};
use proto::limits::{
    ACCESS_KEYS_PER_APPLICATION_MAX, APPLICATIONS_MAX, GRANTS_PER_APPLICATION_MAX, TOKEN_TTL_SECS,
};
use proto::model::access::{
    AccessKey, AccessType, Application, Grant, KeyStatus, RetiredSigningKey, Role, SigningKey,
    Target,
};
use proto::record::{self, MetaOutcome};
use std::collections::BTreeSet;
use std::collections::HashMap;

pub(super) const SIGNING_KEY: &[u8] = b"as";
/// The signing key the current one replaced, while it verifies what it signed.
pub(super) const RETIRED_SIGNING_KEY: &[u8] = b"asr";
pub(super) const APPLICATION_PREFIX: &[u8] = b"ap/";
pub(super) const KEY_PREFIX: &[u8] = b"ak/";
/// The access generation: a big-endian counter moved on by every batch that changes a row.
pub(super) const GENERATION_KEY: &[u8] = b"acg";

fn application_key(id: &str) -> Vec<u8> {
    [APPLICATION_PREFIX, id.as_bytes()].concat()
}

fn key_key(id: &str) -> Vec<u8> {
    [KEY_PREFIX, id.as_bytes()].concat()
}

fn bump(state: &Tree, batch: &mut Batch) {
    super::set_counter(batch, GENERATION_KEY, generation(state).wrapping_add(1));
}

/// The stored generation (0 before access control was set up).
pub(super) fn generation(state: &Tree) -> u64 {
    super::counter(state, GENERATION_KEY)
}

/// Moves the generation on when `outcome` is `Applied`, and answers it.
fn applied(state: &Tree, batch: &mut Batch, outcome: MetaOutcome) -> MetaOutcome {
    if outcome == MetaOutcome::Applied {
        bump(state, batch);
    }
    outcome
}

pub(super) fn set_up(
    state: &Tree,
    batch: &mut Batch,
    signing: &SigningKey,
    admin: &Application,
    key: &AccessKey,
) -> MetaOutcome {
    if matches!(state.contains_key(SIGNING_KEY), Ok(true)) {
        return MetaOutcome::Exists;
    }
    batch.insert(SIGNING_KEY, record::encode(signing));
    batch.insert(application_key(&admin.id), record::encode(admin));
    batch.insert(key_key(&key.id), record::encode(key));
    applied(state, batch, MetaOutcome::Applied)
}

/// Makes `signing` the signing key; the one it replaces verifies its tokens for
/// [`TOKEN_TTL_SECS`] more, unless `retire_now`.
pub(super) fn rotate_signing_key(
    state: &Tree,
    batch: &mut Batch,
    signing: SigningKey,
    retire_now: bool,
) -> MetaOutcome {
    let Some(old) = read::<SigningKey>(state, SIGNING_KEY) else {
        return MetaOutcome::NotFound;
    };
    if retire_now {
        batch.remove(RETIRED_SIGNING_KEY.to_vec());
    } else {
        let retired = RetiredSigningKey {
            key: old,
            honoured_until: signing.created_at + TOKEN_TTL_SECS * 1000,
        };
        batch.insert(RETIRED_SIGNING_KEY, record::encode(&retired));
    }
    batch.insert(SIGNING_KEY, record::encode(&signing));
    applied(state, batch, MetaOutcome::Applied)
}

pub(super) fn put_application(
    state: &Tree,
    batch: &mut Batch,
    mut app: Application,
    create: bool,
) -> MetaOutcome {
    let key = application_key(&app.id);
    let held = read::<Application>(state, &key);
    let outcome = match (held, create) {
        (Some(_), true) => MetaOutcome::Exists,
        (None, false) => MetaOutcome::NotFound,
        (None, true) if state.scan_prefix(APPLICATION_PREFIX).count() >= APPLICATIONS_MAX => {
            MetaOutcome::Full
        }
        (held, _) => {
            if let Some(old) = held {
                app.roles = old.roles;
                app.grants = old.grants;
                app.create_time = old.create_time;
                app.created_by = old.created_by;
            }
            batch.insert(key, record::encode(&app));
            MetaOutcome::Applied
        }
    };
    applied(state, batch, outcome)
}

pub(super) fn delete_application(state: &Tree, batch: &mut Batch, id: &str) -> MetaOutcome {
    for key in keys_of(state, id) {
        batch.remove(key_key(&key.id));
    }
    let outcome = remove_existing(state, batch, application_key(id));
    applied(state, batch, outcome)
}

pub(super) fn set_role(
    state: &Tree,
    batch: &mut Batch,
    application: &str,
    role: Role,
    granted: bool,
) -> MetaOutcome {
    let key = application_key(application);
    let Some(mut app) = read::<Application>(state, &key) else {
        return MetaOutcome::NotFound;
    };
    if granted {
        app.roles.insert(role);
    } else {
        app.roles.remove(&role);
    }
    batch.insert(key, record::encode(&app));
    applied(state, batch, MetaOutcome::Applied)
}

pub(super) fn set_grant(
    state: &Tree,
    batch: &mut Batch,
    application: &str,
    target: Target,
    access: &BTreeSet<AccessType>,
    granted: bool,
) -> MetaOutcome {
    let key = application_key(application);
    let Some(mut app) = read::<Application>(state, &key) else {
        return MetaOutcome::NotFound;
    };
    let held = app.grants.iter().position(|g| g.target == target);
    match (held, granted) {
        (Some(i), true) => app.grants[i].access.extend(access),
        (Some(i), false) => {
            app.grants[i].access.retain(|a| !access.contains(a));
            if app.grants[i].access.is_empty() {
                app.grants.remove(i);
            }
        }
        (None, true) if app.grants.len() >= GRANTS_PER_APPLICATION_MAX => return MetaOutcome::Full,
        (None, true) => app.grants.push(Grant {
            target,
            access: access.clone(),
        }),
        (None, false) => return MetaOutcome::NotFound,
    }
    batch.insert(key, record::encode(&app));
    applied(state, batch, MetaOutcome::Applied)
}

pub(super) fn put_key(state: &Tree, batch: &mut Batch, key: AccessKey) -> MetaOutcome {
    let outcome = if read::<Application>(state, &application_key(&key.application_id)).is_none() {
        MetaOutcome::NotFound
    } else if keys_of(state, &key.application_id).len() >= ACCESS_KEYS_PER_APPLICATION_MAX {
        MetaOutcome::Full
    } else {
        batch.insert(key_key(&key.id), record::encode(&key));
        MetaOutcome::Applied
    };
    applied(state, batch, outcome)
}

/// The key `id` when it belongs to `application`.
fn key_of(state: &Tree, application: &str, id: &str) -> Option<AccessKey> {
    read::<AccessKey>(state, &key_key(id)).filter(|k| k.application_id == application)
}

pub(super) fn set_key_status(
    state: &Tree,
    batch: &mut Batch,
    application: &str,
    id: &str,
    status: KeyStatus,
) -> MetaOutcome {
    let Some(mut key) = key_of(state, application, id) else {
        return MetaOutcome::NotFound;
    };
    key.status = status;
    batch.insert(key_key(id), record::encode(&key));
    applied(state, batch, MetaOutcome::Applied)
}

pub(super) fn delete_key(
    state: &Tree,
    batch: &mut Batch,
    application: &str,
    id: &str,
) -> MetaOutcome {
    if key_of(state, application, id).is_none() {
        return MetaOutcome::NotFound;
    }
    batch.remove(key_key(id));
    applied(state, batch, MetaOutcome::Applied)
}

fn all<T: serde::de::DeserializeOwned>(state: &Tree, prefix: &[u8]) -> Vec<T> {
    state
        .scan_prefix(prefix)
        .filter_map(|kv| kv.ok())
        .filter_map(|(_, v)| record::decode(&v).ok())
        .collect()
}

/// The keys of one application.
fn keys_of(state: &Tree, application: &str) -> Vec<AccessKey> {
    all::<AccessKey>(state, KEY_PREFIX)
        .into_iter()
        .filter(|k| k.application_id == application)
        .collect()
}

/// Access control's rows as decoded at one generation.
#[derive(Debug, Default)]
pub struct AccessTable {
    pub generation: u64,
    /// `None` until access control is set up: then every request is let through.
    pub signing: Option<SigningKey>,
    /// The key `signing` replaced, while it may still verify what it signed.
    pub retired: Option<RetiredSigningKey>,
    pub applications: HashMap<String, Application>,
    pub keys: HashMap<String, AccessKey>,
}

impl AccessTable {
    pub(super) fn decode(state: &Tree, generation: u64) -> Self {
        let applications = all::<Application>(state, APPLICATION_PREFIX);
        let keys = all::<AccessKey>(state, KEY_PREFIX);
        Self {
            generation,
            signing: read(state, SIGNING_KEY),
            retired: read(state, RETIRED_SIGNING_KEY),
            applications: applications
                .into_iter()
                .map(|a| (a.id.clone(), a))
                .collect(),
            keys: keys.into_iter().map(|k| (k.id.clone(), k)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{apply, MetaState};
    use super::*;
    use proto::record::MetaCommand;

    fn app(id: &str) -> Application {
        crate::access::application(id.into(), id, "test", 1)
    }

    fn key(id: &str, application: &str) -> AccessKey {
        AccessKey {
            id: id.into(),
            application_id: application.into(),
            secret_hash: "$argon2id$...".into(),
            status: KeyStatus::Active,
            created_at: 1,
        }
    }

    fn signing() -> SigningKey {
        SigningKey {
            id: "sk".into(),
            secret: vec![1; 32],
            created_at: 1,
        }
    }

    #[test]
    fn access_rows_are_set_up_once_and_read_decoded_per_generation() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = cluster::storage::Db::open_sled(dir.path()).expect("db");
        let state = db.open_tree("meta").expect("tree");
        let meta = MetaState::new(state.clone());
        let run = |command| {
            let mut batch = Batch::default();
            let outcome = apply(&state, &mut batch, command);
            state.apply_batch(batch).expect("applies");
            outcome
        };
        assert!(meta.access().signing.is_none(), "not set up");
        let admin = crate::access::administrator("a".into(), "admin", 1);
        let set_up = || MetaCommand::SetUpAccess {
            signing: signing(),
            admin: Box::new(admin.clone()),
            key: key("k0", "a"),
        };
        assert_eq!(run(set_up()), MetaOutcome::Applied);
        assert_eq!(run(set_up()), MetaOutcome::Exists);
        let table = meta.access();
        assert_eq!(table.signing.as_ref().map(|s| s.id.as_str()), Some("sk"));
        assert!(
            std::sync::Arc::ptr_eq(&table, &meta.access()),
            "decoded once"
        );

        let put = |a: Application, create| MetaCommand::PutApplication {
            app: Box::new(a),
            create,
        };
        assert_eq!(run(put(app("b"), true)), MetaOutcome::Applied);
        assert_eq!(run(put(app("b"), true)), MetaOutcome::Exists);
        assert_eq!(run(put(app("c"), false)), MetaOutcome::NotFound);
        let role = |application: &str, granted| MetaCommand::SetRole {
            application: application.into(),
            role: Role::Worker,
            granted,
        };
        assert_eq!(run(role("b", true)), MetaOutcome::Applied);
        let renamed = Application {
            name: "renamed".into(),
            ..app("b")
        };
        assert_eq!(run(put(renamed, false)), MetaOutcome::Applied);
        let b = meta.access().applications["b"].clone();
        assert_eq!(
            (b.name.as_str(), b.roles.len()),
            ("renamed", 1),
            "roles kept"
        );
        assert_eq!(run(role("c", true)), MetaOutcome::NotFound);

        let grant = |access: &[AccessType], granted| MetaCommand::SetGrant {
            application: "b".into(),
            target: Target {
                kind: proto::model::access::TargetType::TaskDef,
                id: "enc*".into(),
            },
            access: access.iter().copied().collect(),
            granted,
        };
        let both = [AccessType::Execute, AccessType::Read];
        assert_eq!(run(grant(&both, true)), MetaOutcome::Applied);
        assert_eq!(run(grant(&[AccessType::Read], false)), MetaOutcome::Applied);
        let grants = meta.access().applications["b"].grants.clone();
        assert_eq!(grants.len(), 1);
        assert_eq!(grants[0].access, [AccessType::Execute].into());
        assert_eq!(
            run(grant(&[AccessType::Execute], false)),
            MetaOutcome::Applied
        );
        assert!(
            meta.access().applications["b"].grants.is_empty(),
            "emptied, gone"
        );
        assert_eq!(
            run(grant(&[AccessType::Execute], false)),
            MetaOutcome::NotFound
        );

        for n in 0..ACCESS_KEYS_PER_APPLICATION_MAX {
            let put = MetaCommand::PutAccessKey(key(&format!("b{n}"), "b"));
            assert_eq!(run(put), MetaOutcome::Applied);
        }
        let one_more = MetaCommand::PutAccessKey(key("b9", "b"));
        assert_eq!(run(one_more), MetaOutcome::Full);
        assert_eq!(
            run(MetaCommand::PutAccessKey(key("x", "c"))),
            MetaOutcome::NotFound
        );
        let status = |application: &str| MetaCommand::SetAccessKeyStatus {
            application: application.into(),
            id: "b0".into(),
            status: KeyStatus::Inactive,
        };
        assert_eq!(run(status("a")), MetaOutcome::NotFound, "another's key");
        assert_eq!(run(status("b")), MetaOutcome::Applied);
        assert_eq!(meta.access().keys["b0"].status, KeyStatus::Inactive);
        let delete = |application: &str| MetaCommand::DeleteAccessKey {
            application: application.into(),
            id: "b1".into(),
        };
        assert_eq!(run(delete("a")), MetaOutcome::NotFound);
        assert_eq!(run(delete("b")), MetaOutcome::Applied);

        let generation = meta.access().generation;
        assert_eq!(
            run(MetaCommand::DeleteApplication { id: "b".into() }),
            MetaOutcome::Applied
        );
        let table = meta.access();
        assert!(table.generation > generation);
        assert!(!table.applications.contains_key("b"));
        let left: Vec<&str> = table.keys.keys().map(String::as_str).collect();
        assert_eq!(left, ["k0"], "the application's keys went with it");
    }
}
