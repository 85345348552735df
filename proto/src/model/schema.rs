//! `SchemaDef` (Orkes' schema registry): a named, versioned JSON Schema that workflow and task
//! definitions reference with `inputSchema` / `outputSchema` and check when `enforceSchema` is
//! set. AVRO and PROTOBUF schemas are stored and answered, never validated.

use super::{EpochMs, Json};
use serde::{Deserialize, Serialize};

/// What language a schema's `data` is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SchemaType {
    #[default]
    Json,
    Avro,
    Protobuf,
}

impl SchemaType {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Json => "JSON",
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }
}

/// A registered schema, as `POST /api/schema` takes it and `GET /api/schema` answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SchemaDef {
    pub name: String,
    /// 1 and up; a registration of an existing name and version replaces it.
    pub version: u32,
    #[serde(rename = "type")]
    pub schema_type: SchemaType,
    /// The schema itself (for JSON, a JSON Schema document).
    pub data: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_ref: Option<String>,
    pub create_time: EpochMs,
    pub update_time: EpochMs,
    /// Fields Baton does not interpret (Orkes' `createdBy`, `ownerApp`...), kept as given.
    #[serde(flatten)]
    pub extra: Json,
}

impl Default for SchemaDef {
    fn default() -> Self {
        Self {
            name: String::new(),
            version: 1,
            schema_type: SchemaType::Json,
            data: Json::new(),
            external_ref: None,
            create_time: 0,
            update_time: 0,
            extra: Json::new(),
        }
    }
}

/// A definition's reference to a registered schema (`inputSchema`, `outputSchema`): its name,
/// and its version (the latest registered when absent). Orkes' clients send a whole `SchemaDef`
/// here; what Baton does not read of it is kept in `extra`, so the reference round-trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct SchemaRef {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub schema_type: Option<SchemaType>,
    #[serde(flatten)]
    pub extra: Json,
}

impl SchemaRef {
    /// `name` or `name` version `v`, for messages.
    pub fn describe(&self) -> String {
        match self.version {
            Some(v) => format!("'{}' version {v}", self.name),
            None => format!("'{}'", self.name),
        }
    }
}

/// The schema fields a workflow or task definition carries.
pub trait Schemas {
    fn input_schema(&self) -> Option<&SchemaRef>;
    fn output_schema(&self) -> Option<&SchemaRef>;
    fn enforce_schema(&self) -> bool;
}

impl Schemas for super::WorkflowDef {
    fn input_schema(&self) -> Option<&SchemaRef> {
        self.input_schema.as_ref()
    }
    fn output_schema(&self) -> Option<&SchemaRef> {
        self.output_schema.as_ref()
    }
    fn enforce_schema(&self) -> bool {
        self.enforce_schema
    }
}

impl Schemas for super::TaskDef {
    fn input_schema(&self) -> Option<&SchemaRef> {
        self.input_schema.as_ref()
    }
    fn output_schema(&self) -> Option<&SchemaRef> {
        self.output_schema.as_ref()
    }
    fn enforce_schema(&self) -> bool {
        self.enforce_schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_def_reads_orkes_json_and_keeps_unknown_fields() {
        let v = json!({"name": "item", "version": 2, "type": "AVRO", "data": {"a": 1},
            "externalRef": "x", "createdBy": "me"});
        let def: SchemaDef = serde_json::from_value(v).expect("parses");
        assert_eq!(def.schema_type, SchemaType::Avro);
        assert_eq!(def.version, 2);
        assert_eq!(def.extra.get("createdBy"), Some(&json!("me")));
        let back = serde_json::to_value(&def).expect("serialises");
        assert_eq!(back["type"], "AVRO");
        assert_eq!(back["externalRef"], "x");
        assert_eq!(back["createdBy"], "me");
    }

    #[test]
    fn a_reference_round_trips_what_the_client_sent() {
        let v = json!({"name": "item", "version": 1, "type": "JSON", "ownerApp": "a"});
        let r: SchemaRef = serde_json::from_value(v.clone()).expect("parses");
        assert_eq!((r.name.as_str(), r.version), ("item", Some(1)));
        assert_eq!(serde_json::to_value(&r).expect("serialises"), v);
        let bare: SchemaRef = serde_json::from_value(json!({"name": "item"})).expect("parses");
        assert_eq!(bare.describe(), "'item'");
    }
}
