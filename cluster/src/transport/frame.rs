//! Frames of the peer transport: one request frame and one response frame per bidirectional QUIC
//! stream. Layout: `[format version u16 BE][code u8][payload length u32 BE][payload]`. In a
//! request the code names the service ([`super::Service`], or the hello); in a response it is a
//! status ([`STATUS_OK`] or [`STATUS_ERROR`], whose payload is a UTF-8 message).
//!
//! A reader accepts only the format version [`FRAME_VERSION`] and refuses a frame whose declared
//! length exceeds its maximum before reading the payload, so a peer cannot make it allocate more
//! than `frame_bytes_max`. Not here: what payloads mean (the services decide).

/// Format version written in every frame, the only one read.
pub const FRAME_VERSION: u16 = 1;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 7;

/// Request code of the hello that opens every connection: payload = the dialing node's id (u64
/// BE), checked against its certificate, then its boot id (u64 BE).
pub const CODE_HELLO: u8 = 0;
/// Response status: the payload is the answer.
pub const STATUS_OK: u8 = 0;
/// Response status: the payload is an error message.
pub const STATUS_ERROR: u8 = 1;

/// Why a frame could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The stream or its connection failed (peer gone, reset, connection closed).
    #[error("stream failed: {0}")]
    Stream(String),
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame")]
    Truncated,
    /// The frame declares more than the reader's maximum.
    #[error("frame of {bytes} bytes exceeds the maximum of {max} bytes")]
    TooLarge { bytes: usize, max: usize },
    /// A format version this node does not read.
    #[error("unsupported frame format version {0}")]
    Version(u16),
}

/// Encodes a frame header.
pub fn header(code: u8, payload_len: usize) -> Result<[u8; HEADER_LEN], FrameError> {
    let len = u32::try_from(payload_len).map_err(|_| FrameError::TooLarge {
        bytes: payload_len,
        max: u32::MAX as usize,
    })?;
    let mut out = [0u8; HEADER_LEN];
    out[..2].copy_from_slice(&FRAME_VERSION.to_be_bytes());
    out[2] = code;
    out[3..].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}

/// Decodes a frame header into (code, payload length), checking version and maximum.
pub fn parse_header(bytes: &[u8; HEADER_LEN], max: usize) -> Result<(u8, usize), FrameError> {
    let version = u16::from_be_bytes([bytes[0], bytes[1]]);
    if version != FRAME_VERSION {
        return Err(FrameError::Version(version));
    }
    let len = u32::from_be_bytes([bytes[3], bytes[4], bytes[5], bytes[6]]) as usize;
    if len > max {
        return Err(FrameError::TooLarge { bytes: len, max });
    }
    Ok((bytes[2], len))
}

/// Writes one frame and finishes the sending side (one frame per direction per stream).
pub async fn write(
    send: &mut quinn::SendStream,
    code: u8,
    payload: &[u8],
) -> Result<(), FrameError> {
    let head = header(code, payload.len())?;
    let stream = |e: &dyn std::fmt::Display| FrameError::Stream(e.to_string());
    // One write, so that header and payload leave in the same packet.
    let mut frame = Vec::with_capacity(HEADER_LEN + payload.len());
    frame.extend_from_slice(&head);
    frame.extend_from_slice(payload);
    send.write_all(&frame).await.map_err(|e| stream(&e))?;
    send.finish().map_err(|e| stream(&e))
}

/// Reads one frame of at most `max` payload bytes.
pub async fn read(recv: &mut quinn::RecvStream, max: usize) -> Result<(u8, Vec<u8>), FrameError> {
    let mut head = [0u8; HEADER_LEN];
    read_exact(recv, &mut head).await?;
    let (code, len) = parse_header(&head, max)?;
    let mut payload = vec![0u8; len];
    read_exact(recv, &mut payload).await?;
    Ok((code, payload))
}

async fn read_exact(recv: &mut quinn::RecvStream, buf: &mut [u8]) -> Result<(), FrameError> {
    recv.read_exact(buf).await.map_err(|e| match e {
        quinn::ReadExactError::FinishedEarly(_) => FrameError::Truncated,
        quinn::ReadExactError::ReadError(e) => FrameError::Stream(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_are_checked() {
        let head = header(2, 300).expect("header");
        assert_eq!(parse_header(&head, 300), Ok((2, 300)));
        assert_eq!(
            parse_header(&head, 299),
            Err(FrameError::TooLarge {
                bytes: 300,
                max: 299
            })
        );
        let mut future = head;
        future[..2].copy_from_slice(&(FRAME_VERSION + 1).to_be_bytes());
        assert_eq!(
            parse_header(&future, 300),
            Err(FrameError::Version(FRAME_VERSION + 1))
        );
        let mut ancient = head;
        ancient[..2].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(parse_header(&ancient, 300), Err(FrameError::Version(0)));
    }
}
