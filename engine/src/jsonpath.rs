//! JSONPath in `${...}` beyond a plain path, as Conductor's JSONPath (Jayway) evaluates it:
//! wildcards (`items[*].id`), deep scan (`..id`), filters (`[?(@.qty > 1)]`), slices and unions,
//! through the `serde_json_path` crate (RFC 9535). Such a path can match any number of values,
//! so it answers the list of them, as Jayway does for an indefinite path; a plain path
//! (`a.b[0]`) keeps the engine's own walk, which answers the one value.

use serde_json::Value;
use serde_json_path::JsonPath;

/// Whether `path` needs a JSONPath query: a wildcard, deep scan, filter, slice or union.
pub(crate) fn is_query(path: &str) -> bool {
    path.contains('*')
        || path.contains("..")
        || path.contains("[?")
        || bracket_has(path, &[':', ','])
}

/// Whether a `[...]` of `path` holds one of `chars` outside quotes.
fn bracket_has(path: &str, chars: &[char]) -> bool {
    let (mut depth, mut quote) = (0, None);
    for c in path.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => depth -= 1,
            (None, c) if depth > 0 && chars.contains(&c) => return true,
            _ => {}
        }
    }
    false
}

/// Every value `query` (a JSONPath without its leading `$`, such as `.input.items[*].id`)
/// matches in `doc`; an empty list when it does not parse.
pub(crate) fn query(doc: &Value, query: &str) -> Value {
    let Ok(path) = JsonPath::parse(&format!("${query}")) else {
        return Value::Array(Vec::new());
    };
    Value::Array(path.query(doc).all().into_iter().cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wildcards_deep_scans_filters_and_slices() {
        let doc = json!({"input": {"items": [{"id": "a", "qty": 1}, {"id": "b", "qty": 3}],
                                   "nested": {"id": "c"}}});
        assert_eq!(query(&doc, ".input.items[*].id"), json!(["a", "b"]));
        assert_eq!(query(&doc, ".input..id"), json!(["a", "b", "c"]));
        assert_eq!(query(&doc, ".input.items[?(@.qty > 1)].id"), json!(["b"]));
        assert_eq!(query(&doc, ".input.items[0:1].id"), json!(["a"]));
        assert_eq!(query(&doc, ".input.items[?("), json!([]));
        assert!(is_query("x.items[*].id") && is_query("x..id") && is_query("a[0:2]"));
        assert!(!is_query("a.b[0]['c d']") && !is_query("a['x,y']"));
    }
}
