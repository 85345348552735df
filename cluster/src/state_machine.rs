//! The seam between the cluster layer and the engine: the node crate implements [`StateMachine`] to
//! give meaning to the opaque commands a group replicates. This module holds only the trait.

use crate::storage::{Batch, Tree};

/// Implemented by the node crate. Applying must be deterministic: no clock, no randomness, no I/O
/// other than the given tree.
pub trait StateMachine: Send + Sync + 'static {
    /// Applies one committed command. `state` holds the state as of before this command (earlier
    /// commands of the same apply call are already visible); the command's writes go into `batch`,
    /// which the cluster applies atomically together with its own bookkeeping (last applied log id,
    /// membership) — so replay after a crash never applies a command twice. Returns the response
    /// bytes handed back to the proposer.
    ///
    /// A panic stops the group (openraft treats it as fatal); it resumes from durable state when
    /// reopened, so a command that panics deterministically must be fixed, not retried.
    ///
    /// Keys written must not start with byte `0x00`: that prefix is reserved for the cluster's
    /// bookkeeping, which would overwrite them.
    fn apply(&self, state: &Tree, batch: &mut Batch, command: &[u8]) -> Vec<u8>;

    /// Called after a snapshot replaced the state tree (so caches can reload). Default: nothing.
    fn restored(&self, _state: &Tree) {}
}
