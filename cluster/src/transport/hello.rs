//! The hello that opens every peer connection, in the two dialects a node speaks, and the
//! version check both ends make on it.
//!
//! The TLS handshake picks the dialect by ALPN: a binary offers [`tls::ALPN_PEER`] first and
//! [`tls::ALPN_PEER_V1`] second, and the server takes the first of its own list the client offers.
//! Two binaries of this build speak [`Dialect::Ranged`]: the hello and its answer carry the cluster
//! versions each binary serves. A binary that speaks only `baton-peer/1` (every release up to
//! 0.2.0) says only its node id and boot id, and serves cluster version 1 alone
//! ([`V1_RANGE`]).
//!
//! Each end then checks the other's range against the active version it knows (the meta
//! group's row on this node): a peer whose binary cannot serve it is refused, with a message
//! naming both versions. That is how a node rolled back to a binary that cannot serve the active
//! version (it was down when the version was activated, so its own replica still shows the older
//! one and it starts) is kept out: nobody talks to it, so it neither receives entries it cannot
//! read nor takes part in elections.
//!
//! Layouts (big-endian): hello `[node u64][boot u64]`, plus `[min u32][max u32]` when ranged;
//! answer `[node u64]`, plus `[min u32][max u32]` when ranged.

use crate::tls;
use proto::version::{ClusterVersion, VersionRange};
use proto::NodeId;

/// Largest hello payload: node id, boot id and a version range.
pub(crate) const HELLO_BYTES_MAX: usize = 24;

/// What a binary that speaks only `baton-peer/1` serves.
pub const V1_RANGE: VersionRange = VersionRange {
    min: ClusterVersion::FIRST,
    max: ClusterVersion::FIRST,
};

/// Which hello a connection speaks, from the protocol its TLS handshake chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `baton-peer/1`: ids only; the peer serves [`V1_RANGE`].
    V1,
    /// `baton-peer/2`: ids and the binary's range.
    Ranged,
}

impl Dialect {
    /// The dialect `conn` negotiated. A connection without ALPN cannot exist (both ends require
    /// one), so anything but the current protocol is the older dialect.
    pub(crate) fn of(conn: &quinn::Connection) -> Dialect {
        let protocol = conn
            .handshake_data()
            .and_then(|data| data.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
            .and_then(|data| data.protocol);
        match protocol.as_deref() {
            Some(p) if p == tls::ALPN_PEER => Dialect::Ranged,
            _ => Dialect::V1,
        }
    }
}

/// What the dialing node says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) node: NodeId,
    pub(crate) boot: u64,
    pub(crate) supports: VersionRange,
}

impl Hello {
    pub(crate) fn encode(&self, dialect: Dialect) -> Vec<u8> {
        let mut bytes = self.node.0.to_be_bytes().to_vec();
        bytes.extend_from_slice(&self.boot.to_be_bytes());
        if dialect == Dialect::Ranged {
            push_range(&mut bytes, self.supports);
        }
        bytes
    }

    pub(crate) fn decode(dialect: Dialect, bytes: &[u8]) -> Result<Hello, String> {
        let (ids, supports) = split_range(dialect, bytes, 16).ok_or_else(|| {
            format!(
                "bad hello: {} bytes in the {dialect:?} dialect",
                bytes.len()
            )
        })?;
        Ok(Hello {
            node: NodeId(u64_at(ids, 0)),
            boot: u64_at(ids, 8),
            supports,
        })
    }
}

/// The listener's answer: its node id and, when ranged, the range its binary serves.
pub(crate) fn encode_answer(dialect: Dialect, node: NodeId, supports: VersionRange) -> Vec<u8> {
    let mut bytes = node.0.to_be_bytes().to_vec();
    if dialect == Dialect::Ranged {
        push_range(&mut bytes, supports);
    }
    bytes
}

pub(crate) fn decode_answer(
    dialect: Dialect,
    bytes: &[u8],
) -> Result<(NodeId, VersionRange), String> {
    let (id, supports) = split_range(dialect, bytes, 8).ok_or_else(|| {
        format!(
            "its hello answer ({} bytes) is not a node id{}",
            bytes.len(),
            if dialect == Dialect::Ranged {
                " and a version range"
            } else {
                ""
            }
        )
    })?;
    Ok((NodeId(u64_at(id, 0)), supports))
}

