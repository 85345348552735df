//! An HTTP answer as Conductor's HTTP task output: `{"response": {"statusCode", "reasonPhrase",
//! "headers", "body"}}`. Headers are Conductor's multi-valued map (name -> list of values), the
//! names capitalised word by word (`Content-Type`) as most servers write them (HTTP/1 readers
//! lower-case names, so the server's own spelling is not known); the body is JSON when it
//! parses as JSON, else its text.
//!
//! An answer of server-sent events (`text/event-stream`) is read until the server closes it,
//! or until the call's read timeout runs out: its body is the list of its complete events'
//! data, each JSON when it parses, else text (a caller that follows a stream, such as an A2A
//! call, tells a stream cut short from its content).

use reqwest::header::{HeaderMap, CONTENT_TYPE};
use reqwest::Response;
use serde_json::{json, Map, Value};

/// Why an answer could not be read.
#[derive(Debug)]
pub(super) enum Failure {
    /// The body is longer than the limit.
    TooLarge,
    Read(reqwest::Error),
}

/// Reads `response` whole (at most `limit` body bytes) into the task's output.
pub(super) async fn read(mut response: Response, limit: usize) -> Result<Value, Failure> {
    let status = response.status();
    let headers = headers_json(response.headers());
    let stream = is_event_stream(response.headers());
    let body = read_body(&mut response, limit, stream).await?;
    let body = match stream {
        true => Value::Array(events(&body)),
        false => body_value(&body),
    };
    Ok(json!({"response": {
        "statusCode": status.as_u16(),
        "reasonPhrase": status.canonical_reason().unwrap_or_default(),
        "headers": headers,
        "body": body,
    }}))
}

/// Whether the answer is a stream of server-sent events.
fn is_event_stream(headers: &HeaderMap) -> bool {
    let kind = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    kind.is_some_and(|k| {
        k.trim_start()
            .to_ascii_lowercase()
            .starts_with("text/event-stream")
    })
}

/// The body's bytes, refused as soon as they pass `limit` (or its declared length does); when
/// `cut_ok` (a stream), a read that times out ends the body where it is.
async fn read_body(
    response: &mut Response,
    limit: usize,
    cut_ok: bool,
) -> Result<Vec<u8>, Failure> {
    let declared = response.content_length().unwrap_or(0);
    if declared > limit as u64 {
        return Err(Failure::TooLarge);
    }
    let mut body = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return Ok(body),
            Err(e) if cut_ok && e.is_timeout() => return Ok(body),
            Err(e) => return Err(Failure::Read(e)),
        };
        if body.len() + chunk.len() > limit {
            return Err(Failure::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
}

/// The data of each complete event of a stream (one ended by a blank line; a last one the
/// stream cut off is dropped, as the event-stream format says): its `data` lines joined by
/// newlines, JSON when it parses, else text. Events without data (comments, keep-alives) are
/// skipped.
fn events(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut complete: Vec<&str> = text.split("\n\n").collect();
    complete.pop();
    complete
        .into_iter()
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data"))
                .filter_map(|rest| match rest.strip_prefix(':') {
                    Some(value) => Some(value.strip_prefix(' ').unwrap_or(value)),
                    None => rest.is_empty().then_some(""),
                })
                .collect();
            (!data.is_empty()).then(|| body_value(data.join("\n").as_bytes()))
        })
        .collect()
}

/// Each header name with its values, in the order they came.
fn headers_json(headers: &HeaderMap) -> Value {
    let mut out = Map::new();
    for name in headers.keys() {
        let values = headers
            .get_all(name)
            .iter()
            .map(|v| Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        out.insert(capitalised(name.as_str()), Value::Array(values));
    }
    Value::Object(out)
}

/// `content-type` as `Content-Type`.
fn capitalised(name: &str) -> String {
    let word = |w: &str| {
        let mut chars = w.chars();
        chars.next().map_or_else(String::new, |first| {
            first.to_ascii_uppercase().to_string() + chars.as_str()
        })
    };
    name.split('-').map(word).collect::<Vec<_>>().join("-")
}

/// JSON when the body parses as JSON, else its text (invalid UTF-8 replaced); an empty body is
/// an empty string.
fn body_value(body: &[u8]) -> Value {
    if body.iter().any(|b| !b.is_ascii_whitespace()) {
        if let Ok(value) = serde_json::from_slice(body) {
            return value;
        }
    }
    Value::String(String::from_utf8_lossy(body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_when_they_parse_else_text() {
        assert_eq!(body_value(br#" {"a": [1]} "#), json!({"a": [1]}));
        assert_eq!(body_value(b"42"), json!(42));
        assert_eq!(body_value(b"hello"), json!("hello"));
        assert_eq!(body_value(b""), json!(""));
        assert_eq!(body_value(b"\xff{"), json!("\u{fffd}{"));
    }

    #[test]
    fn a_stream_reads_as_its_complete_events_data() {
        let body = b": keep-alive\r\n\r\ndata: {\"a\": 1}\r\n\r\nevent: x\nid: 2\ndata: line one\ndata:line two\n\ndata\n\ndata: {\"cut\":";
        assert_eq!(
            events(body),
            [json!({"a": 1}), json!("line one\nline two"), json!("")]
        );
        assert_eq!(events(b""), Vec::<Value>::new());
        assert!(is_event_stream(&{
            let mut h = HeaderMap::new();
            h.insert(
                CONTENT_TYPE,
                "text/event-stream; charset=utf-8".parse().expect("value"),
            );
            h
        }));
    }

    #[test]
    fn header_names_are_capitalised_and_values_listed() {
        let mut h = HeaderMap::new();
        h.append("content-type", "application/json".parse().expect("value"));
        h.append("x-request-id", "7".parse().expect("value"));
        h.append("set-cookie", "a=1".parse().expect("value"));
        h.append("set-cookie", "b=2".parse().expect("value"));
        assert_eq!(
            headers_json(&h),
            json!({"Content-Type": ["application/json"], "X-Request-Id": ["7"],
                   "Set-Cookie": ["a=1", "b=2"]})
        );
    }
}
