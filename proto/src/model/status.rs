//! Task and workflow statuses with Conductor's flags.

use serde::{Deserialize, Serialize};

/// The nine task states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskStatus {
    InProgress,
    Canceled,
    Failed,
    FailedWithTerminalError,
    Completed,
    CompletedWithErrors,
    #[default]
    Scheduled,
    TimedOut,
    Skipped,
}

impl TaskStatus {
    /// (terminal, successful, retriable) as Conductor defines them.
    pub const fn flags(self) -> (bool, bool, bool) {
        use TaskStatus::*;
        match self {
            InProgress => (false, true, true),
            Canceled => (true, false, false),
            Failed => (true, false, true),
            FailedWithTerminalError => (true, false, false),
            Completed => (true, true, true),
            CompletedWithErrors => (true, true, true),
            Scheduled => (false, true, true),
            TimedOut => (true, false, true),
            Skipped => (true, true, false),
        }
    }
    pub const fn is_terminal(self) -> bool {
        self.flags().0
    }
    pub const fn is_successful(self) -> bool {
        self.flags().1
    }
    pub const fn is_retriable(self) -> bool {
        self.flags().2
    }
    pub const fn as_str(self) -> &'static str {
        use TaskStatus::*;
        match self {
            InProgress => "IN_PROGRESS",
            Canceled => "CANCELED",
            Failed => "FAILED",
            FailedWithTerminalError => "FAILED_WITH_TERMINAL_ERROR",
            Completed => "COMPLETED",
            CompletedWithErrors => "COMPLETED_WITH_ERRORS",
            Scheduled => "SCHEDULED",
            TimedOut => "TIMED_OUT",
            Skipped => "SKIPPED",
        }
    }
    /// Parses Conductor's spelling (as used in paths such as `/api/tasks/{wf}/{ref}/{status}`).
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_ascii_uppercase())).ok()
    }
}

/// Workflow statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkflowStatus {
    #[default]
    Running,
    Completed,
    Failed,
    TimedOut,
    Terminated,
    Paused,
}

impl WorkflowStatus {
    pub const fn is_terminal(self) -> bool {
        !matches!(self, WorkflowStatus::Running | WorkflowStatus::Paused)
    }
    pub const fn is_successful(self) -> bool {
        matches!(
            self,
            WorkflowStatus::Completed | WorkflowStatus::Paused | WorkflowStatus::Running
        )
    }
    pub const fn as_str(self) -> &'static str {
        use WorkflowStatus::*;
        match self {
            Running => "RUNNING",
            Completed => "COMPLETED",
            Failed => "FAILED",
            TimedOut => "TIMED_OUT",
            Terminated => "TERMINATED",
            Paused => "PAUSED",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_ascii_uppercase())).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_match_conductor() {
        use TaskStatus::*;
        let table = [
            (InProgress, (false, true, true)),
            (Canceled, (true, false, false)),
            (Failed, (true, false, true)),
            (FailedWithTerminalError, (true, false, false)),
            (Completed, (true, true, true)),
            (CompletedWithErrors, (true, true, true)),
            (Scheduled, (false, true, true)),
            (TimedOut, (true, false, true)),
            (Skipped, (true, true, false)),
        ];
        for (s, f) in table {
            assert_eq!(s.flags(), f, "{s:?}");
            assert_eq!(TaskStatus::parse(s.as_str()), Some(s));
        }
    }
}
