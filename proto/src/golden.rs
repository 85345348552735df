//! Golden bytes: every encoding this crate defines, at every cluster version this build serves,
//! kept under `proto/tests/golden/v{version}/{format}/{sample}.bin`.
//!
//! Two checks hold them:
//! - every golden file of every served version decodes with today's readers;
//! - each sample encoded today equals the newest golden file of its format, so an encoding that
//!   changes without a new cluster version (`crate::version::FEATURES`) fails here.
//!
//! `BATON_BLESS=1 cargo test -p baton-proto golden` writes today's bytes as the golden files of
//! the newest version this build serves: for a new format at a new version, never to paper over a
//! change to one a release has written.

use crate::peer::tests::{record, replies, requests, tid, wid};
use crate::peer::{self, Envelope};
use crate::record::{self, MetaCommand, MetaOutcome, NodeEntry, PartitionCommand};
use crate::version::{Binary, ClusterVersion, VersionRange};
use crate::worker::{self, Lease, NodeFrame, Subscription, WorkerFrame};
use std::path::PathBuf;

/// A format's reader: whether bytes decode.
type Reader = fn(&[u8]) -> Result<(), String>;

/// One encoded sample: its format, its name, its bytes today, and the reader of its format.
struct Sample {
    format: &'static str,
    name: String,
    bytes: Vec<u8>,
    read: Reader,
}

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

/// The name of an enum sample: its variant.
fn variant(value: &impl std::fmt::Debug) -> String {
    let debug = format!("{value:?}");
    let end = debug.find([' ', '(', '{']).unwrap_or(debug.len());
    debug[..end].to_string()
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
            format: "meta-outcome",
            name: "Unserved".into(),
            bytes: record::encode(&unserved),
            read: read_record::<MetaOutcome>,
        },
    ];
    samples.extend(metas.iter().map(|c| Sample {
        format: "meta-command",
        name: variant(c),
        bytes: record::encode(c),
        read: read_record::<MetaCommand>,
    }));
    samples.extend(partitions.iter().map(|c| Sample {
        format: "partition-command",
        name: variant(c),
        bytes: record::encode(c),
        read: read_record::<PartitionCommand>,
    }));
    samples
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
    let mut samples: Vec<Sample> = workers
        .iter()
        .map(|f| Sample {
            format: "worker-frame",
            name: variant(f),
            bytes: worker::encode_frame(f),
            read: read_worker::<WorkerFrame>,
        })
        .collect();
    samples.extend(nodes.iter().map(|f| Sample {
        format: "node-frame",
        name: variant(f),
        bytes: worker::encode_frame(f),
        read: read_worker::<NodeFrame>,
    }));
    samples
}

fn samples() -> Vec<Sample> {
    let mut all = peer_samples();
    all.extend(record_samples());
    all.extend(worker_samples());
    all
}

fn golden_dir(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/v{version}"))
}

fn served() -> std::ops::RangeInclusive<u32> {
    VersionRange::BUILD.min.0..=VersionRange::BUILD.max.0
}

/// The newest golden file of `sample`'s format and name, with its version.
fn newest_golden(sample: &Sample) -> Option<(u32, Vec<u8>)> {
    served().rev().find_map(|v| {
        let path = golden_dir(v)
            .join(sample.format)
            .join(format!("{}.bin", sample.name));
        std::fs::read(path).ok().map(|bytes| (v, bytes))
    })
}

fn bless(sample: &Sample) {
    let dir = golden_dir(VersionRange::BUILD.max.0).join(sample.format);
    std::fs::create_dir_all(&dir).expect("golden directory");
    let path = dir.join(format!("{}.bin", sample.name));
    std::fs::write(path, &sample.bytes).expect("golden file written");
}

#[test]
fn each_encoding_today_equals_its_golden_bytes() {
    let blessing = std::env::var_os("BATON_BLESS").is_some();
    let mut changed = Vec::new();
    for sample in samples() {
        match newest_golden(&sample) {
            Some((_, golden)) if golden == sample.bytes => {}
            _ if blessing => bless(&sample),
            Some((version, _)) => changed.push(format!(
                "{}/{} differs from its golden bytes of version {version}",
                sample.format, sample.name
            )),
            None => changed.push(format!(
                "{}/{} has no golden bytes",
                sample.format, sample.name
            )),
        }
    }
    assert!(
        changed.is_empty(),
        "{}\nAn encoding changed without a new cluster version. Give the change a version in \
         proto::version::FEATURES, write the old format until it is active and keep its reader; \
         then BATON_BLESS=1 writes the new version's golden bytes.",
        changed.join("\n")
    );
}

#[test]
fn every_golden_file_of_every_served_version_decodes_today() {
    let readers: std::collections::BTreeMap<&str, Reader> =
        samples().iter().map(|s| (s.format, s.read)).collect();
    let mut read = 0;
    for version in served() {
        let Ok(formats) = std::fs::read_dir(golden_dir(version)) else {
            continue;
        };
        for format in formats.flatten() {
            let name = format.file_name().to_string_lossy().into_owned();
            let reader = readers
                .get(name.as_str())
                .unwrap_or_else(|| panic!("v{version}/{name}: no reader for this format"));
            for file in std::fs::read_dir(format.path())
                .expect("format directory")
                .flatten()
            {
                let bytes = std::fs::read(file.path()).expect("golden file");
                if let Err(e) = reader(&bytes) {
                    panic!("{}: {e}", file.path().display());
                }
                read += 1;
            }
        }
    }
    assert!(
        read >= samples().len(),
        "only {read} golden files were read"
    );
}
