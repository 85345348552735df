//! A workflow's write as a partition's Raft log carries it: a small binary head with everything
//! applying it needs (the versions, the workflow's id, name and definition version, whether it
//! ended and still owes its status listener a publication, its correlation id, the event types
//! a Serverless Workflow instance listens for), then the record's or the patch's JSON exactly as the proposer
//! encoded it. Every replica applies every write, so applying one decodes no JSON: the head
//! says what to check and which index rows to write, and the JSON goes into the row as it is.
//!
//! Every other command of a partition's log is a [`super::PartitionCommand`] record.
//!
//! Layout: the two-byte tag [`WRITE_TAG`], or [`WRITE_OWING_TAG`] for a terminal workflow that
//! still owes its status listener a publication, or [`WRITE_LISTENING_TAG`] for a running
//! Serverless Workflow instance (little-endian, like a record's format version), the
//! [`WriteHead`] in bincode's standard encoding, under [`WRITE_LISTENING_TAG`] the event types
//! its `listen` tasks wait for (bincode), then the JSON body to the end.

use super::{CodecError, WorkflowRecord};
use serde::{Deserialize, Serialize};

/// The first two bytes of a write: read as a record's format version, one no record uses.
pub const WRITE_TAG: u16 = 0x5701;

/// The first two bytes of a write of a terminal workflow that still owes a publication
/// ([`WriteHead::owes_publication`]): the tag carries the flag, so
/// the head's encoding, and every write made before the flag existed, stay as they were.
pub const WRITE_OWING_TAG: u16 = 0x5703;

/// The first two bytes of a write of a running Serverless Workflow instance: the head is followed
/// by the event types its `listen` tasks wait for ([`WriteHead::listening`]), so the head's
/// encoding, and every write made before the list existed, stay as they were.
pub const WRITE_LISTENING_TAG: u16 = 0x5705;

/// What a write replaces or extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteKind {
    /// The body is a whole record (`WorkflowRecord`'s JSON); it replaces what is stored.
    Put,
    /// The body is a patch (`patch::RecordPatch`'s JSON); it extends the stored chain.
    Patch,
}

/// What applying a write needs to know without reading its body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteHead<'a> {
    pub kind: WriteKind,
    /// The stored version this write follows (0: the workflow is new).
    pub expected_version: u64,
    /// The version the body carries.
    pub version: u64,
    #[serde(borrow)]
    pub workflow_id: &'a str,
    #[serde(borrow)]
    pub workflow_name: &'a str,
    pub workflow_version: u32,
    /// Whether the workflow is in a terminal state after this write.
    pub terminal: bool,
    #[serde(borrow)]
    pub correlation_id: Option<&'a str>,
    /// Whether the terminal workflow still owes a publication (its end to its status listener
    /// sink, lifecycle events: [`WorkflowRecord::owes_publication`]): the partition then keeps a
    /// row that its next leader's recovery finds it by. Carried by the tag ([`WRITE_OWING_TAG`]).
    #[serde(skip)]
    pub owes_publication: bool,
    /// For a running Serverless Workflow instance: the event types its `listen` tasks wait for
    /// (none: it waits for none), kept as the partition's listening row. `None` for a Conductor
    /// workflow, which never listens, and for a terminal one. Carried after the head under
    /// [`WRITE_LISTENING_TAG`].
    #[serde(skip)]
    pub listening: Option<Vec<&'a str>>,
}

impl<'a> WriteHead<'a> {
    /// The head of a write of `record` following the stored version `expected_version`.
    pub fn of(kind: WriteKind, expected_version: u64, record: &'a WorkflowRecord) -> Self {
        let wf = &record.workflow;
        WriteHead {
            kind,
            expected_version,
            version: record.version,
            workflow_id: wf.workflow_id.as_str(),
            workflow_name: &wf.workflow_name,
            workflow_version: wf.workflow_version,
            terminal: wf.status.is_terminal(),
            correlation_id: wf.correlation_id.as_deref(),
            owes_publication: record.owes_publication(),
            listening: wf
                .dsl
                .as_ref()
                .filter(|_| !wf.status.is_terminal())
                .map(|run| run.listening()),
        }
    }
}

