//! `DslWorkflow`: a registered Serverless Workflow (DSL 1.0) document, named by its header's
//! namespace, name and version, kept in its JSON form (a document sent as YAML is stored as the
//! JSON it reads as). Instances of it run under `engine::dsl::workflow_def`.

use super::EpochMs;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A registered DSL document, as the meta group stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DslWorkflow {
    /// `document.namespace`.
    pub namespace: String,
    /// `document.name`.
    pub name: String,
    /// `document.version`, a semantic version.
    pub version: String,
    /// The whole document, as JSON.
    pub document: Value,
    /// The event types its `listen` tasks wait for (the events Baton's own queues deliver to
    /// its instances).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listens: Vec<String>,
    pub create_time: EpochMs,
    pub update_time: EpochMs,
}

impl DslWorkflow {
    /// `namespace/name/version`, for messages and paths.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.namespace, self.name, self.version)
    }
}

/// A registered document's `schedule`, beside it in the meta group, so that the runners of
/// schedules and the event consumers read it without decoding documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DslSchedule {
    pub namespace: String,
    pub name: String,
    pub version: String,
    /// The document's `schedule` as it is written.
    pub schedule: Value,
    /// When the version was first registered: `every` counts its intervals from it.
    pub create_time: EpochMs,
}

impl DslSchedule {
    /// The schedule of `def`, if its document has one.
    pub fn of(def: &DslWorkflow) -> Option<Self> {
        Some(Self {
            namespace: def.namespace.clone(),
            name: def.name.clone(),
            version: def.version.clone(),
            schedule: def.document.get("schedule")?.clone(),
            create_time: def.create_time,
        })
    }

    /// `namespace/name/version`, as [`DslWorkflow::key`].
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.namespace, self.name, self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_dsl_workflow_round_trips_in_camel_case() {
        let def = DslWorkflow {
            namespace: "ns".into(),
            name: "n".into(),
            version: "1.0.0".into(),
            document: json!({"document": {"name": "n"}}),
            listens: vec!["com.example.ready".into()],
            create_time: 1,
            update_time: 2,
        };
        let v = serde_json::to_value(&def).expect("serialises");
        assert_eq!(v["createTime"], 1);
        assert_eq!(v["updateTime"], 2);
        assert_eq!(def.key(), "ns/n/1.0.0");
        let back: DslWorkflow = serde_json::from_value(v).expect("parses");
        assert_eq!(back, def);
    }
}
