//! Deliberate bugs for the simulator's mutation check (issue 4): a simulator that cannot catch a
//! known bug proves nothing. Each [`Mutation`] is compiled in only with `--cfg baton_sim` (the
//! simulator's own build, `sim/run`); in every other build [`active`] is a constant `false` and
//! [`activate`] refuses.

/// A bug the simulator must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The log store tells openraft an append is durable before flushing it.
    AckBeforeFlush = 1,
    /// The decider accepts a worker's result for an attempt that already ended (no fence).
    AcceptWithoutFence = 2,
    /// A JOIN completes as soon as one of its joinOn tasks ends.
    JoinOnFirstBranch = 3,
    /// Every timer (timeouts, retry backoffs) fires 1.5 s after it is due.
    LateTimers = 4,
}

impl Mutation {
    pub const ALL: [Mutation; 4] = [
        Mutation::AckBeforeFlush,
        Mutation::AcceptWithoutFence,
        Mutation::JoinOnFirstBranch,
        Mutation::LateTimers,
    ];

    /// The name used on the simulator's command line.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::AckBeforeFlush => "ack-before-flush",
            Mutation::AcceptWithoutFence => "accept-without-fence",
            Mutation::JoinOnFirstBranch => "join-on-first-branch",
            Mutation::LateTimers => "late-timers",
        }
    }

    pub fn from_name(name: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.name() == name)
    }
}

#[cfg(baton_sim)]
static ACTIVE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Turns `mutation` on for this process (or every mutation off with `None`). Errors outside the
/// simulator's build.
pub fn activate(mutation: Option<Mutation>) -> Result<(), &'static str> {
    #[cfg(baton_sim)]
    {
        ACTIVE.store(
            mutation.map_or(0, |m| m as u8),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }
    #[cfg(not(baton_sim))]
    {
        match mutation {
            None => Ok(()),
            Some(_) => Err("mutations exist only in the simulator's build (--cfg baton_sim)"),
        }
    }
}

/// Whether `mutation` is on.
#[inline]
pub fn active(mutation: Mutation) -> bool {
    #[cfg(baton_sim)]
    {
        ACTIVE.load(std::sync::atomic::Ordering::Relaxed) == mutation as u8
    }
    #[cfg(not(baton_sim))]
    {
        let _ = mutation;
        false
    }
}
