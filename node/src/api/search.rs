//! The `query` parameter of the searches (`GET /api/workflow/search`, `search-v2`,
//! `GET /api/tasks/search`, `search-v2`), in the subset of Conductor's query syntax that Baton
//! answers: clauses joined by `AND`, each `field = value` or `field IN (v1, v2, ...)`. Values may be
//! bare or quoted with `'` or `"`.
//!
//! Workflow searches take `workflowType` (any of up to [`WORKFLOW_TYPES_MAX`] names), `workflowId`,
//! `status` (workflow statuses, any of several) and `correlationId`, as Conductor UI writes them.
//! Example: `workflowType IN (order, refund) AND status IN (RUNNING, FAILED)`.
//!
//! Task searches take `workflowType` (as above), `workflowId`, `correlationId` and `taskId` (one
//! value each), `taskType` and `status` (task statuses, any of several). Example:
//! `workflowType = 'order' AND taskType IN (charge, ship) AND status = FAILED`.
//!
//! Not supported (a 400 that says so): `OR`, parentheses for grouping, comparison operators other
//! than `=` and `IN`, and other fields (Conductor's Elasticsearch index also searches times and
//! payloads).

use super::error::{ApiError, ApiResult};
use super::extract::Params;
use crate::service::TaskSearchQuery;
use proto::limits::SEARCH_RESULTS_MAX;
use proto::model::{TaskStatus, WorkflowStatus};

/// The filters a query asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedQuery {
    /// Any of these workflow names; empty means any.
    pub workflow_types: Vec<String>,
    pub workflow_id: Option<String>,
    pub correlation_id: Option<String>,
    /// Any of these statuses; empty means any status.
    pub statuses: Vec<WorkflowStatus>,
}

/// Page size of a search when none is given (Conductor's).
const SEARCH_SIZE_DEFAULT: usize = 100;

/// The paging of a search, and its free text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paging {
    pub start: usize,
    pub size: usize,
    /// `freeText`, unless blank or `*` (which match everything).
    pub free_text: Option<String>,
}

/// Reads `start`, `size` (default 100, at most [`SEARCH_RESULTS_MAX`]) and `freeText`. `sort` is
/// accepted and ignored: results come newest first.
pub fn paging(params: &Params) -> ApiResult<Paging> {
    let start = params.num_or("start", 0usize)?;
    let size = params.num_or("size", SEARCH_SIZE_DEFAULT)?;
    if size > SEARCH_RESULTS_MAX {
        return Err(ApiError::bad_request(format!(
            "size {size} is over the limit of {SEARCH_RESULTS_MAX} results per page; page with start"
        )));
    }
    if let Some(sort) = params.str("sort") {
        tracing::debug!(sort, "search sort is not supported; ignored");
    }
    let free_text = params
        .string("freeText")
        .filter(|t| !t.trim().is_empty() && t.trim() != "*");
    Ok(Paging {
        start,
        size,
        free_text,
    })
}

/// Most workflow names one query may search (each is a search of its own).
pub const WORKFLOW_TYPES_MAX: usize = 10;
/// Fields a workflow search may name, for error messages.
const WORKFLOW_FIELDS: &str = "workflowType, workflowId, status, correlationId";
/// Fields a task search may name, for error messages.
const TASK_FIELDS: &str = "workflowType, workflowId, correlationId, taskId, taskType, status";
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

/// One clause of a query: a field and the values it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Clause {
    field: String,
    values: Vec<String>,
}

/// A 400 for a query outside the supported syntax; `fields` are those the search may name.
fn bad(fields: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("unsupported search query: {message}. Supported: clauses over {fields} joined by AND, each `field = 'value'` or `field IN (a, b)`"))
}

