//! The key layout of a workflow partition's state tree. Keys are ASCII prefixes followed by ids; the
//! cluster layer reserves keys starting with byte 0x00 for its own bookkeeping.

use proto::WorkflowId;

/// `w/{workflowId}` -> a chain: the record's version, its JSON, and the patches written after it
/// (see [`proto::record::patch::decode_chain`]).
pub fn workflow(id: &WorkflowId) -> Vec<u8> {
    [b"w/".as_slice(), id.as_str().as_bytes()].concat()
}
pub const WORKFLOW_PREFIX: &[u8] = b"w/";

/// `r/{name}\0{workflowId}` -> workflow version (u32 BE) — present while the workflow is not terminal.
pub fn running(name: &str, id: &WorkflowId) -> Vec<u8> {
    [
        b"r/".as_slice(),
        name.as_bytes(),
        b"\0",
        id.as_str().as_bytes(),
    ]
    .concat()
}
/// The prefix of every running workflow of `name`.
pub fn running_prefix(name: &str) -> Vec<u8> {
    [b"r/".as_slice(), name.as_bytes(), b"\0"].concat()
}
pub const RUNNING_PREFIX: &[u8] = b"r/";

/// `sn/{workflowId}` -> empty — present while a terminal workflow owes a publication (its end
/// to its status listener sink, lifecycle events: `WorkflowRecord::owes_publication`), so that the partition's
/// next leader finds it at recovery as it finds running workflows by their rows. Only terminal
/// writes set or clear it: one retried while it owed keeps it, pointing at a running workflow,
/// until its next end.
pub fn status_notice(id: &WorkflowId) -> Vec<u8> {
    [STATUS_NOTICE_PREFIX, id.as_str().as_bytes()].concat()
}
pub const STATUS_NOTICE_PREFIX: &[u8] = b"sn/";

/// The workflow id of a [`status_notice`] key.
pub fn id_after_status_notice(key: &[u8]) -> Option<WorkflowId> {
    let s = std::str::from_utf8(key.strip_prefix(STATUS_NOTICE_PREFIX)?).ok()?;
    WorkflowId::parse(s).ok()
}

/// `l/{workflowId}` -> the JSON list of event types the workflow's running Serverless Workflow
/// `listen` tasks wait for — present while it waits for some.
pub fn listening(id: &WorkflowId) -> Vec<u8> {
    [LISTENING_PREFIX, id.as_str().as_bytes()].concat()
}
pub const LISTENING_PREFIX: &[u8] = b"l/";

/// The workflow id of a [`listening`] key.
pub fn id_after_listening(key: &[u8]) -> Option<WorkflowId> {
    let s = std::str::from_utf8(key.strip_prefix(LISTENING_PREFIX)?).ok()?;
    WorkflowId::parse(s).ok()
}

/// `c/{correlationId}\0{workflowId}` -> empty.
pub fn correlated(correlation_id: &str, id: &WorkflowId) -> Vec<u8> {
    [
        b"c/".as_slice(),
        correlation_id.as_bytes(),
        b"\0",
        id.as_str().as_bytes(),
    ]
    .concat()
}
pub fn correlated_prefix(correlation_id: &str) -> Vec<u8> {
    [b"c/".as_slice(), correlation_id.as_bytes(), b"\0"].concat()
}

/// The workflow id at the end of an index key (`...\0{id}`).
pub fn id_after_nul(key: &[u8]) -> Option<WorkflowId> {
    let pos = key.iter().rposition(|b| *b == 0)?;
    let s = std::str::from_utf8(&key[pos + 1..]).ok()?;
    WorkflowId::parse(s).ok()
}

/// `x/{handler}\0{executionId}` -> encoded [`proto::model::EventExecution`].
pub fn execution(handler: &str, id: &str) -> Vec<u8> {
    [b"x/".as_slice(), handler.as_bytes(), b"\0", id.as_bytes()].concat()
}
pub const EXECUTION_PREFIX: &[u8] = b"x/";

/// `q/{queue}\0{seq, 20 digits}` -> encoded [`proto::record::QueueMessage`]; sorts in publish order.
pub fn message(queue: &str, seq: u64) -> Vec<u8> {
    format!("q/{queue}\0{seq:020}").into_bytes()
}
pub const MESSAGE_PREFIX: &[u8] = b"q/";

