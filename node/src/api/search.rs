//! The `query` parameter of `GET /api/workflow/search`, in the subset of Conductor's query syntax
//! that Baton's index answers: clauses joined by `AND`, each `field = value` or
//! `field IN (v1, v2, ...)`, over `workflowType`, `status` and `correlationId`. Values may be bare
//! or quoted with `'` or `"`.
//!
//! Example: `workflowType = 'order' AND status IN (RUNNING, FAILED) AND correlationId = "c-1"`.
//!
//! Not supported (a 400 that says so): `OR`, parentheses for grouping, comparison operators other
//! than `=` and `IN`, and other fields (Conductor's Elasticsearch index also searches times,
//! workflow ids and payloads).

use super::error::{ApiError, ApiResult};
use proto::model::WorkflowStatus;

/// The filters a query asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedQuery {
    pub workflow_type: Option<String>,
    pub correlation_id: Option<String>,
    /// Any of these statuses; empty means any status.
    pub statuses: Vec<WorkflowStatus>,
}

/// Fields the query may name, for error messages.
const FIELDS: &str = "workflowType, status, correlationId";
/// Longest query accepted, in bytes.
pub const QUERY_LEN_MAX: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A bare word: field names, `AND`, `IN`, unquoted values.
    Word(String),
    /// A quoted value.
    Quoted(String),
    Op(String),
    Open,
    Close,
    Comma,
}

fn bad(message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("unsupported search query: {message}. Supported: clauses over {FIELDS} joined by AND, each `field = 'value'` or `field IN (a, b)`"))
}

fn tokenize(query: &str) -> ApiResult<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = query.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            ',' => tokens.push(Token::Comma),
            '\'' | '"' => {
                let mut value = String::new();
                let mut closed = false;
                for (_, d) in chars.by_ref() {
                    if d == c {
                        closed = true;
                        break;
                    }
                    value.push(d);
                }
                if !closed {
                    return Err(bad(format_args!(
                        "the quote opened at character {at} is not closed"
                    )));
                }
                tokens.push(Token::Quoted(value));
            }
            '=' | '!' | '<' | '>' => {
                let mut op = c.to_string();
                if let Some((_, '=')) = chars.peek() {
                    op.push('=');
                    chars.next();
                }
                tokens.push(Token::Op(op));
            }
            _ => {
                let mut word = c.to_string();
                while let Some(&(_, d)) = chars.peek() {
                    if d.is_whitespace() || "(),'\"=!<>".contains(d) {
                        break;
                    }
                    word.push(d);
                    chars.next();
                }
                tokens.push(Token::Word(word));
            }
        }
    }
    Ok(tokens)
}

/// Parses a search query; a blank query matches everything.
pub fn parse(query: &str) -> ApiResult<ParsedQuery> {
    if query.len() > QUERY_LEN_MAX {
        return Err(ApiError::bad_request(format!(
            "search query is longer than {QUERY_LEN_MAX} bytes"
        )));
    }
    let tokens = tokenize(query)?;
    let mut parsed = ParsedQuery::default();
    let mut rest = tokens.as_slice();
    if rest.is_empty() {
        return Ok(parsed);
    }
    loop {
        rest = clause(rest, &mut parsed)?;
        match rest.split_first() {
            None => return Ok(parsed),
            Some((Token::Word(w), tail)) if w.eq_ignore_ascii_case("AND") => rest = tail,
            Some((Token::Word(w), _)) if w.eq_ignore_ascii_case("OR") => {
                return Err(bad("OR is not supported; run one search per alternative"))
            }
            Some((t, _)) => {
                return Err(bad(format_args!(
                    "expected AND between clauses, found {}",
                    show(t)
                )))
            }
        }
    }
}

fn show(t: &Token) -> String {
    match t {
        Token::Word(w) => format!("'{w}'"),
        Token::Quoted(q) => format!("'{q}' (quoted)"),
        Token::Op(o) => format!("'{o}'"),
        Token::Open => "'('".to_owned(),
        Token::Close => "')'".to_owned(),
        Token::Comma => "','".to_owned(),
    }
}

/// Parses one `field = value` or `field IN (...)` clause into `parsed`; answers the tokens after it.
fn clause<'t>(tokens: &'t [Token], parsed: &mut ParsedQuery) -> ApiResult<&'t [Token]> {
    let (field, rest) = match tokens.split_first() {
        Some((Token::Word(f), rest)) => (f.as_str(), rest),
        Some((t, _)) => {
            return Err(bad(format_args!(
                "expected a field name, found {}",
                show(t)
            )))
        }
        None => return Err(bad("the query ends after AND")),
    };
    let (values, rest) = match rest.split_first() {
        Some((Token::Op(op), rest)) if op == "=" => match rest.split_first() {
            Some((Token::Word(v) | Token::Quoted(v), rest)) => (vec![v.clone()], rest),
            _ => return Err(bad(format_args!("expected a value after `{field} =`"))),
        },
        Some((Token::Word(w), rest)) if w.eq_ignore_ascii_case("IN") => list(field, rest)?,
        Some((Token::Op(op), _)) => {
            return Err(bad(format_args!(
                "operator '{op}' is not supported (on {field}); use = or IN"
            )))
        }
        _ => return Err(bad(format_args!("expected = or IN after field '{field}'"))),
    };
    match field {
        "workflowType" => set_single(&mut parsed.workflow_type, field, values)?,
        "correlationId" => set_single(&mut parsed.correlation_id, field, values)?,
        "status" => {
            if !parsed.statuses.is_empty() {
                return Err(bad("status appears in more than one clause"));
            }
            for v in values {
                let status = WorkflowStatus::parse(&v).ok_or_else(|| {
                    bad(format_args!(
                        "'{v}' is not a workflow status (RUNNING, COMPLETED, FAILED, TIMED_OUT, TERMINATED, PAUSED)"
                    ))
                })?;
                if !parsed.statuses.contains(&status) {
                    parsed.statuses.push(status);
                }
            }
        }
        other => return Err(bad(format_args!("field '{other}' cannot be searched"))),
    }
    Ok(rest)
}