fn tokenize(query: &str, fields: &str) -> ApiResult<Vec<Token>> {
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
                    return Err(bad(
                        fields,
                        format_args!("the quote opened at character {at} is not closed"),
                    ));
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

/// Splits a query into its clauses, checking the syntax; a blank query has none.
fn clauses(query: &str, fields: &str) -> ApiResult<Vec<Clause>> {
    if query.len() > QUERY_LEN_MAX {
        return Err(ApiError::bad_request(format!(
            "search query is longer than {QUERY_LEN_MAX} bytes"
        )));
    }
    let tokens = tokenize(query, fields)?;
    let mut out = Vec::new();
    let mut rest = tokens.as_slice();
    if rest.is_empty() {
        return Ok(out);
    }
    loop {
        let (clause, tail) = clause(rest, fields)?;
        out.push(clause);
        rest = tail;
        match rest.split_first() {
            None => return Ok(out),
            Some((Token::Word(w), tail)) if w.eq_ignore_ascii_case("AND") => rest = tail,
            Some((Token::Word(w), _)) if w.eq_ignore_ascii_case("OR") => {
                return Err(bad(
                    fields,
                    "OR is not supported; run one search per alternative",
                ))
            }
            Some((t, _)) => {
                return Err(bad(
                    fields,
                    format_args!("expected AND between clauses, found {}", show(t)),
                ))
            }
        }
    }
}

/// Parses a workflow search query; a blank query matches everything.
pub fn parse(query: &str) -> ApiResult<ParsedQuery> {
    let fields = WORKFLOW_FIELDS;
    let mut parsed = ParsedQuery::default();
    for Clause { field, values } in clauses(query, fields)? {
        match field.as_str() {
            "workflowType" => set_types(&mut parsed.workflow_types, fields, &field, values)?,
            "workflowId" => set_single(&mut parsed.workflow_id, fields, &field, values)?,
            "correlationId" => set_single(&mut parsed.correlation_id, fields, &field, values)?,
            "status" => {
                let what =
                    "a workflow status (RUNNING, COMPLETED, FAILED, TIMED_OUT, TERMINATED, PAUSED)";
                set_any(
                    &mut parsed.statuses,
                    fields,
                    &field,
                    values,
                    WorkflowStatus::parse,
                    what,
                )?
            }
            other => {
                return Err(bad(
                    fields,
                    format_args!("field '{other}' cannot be searched"),
                ))
            }
        }
    }
    Ok(parsed)
}

/// Parses a task search query into the filters of a task search (paging left at its default);
/// a blank query matches every task.
pub fn parse_tasks(query: &str) -> ApiResult<TaskSearchQuery> {
    let fields = TASK_FIELDS;
    let mut parsed = TaskSearchQuery::default();
    for Clause { field, values } in clauses(query, fields)? {
        match field.as_str() {
            "workflowType" => set_types(&mut parsed.workflow_names, fields, &field, values)?,
            "workflowId" => set_single(&mut parsed.workflow_id, fields, &field, values)?,
            "correlationId" => set_single(&mut parsed.correlation_id, fields, &field, values)?,
            "taskId" => set_single(&mut parsed.task_id, fields, &field, values)?,
            "taskType" => set_any(
                &mut parsed.task_types,
                fields,
                &field,
                values,
                |v| Some(v.to_owned()),
                "a task type",
            )?,
            "status" => {
                let what = "a task status (SCHEDULED, IN_PROGRESS, COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR, TIMED_OUT, CANCELED, SKIPPED, COMPLETED_WITH_ERRORS)";
                set_any(
                    &mut parsed.statuses,
                    fields,
                    &field,
                    values,
                    TaskStatus::parse,
                    what,
                )?
            }
            other => {
                return Err(bad(
                    fields,
                    format_args!("field '{other}' cannot be searched"),
                ))
            }
        }
    }
    Ok(parsed)
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

/// Parses one `field = value` or `field IN (...)` clause; answers it and the tokens after it.
fn clause<'t>(tokens: &'t [Token], fields: &str) -> ApiResult<(Clause, &'t [Token])> {
    let (field, rest) = match tokens.split_first() {
        Some((Token::Word(f), rest)) => (f.as_str(), rest),
        Some((t, _)) => {
            return Err(bad(
                fields,
                format_args!("expected a field name, found {}", show(t)),
            ))
        }
        None => return Err(bad(fields, "the query ends after AND")),
    };
    let (values, rest) = match rest.split_first() {
        Some((Token::Op(op), rest)) if op == "=" => match rest.split_first() {
            Some((Token::Word(v) | Token::Quoted(v), rest)) => (vec![v.clone()], rest),
            _ => {
                return Err(bad(
                    fields,
                    format_args!("expected a value after `{field} =`"),
                ))
            }
        },
        Some((Token::Word(w), rest)) if w.eq_ignore_ascii_case("IN") => list(fields, field, rest)?,
        Some((Token::Op(op), _)) => {
            return Err(bad(
                fields,
                format_args!("operator '{op}' is not supported (on {field}); use = or IN"),
            ))
        }
        _ => {
            return Err(bad(
                fields,
                format_args!("expected = or IN after field '{field}'"),
            ))
        }
    };
    let field = field.to_owned();
    Ok((Clause { field, values }, rest))
}

/// Parses `( v1, v2, ... )`.
fn list<'t>(
    fields: &str,
    field: &str,
    tokens: &'t [Token],
) -> ApiResult<(Vec<String>, &'t [Token])> {
    let in_list = |what: &str| bad(fields, format_args!("expected {what} `{field} IN (...)`"));
    let mut rest = match tokens.split_first() {
        Some((Token::Open, rest)) => rest,
        _ => return Err(bad(fields, format_args!("expected '(' after `{field} IN`"))),
    };
    let mut values = Vec::new();
    loop {
        match rest.split_first() {
            Some((Token::Word(v) | Token::Quoted(v), tail)) => {
                values.push(v.clone());
                rest = tail;
            }
            _ => return Err(in_list("a value in")),
        }
        match rest.split_first() {
            Some((Token::Comma, tail)) => rest = tail,
            Some((Token::Close, tail)) => return Ok((values, tail)),
            _ => return Err(in_list("',' or ')' in")),
        }
    }
}

