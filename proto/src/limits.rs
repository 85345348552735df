//! Named maximums for everything that enters Baton: everything gets a limit.

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
/// Most iterations a DO_WHILE runs; the next one fails it with the reason. A loop that keeps
/// only its last iterations (`keepLastN`) is bounded by this, one that keeps them all also by
/// [`WORKFLOW_TASKS_MAX`] and the workflow's size.
pub const LOOP_ITERATIONS_MAX: u32 = 100_000;
/// Longest name (workflow, task, reference name) accepted.
pub const NAME_LEN_MAX: usize = 256;
/// Most results a search returns at once.
pub const SEARCH_RESULTS_MAX: usize = 1_000;
/// Most workflow ids one bulk operation (`/api/workflow/bulk/...`) may name, as in Conductor.
pub const BULK_WORKFLOWS_MAX: usize = 1_000;
/// Most log lines kept per task.
pub const TASK_LOGS_MAX: usize = 1_000;
/// Messages one of Baton's own event queues holds per partition before a publish is refused.
pub const EVENT_QUEUE_MAX: u64 = 100_000;
/// Messages an event consumer works on at once.
pub const EVENT_INFLIGHT_MAX: usize = 64;
/// Execution records one listing answers.
pub const EXECUTIONS_MAX: usize = 1_000;
/// Deepest nesting of a payload (workflow input, task output, variables, templates): a map is one
/// level, each object or array inside it one more. Records add a few levels of their own around
/// payloads, and they must always decode (JSON parsers stop at 128).
pub const PAYLOAD_DEPTH_MAX: usize = 64;
/// Longest correlation id accepted, in bytes.
pub const CORRELATION_ID_LEN_MAX: usize = 1024;
/// Longest reason (a worker's `reasonForIncompletion`, a terminate reason), in bytes.
pub const REASON_LEN_MAX: usize = 4 * 1024;
/// Longest description of a definition, in bytes.
pub const DESCRIPTION_LEN_MAX: usize = 4 * 1024;
/// Longest duration a definition or result may name, in seconds (ten years).
pub const DURATION_SECONDS_MAX: u64 = 10 * 365 * 24 * 3600;
/// Largest retry count (and backoff scale factor). Conductor sets none, and definitions written
/// for it ask for tens of thousands; a workflow still holds at most [`WORKFLOW_TASKS_MAX`]
/// attempts, and one that would create more fails with the reason.
pub const RETRY_COUNT_MAX: u32 = 1_000_000;
/// Largest workflow definition, as JSON. Every workflow record carries its definition, so a
/// definition must leave room for the workflow's own data within [`WORKFLOW_BYTES_MAX`].
pub const DEF_BYTES_MAX: usize = 512 * 1024;
/// Largest Serverless Workflow document, as the YAML or JSON text submitted; measured before it
/// is parsed.
pub const DSL_DOCUMENT_BYTES_MAX: usize = 1024 * 1024;
/// Most problems a refused Serverless Workflow document reports (the rest are counted).
pub const DSL_PROBLEMS_MAX: usize = 20;
/// Largest a workflow's record may grow, as JSON (its definition, inputs, outputs, variables and
/// task logs together). A step that would pass it fails the workflow with that reason instead; a
/// start that would, is refused. It stays a quarter below the largest replicated command (4 MiB),
/// so that the write failing a workflow at the limit still fits.
pub const WORKFLOW_BYTES_MAX: usize = 3 * 1024 * 1024;
/// Deepest a workflow's stored record may nest as JSON, its own levels around payloads
/// included. A step that would pass it fails the workflow (templates can nest a payload
/// deeper); it stays below the 128 levels JSON parsers take, so every stored record decodes.
pub const RECORD_DEPTH_MAX: usize = 120;
/// Script host processes a node runs at once (each evaluates one script at a time).
pub const SCRIPT_HOSTS_MAX: usize = 4;
/// Times a message's handling may fail or time out before it is set aside as a dead letter.
pub const EVENT_ATTEMPTS_MAX: u32 = 5;
/// Longest one handling of a message may take before it counts as a failed attempt, in ms.
pub const EVENT_HANDLING_MS_MAX: u64 = 60_000;
/// Dead letters one listing answers.
pub const DEAD_LETTERS_MAX: usize = 1_000;
/// HTTP requests one node serves at once, besides those that may wait (polls, executes); more
/// answer 503 with `Retry-After`.
pub const HTTP_REQUESTS_MAX: usize = 1_024;
/// HTTP polls and executes one node lets wait at once; more answer 503 with `Retry-After`.
pub const HTTP_WAITS_MAX: usize = 3_072;
/// HTTP connections one node holds open at once (each costs buffers and a task); past it the
/// node accepts no more until one closes.
pub const HTTP_CONNECTIONS_MAX: usize = 4_096;
/// Longest an HTTP connection may wait for its next request's head (idle keep-alive, or a client
/// that sends its headers too slowly); then the node closes it, so idle connections do not hold
/// the slots of [`HTTP_CONNECTIONS_MAX`]. A request being answered (a parked poll, an execute's
/// wait) is not idle.
pub const HTTP_IDLE_SECS: u64 = 60;
/// Polls parked on one node at once (HTTP polls and QUIC workers' pumps); a poll that finds
/// nothing when this many are parked answers 503.
pub const PARKED_POLLS_MAX: usize = 4_096;
/// Operations waiting on one partition's workflow actors at once on its leader; more answer 503.
pub const PARTITION_CALLS_MAX: usize = 2_048;
/// Seconds a client is told to wait (`Retry-After`) when one of these bounds is full.
pub const RETRY_AFTER_SECS: u64 = 1;
/// Largest schema's `data` (`POST /api/schema`), as JSON. Schemas are read from the meta group's
/// replica and compiled on the partitions' leaders, so they stay small beside a definition.
pub const SCHEMA_BYTES_MAX: usize = 64 * 1024;
/// Most schema versions the registry holds, over all names; a registration past it is refused.
pub const SCHEMAS_MAX: usize = 1_000;
/// Most schemas one `POST /api/schema` may register.
pub const SCHEMAS_PER_REQUEST_MAX: usize = 100;
/// Most applications (identities with access keys) the meta group holds.
pub const APPLICATIONS_MAX: usize = 1_000;
/// Most access keys one application holds (two let a key be rotated without a gap).
pub const ACCESS_KEYS_PER_APPLICATION_MAX: usize = 5;
/// Most targets one application holds grants on.
pub const GRANTS_PER_APPLICATION_MAX: usize = 100;
/// Most entries the audit log keeps; the oldest goes as a new one comes.
pub const AUDIT_ENTRIES_MAX: u64 = 100_000;
/// How long the audit log keeps an entry (90 days), if fewer than [`AUDIT_ENTRIES_MAX`] came
/// after it.
pub const AUDIT_RETENTION_MS: i64 = 90 * 24 * 60 * 60 * 1000;
/// Most audit entries one read answers.
pub const AUDIT_PAGE_MAX: usize = 1_000;
/// Seconds a token from `POST /api/token` is honoured (its key's revocation ends it sooner).
pub const TOKEN_TTL_SECS: i64 = 60 * 60;
/// Most secrets a store holds (the replicated store, or a node's secrets directory).
pub const SECRETS_MAX: usize = 1_000;
/// Largest secret value, in bytes.
pub const SECRET_BYTES_MAX: usize = 64 * 1024;
/// Most validation errors a refusal or a failure reason lists (the rest are counted).
pub const SCHEMA_ERRORS_MAX: usize = 10;
/// Most Serverless Workflow document versions the meta group holds (each up to
/// [`DSL_DOCUMENT_BYTES_MAX`]).
pub const DSL_WORKFLOWS_MAX: usize = 1_000;
/// Shortest `schedule.every` or `schedule.after` of a DSL document: a document cannot start
/// instances faster than one per second by itself.
pub const DSL_SCHEDULE_INTERVAL_MIN_MS: i64 = 1_000;
/// Lifecycle CloudEvents one DSL instance keeps waiting for its sink: past it the oldest are
/// dropped (and counted), so a sink that is down cannot grow a record without bound.
pub const DSL_LIFECYCLE_PENDING_MAX: usize = 256;
/// Most bytes of a DSL `run` process's stdout a node keeps, and as many of its stderr: both
/// together fit one payload. The rest is read and dropped, and the text says it was cut.
pub const PROCESS_OUTPUT_BYTES_MAX: usize = PAYLOAD_BYTES_MAX / 2;
/// DSL `run` processes (a shell command, a python script) one node runs at once; the others
/// wait for a slot.
pub const PROCESSES_MAX: usize = 8;
/// How long a DSL `run` process may run when its task sets no `timeout`; then it is killed.
pub const PROCESS_RUN_MS_DEFAULT: u64 = 5 * 60 * 1000;
/// The longest a DSL `run` process may run, whatever its task's `timeout` says.
pub const PROCESS_RUN_MS_MAX: u64 = 60 * 60 * 1000;
/// Most groups a gathering `schedule.on` keeps gathering at once: past it the oldest is
/// dropped (and counted), so events that never complete a group cannot grow it without bound.
pub const GATHER_GROUPS_MAX: usize = 256;
/// Most bytes (as JSON) a gathering `schedule.on`'s groups hold: past it the oldest are dropped.
pub const GATHERING_BYTES_MAX: usize = 4 * 1024 * 1024;
/// How many offered message ids a gathering `schedule.on` remembers, so that a message
/// delivered again joins no group.
pub const GATHER_SEEN_MAX: usize = 1_024;
