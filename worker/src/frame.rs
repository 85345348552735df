//! Reading and writing the protocol's length-prefixed frames on any byte stream (a QUIC stream in
//! the SDK, a byte slice in tests). The announced length is checked against
//! [`FRAME_BYTES_MAX`](proto::worker::FRAME_BYTES_MAX) before the body is allocated.

use proto::worker::{decode_frame, encode_frame, frame_len, FrameError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("stream failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("stream ended inside a frame")]
    Truncated,
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Reads one frame; `None` when the stream ends cleanly between frames.
pub(crate) async fn read_frame<T, R>(reader: &mut R) -> Result<Option<T>, ReadError>
where
    T: DeserializeOwned,
    R: AsyncRead + Unpin,
{
    let mut header = [0u8; 4];
    let mut filled = 0;
    while filled < header.len() {
        let n = reader.read(&mut header[filled..]).await?;
        if n == 0 {
            return if filled == 0 {
                Ok(None)
            } else {
                Err(ReadError::Truncated)
            };
        }
        filled += n;
    }
    let len = frame_len(header)?;
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ReadError::Truncated
        } else {
            ReadError::Io(e)
        }
    })?;
    Ok(Some(decode_frame(&body)?))
}

/// Writes one frame.
pub(crate) async fn write_frame<T, W>(writer: &mut W, frame: &T) -> std::io::Result<()>
where
    T: Serialize,
    W: AsyncWrite + Unpin,
{
    writer.write_all(&encode_frame(frame)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::worker::{ErrorCode, NodeFrame, WorkerFrame, FRAME_BYTES_MAX};

    fn frames() -> Vec<NodeFrame> {
        vec![
            NodeFrame::Welcome {
                node: 3,
                version: 1,
                worker_id: "w1".into(),
            },
            NodeFrame::Ack { seq: 9 },
            NodeFrame::Error {
                seq: Some(10),
                code: ErrorCode::Stale,
                message: "lease ended".into(),
            },
            NodeFrame::Drain,
        ]
    }

    #[tokio::test]
    async fn frames_are_read_back_in_order_until_a_clean_end() {
        let mut bytes = Vec::new();
        for f in frames() {
            write_frame(&mut bytes, &f).await.expect("write");
        }
        let mut stream = bytes.as_slice();
        for f in frames() {
            let got: Option<NodeFrame> = read_frame(&mut stream).await.expect("read");
            assert_eq!(got, Some(f));
        }
        let end: Option<NodeFrame> = read_frame(&mut stream).await.expect("clean end");
        assert_eq!(end, None);
    }

    #[tokio::test]
    async fn frames_split_into_small_reads_are_reassembled() {
        let bytes = encode_frame(&WorkerFrame::Drain);
        let (mut client, mut server) = tokio::io::duplex(3);
        let writer = tokio::spawn(async move {
            for chunk in bytes.chunks(2) {
                client.write_all(chunk).await.expect("write");
            }
        });
        let got: Option<WorkerFrame> = read_frame(&mut server).await.expect("read");
        assert_eq!(got, Some(WorkerFrame::Drain));
        writer.await.expect("writer");
    }

    #[tokio::test]
    async fn truncated_oversized_and_garbled_frames_are_errors() {
        let bytes = encode_frame(&NodeFrame::Ack { seq: 1 });
        for cut in [2, bytes.len() - 1] {
            let mut stream = &bytes[..cut];
            let r = read_frame::<NodeFrame, _>(&mut stream).await;
            assert!(
                matches!(r, Err(ReadError::Truncated)),
                "cut at {cut}: {r:?}"
            );
        }
        // Refused from the header alone: no body follows, and none is allocated.
        let huge = ((FRAME_BYTES_MAX + 1) as u32).to_le_bytes();
        let r = read_frame::<NodeFrame, _>(&mut &huge[..]).await;
        assert!(matches!(r, Err(ReadError::Frame(FrameError::TooLarge(_)))));
        let garbled = [3u8, 0, 0, 0, 1, 0, b'{'];
        let r = read_frame::<NodeFrame, _>(&mut &garbled[..]).await;
        assert!(matches!(r, Err(ReadError::Frame(FrameError::Codec(_)))));
    }
}