/// Sets a field that takes one value and appears in one clause.
fn set_single(
    slot: &mut Option<String>,
    fields: &str,
    field: &str,
    mut values: Vec<String>,
) -> ApiResult<()> {
    if slot.is_some() {
        return Err(bad(
            fields,
            format_args!("{field} appears in more than one clause"),
        ));
    }
    match (values.pop(), values.is_empty()) {
        (Some(v), true) => {
            *slot = Some(v);
            Ok(())
        }
        _ => Err(bad(
            fields,
            format_args!("{field} can match only one value"),
        )),
    }
}

/// Sets `workflowType`: any of at most [`WORKFLOW_TYPES_MAX`] names.
fn set_types(
    slot: &mut Vec<String>,
    fields: &str,
    field: &str,
    values: Vec<String>,
) -> ApiResult<()> {
    set_any(
        slot,
        fields,
        field,
        values,
        |v| Some(v.to_owned()),
        "a workflow name",
    )?;
    if slot.len() > WORKFLOW_TYPES_MAX {
        return Err(bad(
            fields,
            format_args!("{field} may name at most {WORKFLOW_TYPES_MAX} workflows"),
        ));
    }
    Ok(())
}

/// Sets a field that matches any of several values (`status`, `taskType`), each read by `parse`
/// (`what` names a good value); it appears in one clause.
fn set_any<T: PartialEq>(
    slot: &mut Vec<T>,
    fields: &str,
    field: &str,
    values: Vec<String>,
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
) -> ApiResult<()> {
    if !slot.is_empty() {
        return Err(bad(
            fields,
            format_args!("{field} appears in more than one clause"),
        ));
    }
    for v in values {
        let value = parse(&v).ok_or_else(|| bad(fields, format_args!("'{v}' is not {what}")))?;
        if !slot.contains(&value) {
            slot.push(value);
        }
    }
    Ok(())
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
            workflow_types: w.map(str::to_owned).into_iter().collect(),
            correlation_id: c.map(str::to_owned),
            statuses: s,
            ..ParsedQuery::default()
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
                "workflowType IN (a, 'b', a) AND workflowId = \"x\"",
                ParsedQuery {
                    workflow_types: vec!["a".into(), "b".into()],
                    workflow_id: Some("x".into()),
                    ..ParsedQuery::default()
                },
            ),
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
            ("taskType = 'x'", "field 'taskType' cannot be searched"),
            ("status = DONE", "'DONE' is not a workflow status"),
            ("workflowType = 'w", "is not closed"),
            (
                "workflowType = 'w' status = RUNNING",
                "expected AND between clauses",
            ),
            ("workflowType = 'w' AND", "the query ends after AND"),
            ("workflowType =", "expected a value after `workflowType =`"),
            (
                "correlationId IN (a, b)",
                "correlationId can match only one value",
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

    #[test]
    fn task_queries() {
        let q = parse_tasks(
            "workflowType = 'w' AND taskType IN (a, 'b', a) AND status IN (FAILED, scheduled) AND taskId = \"t\" AND workflowId = x AND correlationId = c",
        )
        .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(q.workflow_names, ["w"]);
        assert_eq!(q.task_types, ["a", "b"]);
        assert_eq!(q.statuses, [TaskStatus::Failed, TaskStatus::Scheduled]);
        assert_eq!(
            (
                q.task_id.as_deref(),
                q.workflow_id.as_deref(),
                q.correlation_id.as_deref()
            ),
            (Some("t"), Some("x"), Some("c"))
        );
        assert_eq!(
            parse_tasks("").map(|q| q == TaskSearchQuery::default()),
            Ok(true)
        );
        for (query, needle) in [
            ("status = RUNNING", "'RUNNING' is not a task status"),
            (
                "workflowType IN (a, b, c, d, e, f, g, h, i, j, k)",
                "workflowType may name at most 10 workflows",
            ),
            (
                "taskType = a AND taskType = b",
                "taskType appears in more than one clause",
            ),
            ("taskId IN (a, b)", "taskId can match only one value"),
            ("startTime > 5", "operator '>' is not supported"),
            ("taskName = x", "field 'taskName' cannot be searched"),
        ] {
            let e = parse_tasks(query).expect_err(query);
            assert!(e.message.contains(needle), "{query}: {}", e.message);
            assert!(
                e.message
                    .contains("workflowType, workflowId, correlationId, taskId"),
                "{}",
                e.message
            );
        }
    }
}
