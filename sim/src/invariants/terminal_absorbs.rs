//! Terminal states absorb and versions only grow: across samples taken from
//! whichever replica leads, a workflow's record version never goes back, a terminal workflow keeps
//! its status, and a terminal task attempt keeps its status.

use proto::model::{TaskStatus, WorkflowStatus};
use proto::record::WorkflowRecord;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct Seen {
    version: BTreeMap<String, u64>,
    status: BTreeMap<String, WorkflowStatus>,
    tasks: BTreeMap<String, TaskStatus>,
}

impl Seen {
    pub fn observe(
        &mut self,
        records: &BTreeMap<String, WorkflowRecord>,
    ) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (id, r) in records {
            if let Some(v) = self.version.get(id) {
                if r.version < *v {
                    out.push((
                        "versions only grow",
                        format!("workflow {id}: version {} seen after {v}", r.version),
                    ));
                }
            }
            self.version.insert(id.clone(), r.version);
            match self.status.get(id) {
                Some(s) if s.is_terminal() && *s != r.workflow.status => out.push((
                    "terminal states absorb",
                    format!(
                        "workflow {id} was {} and is now {}",
                        s.as_str(),
                        r.workflow.status.as_str()
                    ),
                )),
                _ => {
                    self.status.insert(id.clone(), r.workflow.status);
                }
            }
            for t in &r.workflow.tasks {
                let key = t.task_id.as_str().to_owned();
                match self.tasks.get(&key) {
                    Some(s) if s.is_terminal() && *s != t.status => out.push((
                        "terminal states absorb",
                        format!(
                            "workflow {id}: task {} ({}) was {} and is now {}",
                            key,
                            t.reference_task_name,
                            s.as_str(),
                            t.status.as_str()
                        ),
                    )),
                    _ => {
                        self.tasks.insert(key, t.status);
                    }
                }
            }
        }
        out
    }
}
