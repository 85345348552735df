//! Orkes' schema registry, part of the definitions service: named, versioned schemas replicated
//! through the meta group beside the definitions that reference them, and the check that a
//! definition enforcing schemas names registered JSON schemas.

use super::Definitions;
use crate::error::{Error, Result};
use proto::limits::{SCHEMAS_MAX, SCHEMAS_PER_REQUEST_MAX};
use proto::model::{SchemaDef, SchemaType, Schemas, WorkflowDef};
use proto::record::{MetaCommand, MetaOutcome};

impl Definitions {
    /// Registers schemas (`POST /api/schema`), each replacing its name and version; with
    /// `new_version`, each becomes the version after its latest (1 when it has none). A JSON
    /// schema's data must be a valid JSON Schema. All are refused if one is.
    pub async fn put_schemas(&self, mut defs: Vec<SchemaDef>, new_version: bool) -> Result<()> {
        if defs.is_empty() {
            return Err(Error::Invalid("the list of schemas is empty".into()));
        }
        if defs.len() > SCHEMAS_PER_REQUEST_MAX {
            return Err(Error::TooLarge(format!(
                "{} schemas in one request, over the limit of {SCHEMAS_PER_REQUEST_MAX}",
                defs.len()
            )));
        }
        let now = self.host.clock.now_ms();
        for def in &mut defs {
            proto::check::schema_def(def)?;
            engine::schema::check(def)?;
            let latest = self.host.defs.schema(&def.name, None);
            if new_version {
                def.version = latest.as_ref().map_or(1, |l| l.version.saturating_add(1));
            }
            let existing = self.host.defs.schema(&def.name, Some(def.version));
            def.create_time = existing.map_or(now, |old| old.create_time);
            def.update_time = now;
        }
        match self
            .host
            .propose_meta(MetaCommand::PutSchemas(defs))
            .await?
        {
            MetaOutcome::Full => Err(Error::TooLarge(format!(
                "the schema registry holds at most {SCHEMAS_MAX} schema versions; delete some first"
            ))),
            _ => Ok(()),
        }
    }

    /// A version of a schema, or its latest.
    pub fn schema(&self, name: &str, version: Option<u32>) -> Result<SchemaDef> {
        self.host.defs.schema(name, version).ok_or_else(|| {
            Error::NotFound(match version {
                Some(v) => format!("No such schema found by name: {name}, version: {v}"),
                None => format!("No such schema found by name: {name}"),
            })
        })
    }

    /// Every version of every schema.
    pub fn schemas(&self) -> Vec<SchemaDef> {
        self.host.defs.schemas()
    }

    /// Removes one version of a schema, or every version. Definitions that enforce it stay
    /// registered; what they check afterwards fails, naming the missing schema.
    pub async fn delete_schema(&self, name: &str, version: Option<u32>) -> Result<()> {
        let command = MetaCommand::DeleteSchema {
            name: name.to_owned(),
            version,
        };
        match self.host.propose_meta(command).await? {
            MetaOutcome::Applied => Ok(()),
            _ => Err(self.schema(name, version).err().unwrap_or_else(|| {
                Error::NotFound(format!("No such schema found by name: {name}"))
            })),
        }
    }

    /// A definition that enforces schemas must name registered JSON schemas; one that does not
    /// enforce them may name anything (the fields are kept as given).
    pub(crate) fn check_schema_refs(&self, owner: &str, def: &dyn Schemas) -> Result<()> {
        if !def.enforce_schema() {
            return Ok(());
        }
        for (field, wanted) in [
            ("inputSchema", def.input_schema()),
            ("outputSchema", def.output_schema()),
        ] {
            let Some(wanted) = wanted else { continue };
            let found = self.host.defs.schema(&wanted.name, wanted.version);
            match found {
                None => {
                    return Err(Error::Invalid(format!(
                        "{owner} enforces {field} {}, which is not a registered schema",
                        wanted.describe()
                    )))
                }
                Some(s) if s.schema_type != SchemaType::Json => {
                    return Err(Error::Invalid(format!(
                        "{owner} enforces {field} {}, a {} schema; only JSON schemas can be enforced",
                        wanted.describe(),
                        s.schema_type.as_str()
                    )))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// [`Definitions::check_schema_refs`] for a workflow definition and every task definition
    /// it inlines.
    pub(crate) fn check_workflow_schema_refs(&self, def: &WorkflowDef) -> Result<()> {
        self.check_schema_refs(&format!("workflow {}", def.name), def)?;
        for task in def.all_tasks() {
            if let Some(d) = &task.task_definition {
                let owner = format!(
                    "task '{}' of workflow {}",
                    task.task_reference_name, def.name
                );
                self.check_schema_refs(&owner, d)?;
            }
        }
        Ok(())
    }
}
