//! The node's [`engine::Catalog`]: what a workflow's decisions may look up beyond its record,
//! all of it replicated (the meta group's definitions and active cluster version) or the
//! operator's configuration, equal on every node (secrets, the lifecycle sink), so every replica
//! decides alike.

use crate::secrets::SecretFiles;
use serde_json::Value;
use std::sync::Arc;

/// What a workflow's decisions look up: the meta group's definitions, the operator's secrets,
/// and whether DSL instances record their lifecycle events (a sink is named for them).
pub(crate) struct Catalog {
    pub defs: crate::meta::MetaState,
    pub secrets: SecretFiles,
    pub lifecycle_events: bool,
}

impl engine::Catalog for Catalog {
    fn task_def(&self, name: &str) -> Option<proto::model::TaskDef> {
        self.defs.task_def(name)
    }

    fn schema(&self, name: &str, version: Option<u32>) -> Option<Arc<engine::schema::Compiled>> {
        engine::Catalog::schema(&self.defs, name, version)
    }

    fn dsl_document(&self, namespace: &str, name: &str, version: &str) -> Option<Value> {
        engine::Catalog::dsl_document(&self.defs, namespace, name, version)
    }

    fn secret(&self, name: &str) -> Option<Value> {
        self.secrets.get(name)
    }

    fn lifecycle_events(&self) -> bool {
        self.lifecycle_events
    }

    fn cluster_version(&self) -> proto::version::ClusterVersion {
        self.defs.cluster_version()
    }
}
