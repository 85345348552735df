use super::*;
use crate::meta::AccessTable;
use proto::model::access::{AccessKey, Application, RetiredSigningKey, SigningKey, Target};

const NOW: EpochMs = 1_800_000_000_000;

fn table(roles: &[Role]) -> AccessTable {
    let app = Application {
        id: "app".into(),
        name: "billing".into(),
        roles: roles.iter().copied().collect(),
        grants: Vec::new(),
        created_by: String::new(),
        create_time: 0,
        updated_by: String::new(),
        update_time: 0,
    };
    let key = AccessKey {
        id: "key".into(),
        application_id: "app".into(),
        secret_hash: String::new(),
        status: KeyStatus::Active,
        created_at: 0,
    };
    AccessTable {
        generation: 1,
        signing: Some(signing()),
        retired: None,
        applications: [(app.id.clone(), app)].into(),
        keys: [(key.id.clone(), key)].into(),
    }
}

fn signing() -> SigningKey {
    SigningKey {
        id: "sk".into(),
        secret: vec![7; 32],
        created_at: 0,
    }
}

#[test]
fn a_replaced_signing_key_verifies_its_tokens_for_their_lifetime_only() {
    let old = token::issue(&signing(), "app", "key", NOW);
    let mut table = table(&[Role::Worker]);
    let new = SigningKey {
        id: "sk2".into(),
        secret: vec![9; 32],
        created_at: NOW,
    };
    table.signing = Some(new.clone());
    assert_eq!(authenticate(&table, Some(&old), NOW), Err(Denied::Invalid));
    let until = NOW + proto::limits::TOKEN_TTL_SECS * 1000;
    table.retired = Some(RetiredSigningKey {
        key: signing(),
        honoured_until: until,
    });
    assert!(authenticate(&table, Some(&old), NOW + 1).is_ok());
    assert_eq!(
        authenticate(&table, Some(&old), until),
        Err(Denied::Invalid)
    );
    let fresh = token::issue(&new, "app", "key", NOW);
    assert!(authenticate(&table, Some(&fresh), NOW + 1).is_ok());
    let forged = token::issue(
        &SigningKey {
            secret: vec![1; 32],
            ..new
        },
        "app",
        "key",
        NOW,
    );
    assert_eq!(
        authenticate(&table, Some(&forged), NOW),
        Err(Denied::Invalid)
    );
}

#[test]
fn a_token_names_its_application_while_its_key_is_active() {
    let mut table = table(&[Role::Worker]);
    let token = token::issue(&signing(), "app", "key", NOW);
    let principal = authenticate(&table, Some(&token), NOW + 1).expect("authenticated");
    assert_eq!(principal.name, "billing");
    assert_eq!(principal.roles, [Role::Worker].into());
    table.keys.get_mut("key").expect("key").status = KeyStatus::Inactive;
    assert_eq!(
        authenticate(&table, Some(&token), NOW),
        Err(Denied::Revoked)
    );
    table.keys.clear();
    assert_eq!(
        authenticate(&table, Some(&token), NOW),
        Err(Denied::Revoked)
    );
}

#[test]
fn a_token_expires_and_a_foreign_one_is_refused() {
    let table = table(&[Role::Admin]);
    let token = token::issue(&signing(), "app", "key", NOW);
    let end = NOW + proto::limits::TOKEN_TTL_SECS * 1000;
    assert!(authenticate(&table, Some(&token), end - 1).is_ok());
    assert_eq!(
        authenticate(&table, Some(&token), end),
        Err(Denied::Expired)
    );
    let foreign = SigningKey {
        secret: vec![8; 32],
        ..signing()
    };
    let forged = token::issue(&foreign, "app", "key", NOW);
    assert_eq!(
        authenticate(&table, Some(&forged), NOW),
        Err(Denied::Invalid)
    );
    let renamed = SigningKey {
        id: "other".into(),
        ..signing()
    };
    let renamed = token::issue(&renamed, "app", "key", NOW);
    assert_eq!(
        authenticate(&table, Some(&renamed), NOW),
        Err(Denied::Invalid)
    );
    assert_eq!(
        authenticate(&table, Some("a.b.c"), NOW),
        Err(Denied::Invalid)
    );
    assert_eq!(authenticate(&table, None, NOW), Err(Denied::Missing));
    assert_eq!(Denied::Expired.error_code(), "EXPIRED_TOKEN");
    assert_eq!(Denied::Revoked.error_code(), "INVALID_TOKEN");
}

