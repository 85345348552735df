//! The bodies of Baton's fuzz targets, one function per target (`fuzz_targets/*.rs` call them).
//! Each feeds arbitrary bytes to what reads input from outside or from disk and checks that it
//! answers (an error is a fine answer; a panic, a hang or an unbounded allocation is not) and,
//! where input is accepted, that it survives the trip through storage unchanged.
//!
//! Run one for a while: `cargo fuzz run records -- -max_total_time=600` (from `fuzz/`, with
//! `RUSTC_BOOTSTRAP=1` on a stable toolchain); the corpus in `fuzz/corpus/<target>` seeds it.

use proto::model::{
    EventHandler, StartWorkflowRequest, TaskDef, TaskResult, Webhook, WorkflowDef,
    WorkflowSchedule,
};
use proto::record::{self, patch, quarantine, write, MetaCommand, PartitionCommand};
use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;

/// What is accepted survives the trip through storage: encoded as a record and decoded, it is
/// the same value.
fn round_trips<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) {
    let stored = record::encode(value);
    let back: T = record::decode(&stored).expect("an accepted value decodes after storage");
    assert_eq!(&back, value, "an accepted value changed in storage");
}

/// Parses `data` as a JSON body of type `T` as the HTTP API does; `Some` when it parses.
fn body<T: DeserializeOwned>(data: &[u8]) -> Option<T> {
    node::api::extract::parse_json::<T>(data).ok()
}

/// HTTP bodies: every request type the API parses, the door's checks on it, the engine's
/// validation of definitions, and the round trip of what passes.
pub fn http_bodies(data: &[u8]) {
    if let Some(r) = body::<StartWorkflowRequest>(data) {
        if proto::check::start_request(&r).is_ok() {
            round_trips(&r);
        }
    }
    if let Some(r) = body::<TaskResult>(data) {
        let _ = proto::check::task_result(&r);
    }
    if let Some(def) = body::<WorkflowDef>(data) {
        if proto::check::workflow_def(&def).is_ok()
            && engine::validate_workflow_def(&def).is_ok()
        {
            round_trips(&MetaCommand::PutWorkflowDef(Box::new(def)));
        }
    }
    if let Some(def) = body::<TaskDef>(data) {
        if proto::check::task_def(&def).is_ok() {
            round_trips(&MetaCommand::PutTaskDefs(vec![def]));
        }
    }
    let _ = body::<EventHandler>(data);
    let _ = body::<Webhook>(data);
    let _ = body::<WorkflowSchedule>(data);
}

/// Stored and replicated records: workflow records, chains, writes, commands of both groups,
/// quarantine entries. Whatever decodes encodes and decodes again to the same value.
pub fn records(data: &[u8]) {
    if let Ok(command) = record::decode::<PartitionCommand>(data) {
        round_trips(&command);
    }
    if let Ok(command) = record::decode::<MetaCommand>(data) {
        round_trips(&command);
    }
    let _ = record::decode::<record::WorkflowRecord>(data);
    let _ = patch::decode_chain(data);
    if let Ok(Some((head, body))) = write::decode(data) {
        let again = write::encode(&head, body);
        assert_eq!(write::decode(&again).ok().flatten(), Some((head, body)));
    }
    if let Ok(entry) = quarantine::decode(data) {
        assert_eq!(quarantine::decode(&quarantine::encode(&entry)).ok(), Some(entry));
    }
}

/// What the Raft layer reads from peers and disk: RPCs and replies, log entries, command
/// batches (packed or not), apply progress, log ids, peer frame headers, Raft log segments.
pub fn raft_wire(data: &[u8]) {
    use cluster::network::wire;
    let _ = wire::decode::<wire::RaftRequest>(data);
    let _ = wire::decode::<wire::RaftReply>(data);
    let _ = cluster::codec::decode_entry(data);
    let _ = cluster::codec::decode_log_id(data);
    let _ = cluster::codec::decode_partial(data);
    if let Ok(commands) = cluster::codec::decode_commands(data) {
        let _ = cluster::pack::unpack(commands);
    }
    if let Ok(header) = <[u8; cluster::transport::frame::HEADER_LEN]>::try_from(
        data.get(..cluster::transport::frame::HEADER_LEN).unwrap_or_default(),
    ) {
        let _ = cluster::transport::frame::parse_header(&header, 1 << 20);
    }
    let _ = cluster::storage::wal::format::read(0, data);
}

/// Frames from workers and peers: the QUIC worker protocol both ways, forwarded requests and
/// their replies.
pub fn frames(data: &[u8]) {
    if let Ok(frame) = proto::worker::decode_frame::<proto::worker::WorkerFrame>(data) {
        round_trips(&frame);
    }
    let _ = proto::worker::decode_frame::<proto::worker::NodeFrame>(data);
    let _ = proto::peer::decode_request(data);
    let _ = proto::peer::decode_reply(data);
}

/// Event payloads: a body taken as a payload, `expandInlineJSON`, and `${...}` placeholders
/// resolved against it (the first line of the input is the template, the rest the payload).
pub fn events(data: &[u8]) {
    let (template, rest) = match data.iter().position(|b| *b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let payload = node::events::eval::payload_of(rest);
    let expanded = node::events::eval::expand_inline_json(&payload);
    let template = serde_json::Value::String(String::from_utf8_lossy(template).into_owned());
    let _ = engine::resolve_in(&template, &expanded);
    let request = StartWorkflowRequest {
        name: "w".into(),
        correlation_id: Some(String::from_utf8_lossy(data).into_owned()),
        ..Default::default()
    };
    let _ = node::events::eval::resolve_details(&request, &expanded);
}

/// Cron expressions and time zones of schedules, and the next time after a few instants.
pub fn cron(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (expression, zone) = match text.split_once('|') {
        Some((e, z)) => (e.to_owned(), Some(z.to_owned())),
        None => (text.into_owned(), None),
    };
    let schedule = WorkflowSchedule {
        name: "s".into(),
        cron_expression: expression,
        zone_id: zone,
        ..Default::default()
    };
    if let Ok(cron) = node::service::triggers::Cron::parse(&schedule) {
        for after in [0, 1_700_000_000_000, i64::MAX / 2] {
            let _ = cron.next_after(after);
        }
    }
}