fn config() -> impl bincode::config::Config {
    // A head is a few ids and names: bound what a damaged length prefix can make decoding take.
    bincode::config::standard().with_limit::<{ 64 * 1024 }>()
}

/// A write: the tag, `head`, and `body` (the JSON the head describes).
pub fn encode(head: &WriteHead<'_>, body: &[u8]) -> Vec<u8> {
    let mut out = encode_head(head, body.len());
    out.extend_from_slice(body);
    out
}

/// [`encode`] with `body` serialised as JSON straight after the head.
pub fn encode_json<T: Serialize>(head: &WriteHead<'_>, body: &T) -> Vec<u8> {
    encode_json_measured(head, body).0
}

/// [`encode_json`], and how deeply the body nests (brackets, as a parser's recursion limit
/// counts them), measured while it is written: bounding a stored record's depth costs no second
/// pass over its bytes.
pub fn encode_json_measured<T: Serialize>(head: &WriteHead<'_>, body: &T) -> (Vec<u8>, usize) {
    let mut out = encode_head(head, 4096);
    let mut depth = Depth::default();
    let mut json = serde_json::Serializer::with_formatter(&mut out, Nesting(&mut depth));
    // Serialising plain data structs into a Vec cannot fail: every map key is a string.
    body.serialize(&mut json)
        .expect("records serialise to JSON");
    (out, depth.deepest)
}

#[derive(Default)]
struct Depth {
    now: usize,
    deepest: usize,
}

/// serde_json's compact output, counting how deeply arrays and objects nest.
struct Nesting<'a>(&'a mut Depth);

impl Nesting<'_> {
    fn open<W: ?Sized + std::io::Write>(&mut self, w: &mut W, b: &[u8]) -> std::io::Result<()> {
        self.0.now += 1;
        self.0.deepest = self.0.deepest.max(self.0.now);
        w.write_all(b)
    }

    fn close<W: ?Sized + std::io::Write>(&mut self, w: &mut W, b: &[u8]) -> std::io::Result<()> {
        self.0.now = self.0.now.saturating_sub(1);
        w.write_all(b)
    }
}

impl serde_json::ser::Formatter for Nesting<'_> {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }
}

fn encode_head(head: &WriteHead<'_>, body_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + head.workflow_name.len() + body_len);
    let tag = match (&head.listening, head.owes_publication) {
        (_, true) => WRITE_OWING_TAG,
        (Some(_), false) => WRITE_LISTENING_TAG,
        (None, false) => WRITE_TAG,
    };
    out.extend_from_slice(&tag.to_le_bytes());
    bincode::serde::encode_into_std_write(head, &mut out, config())
        .expect("a write head encodes into a Vec");
    if let (WRITE_LISTENING_TAG, Some(types)) = (tag, &head.listening) {
        bincode::serde::encode_into_std_write(types, &mut out, config())
            .expect("a list of strings encodes into a Vec");
    }
    out
}

