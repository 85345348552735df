//! `TimerActor`: one per partition. It holds the timers that the partition's workflows need armed
//! (derived from their state by [`engine::timers`](engine::timers) and re-published after every
//! decision) and, when one comes due, sends the workflow a `Timer` input. A fired timer leaves the
//! wheel; the workflow's next publication re-arms whatever it still needs. Nothing here is stored: after
//! a restart the partition re-publishes every running workflow's timers from state.

use super::workflow::WorkflowMsg;
use super::SupervisorMsg;
use crate::clock::Clock;
use engine::{NowMs, Timer, TimerKey};
use proto::WorkflowId;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// A timer that fired but was re-armed unchanged (the workflow did not consider it due) waits this
/// long before firing again, so a disagreement about time cannot spin.
const REFIRE_DELAY_MS: NowMs = 1_000;

pub enum TimerMsg {
    /// Replaces every timer of `workflow` (empty: the workflow needs none).
    Arm {
        workflow: WorkflowId,
        timers: Vec<Timer>,
    },
    /// Fire whatever is due.
    Tick,
}

pub struct TimerActor;

/// The smallest key, to start a range scan over one workflow's entries.
fn first_key() -> TimerKey {
    TimerKey {
        kind: engine::TimerKind::PollTimeout,
        task_id: None,
    }
}

pub struct TimerArgs {
    pub clock: Arc<dyn Clock>,
    pub supervisor: ActorRef<SupervisorMsg>,
}

pub struct TimerState {
    clock: Arc<dyn Clock>,
    supervisor: ActorRef<SupervisorMsg>,
    wheel: BTreeSet<(NowMs, WorkflowId, TimerKey)>,
    /// Per workflow: (when it fires, the due time the workflow asked for, key).
    by_workflow: BTreeMap<WorkflowId, Vec<(NowMs, NowMs, TimerKey)>>,
    /// Timers fired and not yet re-armed differently: (workflow, key) -> due.
    fired: BTreeMap<(WorkflowId, TimerKey), NowMs>,
    /// The earliest time a Tick is already scheduled for.
    tick_at: Option<NowMs>,
}

impl TimerState {
    fn schedule(&mut self, myself: &ActorRef<TimerMsg>) {
        let Some((due, _, _)) = self.wheel.iter().next() else {
            return;
        };
        let due = *due;
        if self.tick_at.is_some_and(|t| t <= due) {
            return;
        }
        self.tick_at = Some(due);
        let wait = u64::try_from(due.saturating_sub(self.clock.now_ms())).unwrap_or(0);
        myself.send_after(Duration::from_millis(wait), || TimerMsg::Tick);
    }
}

impl Actor for TimerActor {
    type Msg = TimerMsg;
    type State = TimerState;
    type Arguments = TimerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<TimerMsg>,
        args: TimerArgs,
    ) -> Result<TimerState, ActorProcessingErr> {
        Ok(TimerState {
            clock: args.clock,
            supervisor: args.supervisor,
            wheel: BTreeSet::new(),
            by_workflow: BTreeMap::new(),
            fired: BTreeMap::new(),
            tick_at: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<TimerMsg>,
        msg: TimerMsg,
        st: &mut TimerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TimerMsg::Arm { workflow, timers } => {
                if let Some(old) = st.by_workflow.remove(&workflow) {
                    for (at, _, key) in old {
                        st.wheel.remove(&(at, workflow.clone(), key));
                    }
                }
                let fired_before: Vec<(TimerKey, NowMs)> = {
                    let keys: Vec<_> = st
                        .fired
                        .range((workflow.clone(), first_key())..)
                        .take_while(|((w, _), _)| w == &workflow)
                        .map(|(k, d)| (k.1.clone(), *d))
                        .collect();
                    for (k, _) in &keys {
                        st.fired.remove(&(workflow.clone(), k.clone()));
                    }
                    keys
                };
                let now = st.clock.now_ms();
                let mut mine = Vec::with_capacity(timers.len());
                for t in timers {
                    let mut at = t.due_ms;
                    if engine::mutation::active(engine::mutation::Mutation::LateTimers) {
                        at += 1_500;
                    }
                    if fired_before
                        .iter()
                        .any(|(k, d)| k == &t.key && *d == t.due_ms)
                    {
                        at = at.max(now + REFIRE_DELAY_MS);
                        st.fired.insert((workflow.clone(), t.key.clone()), t.due_ms);
                    }
                    st.wheel.insert((at, workflow.clone(), t.key.clone()));
                    mine.push((at, t.due_ms, t.key));
                }
                if !mine.is_empty() {
                    st.by_workflow.insert(workflow, mine);
                }
                st.schedule(&myself);
            }
            TimerMsg::Tick => {
                st.tick_at = None;
                let now = st.clock.now_ms();
                while let Some((due, wf, key)) = st.wheel.iter().next().cloned() {
                    if due > now {
                        break;
                    }
                    st.wheel.remove(&(due, wf.clone(), key.clone()));
                    let mut original_due = due;
                    if let Some(list) = st.by_workflow.get_mut(&wf) {
                        if let Some(entry) = list.iter().find(|(at, _, k)| *at == due && k == &key)
                        {
                            original_due = entry.1;
                        }
                        list.retain(|(at, _, k)| !(*at == due && k == &key));
                    }
                    st.fired.insert((wf.clone(), key.clone()), original_due);
                    let msg = SupervisorMsg::Route(wf, WorkflowMsg::Fire(key));
                    if st.supervisor.send_message(msg).is_err() {
                        tracing::debug!("partition supervisor gone; timer dropped");
                    }
                }
                st.schedule(&myself);
            }
        }
        Ok(())
    }
}
