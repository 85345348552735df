//! This crate's encodings as golden samples (see [`super`]): every peer request and reply, a
//! workflow record, meta and partition commands, a meta outcome, worker and node frames.

use super::{variant, Sample};
use crate::peer::tests::{record, replies, requests, tid, wid};
use crate::peer::{self, Envelope};
use crate::record::{self, MetaCommand, MetaOutcome, NodeEntry, PartitionCommand};
use crate::version::{Binary, ClusterVersion, VersionRange};
use crate::worker::{self, Lease, NodeFrame, Subscription, WorkerFrame};

fn read_record<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<(), String> {
    record::decode::<T>(bytes)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn read_worker<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<(), String> {
    let body = bytes.get(4..).ok_or("no length prefix")?;
    worker::decode_frame::<T>(body)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn binary() -> Binary {
    Binary {
        release: "0.1.0".into(),
        supports: VersionRange {
            min: ClusterVersion(1),
            max: ClusterVersion(1),
        },
    }
}

fn peer_samples() -> Vec<Sample> {
    let mut samples = Vec::new();
    for (i, request) in requests().into_iter().enumerate() {
        let name = format!("{i:02}-{}", variant(&request));
        let envelope = Envelope { hops: 1, request };
        samples.push(Sample {
            format: "peer-request",
            name,
            bytes: peer::encode_request(&envelope),
            read: |b| peer::decode_request(b).map(drop).map_err(|e| e.to_string()),
        });
    }
    for (i, reply) in replies().into_iter().enumerate() {
        let name = match &reply {
            Ok(r) => format!("{i:02}-{}", variant(r)),
            Err(_) => format!("{i:02}-Failure"),
        };
        samples.push(Sample {
            format: "peer-reply",
            name,
            bytes: peer::encode_reply(&reply),
            read: |b| peer::decode_reply(b).map(drop).map_err(|e| e.to_string()),
        });
    }
    samples
}

fn record_samples() -> Vec<Sample> {
    let node = NodeEntry {
        id: crate::NodeId(2),
        addr: "127.0.0.1:9082".into(),
        draining: false,
        binary: Some(binary()),
    };
    let metas = [
        MetaCommand::PutNode(node),
        MetaCommand::ActivateVersion {
            version: ClusterVersion(1),
        },
        MetaCommand::DeleteTaskDef { name: "t".into() },
        MetaCommand::PutWorkflowDefs(vec![crate::model::WorkflowDef {
            name: "orders".into(),
            version: 2,
            ..Default::default()
        }]),
    ];
    let partitions = [
        PartitionCommand::RemoveWorkflow { workflow_id: wid() },
        PartitionCommand::Ack {
            queue: "conductor:q".into(),
            seq: 9,
        },
    ];
    let unserved = MetaOutcome::Unserved {
        node: crate::NodeId(3),
        supports: Some(binary().supports),
        active: ClusterVersion(2),
    };
    let mut samples = vec![
        Sample {
            format: "record",
            name: "WorkflowRecord".into(),
            bytes: record::encode(&record()),
            read: read_record::<record::WorkflowRecord>,
        },
        Sample {
            format: "record",
            name: "WorkflowRecordRateLimited".into(),
            bytes: record::encode(&rate_limited()),
            read: read_record::<record::WorkflowRecord>,
        },
        Sample {
            format: "meta-outcome",
            name: "Unserved".into(),
            bytes: record::encode(&unserved),
            read: read_record::<MetaOutcome>,
        },
    ];
    let encode = |c: &_| record::encode(c);
    samples.extend(each(
        "meta-command",
        &metas,
        encode,
        read_record::<MetaCommand>,
    ));
    let encode = |c: &_| record::encode(c);
    let read = read_record::<PartitionCommand>;
    samples.extend(each("partition-command", &partitions, encode, read));
    samples
}

/// A workflow record whose task carries its definition's rate limit
/// (`crate::version::TASK_RATE_LIMITS`).
fn rate_limited() -> record::WorkflowRecord {
    let mut rec = record();
    let task = &mut rec.workflow.tasks[0];
    task.rate_limit_per_frequency = Some(10);
    task.rate_limit_frequency_in_seconds = Some(60);
    rec
}

/// A sample of each of `values`, named by its variant.
fn each<T: std::fmt::Debug>(
    format: &'static str,
    values: &[T],
    encode: impl Fn(&T) -> Vec<u8>,
    read: super::Reader,
) -> Vec<Sample> {
    let sample = |value: &T| Sample {
        format,
        name: variant(value),
        bytes: encode(value),
        read,
    };
    values.iter().map(sample).collect()
}

fn worker_samples() -> Vec<Sample> {
    let lease = Lease {
        task_id: tid().to_string(),
        task_type: "t".into(),
        poll_count: 1,
    };
    let workers = [
        WorkerFrame::Hello {
            worker_id: "w1".into(),
            subscriptions: vec![Subscription {
                task_type: "t".into(),
                domain: None,
                capacity: 8,
            }],
            versions: vec![1],
        },
        WorkerFrame::Credit {
            task_type: "t".into(),
            domain: Some("d".into()),
            n: 2,
        },
        WorkerFrame::Result {
            seq: 4,
            lease,
            result: crate::model::TaskResult {
                task_id: tid().to_string(),
                ..Default::default()
            },
        },
        WorkerFrame::Drain,
    ];
    let nodes = [
        NodeFrame::Welcome {
            node: 1,
            version: 1,
            worker_id: "w1".into(),
        },
        NodeFrame::Ack { seq: 4 },
        NodeFrame::Error {
            seq: Some(4),
            code: worker::ErrorCode::Invalid,
            message: "no".into(),
        },
    ];
    let encode = |f: &_| worker::encode_frame(f);
    let mut samples = each("worker-frame", &workers, encode, read_worker::<WorkerFrame>);
    let encode = |f: &_| worker::encode_frame(f);
    samples.extend(each("node-frame", &nodes, encode, read_worker::<NodeFrame>));
    samples
}

/// A partition's workflow writes (a put, one owing a publication, one listening) and a stored
/// chain (a record and a patch).
fn write_samples() -> Vec<Sample> {
    use crate::record::patch;
    use crate::record::write::{self, WriteHead, WriteKind};
    let older = record();
    let mut newer = record();
    newer.version += 1;
    newer.workflow.update_time = 9;
    let body = serde_json::to_vec(&older).expect("encodes");
    let mut owing = WriteHead::of(WriteKind::Put, 6, &older);
    owing.owes_publication = true;
    let mut listening = WriteHead::of(WriteKind::Put, 6, &older);
    listening.listening = Some(vec!["com.example.paid"]);
    let heads = [
        ("Put", WriteHead::of(WriteKind::Put, 6, &older)),
        ("Owing", owing),
        ("Listening", listening),
    ];
    let read_write: super::Reader = |b| match write::decode(b) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("not a write".into()),
        Err(e) => Err(e.to_string()),
    };
    let mut samples: Vec<Sample> = heads
        .iter()
        .map(|(name, head)| Sample {
            format: "workflow-write",
            name: (*name).into(),
            bytes: write::encode_json(head, &older),
            read: read_write,
        })
        .collect();
    let patch = patch::diff(&older, &newer).expect("a patch says the change");
    let patch = serde_json::to_vec(&patch).expect("encodes");
    let chain = patch::chain_start(older.version, &body);
    samples.push(Sample {
        format: "workflow-chain",
        name: "RecordAndPatch".into(),
        bytes: patch::chain_extend(&chain, newer.version, &patch).expect("extends"),
        read: |b| patch::decode_chain(b).map(drop).map_err(|e| e.to_string()),
    });
    samples
}

fn samples() -> Vec<Sample> {
    let mut all = peer_samples();
    all.extend(write_samples());
    all.extend(record_samples());
    all.extend(worker_samples());
    all
}

#[test]
fn each_encoding_equals_its_golden_bytes_and_every_golden_file_decodes() {
    super::check(env!("CARGO_MANIFEST_DIR"), &samples());
}
