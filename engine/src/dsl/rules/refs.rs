//! Names a document uses must be declared: a `call` of a function (unless built in, given by
//! URI, or cataloged as `name:version@catalog`), a `raise` of a named error, a `catch`'s named
//! retry policy, a task's named timeout.

use serde_json::Value;
use std::collections::BTreeSet;

/// The calls the DSL itself defines.
const BUILT_IN_CALLS: [&str; 6] = ["http", "grpc", "openapi", "asyncapi", "a2a", "mcp"];

/// The runtime's own catalog, which needs no declaration.
const DEFAULT_CATALOG: &str = "default";

/// The names a document declares under `use`.
#[derive(Debug, Default)]
pub struct Uses {
    pub functions: BTreeSet<String>,
    pub errors: BTreeSet<String>,
    pub retries: BTreeSet<String>,
    pub timeouts: BTreeSet<String>,
    pub catalogs: BTreeSet<String>,
    /// Registered task types the document calls: functions served by workers.
    pub workers: BTreeSet<String>,
}

impl Uses {
    pub fn of(doc: &Value, workers: BTreeSet<String>) -> Self {
        let names = |what: &str| -> BTreeSet<String> {
            doc.pointer(&format!("/use/{what}"))
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        };
        Self {
            functions: names("functions"),
            errors: names("errors"),
            retries: names("retries"),
            timeouts: names("timeouts"),
            catalogs: names("catalogs"),
            workers,
        }
    }

    /// Why a `call` of `name` cannot be resolved, if it cannot.
    pub fn call(&self, name: &str) -> Option<String> {
        let declared = self.functions.contains(name) || self.workers.contains(name);
        if BUILT_IN_CALLS.contains(&name) || declared || name.contains("://") {
            return None;
        }
        if let Some((function, catalog)) = name.rsplit_once('@') {
            if function.contains(':') {
                let known = catalog == DEFAULT_CATALOG || self.catalogs.contains(catalog);
                return (!known).then(|| {
                    format!("calls '{name}' from the catalog '{catalog}', which use.catalogs does not declare")
                });
            }
        }
        Some(format!(
            "calls '{name}', which is neither a built-in call ({}), nor a function of use.functions, \
             nor a registered task type (a worker's function), nor a cataloged function \
             (name:version@catalog), nor a function's URI",
            BUILT_IN_CALLS.join(", ")
        ))
    }
}

/// Why a reference to `name` among `declared` (the `use.{what}` of the document) fails, if it does.
pub fn named(what: &str, declared: &BTreeSet<String>, name: &str) -> Option<String> {
    (!declared.contains(name)).then(|| format!("names '{name}', which use.{what} does not declare"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_resolve_to_built_ins_declared_functions_catalogs_or_uris() {
        let workers = BTreeSet::from(["chargeCard".to_owned()]);
        let uses = Uses::of(
            &json!({"use": {
                "functions": {"getPet": {"call": "http"}},
                "catalogs": {"global": {"endpoint": "https://example.test"}}
            }}),
            workers,
        );
        for ok in [
            "http",
            "mcp",
            "getPet",
            "chargeCard",
            "log:1.0.0@global",
            "log:1.0.0@default",
            "https://example.test/functions/log/1.0.0/function.yaml",
        ] {
            assert_eq!(uses.call(ok), None, "{ok}");
        }
        let unknown = uses.call("getPets").unwrap_or_default();
        assert!(
            unknown.starts_with("calls 'getPets', which is neither"),
            "{unknown}"
        );
        let catalog = uses.call("log:1.0.0@elsewhere").unwrap_or_default();
        assert!(catalog.contains("'elsewhere'"), "{catalog}");
    }
}
