//! Packing a batch of commands into one compressed command, and back.
//!
//! The proposer puts a batch of commands into one log entry. Workflow records are JSON, which
//! compresses about fourfold with LZ4, and an entry's bytes are handled many times over: written
//! to the Raft log, sent to every follower (a W2 workflow sent about 14 KB to each, most of it in
//! full-size datagrams), kept in the log cache. So the proposer packs a batch of at least
//! [`PACK_MIN_BYTES`] into a single command, `[MARKER][raw length u32 BE][LZ4 block of the
//! batch as encode_commands writes it]`, when that saves at least an eighth; the log, the wire
//! and followers carry it as it is, and each replica unpacks it once, when it applies the entry
//! (the state machine sees the original commands, and the answers are one per original command).
//!
//! A command never begins with [`MARKER`] ([`crate::group::Group::propose`] refuses one that
//! does), so an entry of one command that begins with it is a packed batch and nothing else.

use crate::codec::{decode_commands, encode_commands, DecodeError};

/// First bytes of a packed batch.
pub const MARKER: &[u8; 4] = b"\xff\xffz4";
/// Batches smaller than this are left as they are.
pub const PACK_MIN_BYTES: usize = 512;
/// Largest unpacked batch accepted (the proposer's batches stay far below: 4 MiB by default).
pub const UNPACKED_BYTES_MAX: usize = 256 * 1024 * 1024;

const HEADER_LEN: usize = MARKER.len() + 4;

/// The commands of one entry as the proposer hands them to Raft: packed into one when that is
/// worth it, unchanged otherwise.
pub fn pack(commands: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let size: usize = commands.iter().map(|c| 4 + c.len()).sum();
    let Ok(raw_len) = u32::try_from(4 + size) else {
        return commands;
    };
    if size < PACK_MIN_BYTES {
        return commands;
    }
    let raw = encode_commands(&commands);
    let block = lz4_flex::compress(&raw);
    if HEADER_LEN + block.len() > raw.len() - raw.len() / 8 {
        return commands;
    }
    let mut packed = Vec::with_capacity(HEADER_LEN + block.len());
    packed.extend_from_slice(MARKER);
    packed.extend_from_slice(&raw_len.to_be_bytes());
    packed.extend_from_slice(&block);
    vec![packed]
}

/// Whether `command` would be taken for a packed batch.
pub fn looks_packed(command: &[u8]) -> bool {
    command.starts_with(MARKER)
}

/// The commands an entry carries: a packed batch unpacked, anything else as it is.
pub fn unpack(commands: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, DecodeError> {
    match commands.as_slice() {
        [only] if looks_packed(only) => unpack_one(only),
        _ => Ok(commands),
    }
}

fn unpack_one(packed: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
    let bad = |why: String| DecodeError {
        what: "packed command batch",
        why,
    };
    let Some(len) = packed.get(MARKER.len()..HEADER_LEN) else {
        return Err(bad("truncated header".into()));
    };
    let raw_len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
    if raw_len > UNPACKED_BYTES_MAX {
        return Err(bad(format!(
            "unpacks to {raw_len} bytes, more than {UNPACKED_BYTES_MAX}"
        )));
    }
    let raw =
        lz4_flex::decompress(&packed[HEADER_LEN..], raw_len).map_err(|e| bad(e.to_string()))?;
    if raw.len() != raw_len {
        return Err(bad(format!(
            "unpacked {} bytes, the header says {raw_len}",
            raw.len()
        )));
    }
    decode_commands(&raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_commands(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                format!(
                    "\x00\x02{{\"workflowId\":\"wf-{i}\",\"status\":\"RUNNING\",\"tasks\":[{{\"taskType\":\"bench\",\"status\":\"SCHEDULED\",\"inputData\":{{}}}}]}}"
                )
                .into_bytes()
            })
            .collect()
    }

    #[test]
    fn a_large_batch_is_packed_into_one_command_and_unpacked_exactly() {
        let commands = json_commands(20);
        let raw: usize = commands.iter().map(Vec::len).sum();
        let packed = pack(commands.clone());
        assert_eq!(packed.len(), 1);
        assert!(looks_packed(&packed[0]));
        assert!(packed[0].len() < raw / 2, "{} of {raw}", packed[0].len());
        assert_eq!(unpack(packed).expect("unpacks"), commands);
    }

    #[test]
    fn small_or_incompressible_batches_stay_as_they_are() {
        let small = json_commands(1);
        assert_eq!(pack(small.clone()), small);
        // Bytes that do not repeat do not compress.
        let mut x: u32 = 12345;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (x >> 16) as u8
            })
            .collect();
        assert_eq!(pack(vec![noise.clone()]), vec![noise.clone()]);
        // Unpacking leaves unpacked commands alone, one or many.
        assert_eq!(unpack(vec![noise.clone()]).expect("as is"), vec![noise]);
        assert_eq!(unpack(small.clone()).expect("as is"), small);
    }

    #[test]
    fn damaged_packed_batches_are_refused() {
        let packed = pack(json_commands(20)).remove(0);
        // Truncated block, truncated header, a length beyond the bound, a wrong length.
        assert!(unpack(vec![packed[..packed.len() - 3].to_vec()]).is_err());
        assert!(unpack(vec![MARKER.to_vec()]).is_err());
        let mut huge = packed.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(unpack(vec![huge]).is_err());
        let mut short = packed;
        let len = u32::from_be_bytes(short[4..8].try_into().expect("4 bytes"));
        short[4..8].copy_from_slice(&(len - 1).to_be_bytes());
        assert!(unpack(vec![short]).is_err());
    }
}