/// Parses `( v1, v2, ... )`.
fn list<'t>(field: &str, tokens: &'t [Token]) -> ApiResult<(Vec<String>, &'t [Token])> {
    let mut rest = match tokens.split_first() {
        Some((Token::Open, rest)) => rest,
        _ => return Err(bad(format_args!("expected '(' after `{field} IN`"))),
    };
    let mut values = Vec::new();
    loop {
        match rest.split_first() {
            Some((Token::Word(v) | Token::Quoted(v), tail)) => {
                values.push(v.clone());
                rest = tail;
            }
            _ => return Err(bad(format_args!("expected a value in `{field} IN (...)`"))),
        }
        match rest.split_first() {
            Some((Token::Comma, tail)) => rest = tail,
            Some((Token::Close, tail)) => return Ok((values, tail)),
            _ => {
                return Err(bad(format_args!(
                    "expected ',' or ')' in `{field} IN (...)`"
                )))
            }
        }
    }
}

fn set_single(slot: &mut Option<String>, field: &str, mut values: Vec<String>) -> ApiResult<()> {
    if slot.is_some() {
        return Err(bad(format_args!("{field} appears in more than one clause")));
    }
    match (values.pop(), values.is_empty()) {
        (Some(v), true) => {
            *slot = Some(v);
            Ok(())
        }
        _ => Err(bad(format_args!("{field} can match only one value"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use WorkflowStatus::*;

    fn ok(query: &str) -> ParsedQuery {
        parse(query).unwrap_or_else(|e| panic!("{query}: {}", e.message))
    }

    #[test]
    fn accepted_queries() {
        let q = |w: Option<&str>, c: Option<&str>, s: Vec<WorkflowStatus>| ParsedQuery {
            workflow_type: w.map(str::to_owned),
            correlation_id: c.map(str::to_owned),
            statuses: s,
        };
        let table = [
            ("", q(None, None, vec![])),
            ("   ", q(None, None, vec![])),
            ("workflowType = 'order'", q(Some("order"), None, vec![])),
            ("workflowType='order'", q(Some("order"), None, vec![])),
            (
                "workflowType = order_flow",
                q(Some("order_flow"), None, vec![]),
            ),
            (
                "workflowType = \"has space\"",
                q(Some("has space"), None, vec![]),
            ),
            ("status = 'RUNNING'", q(None, None, vec![Running])),
            ("status = running", q(None, None, vec![Running])),
            (
                "status IN (RUNNING,FAILED)",
                q(None, None, vec![Running, Failed]),
            ),
            (
                "status in ( 'RUNNING' , FAILED, RUNNING )",
                q(None, None, vec![Running, Failed]),
            ),
            ("correlationId = 'c-1'", q(None, Some("c-1"), vec![])),
            ("workflowType IN (w)", q(Some("w"), None, vec![])),
            (
                "workflowType = 'w' AND status IN (TIMED_OUT, TERMINATED) and correlationId = 'c'",
                q(Some("w"), Some("c"), vec![TimedOut, Terminated]),
            ),
        ];
        for (query, want) in table {
            assert_eq!(ok(query), want, "{query}");
        }
    }

    #[test]
    fn rejected_queries_say_why() {
        let table = [
            (
                "workflowType = 'w' OR status = RUNNING",
                "OR is not supported",
            ),
            ("startTime > 100", "operator '>' is not supported"),
            ("status != RUNNING", "operator '!=' is not supported"),
            ("workflowId = 'x'", "field 'workflowId' cannot be searched"),
            ("status = DONE", "'DONE' is not a workflow status"),
            ("workflowType = 'w", "is not closed"),
            (
                "workflowType = 'w' status = RUNNING",
                "expected AND between clauses",
            ),
            ("workflowType = 'w' AND", "the query ends after AND"),
            ("workflowType =", "expected a value after `workflowType =`"),
            (
                "workflowType IN (a, b)",
                "workflowType can match only one value",
            ),
            ("status IN RUNNING", "expected '(' after `status IN`"),
            ("status IN (RUNNING", "expected ',' or ')'"),
            (
                "status = RUNNING AND status = FAILED",
                "status appears in more than one clause",
            ),
            (
                "correlationId = a AND correlationId = b",
                "correlationId appears in more than one clause",
            ),
            ("(status = RUNNING)", "expected a field name"),
            (
                "workflowType",
                "expected = or IN after field 'workflowType'",
            ),
        ];
        for (query, needle) in table {
            let e = parse(query).expect_err(query);
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST, "{query}");
            assert!(e.message.contains(needle), "{query}: {}", e.message);
            assert!(
                e.message.starts_with("unsupported search query: "),
                "{query}: {}",
                e.message
            );
        }
        assert!(parse(&"a".repeat(QUERY_LEN_MAX + 1)).is_err());
    }
}
