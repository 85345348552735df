//! Byte layout of the Raft log's segment files, and reading them back.
//!
//! A segment starts with a header, `[magic "BATONWAL"][version u16 BE][segment id u64 BE]
//! [previous segment's length u64 BE]`, then holds records, `[payload length u32 BE]
//! [CRC-32 of the payload u32 BE][payload]`. A payload is `[kind u8][group name length u8]
//! [group name][body]`:
//! - kind 1, an entry: the body is the entry as [`crate::codec::encode_entry`] writes it (it
//!   carries its log id);
//! - kind 2, a truncation: the body is `[index u64 BE]`, and the group's entries from that index
//!   on are gone;
//! - kind 3, a drop: no body; every entry of the group is gone (its replica left the node).
//!
//! Replaying records in file order rebuilds every group's log. A record whose length runs past
//! the end of the file or whose checksum fails is a torn write, and the log ends there: every
//! acknowledged byte was synced, and a sync covers everything written before it, so whatever
//! follows a torn record was never acknowledged. The previous segment's length in a header
//! catches the one case a checksum cannot: a crash that kept the start of a new segment but lost
//! the unsynced tail of the one before at a record boundary. A segment may end in zeros (space
//! filled ahead of the writes, see [`super::fs`]): the records end at the first zero frame, and a
//! tail of nothing but zeros is not a torn write.

use crate::codec::{self, DecodeError};
use crate::types::LogId;

pub const MAGIC: &[u8; 8] = b"BATONWAL";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 8 + 2 + 8 + 8;
/// Length and checksum before each payload.
const FRAME_LEN: usize = 8;

const KIND_ENTRY: u8 = 1;
const KIND_TRUNCATE: u8 = 2;
const KIND_DROP: u8 = 3;

/// What one record does to its group's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// Adds (or replaces) an encoded entry.
    Entry(&'a [u8]),
    /// Removes the entries from this index on.
    Truncate(u64),
    /// Removes every entry.
    Drop,
}

/// The header of a segment.
pub fn header(segment: u64, previous_len: u64) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..8].copy_from_slice(MAGIC);
    out[8..10].copy_from_slice(&VERSION.to_be_bytes());
    out[10..18].copy_from_slice(&segment.to_be_bytes());
    out[18..].copy_from_slice(&previous_len.to_be_bytes());
    out
}

/// Appends one record to `out`; returns the offset of its body from the record's start (where
/// an entry's bytes begin).
pub fn encode(out: &mut Vec<u8>, group: &str, op: Op<'_>) -> usize {
    debug_assert!(group.len() <= u8::MAX as usize, "group names are short");
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_LEN]);
    let (kind, body): (u8, &[u8]) = match op {
        Op::Entry(bytes) => (KIND_ENTRY, bytes),
        Op::Truncate(_) => (KIND_TRUNCATE, &[]),
        Op::Drop => (KIND_DROP, &[]),
    };
    out.push(kind);
    out.push(group.len() as u8);
    out.extend_from_slice(group.as_bytes());
    let body_at = out.len() - start;
    match op {
        Op::Truncate(index) => out.extend_from_slice(&index.to_be_bytes()),
        _ => out.extend_from_slice(body),
    }
    let payload = &out[start + FRAME_LEN..];
    let len = payload.len() as u32;
    let crc = crc32fast::hash(payload);
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
    body_at
}

/// One record read back: its group, what it does, and where its body lies in the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub group: &'a str,
    pub op: Op<'a>,
    pub body_at: u64,
}

/// A segment read back.
#[derive(Debug)]
pub struct Segment<'a> {
    /// The previous segment's length as the header recorded it.
    pub previous_len: u64,
    /// The records before the first torn one (or the end).
    pub records: Vec<Record<'a>>,
    /// How many bytes hold the header and those records.
    pub valid_len: u64,
    /// Whether a torn record (or trailing garbage, anything but zeros) follows them.
    pub torn: bool,
}

