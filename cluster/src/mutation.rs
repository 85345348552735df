//! The Raft and storage layer's deliberate bugs for the simulator's mutation check (see
//! [`proto::mutation`]); the workflow engine's are in `engine::mutation`.

use proto::mutation::Switch;

static SWITCH: Switch = Switch::new();

/// A bug the simulator must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The log store tells openraft an append is durable before flushing it.
    AckBeforeFlush = 1,
}

impl Mutation {
    pub const ALL: [Mutation; 1] = [Mutation::AckBeforeFlush];

    /// The name used on the simulator's command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::AckBeforeFlush => "ack-before-flush",
        }
    }
}

/// Turns `mutation` on for this process (or every one of this layer off with `None`).
pub fn activate(mutation: Option<Mutation>) -> Result<(), &'static str> {
    SWITCH.set(mutation.map(|m| m as u8))
}

/// Whether `mutation` is on.
#[inline]
pub fn active(mutation: Mutation) -> bool {
    SWITCH.is_on(mutation as u8)
}
