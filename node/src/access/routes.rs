//! The routes an application may use by grants alone, beside its roles.

use super::Family;
use proto::model::access::AccessType::{self, Create, Delete, Execute, Read, Update};
use proto::model::access::TargetType::{
    self, EventHandler, SecretName, TaskDef, Webhook, WorkflowDef, WorkflowSchedule,
};

const WRITE: &[AccessType] = &[Create, Update];

/// The routes open to an application by grants alone, beside its roles, with the kind of
/// resource and the accesses that open them; each checks the resource it names (lists show
/// what the caller may read). Work: the polled type, or the reported task's type. Workflows:
/// the started name, or the workflow's name read by its id. Definitions: by their names.
pub const GRANTED_ROUTES: &[(Family, &str, TargetType, &[AccessType])] = &[
    (Family::Work, "/api/tasks", TaskDef, &[Execute]),
    (Family::Work, "/api/tasks/update-v2", TaskDef, &[Execute]),
    (
        Family::Work,
        "/api/tasks/poll/{task_type}",
        TaskDef,
        &[Execute],
    ),
    (
        Family::Work,
        "/api/tasks/poll/batch/{task_type}",
        TaskDef,
        &[Execute],
    ),
    (Family::Work, "/api/tasks/{id}/log", TaskDef, &[Execute]),
    (Family::Operate, "/api/workflow", WorkflowDef, &[Execute]),
    (
        Family::Operate,
        "/api/workflow/{id}",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/execute/{name}/{version}",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/{id}/pause",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/{id}/resume",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/{id}/retry",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/{id}/restart",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/{id}/rerun",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/{id}/skiptask/{reference}",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/{id}/remove",
        WorkflowDef,
        &[Execute],
    ),
    (
        Family::Operate,
        "/api/workflow/{id}/terminate-remove",
        WorkflowDef,
        &[Execute],
    ),
    (Family::Read, "/api/workflow/{id}", WorkflowDef, &[Read]),
    (
        Family::Read,
        "/api/workflow/{id}/status",
        WorkflowDef,
        &[Read],
    ),
    (
        Family::Read,
        "/api/workflow/{id}/tasks",
        WorkflowDef,
        &[Read],
    ),
    (Family::Define, "/api/metadata/taskdefs", TaskDef, WRITE),
    (Family::Read, "/api/metadata/taskdefs", TaskDef, &[Read]),
    (
        Family::Read,
        "/api/metadata/taskdefs/{name}",
        TaskDef,
        &[Read],
    ),
    (
        Family::Define,
        "/api/metadata/taskdefs/{name}",
        TaskDef,
        &[Delete],
    ),
    (Family::Define, "/api/metadata/workflow", WorkflowDef, WRITE),
    (Family::Read, "/api/metadata/workflow", WorkflowDef, &[Read]),
    (
        Family::Read,
        "/api/metadata/workflow/latest-versions",
        WorkflowDef,
        &[Read],
    ),
    (
        Family::Read,
        "/api/metadata/workflow/names",
        WorkflowDef,
        &[Read],
    ),
    (
        Family::Read,
        "/api/metadata/workflow/names-and-versions",
        WorkflowDef,
        &[Read],
    ),
    (
        Family::Read,
        "/api/metadata/workflow/{name}",
        WorkflowDef,
        &[Read],
    ),
    (
        Family::Read,
        "/api/metadata/workflow/{name}/versions",
        WorkflowDef,
        &[Read],
    ),
    (
        Family::Define,
        "/api/metadata/workflow/{name}/{version}",
        WorkflowDef,
        &[Delete],
    ),
    (Family::Define, "/api/event", EventHandler, WRITE),
    (Family::Read, "/api/event", EventHandler, &[Read]),
    (Family::Read, "/api/event/{event}", EventHandler, &[Read]),
    (
        Family::Define,
        "/api/event/{event}",
        EventHandler,
        &[Delete],
    ),
    (Family::Define, "/api/metadata/webhook", Webhook, WRITE),
    (Family::Read, "/api/metadata/webhook", Webhook, &[Read]),
    (
        Family::Define,
        "/api/metadata/webhook/{name}",
        Webhook,
        &[Delete],
    ),
    (
        Family::Define,
        "/api/scheduler/schedules",
        WorkflowSchedule,
        WRITE,
    ),
    (
        Family::Read,
        "/api/scheduler/schedules",
        WorkflowSchedule,
        &[Read],
    ),
    (
        Family::Read,
        "/api/scheduler/schedules/{name}",
        WorkflowSchedule,
        &[Read],
    ),
    (
        Family::Define,
        "/api/scheduler/schedules/{name}",
        WorkflowSchedule,
        &[Delete],
    ),
    (
        Family::Define,
        "/api/scheduler/schedules/{name}/pause",
        WorkflowSchedule,
        &[Update],
    ),
    (
        Family::Define,
        "/api/scheduler/schedules/{name}/resume",
        WorkflowSchedule,
        &[Update],
    ),
    (Family::Read, "/api/secrets", SecretName, &[Read]),
    (
        Family::Read,
        "/api/secrets/{key}/exists",
        SecretName,
        &[Read],
    ),
    (
        Family::Define,
        "/api/secrets/{key}",
        SecretName,
        &[Create, Update, Delete],
    ),
];

/// The operations on workflows and instances recorded in the audit log when a request with a
/// token makes them (method, route, the action recorded); starts, polls and results are not:
/// applications make them by the thousand, and their effects are in the workflows themselves.
pub const AUDITED_OPERATIONS: &[(&str, &str, &str)] = &[
    ("DELETE", "/api/workflow/{id}", "TerminateWorkflow"),
    ("PUT", "/api/workflow/{id}/pause", "PauseWorkflow"),
    ("PUT", "/api/workflow/{id}/resume", "ResumeWorkflow"),
    ("POST", "/api/workflow/{id}/retry", "RetryWorkflow"),
    ("POST", "/api/workflow/{id}/restart", "RestartWorkflow"),
    ("POST", "/api/workflow/{id}/rerun", "RerunWorkflow"),
    ("PUT", "/api/workflow/{id}/skiptask/{reference}", "SkipTask"),
    ("DELETE", "/api/workflow/{id}/remove", "RemoveWorkflow"),
    (
        "DELETE",
        "/api/workflow/{id}/terminate-remove",
        "TerminateRemoveWorkflow",
    ),
    ("PUT", "/api/workflow/decide/{id}", "DecideWorkflow"),
    ("PUT", "/api/workflow/bulk/pause", "BulkPauseWorkflows"),
    ("PUT", "/api/workflow/bulk/resume", "BulkResumeWorkflows"),
    ("POST", "/api/workflow/bulk/restart", "BulkRestartWorkflows"),
    ("POST", "/api/workflow/bulk/retry", "BulkRetryWorkflows"),
    (
        "POST",
        "/api/workflow/bulk/terminate",
        "BulkTerminateWorkflows",
    ),
    ("POST", "/api/dsl/instances/{id}/suspend", "SuspendInstance"),
    ("POST", "/api/dsl/instances/{id}/resume", "ResumeInstance"),
    ("POST", "/api/dsl/instances/{id}/cancel", "CancelInstance"),
];

/// The action recorded for a request to `route` with `method`, if it is an audited operation.
pub fn audited_operation(method: &str, route: &str) -> Option<&'static str> {
    AUDITED_OPERATIONS
        .iter()
        .find(|(m, r, _)| *m == method && *r == route)
        .map(|(_, _, action)| *action)
}
