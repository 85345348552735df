//! The switch behind the simulator's deliberate bugs (`cluster::mutation` for Raft and storage,
//! `engine::mutation` for workflow semantics): a simulator that cannot catch a known bug proves
//! nothing. A switch holds something only with `--cfg baton_sim` (the simulator's own build,
//! `sim/run`); in every other build it is always off and refuses to be turned on.

/// One crate's set of deliberate bugs, identified by a non-zero code; at most one is on.
#[derive(Debug, Default)]
pub struct Switch {
    #[cfg(baton_sim)]
    on: std::sync::atomic::AtomicU8,
}

impl Switch {
    pub const fn new() -> Switch {
        Switch {
            #[cfg(baton_sim)]
            on: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Turns the bug with `code` on (every bug of this switch off with `None`). Errors outside
    /// the simulator's build.
    pub fn set(&self, code: Option<u8>) -> Result<(), &'static str> {
        #[cfg(baton_sim)]
        {
            self.on
                .store(code.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        #[cfg(not(baton_sim))]
        {
            match code {
                None => Ok(()),
                Some(_) => Err("mutations exist only in the simulator's build (--cfg baton_sim)"),
            }
        }
    }

    /// Whether the bug with `code` is on.
    #[inline]
    pub fn is_on(&self, code: u8) -> bool {
        #[cfg(baton_sim)]
        {
            code != 0 && self.on.load(std::sync::atomic::Ordering::Relaxed) == code
        }
        #[cfg(not(baton_sim))]
        {
            let _ = code;
            false
        }
    }
}
