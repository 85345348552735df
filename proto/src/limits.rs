//! Named maximums for everything that enters Baton (CONVENTIONS: put a limit on everything).

/// Largest HTTP request body accepted, in bytes.
pub const REQUEST_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Largest JSON payload (workflow input, task output) accepted, in bytes.
pub const PAYLOAD_BYTES_MAX: usize = 1024 * 1024;
/// Most tasks one batch poll may lease.
pub const POLL_BATCH_MAX: usize = 100;
/// Longest a batch poll may wait, in milliseconds.
pub const POLL_WAIT_MS_MAX: u64 = 60_000;
/// Most tasks a workflow definition may contain (counted through forks and nesting).
pub const DEF_TASKS_MAX: usize = 1_000;
/// Most tasks one workflow instance may create over its life (retries included).
pub const WORKFLOW_TASKS_MAX: usize = 10_000;
/// Longest name (workflow, task, reference name) accepted.
pub const NAME_LEN_MAX: usize = 256;
/// Most results a search returns at once.
pub const SEARCH_RESULTS_MAX: usize = 1_000;
/// Most log lines kept per task.
pub const TASK_LOGS_MAX: usize = 1_000;
/// Messages one of Baton's own event queues holds per partition before a publish is refused.
pub const EVENT_QUEUE_MAX: u64 = 100_000;
/// Messages an event consumer works on at once.
pub const EVENT_INFLIGHT_MAX: usize = 64;
/// Execution records one listing answers.
pub const EXECUTIONS_MAX: usize = 1_000;
/// Script host processes a node runs at once (each evaluates one script at a time).
pub const SCRIPT_HOSTS_MAX: usize = 4;
/// Times a message's handling may fail or time out before it is set aside as a dead letter.
pub const EVENT_ATTEMPTS_MAX: u32 = 5;
/// Longest one handling of a message may take before it counts as a failed attempt, in ms.
pub const EVENT_HANDLING_MS_MAX: u64 = 60_000;
/// Dead letters one listing answers.
pub const DEAD_LETTERS_MAX: usize = 1_000;