/// Reads segment `id`. `None`: no valid header (a segment whose creation was cut short).
pub fn read(id: u64, bytes: &[u8]) -> Option<Segment<'_>> {
    if bytes.len() < HEADER_LEN
        || &bytes[..8] != MAGIC
        || u16::from_be_bytes([bytes[8], bytes[9]]) != VERSION
        || read_u64(&bytes[10..18]) != id
    {
        return None;
    }
    let previous_len = read_u64(&bytes[18..HEADER_LEN]);
    let (records, at) = records_from(bytes, HEADER_LEN);
    Some(Segment {
        previous_len,
        records,
        valid_len: at as u64,
        // Zeros after the records are space filled ahead of the writes, not a torn write.
        torn: bytes[at..].iter().any(|b| *b != 0),
    })
}

/// The records from offset `at` (a record boundary) up to the first torn one or the end, and
/// the offset after them.
pub fn records_from(bytes: &[u8], mut at: usize) -> (Vec<Record<'_>>, usize) {
    let mut records = Vec::new();
    while at < bytes.len() {
        match record(bytes, at) {
            Some((record, next)) => {
                records.push(record);
                at = next;
            }
            None => break,
        }
    }
    (records, at)
}

/// The record at `at`, and where the next begins; `None` if it is torn or malformed.
fn record(bytes: &[u8], at: usize) -> Option<(Record<'_>, usize)> {
    let frame = bytes.get(at..at + FRAME_LEN)?;
    let len = u32::from_be_bytes(frame[..4].try_into().ok()?) as usize;
    let crc = u32::from_be_bytes(frame[4..].try_into().ok()?);
    let start = at + FRAME_LEN;
    let payload = bytes.get(start..start.checked_add(len)?)?;
    // An all-zero frame (a page the file system never wrote) has an empty payload whose
    // checksum is zero: real payloads are never empty.
    if payload.len() < 2 || crc32fast::hash(payload) != crc {
        return None;
    }
    let name_len = payload[1] as usize;
    let group = std::str::from_utf8(payload.get(2..2 + name_len)?).ok()?;
    let body = &payload[2 + name_len..];
    let op = match payload[0] {
        KIND_ENTRY => Op::Entry(body),
        KIND_TRUNCATE if body.len() == 8 => Op::Truncate(read_u64(body)),
        KIND_DROP if body.is_empty() => Op::Drop,
        _ => return None,
    };
    let body_at = (start + 2 + name_len) as u64;
    Some((Record { group, op, body_at }, start + len))
}

fn read_u64(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    u64::from_be_bytes(b)
}

/// Where one entry's bytes lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub log_id: LogId,
    pub segment: u64,
    pub offset: u64,
    pub len: u32,
}

/// The logs that segment files hold: every group's entries by index.
pub type Logs = std::collections::HashMap<String, std::collections::BTreeMap<u64, Located>>;

/// What reading a log directory found.
#[derive(Debug, Default)]
pub struct Replay {
    pub logs: Logs,
    /// The segments that count, with their valid lengths, ascending.
    pub segments: Vec<(u64, u64)>,
    /// Segments to cut back to their valid length (a torn tail).
    pub cut: Vec<(u64, u64)>,
    /// Segments that do not count: after a torn record, or stale leftovers before a gap in the
    /// numbering (a deleted segment that came back).
    pub discard: Vec<u64>,
}

/// Replays segment files (id and bytes, in any order) into logs.
pub fn replay(files: Vec<(u64, Vec<u8>)>) -> Result<Replay, DecodeError> {
    let mut files: std::collections::BTreeMap<u64, Vec<u8>> = files.into_iter().collect();
    let ids = files.keys().copied().collect();
    replay_with(ids, |id| Ok(files.remove(&id).unwrap_or_default()))
}

