//! The workflow engine's deliberate bugs for the simulator's mutation check (see
//! [`proto::mutation`]); the Raft and storage layer's are in `cluster::mutation`.

use proto::mutation::Switch;

static SWITCH: Switch = Switch::new();

/// A bug the simulator must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The decider accepts a worker's result for an attempt that already ended (no fence).
    AcceptWithoutFence = 1,
    /// A JOIN completes as soon as one of its joinOn tasks ends.
    JoinOnFirstBranch = 2,
    /// Every timer (timeouts, retry backoffs) fires 1.5 s after it is due (read by the runtime
    /// that arms them).
    LateTimers = 3,
    /// A SUB_WORKFLOW does not remember that its child started: in progress, it asks for a
    /// child again, under an id that depends on the parent's last write rather than on the task
    /// alone, so the repeat starts a second child.
    SubWorkflowTwice = 4,
    /// A task type's concurrency and rate limits are ignored: its tasks are leased without
    /// permits (read by the runtime that asks for them).
    LeaseWithoutPermit = 5,
    /// A cluster version is activated as soon as one member serves it: the meta leader takes the
    /// newest any member serves, and the meta apply does not check the members (read by the
    /// node's upgrade service and meta apply).
    ActivateUnserved = 6,
}

impl Mutation {
    pub const ALL: [Mutation; 6] = [
        Mutation::AcceptWithoutFence,
        Mutation::JoinOnFirstBranch,
        Mutation::LateTimers,
        Mutation::SubWorkflowTwice,
        Mutation::LeaseWithoutPermit,
        Mutation::ActivateUnserved,
    ];

    /// The name used on the simulator's command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::AcceptWithoutFence => "accept-without-fence",
            Mutation::JoinOnFirstBranch => "join-on-first-branch",
            Mutation::LateTimers => "late-timers",
            Mutation::SubWorkflowTwice => "sub-workflow-twice",
            Mutation::LeaseWithoutPermit => "lease-without-permit",
            Mutation::ActivateUnserved => "activate-unserved",
        }
    }
}

/// Turns `mutation` on for this process (or every one of the engine's off with `None`).
pub fn activate(mutation: Option<Mutation>) -> Result<(), &'static str> {
    SWITCH.set(mutation.map(|m| m as u8))
}

/// Whether `mutation` is on.
#[inline]
pub fn active(mutation: Mutation) -> bool {
    SWITCH.is_on(mutation as u8)
}
