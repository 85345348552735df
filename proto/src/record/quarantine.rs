//! A workflow set aside because its stored row cannot be decoded: the row exactly as it was,
//! why it was set aside and when. A partition moves such a row here instead of failing to start
//! (or answering 500 for it forever); operators list the quarantine and delete what they have
//! looked at (`/api/admin/quarantine`).
//!
//! Layout: [`QUARANTINE_TAG`] (two bytes, little-endian), then the entry in bincode's standard
//! encoding (the row as its bytes, not as JSON: it may be anything).

use super::CodecError;
use serde::{Deserialize, Serialize};

/// The first two bytes of an entry.
pub const QUARANTINE_TAG: u16 = 0x5101;

/// Largest entry decoded: a row is bounded by the largest replicated command.
const ENTRY_BYTES_MAX: usize = 8 * 1024 * 1024;

/// One quarantined workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantined {
    /// Why the row was set aside (the decoder's error).
    pub reason: String,
    /// When, on the setting leader's clock (epoch ms).
    pub time: i64,
    /// The stored row, unchanged.
    pub row: Vec<u8>,
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<ENTRY_BYTES_MAX>()
}

/// Encodes an entry.
pub fn encode(entry: &Quarantined) -> Vec<u8> {
    let mut out = QUARANTINE_TAG.to_le_bytes().to_vec();
    bincode::serde::encode_into_std_write(entry, &mut out, config())
        .expect("an entry encodes into a Vec");
    out
}

/// Decodes an entry.
pub fn decode(bytes: &[u8]) -> Result<Quarantined, CodecError> {
    match bytes {
        [a, b, rest @ ..] if u16::from_le_bytes([*a, *b]) == QUARANTINE_TAG => {
            bincode::serde::decode_from_slice(rest, config())
                .map(|(entry, _)| entry)
                .map_err(|e| CodecError::Head(e.to_string()))
        }
        [_, _, ..] => Err(CodecError::Head("not a quarantine entry".into())),
        _ => Err(CodecError::Truncated),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damage_is_an_error() {
        let entry = Quarantined {
            reason: "record body is malformed: recursion limit exceeded".into(),
            time: 1_700_000_000_000,
            row: vec![0xff, 0x00, b'{', b'['],
        };
        let bytes = encode(&entry);
        assert_eq!(decode(&bytes).expect("decodes"), entry);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(b"{}").is_err());
        assert!(decode(b"x").is_err());
    }
}