/// Replays the segments `ids` (in any order), reading each with `read` when its turn comes, so
/// only one segment is in memory at a time.
pub fn replay_with<E: From<DecodeError>>(
    mut ids: Vec<u64>,
    mut read: impl FnMut(u64) -> Result<Vec<u8>, E>,
) -> Result<Replay, E> {
    ids.sort_unstable();
    ids.dedup();
    let mut out = Replay::default();
    // Only the run of consecutive ids that ends at the newest counts: segments are deleted
    // oldest first, so anything before a gap is a leftover whose entries are all dead.
    let run_start = ids
        .windows(2)
        .rposition(|w| w[1] != w[0] + 1)
        .map_or(0, |i| i + 1);
    out.discard.extend(&ids[..run_start]);
    let mut previous: Option<u64> = None;
    let mut ended = false;
    for &id in &ids[run_start..] {
        if ended {
            out.discard.push(id);
            continue;
        }
        let bytes = read(id)?;
        let segment = match self::read(id, &bytes) {
            Some(s) if previous.is_none_or(|len| len == s.previous_len) => s,
            _ => {
                ended = true;
                out.discard.push(id);
                continue;
            }
        };
        for record in &segment.records {
            apply(&mut out.logs, id, record)?;
        }
        if segment.torn {
            out.cut.push((id, segment.valid_len));
            ended = true;
        }
        out.segments.push((id, segment.valid_len));
        previous = Some(segment.valid_len);
    }
    Ok(out)
}

