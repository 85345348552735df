//! The operator's secrets directory, read once when the node starts
//! (`baton server --secrets-dir DIR`, the way Kubernetes mounts a Secret): each file is a secret
//! named after it, its text (one trailing newline dropped) as a string, or, for `NAME.json`,
//! its JSON as the secret `NAME`. Hidden entries (a mount's `..data`) are skipped. Secrets are
//! never replicated or stored by Baton: every node of a cluster reads its own directory, which
//! the operator keeps equal, and a change takes effect when a node restarts. Serverless
//! Workflow documents read them as `$secrets` (those their `use.secrets` declares) and as
//! authentication (`basic: { use: NAME }`).

use proto::limits::{SECRETS_MAX, SECRET_BYTES_MAX};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The secrets by name. Its `Debug` names them and never shows a value.
#[derive(Clone, Default)]
pub struct SecretFiles(Arc<BTreeMap<String, Value>>);

impl std::fmt::Debug for SecretFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretFiles")
            .field("names", &self.0.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SecretFiles {
    /// Reads every secret of `dir`; an unreadable directory or file, a file too large, JSON
    /// that does not parse, or too many secrets is an error naming it.
    pub fn read_dir(dir: &Path) -> Result<Self, String> {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("secrets directory {}: {e}", dir.display()))?;
        let mut secrets = BTreeMap::new();
        for entry in entries {
            let path = entry
                .map_err(|e| format!("secrets directory {}: {e}", dir.display()))?
                .path();
            let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if file.starts_with('.') || !path.is_file() {
                continue;
            }
            let (name, value) = read_secret(&path, file)?;
            secrets.insert(name, value);
            if secrets.len() > SECRETS_MAX {
                return Err(format!(
                    "secrets directory {} holds more than {SECRETS_MAX} secrets",
                    dir.display()
                ));
            }
        }
        Ok(Self(Arc::new(secrets)))
    }

    /// The secret `name`, if the store has it.
    pub fn get(&self, name: &str) -> Option<Value> {
        self.0.get(name).cloned()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }
}

/// One secret file: its name and value.
fn read_secret(path: &Path, file: &str) -> Result<(String, Value), String> {
    let shown = path.display();
    let size = std::fs::metadata(path).map_err(|e| format!("secret {shown}: {e}"))?;
    if size.len() > SECRET_BYTES_MAX as u64 {
        return Err(format!(
            "secret {shown} is {} bytes, over the limit of {SECRET_BYTES_MAX}",
            size.len()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("secret {shown}: {e}"))?;
    match file.strip_suffix(".json") {
        Some(name) => {
            let value = serde_json::from_str(&text)
                .map_err(|e| format!("secret {shown} is not JSON: {e}"))?;
            Ok((name.to_owned(), value))
        }
        None => {
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let text = text.strip_suffix('\r').unwrap_or(text);
            Ok((file.to_owned(), Value::String(text.to_owned())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn files_are_secrets_by_name_text_or_json_and_hidden_ones_are_skipped() {
        let dir = tempfile::tempdir().expect("a directory");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        write("api-token", "s3cr3t\n");
        write("db.json", r#"{"username": "app", "password": "pw"}"#);
        write(".hidden", "no");
        let secrets = SecretFiles::read_dir(dir.path()).expect("read");
        assert_eq!(secrets.get("api-token"), Some(json!("s3cr3t")));
        assert_eq!(
            secrets.get("db"),
            Some(json!({"username": "app", "password": "pw"}))
        );
        assert!(!secrets.contains(".hidden"));
        let shown = format!("{secrets:?}");
        assert!(
            shown.contains("api-token") && !shown.contains("s3cr3t"),
            "{shown}"
        );
        write("broken.json", "{");
        let refused = SecretFiles::read_dir(dir.path()).expect_err("broken JSON");
        assert!(refused.contains("broken.json"), "{refused}");
    }
}