/// The head and body of a write; `Ok(None)` when `bytes` is not a write (another command).
pub fn decode(bytes: &[u8]) -> Result<Option<(WriteHead<'_>, &[u8])>, CodecError> {
    let [a, b, rest @ ..] = bytes else {
        return Ok(None);
    };
    let tag = u16::from_le_bytes([*a, *b]);
    if ![WRITE_TAG, WRITE_OWING_TAG, WRITE_LISTENING_TAG].contains(&tag) {
        return Ok(None);
    }
    let head_error = |e: bincode::error::DecodeError| CodecError::Head(e.to_string());
    let (mut head, mut used): (WriteHead<'_>, usize) =
        bincode::serde::borrow_decode_from_slice(rest, config()).map_err(head_error)?;
    head.owes_publication = tag == WRITE_OWING_TAG;
    if tag == WRITE_LISTENING_TAG {
        let (types, more): (Vec<&str>, usize) =
            bincode::serde::borrow_decode_from_slice(&rest[used..], config())
                .map_err(head_error)?;
        head.listening = Some(types);
        used += more;
    }
    Ok(Some((head, &rest[used..])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head() -> WriteHead<'static> {
        WriteHead {
            kind: WriteKind::Patch,
            expected_version: 3,
            version: 4,
            workflow_id: "01234567-89ab-cdef-0123-456789ab0005",
            workflow_name: "w2",
            workflow_version: 1,
            terminal: false,
            correlation_id: Some("order-7"),
            owes_publication: false,
            listening: None,
        }
    }

    #[test]
    fn a_write_round_trips_with_its_body_untouched() {
        let body = br#"{"version":4,"workflow":{}}"#;
        let bytes = encode(&head(), body);
        let (decoded, rest) = decode(&bytes).expect("decodes").expect("a write");
        assert_eq!(decoded, head());
        assert_eq!(rest, body);
        let value: serde_json::Value = serde_json::from_slice(body).expect("JSON");
        assert_eq!(encode_json(&head(), &value), bytes);
    }

    #[test]
    fn a_listening_instance_s_types_follow_the_head_under_their_own_tag() {
        let listening = WriteHead {
            listening: Some(vec!["com.example.ready", "com.example.gone"]),
            ..head()
        };
        let body = br#"{"version":4}"#;
        let (a, b) = (encode(&listening, body), encode(&head(), body));
        assert_eq!(a[..2], WRITE_LISTENING_TAG.to_le_bytes());
        assert_eq!(b[..2], WRITE_TAG.to_le_bytes());
        assert!(
            a[2..].starts_with(&b[2..b.len() - body.len()]),
            "the head's encoding is the same"
        );
        let (decoded, rest) = decode(&a).expect("decodes").expect("a write");
        assert_eq!((decoded, rest), (listening, body.as_slice()));
        let none = WriteHead {
            listening: Some(Vec::new()),
            ..head()
        };
        assert_eq!(
            decode(&encode(&none, body))
                .expect("decodes")
                .expect("a write")
                .0,
            none
        );
    }

    #[test]
    fn a_write_that_owes_a_status_notice_says_so_in_its_tag_alone() {
        let owing = WriteHead {
            terminal: true,
            owes_publication: true,
            ..head()
        };
        let settled = WriteHead {
            owes_publication: false,
            ..owing.clone()
        };
        let (a, b) = (encode(&owing, b"{}"), encode(&settled, b"{}"));
        assert_eq!(a[..2], WRITE_OWING_TAG.to_le_bytes());
        assert_eq!(b[..2], WRITE_TAG.to_le_bytes());
        assert_eq!(a[2..], b[2..], "the head's encoding is the same");
        assert_eq!(decode(&a).expect("decodes").expect("a write").0, owing);
        assert_eq!(decode(&b).expect("decodes").expect("a write").0, settled);
    }

    #[test]
    fn the_depth_measured_while_encoding_is_what_a_parser_counts() {
        let texts = [
            r#"{}"#,
            r#"{"a":[1,{"b":"[[[{"}],"c":[[],[[]]]}"#,
            r#"{"a":"\"[[","b":{"c":{}}}"#,
        ];
        for text in texts {
            let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
            let (bytes, depth) = encode_json_measured(&head(), &value);
            let (_, body) = decode(&bytes).expect("decodes").expect("a write");
            assert_eq!(depth, crate::check::encoded_depth(body), "{text}");
            assert_eq!(bytes, encode_json(&head(), &value));
        }
        let deep: serde_json::Value =
            serde_json::from_str(&format!("{}1{}", "[".repeat(40), "]".repeat(40))).expect("JSON");
        assert_eq!(encode_json_measured(&head(), &deep).1, 40);
    }

    #[test]
    fn other_commands_are_not_writes_and_damage_is_refused() {
        let json_command = crate::record::encode(&crate::record::PartitionOutcome::Applied);
        assert!(decode(&json_command).expect("not damage").is_none());
        assert!(decode(&[]).expect("not damage").is_none());
        let bytes = encode(&head(), b"{}");
        // Cut inside the head.
        assert!(decode(&bytes[..6]).is_err());
        // A name's length prefix claiming more than the limit allows.
        let mut bad = WRITE_TAG.to_le_bytes().to_vec();
        bad.extend_from_slice(&[0, 3, 4, 0xfc, 0xff, 0xff, 0xff, 0x7f]);
        assert!(decode(&bad).is_err());
    }
}
