//! The script host's wire format, between a node and the `baton script-host` processes of its
//! [`ScriptPool`](super::pool::ScriptPool), over the child's stdin and stdout.
//!
//! Every frame is a 4-byte big-endian length and that many bytes of JSON, at most
//! [`FRAME_BYTES_MAX`]. A host starts by writing [`HELLO`] (so the pool knows the program it
//! started is a script host and is ready); then, for each [`Request`] it reads, it writes one
//! [`Answer`]. A host exits when its stdin closes.

use super::script::{Limits, ScriptError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{self, Read, Write};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The first frame a script host writes: the protocol's name and version.
pub const HELLO: &[u8] = b"baton-script-host/2";

/// Largest frame either side accepts: a payload of the largest size accepted anywhere, a
/// script, and room for JSON's escaping.
pub const FRAME_BYTES_MAX: usize = 4 * proto::limits::REQUEST_BYTES_MAX;

/// The language of a [`Request`]'s script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// JavaScript, with the value bound to `$`; the answer is the script's value.
    #[default]
    Js,
    /// A jq query run on the value; the answer is the list of its outputs.
    Jq,
}

/// One evaluation: the script, the value bound to `$`, and its limits.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    #[serde(default)]
    pub lang: Lang,
    pub script: String,
    pub root: Value,
    pub limits: Limits,
}

/// A [`Request`] as the pool writes it, borrowing what it sends.
#[derive(Debug, Serialize)]
pub struct RequestRef<'a> {
    pub lang: Lang,
    pub script: &'a str,
    pub root: &'a Value,
    pub limits: &'a Limits,
}

/// What a host answers to a [`Request`].
pub type Answer = Result<Value, ScriptError>;

fn too_large(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("frame of {len} bytes is over the limit of {FRAME_BYTES_MAX}"),
    )
}

/// The 4-byte length prefix of a body.
fn prefix(body: &[u8]) -> io::Result<[u8; 4]> {
    if body.len() > FRAME_BYTES_MAX {
        return Err(too_large(body.len()));
    }
    let len = u32::try_from(body.len()).map_err(|_| too_large(body.len()))?;
    Ok(len.to_be_bytes())
}

/// Writes one frame and flushes it (the host's side).
pub fn write_blocking(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    w.write_all(&prefix(body)?)?;
    w.write_all(body)?;
    w.flush()
}

/// Reads one frame; `None` when the stream ended cleanly before a frame began (the host's side).
pub fn read_blocking(r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(too_large(len));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

/// Writes one frame and flushes it (the pool's side).
pub async fn write(w: &mut (impl AsyncWrite + Unpin), body: &[u8]) -> io::Result<()> {
    w.write_all(&prefix(body)?).await?;
    w.write_all(body).await?;
    w.flush().await
}

/// Reads one frame (the pool's side); the end of the stream is an error.
pub async fn read(r: &mut (impl AsyncRead + Unpin)) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > FRAME_BYTES_MAX {
        return Err(too_large(len));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut buf = Vec::new();
        write_blocking(&mut buf, b"one").expect("write");
        write_blocking(&mut buf, b"").expect("write");
        let mut r = io::Cursor::new(buf);
        assert_eq!(read_blocking(&mut r).expect("read"), Some(b"one".to_vec()));
        assert_eq!(read_blocking(&mut r).expect("read"), Some(Vec::new()));
        assert_eq!(read_blocking(&mut r).expect("read"), None);
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut r = io::Cursor::new(u32::MAX.to_be_bytes().to_vec());
        assert!(read_blocking(&mut r).is_err());
        let big = vec![0u8; FRAME_BYTES_MAX + 1];
        assert!(write_blocking(&mut Vec::new(), &big).is_err());
    }

    #[tokio::test]
    async fn async_side_reads_what_the_host_writes() {
        let mut buf = Vec::new();
        write_blocking(&mut buf, HELLO).expect("write");
        let mut r = io::Cursor::new(buf);
        assert_eq!(read(&mut r).await.expect("read"), HELLO);
        assert!(read(&mut r).await.is_err(), "the end of the stream");
    }
}