/// Refuses `peer` when its binary cannot serve `active`.
pub(crate) fn admit(
    peer: NodeId,
    supports: VersionRange,
    active: ClusterVersion,
) -> Result<(), String> {
    if supports.contains(active) {
        return Ok(());
    }
    Err(format!(
        "node {} runs a binary that serves cluster {supports}, but the cluster is at version \
         {active}: it is refused until it runs a binary that serves version {active}",
        peer.0
    ))
}

/// Splits `bytes` into the first `ids` bytes and the range after them (ranged dialect), or
/// checks it is exactly `ids` bytes (V1). `None` when the length is wrong or the range is empty.
fn split_range(dialect: Dialect, bytes: &[u8], ids: usize) -> Option<(&[u8], VersionRange)> {
    match dialect {
        Dialect::V1 => (bytes.len() == ids).then_some((bytes, V1_RANGE)),
        Dialect::Ranged => {
            if bytes.len() != ids + 8 {
                return None;
            }
            let (head, range) = bytes.split_at(ids);
            let min = ClusterVersion(u32::from_be_bytes(range[..4].try_into().ok()?));
            let max = ClusterVersion(u32::from_be_bytes(range[4..].try_into().ok()?));
            (min <= max).then_some((head, VersionRange { min, max }))
        }
    }
}

fn push_range(bytes: &mut Vec<u8>, range: VersionRange) {
    bytes.extend_from_slice(&range.min.0.to_be_bytes());
    bytes.extend_from_slice(&range.max.0.to_be_bytes());
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_be_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANGE: VersionRange = VersionRange {
        min: ClusterVersion(1),
        max: ClusterVersion(2),
    };

    #[test]
    fn a_ranged_hello_and_answer_round_trip() {
        let hello = Hello {
            node: NodeId(3),
            boot: 0xfeed,
            supports: RANGE,
        };
        let bytes = hello.encode(Dialect::Ranged);
        assert_eq!(bytes.len(), HELLO_BYTES_MAX);
        assert_eq!(Hello::decode(Dialect::Ranged, &bytes), Ok(hello));
        let answer = encode_answer(Dialect::Ranged, NodeId(2), RANGE);
        assert_eq!(
            decode_answer(Dialect::Ranged, &answer),
            Ok((NodeId(2), RANGE))
        );
    }

    #[test]
    fn the_first_dialect_is_ids_only_and_serves_version_1() {
        let hello = Hello {
            node: NodeId(3),
            boot: 7,
            supports: RANGE,
        };
        let bytes = hello.encode(Dialect::V1);
        assert_eq!(bytes.len(), 16, "what releases up to 0.2.0 send and read");
        let read = Hello::decode(Dialect::V1, &bytes).expect("decodes");
        assert_eq!(
            (read.node, read.boot, read.supports),
            (NodeId(3), 7, V1_RANGE)
        );
        let answer = encode_answer(Dialect::V1, NodeId(2), RANGE);
        assert_eq!(answer, 2u64.to_be_bytes());
        assert_eq!(
            decode_answer(Dialect::V1, &answer),
            Ok((NodeId(2), V1_RANGE))
        );
    }

    #[test]
    fn a_hello_of_the_wrong_length_or_an_empty_range_is_refused() {
        assert!(Hello::decode(Dialect::V1, &[0; 24]).is_err());
        assert!(Hello::decode(Dialect::Ranged, &[0; 16]).is_err());
        let mut empty = vec![0u8; 16];
        push_range(
            &mut empty,
            VersionRange {
                min: ClusterVersion(3),
                max: ClusterVersion(2),
            },
        );
        assert!(Hello::decode(Dialect::Ranged, &empty).is_err());
        assert!(decode_answer(Dialect::Ranged, &[0; 8]).is_err());
    }

    #[test]
    fn a_peer_is_admitted_only_if_its_binary_serves_the_active_version() {
        assert_eq!(admit(NodeId(3), RANGE, ClusterVersion(2)), Ok(()));
        let refused = admit(NodeId(3), V1_RANGE, ClusterVersion(2)).expect_err("refused");
        assert!(
            refused.contains("node 3 runs a binary that serves cluster version 1, but the cluster is at version 2"),
            "{refused}"
        );
    }
}