#[test]
fn routes_fall_into_their_families() {
    use Family::*;
    let cases = [
        ("GET", "/health", Public),
        ("POST", "/api/token", Public),
        ("POST", "/api/webhook/{name}", Public),
        ("GET", "/api/admin/status", Admin),
        ("POST", "/api/applications", Admin),
        ("GET", "/api/applications/{id}/accessKeys", Admin),
        ("POST", "/api/auth/authorization", Admin),
        ("GET", "/api/auth/authorization/{type}/{id}", Admin),
        ("GET", "/api/tasks/poll/{task_type}", Work),
        ("GET", "/api/tasks/poll/batch/{task_type}", Work),
        ("POST", "/api/tasks", Work),
        ("POST", "/api/tasks/{id}/log", Work),
        ("GET", "/api/tasks/{id}/log", Read),
        ("GET", "/api/tasks/{id}", Read),
        ("GET", "/api/metadata/taskdefs", Read),
        ("POST", "/api/metadata/taskdefs", Define),
        ("DELETE", "/api/metadata/workflow/{name}/{version}", Define),
        ("POST", "/api/event", Define),
        ("POST", "/api/event/publish/{queue}", Operate),
        ("GET", "/api/scheduler/schedules/{name}/pause", Define),
        ("POST", "/api/schema", Define),
        ("POST", "/api/dsl/workflows", Define),
        ("POST", "/api/dsl/validate", Read),
        (
            "POST",
            "/api/dsl/workflows/{namespace}/{name}/{version}/instances",
            Operate,
        ),
        ("POST", "/api/dsl/instances/{id}/cancel", Operate),
        ("POST", "/api/workflow", Operate),
        ("DELETE", "/api/workflow/{id}", Operate),
        ("POST", "/api/workflow/bulk/terminate", Operate),
        ("POST", "/api/workflow/correlated/batch", Read),
        ("GET", "/api/workflow/search", Read),
        ("POST", "/a2a", Operate),
    ];
    for (method, path, expected) in cases {
        assert_eq!(family(method, path), expected, "{method} {path}");
    }
}

#[test]
fn each_role_reaches_its_families_only() {
    use Family::*;
    let matrix = [
        (Role::Admin, [Read, Define, Operate, Work, Admin].as_slice()),
        (Role::MetadataManager, &[Read, Define]),
        (Role::WorkflowManager, &[Read, Operate, Work]),
        (Role::Worker, &[Work]),
        (Role::ReadOnly, &[Read]),
    ];
    for (role, allowed) in matrix {
        for family in [Read, Define, Operate, Work, Admin] {
            let roles = [role].into();
            assert_eq!(
                permits(&roles, family),
                allowed.contains(&family),
                "{role:?} on {family:?}"
            );
        }
        assert!(permits(&[role].into(), Public));
    }
    assert!(permits(&BTreeSet::new(), Public));
    assert!(!permits(&BTreeSet::new(), Read));
    let both = [Role::Worker, Role::MetadataManager].into();
    assert!(permits(&both, Work) && permits(&both, Define) && !permits(&both, Operate));
}

/// An application holding only `grants`: on each target, its accesses.
fn granted(grants: &[(TargetType, &str, &[AccessType])]) -> Principal {
    let grant = |(kind, id, access): &(TargetType, &str, &[AccessType])| Grant {
        target: Target {
            kind: *kind,
            id: (*id).into(),
        },
        access: access.iter().copied().collect(),
    };
    Principal {
        application: "app".into(),
        name: "granted".into(),
        roles: BTreeSet::new(),
        grants: grants.iter().map(grant).collect(),
        key: "key".into(),
    }
}