/// Applies one record of `segment` to `logs`.
pub fn apply(logs: &mut Logs, segment: u64, record: &Record<'_>) -> Result<(), DecodeError> {
    match record.op {
        Op::Entry(bytes) => {
            let log_id = codec::decode_entry_log_id(bytes)?;
            let located = Located {
                log_id,
                segment,
                offset: record.body_at,
                len: bytes.len() as u32,
            };
            logs.entry(record.group.to_owned())
                .or_default()
                .insert(log_id.index, located);
        }
        Op::Truncate(index) => {
            if let Some(log) = logs.get_mut(record.group) {
                log.split_off(&index);
            }
        }
        Op::Drop => {
            logs.remove(record.group);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Entry, Request};
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(term: u64, index: u64) -> Vec<u8> {
        codec::encode_entry(&Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(Request(vec![format!("c{index}").into_bytes()])),
        })
        .expect("encodes")
    }

    fn segment(id: u64, previous_len: u64, records: &[(&str, Op<'_>)]) -> Vec<u8> {
        let mut out = header(id, previous_len).to_vec();
        for (group, op) in records {
            encode(&mut out, group, *op);
        }
        out
    }

    fn indexes(replay: &Replay, group: &str) -> Vec<(u64, u64)> {
        replay.logs.get(group).map_or(Vec::new(), |log| {
            log.values()
                .map(|l| (l.log_id.index, l.log_id.leader_id.term))
                .collect()
        })
    }

    #[test]
    fn records_replay_in_order_and_locate_their_entries() {
        let (e1, e2, e3, e2b) = (entry(1, 1), entry(1, 2), entry(1, 3), entry(2, 2));
        let bytes = segment(
            1,
            0,
            &[
                ("p0", Op::Entry(&e1)),
                ("p0", Op::Entry(&e2)),
                ("meta", Op::Entry(&e1)),
                ("p0", Op::Entry(&e3)),
                ("p0", Op::Truncate(2)),
                ("p0", Op::Entry(&e2b)),
                ("p1", Op::Entry(&e1)),
                ("p1", Op::Drop),
            ],
        );
        let got = replay(vec![(1, bytes.clone())]).expect("replays");
        assert_eq!(indexes(&got, "p0"), vec![(1, 1), (2, 2)]);
        assert_eq!(indexes(&got, "meta"), vec![(1, 1)]);
        assert!(!got.logs.contains_key("p1"));
        let located = got.logs["p0"][&2];
        let at = located.offset as usize;
        assert_eq!(&bytes[at..at + located.len as usize], &e2b[..]);
        assert_eq!(got.segments, vec![(1, bytes.len() as u64)]);
        assert!(got.cut.is_empty() && got.discard.is_empty());
    }

    #[test]
    fn a_torn_record_ends_the_log() {
        let (e1, e2) = (entry(1, 1), entry(1, 2));
        let whole = segment(1, 0, &[("p0", Op::Entry(&e1)), ("p0", Op::Entry(&e2))]);
        let first_len = segment(1, 0, &[("p0", Op::Entry(&e1))]).len() as u64;
        // Cut inside the second record, and corrupt it instead: both end the log after the first.
        let mut flipped = whole.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        for bytes in [whole[..whole.len() - 3].to_vec(), flipped] {
            let later = segment(2, bytes.len() as u64, &[("p0", Op::Entry(&entry(1, 3)))]);
            let got = replay(vec![(2, later), (1, bytes)]).expect("replays");
            assert_eq!(indexes(&got, "p0"), vec![(1, 1)]);
            assert_eq!(got.cut, vec![(1, first_len)]);
            assert_eq!(got.discard, vec![2]);
        }
    }

    #[test]
    fn a_zero_tail_ends_a_segment_without_ending_the_log() {
        let (e1, e2) = (entry(1, 1), entry(1, 2));
        let whole = segment(1, 0, &[("p0", Op::Entry(&e1)), ("p0", Op::Entry(&e2))]);
        // Space filled ahead of the writes (or pages the file system never wrote) holds zeros:
        // no record, and no torn write, so the next segment still counts.
        let mut zeros = whole.clone();
        zeros.extend_from_slice(&[0; 4096]);
        let later = segment(2, whole.len() as u64, &[("p0", Op::Entry(&entry(1, 3)))]);
        let got = replay(vec![(1, zeros.clone()), (2, later)]).expect("replays");
        assert_eq!(indexes(&got, "p0"), vec![(1, 1), (2, 1), (3, 1)]);
        assert!(got.cut.is_empty() && got.discard.is_empty());
        assert_eq!(
            got.segments,
            vec![(1, whole.len() as u64), (2, got.segments[1].1)]
        );
        // A torn record before the zeros is still torn.
        let mut torn = zeros;
        torn[whole.len() + 2] = 7;
        let got = replay(vec![(1, torn)]).expect("replays");
        assert_eq!(got.cut, vec![(1, whole.len() as u64)]);
    }

    #[test]
    fn a_new_segment_counts_only_after_the_whole_previous_one() {
        let e1 = entry(1, 1);
        let old = segment(
            1,
            0,
            &[("p0", Op::Entry(&e1)), ("p0", Op::Entry(&entry(1, 2)))],
        );
        // The crash lost the old segment's last record at a record boundary but kept the new one.
        let kept = segment(1, 0, &[("p0", Op::Entry(&e1))]);
        let new = segment(2, old.len() as u64, &[("p0", Op::Entry(&entry(1, 3)))]);
        let got = replay(vec![(1, kept), (2, new.clone())]).expect("replays");
        assert_eq!(indexes(&got, "p0"), vec![(1, 1)], "no gap at index 2");
        assert_eq!(got.discard, vec![2]);
        // With the whole old segment it counts; a new segment without a header does not.
        let got = replay(vec![(1, old.clone()), (2, new), (3, b"BATON".to_vec())]).expect("ok");
        assert_eq!(indexes(&got, "p0"), vec![(1, 1), (2, 1), (3, 1)]);
        assert_eq!(got.discard, vec![3]);
    }

    #[test]
    fn a_segment_before_a_gap_is_a_leftover() {
        let stale = segment(3, 0, &[("p0", Op::Entry(&entry(1, 1)))]);
        let live = segment(5, 999, &[("p0", Op::Entry(&entry(1, 7)))]);
        let got = replay(vec![(3, stale), (5, live)]).expect("replays");
        assert_eq!(indexes(&got, "p0"), vec![(7, 1)]);
        assert_eq!(got.discard, vec![3]);
    }
}
