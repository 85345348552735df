//! Who a request acts for, for the audit log: the API's guard runs each request's handler inside
//! [`acting_as`], and the meta group's proposals record [`current`] with each change. Work the
//! node does on its own (members, placement, schedules) acts as [`SYSTEM`].

use std::future::Future;

tokio::task_local! {
    static CALLER: String;
}

/// Who changes made outside any request are recorded as.
pub const SYSTEM: &str = "baton";
/// Who requests are recorded as while access control is off.
pub const ANONYMOUS: &str = "anonymous";

/// Runs `work` acting for `who`.
pub async fn acting_as<F: Future>(who: String, work: F) -> F::Output {
    CALLER.scope(who, work).await
}

/// Who the current work acts for.
pub fn current() -> String {
    CALLER
        .try_with(Clone::clone)
        .unwrap_or_else(|_| SYSTEM.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_acts_for_whoever_it_runs_as() {
        assert_eq!(current(), SYSTEM);
        let inside = acting_as("billing (a1)".into(), async { current() }).await;
        assert_eq!(inside, "billing (a1)");
        assert_eq!(current(), SYSTEM);
    }
}