#[test]
fn a_grant_to_execute_task_types_opens_work_on_those_types_only() {
    let mut principal = granted(&[(TargetType::TaskDef, "encode_*", &[AccessType::Execute])]);
    let poll = "/api/tasks/poll/{task_type}";
    assert!(principal.may_use(Family::Work, poll));
    assert!(!principal.may_use(Family::Work, "/api/tasks/{id}/{reference}/{status}"));
    assert!(!principal.may_use(Family::Read, "/api/tasks/{id}"));
    assert!(principal.may(Ask::EXECUTE_TASKS, "encode_video"));
    assert!(!principal.may(Ask::EXECUTE_TASKS, "decode_video"));
    principal = granted(&[(TargetType::TaskDef, "encode_*", &[AccessType::Read])]);
    assert!(
        !principal.may_use(Family::Work, poll),
        "reading is not executing"
    );
    principal.roles.insert(Role::Worker);
    assert!(
        principal.may(Ask::EXECUTE_TASKS, "decode_video"),
        "the role works on every type"
    );
}

#[test]
fn grants_on_workflow_definitions_open_their_checked_routes_only() {
    let principal = granted(&[(TargetType::WorkflowDef, "orders_*", &[AccessType::Execute])]);
    assert!(principal.may_use(Family::Operate, "/api/workflow"));
    assert!(principal.may_use(Family::Operate, "/api/workflow/{id}/pause"));
    assert!(!principal.may_use(Family::Operate, "/api/workflow/bulk/terminate"));
    assert!(
        !principal.may_use(Family::Read, "/api/workflow/{id}"),
        "no READ grant"
    );
    assert!(!principal.may_use(Family::Read, "/api/workflow/search"));
    assert!(principal.may(Ask::RUN_WORKFLOWS, "orders_eu"));
    assert!(!principal.may(Ask::RUN_WORKFLOWS, "payroll"));
    assert!(!principal.may(Ask::read(TargetType::WorkflowDef), "orders_eu"));
    for (expected, route, _, _) in GRANTED_ROUTES {
        let methods = ["GET", "POST", "PUT", "DELETE"];
        let some = methods.iter().any(|m| family(m, route) == *expected);
        assert!(some, "{route} is never {expected:?}");
    }
}

#[test]
fn audited_operations_are_operations_and_starts_are_not() {
    for (method, route, action) in AUDITED_OPERATIONS {
        assert_eq!(family(method, route), Family::Operate, "{method} {route}");
        assert_eq!(audited_operation(method, route), Some(*action));
    }
    assert_eq!(
        audited_operation("POST", "/api/workflow"),
        None,
        "starts are not"
    );
    assert_eq!(audited_operation("GET", "/api/workflow/{id}"), None);
}

#[test]
fn grants_on_definitions_tell_creating_from_updating_and_deleting() {
    use AccessType::{Create, Delete, Read, Update};
    let principal = granted(&[
        (TargetType::TaskDef, "billing_*", &[Create, Read]),
        (TargetType::WorkflowSchedule, "nightly", &[Update]),
        (
            TargetType::SecretName,
            "stripe_*",
            &[Create, Update, Delete],
        ),
    ]);
    let task = TargetType::TaskDef;
    assert!(principal.may_use(Family::Define, "/api/metadata/taskdefs"));
    assert!(principal.may_use(Family::Read, "/api/metadata/taskdefs/{name}"));
    assert!(!principal.may_use(Family::Define, "/api/metadata/taskdefs/{name}"));
    assert!(principal.may(Ask::put(task, false), "billing_charge"));
    assert!(
        !principal.may(Ask::put(task, true), "billing_charge"),
        "no UPDATE"
    );
    assert!(!principal.may(Ask::put(task, false), "payroll_pay"));
    assert!(principal.may(Ask::read(task), "billing_charge"));
    assert!(!principal.may(Ask::delete(task), "billing_charge"));
    let schedule = TargetType::WorkflowSchedule;
    let pause = "/api/scheduler/schedules/{name}/pause";
    assert!(principal.may_use(family("PUT", pause), pause));
    assert!(principal.may(Ask::update(schedule), "nightly"));
    assert!(!principal.may(Ask::delete(schedule), "nightly"));
    assert!(!principal.may_use(Family::Define, "/api/metadata/webhook"));
    assert!(principal.may_use(family("PUT", "/api/secrets/{key}"), "/api/secrets/{key}"));
    assert!(
        !principal.may_use(Family::Read, "/api/secrets"),
        "no READ on secrets"
    );
    assert_eq!(family("POST", "/api/secrets"), Family::Read);
}
