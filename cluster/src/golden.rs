//! This crate's encodings as golden samples (`proto::golden`): log entries and log ids, the
//! progress marker, packed batches, Raft log segments, Raft messages between nodes, snapshots
//! and their metadata, votes and memberships as stored, the transport's frame header, and the
//! hello in both of its dialects.

use crate::codec;
use crate::network::wire::{self, RaftReply, RaftRequest, RaftRpc};
use crate::storage::wal::format::{self as wal, Op};
use crate::types::{Entry, LogId, Request, SnapshotMeta, StoredMembership};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest, VoteResponse};
use openraft::{BasicNode, CommittedLeaderId, EntryPayload, Membership, Vote};
use proto::golden::{check, variant, Reader, Sample};
use std::collections::{BTreeMap, BTreeSet};

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(3, 2), index)
}

fn membership() -> Membership<u64, BasicNode> {
    let voters = BTreeSet::from([1, 2, 3]);
    let nodes = (1..=3).map(|n| (n, BasicNode::new(format!("127.0.0.1:908{n}"))));
    Membership::new(vec![voters], nodes.collect::<BTreeMap<_, _>>())
}

/// A JSON command of the size of a workflow write, so that a batch of them is packed.
fn command(n: u8) -> Vec<u8> {
    let json = format!(r#"{{"workflow":{n},"tasks":[{}]}}"#, "\"step\",".repeat(80));
    json.into_bytes()
}

fn entries() -> Vec<Entry> {
    vec![
        Entry {
            log_id: log_id(7),
            payload: EntryPayload::Blank,
        },
        Entry {
            log_id: log_id(8),
            payload: EntryPayload::Normal(Request(vec![b"one".to_vec(), b"two".to_vec()])),
        },
        Entry {
            log_id: log_id(9),
            payload: EntryPayload::Membership(membership()),
        },
    ]
}

fn read_entry(bytes: &[u8]) -> Result<(), String> {
    codec::decode_entry(bytes)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn storage_samples() -> Vec<Sample> {
    let names = ["Blank", "Normal", "Membership"];
    let mut samples: Vec<Sample> = entries()
        .iter()
        .zip(names)
        .map(|(e, name)| Sample {
            format: "log-entry",
            name: name.into(),
            bytes: codec::encode_entry(e).expect("encodes"),
            read: read_entry,
        })
        .collect();
    samples.push(Sample {
        format: "log-id",
        name: "LogId".into(),
        bytes: codec::encode_log_id(&log_id(8)).to_vec(),
        read: |b| codec::decode_log_id(b).map(drop).map_err(|e| e.to_string()),
    });
    samples.push(Sample {
        format: "partial",
        name: "Partial".into(),
        bytes: codec::encode_partial(&log_id(8), 1),
        read: |b| {
            codec::decode_partial(b)
                .map(drop)
                .map_err(|e| e.to_string())
        },
    });
    let packed = crate::pack::pack((0..8).map(command).collect());
    assert_eq!(packed.len(), 1, "the sample batch is packed");
    samples.push(Sample {
        format: "packed-batch",
        name: "Packed".into(),
        bytes: packed.concat(),
        read: |b| {
            crate::pack::unpack(vec![b.to_vec()])
                .map(drop)
                .map_err(|e| e.to_string())
        },
    });
    samples.push(Sample {
        format: "log-segment",
        name: "Segment".into(),
        bytes: segment(),
        read: read_segment,
    });
    samples
}

/// A Raft log segment: its header, an entry, a truncation and a drop.
fn segment() -> Vec<u8> {
    let mut out = wal::header(4, 1_024).to_vec();
    let entry = codec::encode_entry(&entries()[1]).expect("encodes");
    wal::encode(&mut out, "p0", Op::Entry(&entry));
    wal::encode(&mut out, "p0", Op::Truncate(9));
    wal::encode(&mut out, "p1", Op::Drop);
    out
}

fn read_segment(bytes: &[u8]) -> Result<(), String> {
    let segment = wal::read(4, bytes).ok_or("no valid header")?;
    match (segment.records.len(), segment.torn) {
        (3, false) => Ok(()),
        (n, torn) => Err(format!("{n} records read, torn: {torn}")),
    }
}

fn wire_samples() -> Vec<Sample> {
    let vote = Vote::new_committed(3, 2);
    let requests = [
        RaftRpc::Vote(VoteRequest::new(Vote::new(4, 1), Some(log_id(9)))),
        RaftRpc::AppendEntries(AppendEntriesRequest {
            vote,
            prev_log_id: Some(log_id(6)),
            entries: entries(),
            leader_commit: Some(log_id(7)),
        }),
    ];
    let replies = [
        RaftReply::Vote(Ok(VoteResponse::new(vote, Some(log_id(9)), true))),
        RaftReply::AppendEntries(Ok(AppendEntriesResponse::Success)),
        RaftReply::NoGroup,
    ];
    let mut samples: Vec<Sample> = requests
        .into_iter()
        .map(|rpc| {
            let name = variant(&rpc);
            let request = RaftRequest {
                group: "p0".into(),
                rpc,
            };
            Sample {
                format: "raft-request",
                name,
                bytes: wire::encode(&request).expect("encodes"),
                read: |b| {
                    wire::decode::<RaftRequest>(b)
                        .map(drop)
                        .map_err(|e| e.to_string())
                },
            }
        })
        .collect();
    samples.extend(replies.iter().map(|reply| Sample {
        format: "raft-reply",
        name: variant(reply),
        bytes: wire::encode(reply).expect("encodes"),
        read: |b| {
            wire::decode::<RaftReply>(b)
                .map(drop)
                .map_err(|e| e.to_string())
        },
    }));
    samples
}

fn json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<(), String> {
    serde_json::from_slice::<T>(bytes)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn state_samples() -> Vec<Sample> {
    let pairs = [(b"wf/1".as_slice(), b"record".as_slice()), (b"wf/2", b"")];
    let pairs = pairs.map(|(k, v)| Ok((k.into(), v.into())));
    let stored = StoredMembership::new(Some(log_id(9)), membership());
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(9)),
        last_membership: stored.clone(),
        snapshot_id: "3-2-9".into(),
    };
    vec![
        Sample {
            format: "snapshot",
            name: "Pairs".into(),
            bytes: crate::snapshot::encode(pairs).expect("encodes"),
            read: |b| {
                crate::snapshot::decode(b)
                    .map(drop)
                    .map_err(|e| e.to_string())
            },
        },
        Sample {
            format: "snapshot-meta",
            name: "SnapshotMeta".into(),
            bytes: serde_json::to_vec(&meta).expect("encodes"),
            read: json::<SnapshotMeta>,
        },
        Sample {
            format: "membership",
            name: "StoredMembership".into(),
            bytes: serde_json::to_vec(&stored).expect("encodes"),
            read: json::<StoredMembership>,
        },
        Sample {
            format: "vote",
            name: "Vote".into(),
            bytes: serde_json::to_vec(&Vote::new_committed(3, 2)).expect("encodes"),
            read: json::<Vote<u64>>,
        },
        Sample {
            format: "frame-header",
            name: "Hello".into(),
            bytes: crate::transport::frame::header(0, 16)
                .expect("encodes")
                .to_vec(),
            read: |b| {
                let header: [u8; crate::transport::frame::HEADER_LEN] =
                    b.try_into().map_err(|_| "not a header's length")?;
                crate::transport::frame::parse_header(&header, 64)
                    .map(drop)
                    .map_err(|e| e.to_string())
            },
        },
    ]
}

/// The hello and its answer in both dialects: `baton-peer/1` (ids only, what releases up to 0.2.0
/// speak) and `baton-peer/2` (with the binary's range).
fn hello_samples() -> Vec<Sample> {
    use crate::transport::hello::{decode_answer, encode_answer, Dialect, Hello};
    use proto::version::{ClusterVersion, VersionRange};
    let range = VersionRange {
        min: ClusterVersion(1),
        max: ClusterVersion(2),
    };
    let hello = Hello {
        node: proto::NodeId(3),
        boot: 0x0123_4567_89ab_cdef,
        supports: range,
    };
    let sample = |format, dialect: Dialect, bytes, read: Reader| Sample {
        format,
        name: format!("{dialect:?}"),
        bytes,
        read,
    };
    let answer = |dialect| encode_answer(dialect, proto::NodeId(2), range);
    vec![
        sample("hello-v1", Dialect::V1, hello.encode(Dialect::V1), |b| {
            Hello::decode(Dialect::V1, b).map(drop)
        }),
        sample(
            "hello",
            Dialect::Ranged,
            hello.encode(Dialect::Ranged),
            |b| Hello::decode(Dialect::Ranged, b).map(drop),
        ),
        sample("hello-answer-v1", Dialect::V1, answer(Dialect::V1), |b| {
            decode_answer(Dialect::V1, b).map(drop)
        }),
        sample(
            "hello-answer",
            Dialect::Ranged,
            answer(Dialect::Ranged),
            |b| decode_answer(Dialect::Ranged, b).map(drop),
        ),
    ]
}

#[test]
fn each_encoding_equals_its_golden_bytes_and_every_golden_file_decodes() {
    let mut samples = storage_samples();
    samples.extend(wire_samples());
    samples.extend(state_samples());
    samples.extend(hello_samples());
    check(env!("CARGO_MANIFEST_DIR"), &samples);
}