/// The queue and sequence number of a [`message`] key.
pub fn parse_message(key: &[u8]) -> Option<(String, u64)> {
    let rest = key.strip_prefix(MESSAGE_PREFIX)?;
    let pos = rest.iter().rposition(|b| *b == 0)?;
    let queue = std::str::from_utf8(&rest[..pos]).ok()?;
    let seq = std::str::from_utf8(&rest[pos + 1..]).ok()?.parse().ok()?;
    Some((queue.to_owned(), seq))
}

/// `qn/{queue}` -> how many messages the queue holds in this partition (u64 BE).
pub fn queue_len(queue: &str) -> Vec<u8> {
    [QUEUE_LEN_PREFIX, queue.as_bytes()].concat()
}

const QUEUE_LEN_PREFIX: &[u8] = b"qn/";

/// The queue a [`queue_len`] key counts.
pub fn queue_of_len(key: &[u8]) -> Option<&str> {
    std::str::from_utf8(key.strip_prefix(QUEUE_LEN_PREFIX)?).ok()
}

/// The partition's last message sequence number (u64 BE).
pub const MESSAGE_SEQ: &[u8] = b"qs";

/// `fp/{fingerprint, 16 hex}` -> when it was last published (i64 BE): the event gate's window.
pub fn fingerprint(fp: u64) -> Vec<u8> {
    format!("fp/{fp:016x}").into_bytes()
}

/// `ft/{time, 20 digits}/{fingerprint}` -> empty: fingerprints by age, to expire them.
pub fn fingerprint_by_time(time: i64, fp: u64) -> Vec<u8> {
    format!("ft/{:020}/{fp:016x}", time.max(0)).into_bytes()
}
pub const FINGERPRINT_TIME_PREFIX: &[u8] = b"ft/";

/// The time and fingerprint of a [`fingerprint_by_time`] key.
pub fn parse_fingerprint_by_time(key: &[u8]) -> Option<(i64, u64)> {
    let s = std::str::from_utf8(key.strip_prefix(FINGERPRINT_TIME_PREFIX)?).ok()?;
    let (time, fp) = s.split_once('/')?;
    Some((time.parse().ok()?, u64::from_str_radix(fp, 16).ok()?))
}

/// `ea/{event}\0{messageId}` -> encoded [`proto::record::dead_letter::Attempts`]: the
/// handlings begun on a message not handled yet.
pub fn attempts(event: &str, message_id: &str) -> Vec<u8> {
    [
        b"ea/".as_slice(),
        event.as_bytes(),
        b"\0",
        message_id.as_bytes(),
    ]
    .concat()
}

/// `dl/{event}\0{messageId}` -> encoded [`proto::record::dead_letter::DeadLetter`].
pub fn dead_letter(event: &str, message_id: &str) -> Vec<u8> {
    [
        DEAD_LETTER_PREFIX,
        event.as_bytes(),
        b"\0",
        message_id.as_bytes(),
    ]
    .concat()
}
pub const DEAD_LETTER_PREFIX: &[u8] = b"dl/";

/// `sm/{schedule}` -> the last time (epoch ms, i64 BE) the schedule fired.
pub fn schedule_mark(name: &str) -> Vec<u8> {
    [b"sm/".as_slice(), name.as_bytes()].concat()
}

/// `z/{workflowId}` -> a [`proto::record::quarantine`] entry: a workflow row that could not be
/// decoded, set aside with the reason.
pub fn quarantined(id: &WorkflowId) -> Vec<u8> {
    [QUARANTINE_PREFIX, id.as_str().as_bytes()].concat()
}
pub const QUARANTINE_PREFIX: &[u8] = b"z/";

/// The workflow name of a [`running`] key.
pub fn running_name(key: &[u8]) -> Option<String> {
    let rest = key.strip_prefix(RUNNING_PREFIX)?;
    let pos = rest.iter().rposition(|b| *b == 0)?;
    std::str::from_utf8(&rest[..pos]).ok().map(str::to_owned)
}
