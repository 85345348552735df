//! A document's text to a JSON value: its size is checked first ([`DSL_DOCUMENT_BYTES_MAX`]), then
//! it is read as JSON when it begins with `{` and as YAML otherwise. A key given twice in one
//! mapping is refused (YAML requires unique keys; JSON parsers would keep the last silently), and
//! so are YAML values JSON cannot hold (`.nan`, `.inf`, tagged values). Errors say the line and
//! column. The parsers bound nesting (128 levels) and YAML alias expansion themselves.

use super::error::{Error, Location};
use proto::limits::DSL_DOCUMENT_BYTES_MAX;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// Reads `text` (YAML or JSON) into a JSON value.
pub fn parse(text: &str) -> Result<Value, Error> {
    if text.len() > DSL_DOCUMENT_BYTES_MAX {
        return Err(Error::TooLarge {
            bytes: text.len(),
            max: DSL_DOCUMENT_BYTES_MAX,
        });
    }
    if text.trim_start().starts_with('{') {
        serde_json::from_str::<Unique>(text)
            .map(|u| u.0)
            .map_err(|e| syntax(e.to_string(), Some((e.line(), e.column()))))
    } else {
        serde_yaml_ng::from_str::<Unique>(text)
            .map(|u| u.0)
            .map_err(|e| {
                let at = e.location().map(|l| (l.line(), l.column()));
                syntax(e.to_string(), at)
            })
    }
}

/// A syntax error; the parsers' own " at line L column C" suffix is left out of the message. A
/// key given twice is reported where its mapping begins.
fn syntax(message: String, at: Option<(usize, usize)>) -> Error {
    let location = at
        .filter(|(line, _)| *line > 0)
        .map(|(line, column)| Location { line, column });
    let suffix = location.map(|l| format!(" at line {} column {}", l.line, l.column));
    let message = match suffix.and_then(|s| message.strip_suffix(&s).map(str::to_owned)) {
        Some(stripped) => stripped,
        None => message,
    };
    Error::Syntax { location, message }
}

/// A JSON value read without duplicate keys.
struct Unique(Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value (null, boolean, number, string, list or mapping)")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Unique::deserialize(d).map(|u| u.0)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("{v} is not a JSON number")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "this mapping has the key `{key}` twice"
                )));
            }
            let Unique(value) = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_yaml_and_json_alike() {
        let yaml = "a: 1\nb: [x, 2.5, true, null]\n";
        let json = r#"{"a": 1, "b": ["x", 2.5, true, null]}"#;
        let expected = json!({"a": 1, "b": ["x", 2.5, true, null]});
        assert_eq!(parse(yaml), Ok(expected.clone()));
        assert_eq!(parse(json), Ok(expected));
    }

    #[test]
    fn syntax_errors_say_where() {
        let Err(Error::Syntax { location, message }) = parse("a: 1\nb: [1, 2\nc: 3\n") else {
            panic!("an unclosed list is a syntax error");
        };
        assert_eq!(location.map(|l| l.line), Some(3), "{message}");
        assert!(
            message.starts_with("did not find expected ','"),
            "{message}"
        );
        let Err(Error::Syntax { location, .. }) = parse("{\"a\": 1,\n \"b\": }") else {
            panic!("a JSON value is missing");
        };
        assert_eq!(location, Some(Location { line: 2, column: 7 }));
    }

    #[test]
    fn refuses_duplicate_keys_and_what_json_cannot_hold() {
        let Err(Error::Syntax { location, message }) = parse("a: 1\nb:\n  x: 2\n  x: 3\n") else {
            panic!("a duplicate key is refused");
        };
        assert_eq!(message, "b: this mapping has the key `x` twice");
        assert_eq!(location, Some(Location { line: 3, column: 3 }));
        let dup = parse(r#"{"a": {"x": 1, "x": 2}}"#);
        assert!(matches!(dup, Err(Error::Syntax { .. })), "{dup:?}");
        let nan = parse("a: .nan\n");
        assert!(matches!(nan, Err(Error::Syntax { .. })), "{nan:?}");
    }

    #[test]
    fn the_size_is_checked_before_parsing() {
        let text = "#".repeat(DSL_DOCUMENT_BYTES_MAX + 1);
        assert_eq!(
            parse(&text),
            Err(Error::TooLarge {
                bytes: DSL_DOCUMENT_BYTES_MAX + 1,
                max: DSL_DOCUMENT_BYTES_MAX
            })
        );
        assert_eq!(parse(&"#".repeat(DSL_DOCUMENT_BYTES_MAX)), Ok(Value::Null));
    }
}
