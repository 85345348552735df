//! What a stored record leaves out of the model when it serialises it (`crate::record`): the
//! model's `skip_serializing_if` hooks, and the per-thread switches the record's serialisers set
//! around themselves. Over the API nothing is left out: the switches are off.

use super::WorkflowTask;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

thread_local! {
    /// Set while a patch's head serialises.
    static HEAD_ONLY: Cell<bool> = const { Cell::new(false) };
    /// Addresses of the `workflowTask` fields the record being serialised leaves out.
    static OMITTED: RefCell<Option<HashSet<usize>>> = const { RefCell::new(None) };
}

/// `skip_serializing_if` of `Workflow::tasks` and `Workflow::workflow_definition`: true only while
/// a patch's head serialises.
pub fn head_only<T>(_: &T) -> bool {
    HEAD_ONLY.with(Cell::get)
}

/// Sets whether a patch's head is serialising; answers what it was.
pub(crate) fn set_head_only(on: bool) -> bool {
    HEAD_ONLY.with(|h| h.replace(on))
}

/// `skip_serializing_if` of `Task::workflow_task`: true only while a record serialises and only
/// for the tasks whose definition the record's workflow definition carries.
pub fn omit_workflow_task(task: &WorkflowTask) -> bool {
    let address = task as *const WorkflowTask as usize;
    OMITTED.with(|o| {
        o.borrow()
            .as_ref()
            .is_some_and(|set| set.contains(&address))
    })
}

/// Sets the addresses of the `workflowTask` fields left out; answers the previous set.
pub(crate) fn set_omitted(set: Option<HashSet<usize>>) -> Option<HashSet<usize>> {
    OMITTED.with(|o| std::mem::replace(&mut *o.borrow_mut(), set))
}
