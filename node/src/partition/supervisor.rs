//! `PartitionSupervisor`: one per led partition. It routes every message for a workflow to that
//! workflow's actor, spawning the actor on first use (it loads its state from sled), and passivates
//! actors that report themselves idle — but only when no message was forwarded since, so a message is
//! never sent to an actor that is stopping. No names, no global registry.

use super::workflow::{queued, Inbox, Reply, WorkflowActor, WorkflowArgs, WorkflowMsg};
use super::{PartitionCtx, SupervisorMsg};
use crate::error::Error;
use proto::WorkflowId;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::collections::BTreeMap;
use std::sync::Arc;

pub struct PartitionSupervisor;

pub struct SupervisorState {
    ctx: Arc<PartitionCtx>,
    /// Live workflow actors, how many messages were forwarded to each, and each one's inbox.
    children: BTreeMap<WorkflowId, (ActorRef<WorkflowMsg>, u64, Inbox)>,
}

/// Answers a caller whose message cannot be delivered, so it is not left waiting.
fn refuse_port<T>(port: Reply<T>, why: &str) {
    let _ = port.send(Err(Error::Unavailable(why.to_owned())));
}

/// Answers a message that cannot be delivered, so its caller is not left waiting.
fn refuse(msg: WorkflowMsg, why: &str) {
    refuse_with(msg, Error::Unavailable(why.to_owned()));
}

fn refuse_with(msg: WorkflowMsg, error: Error) {
    match msg {
        WorkflowMsg::Start(_, p) | WorkflowMsg::Input(_, p) => {
            let _ = p.send(Err(error));
        }
        WorkflowMsg::AddLog(_, _, p) | WorkflowMsg::Remove(p) => {
            let _ = p.send(Err(error));
        }
        WorkflowMsg::Fire(_) | WorkflowMsg::IdleCheck(_) | WorkflowMsg::Inputs => {}
    }
}

impl Actor for PartitionSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = Arc<PartitionCtx>;

    async fn pre_start(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        ctx: Arc<PartitionCtx>,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        Ok(SupervisorState {
            ctx,
            children: BTreeMap::new(),
        })
    }

    /// Stops the workflow actors in workflow-id order. ractor would kill them anyway after this,
    /// but in the order of its internal `HashMap` (random per process), which made the order the
    /// actors wind down in, and with it a simulated run, differ from one process to the next.
    async fn post_stop(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        st: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        for (child, _, _) in st.children.values() {
            child.kill();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        st: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Route(id, wmsg) => {
                if !st.children.contains_key(&id) {
                    let inbox = Inbox::default();
                    let args = WorkflowArgs {
                        ctx: st.ctx.clone(),
                        id: id.clone(),
                        supervisor: myself.clone(),
                        inbox: inbox.clone(),
                    };
                    match Actor::spawn_linked(None, WorkflowActor, args, myself.get_cell()).await {
                        Ok((child, _)) => {
                            st.children.insert(id.clone(), (child, 0, inbox));
                        }
                        Err(e) => {
                            tracing::error!(workflow = %id, error = %e, "could not start workflow actor");
                            // A workflow set aside when it was loaded is refused for good, not
                            // "retry": its stored record cannot be decoded.
                            match crate::partition::stored::read(st.ctx.group.state(), &id) {
                                Err(e @ Error::Conflict(_)) => refuse_with(wmsg, e),
                                _ => refuse(wmsg, "the workflow could not be loaded; retry"),
                            }
                            return Ok(());
                        }
                    }
                }
                if let Some((child, forwarded, inbox)) = st.children.get_mut(&id) {
                    *forwarded += 1;
                    // Inputs wait in the inbox, so that those queued behind a write in flight
                    // are decided together (see `Inbox`); the message only says to look.
                    let wmsg = match wmsg {
                        WorkflowMsg::Input(input, port) => {
                            queued(inbox).push((input, port));
                            WorkflowMsg::Inputs
                        }
                        other => other,
                    };
                    if let Err(e) = child.send_message(wmsg) {
                        let inbox = inbox.clone();
                        st.children.remove(&id);
                        for (_, port) in std::mem::take(&mut *queued(&inbox)) {
                            refuse_port(port, "the workflow actor stopped; retry");
                        }
                        if let ractor::MessagingErr::SendErr(m) = e {
                            refuse(m, "the workflow actor stopped; retry");
                        }
                    }
                }
            }
            SupervisorMsg::Idle(id, processed) => {
                if st
                    .children
                    .get(&id)
                    .is_some_and(|(_, forwarded, _)| *forwarded == processed)
                {
                    if let Some((child, _, _)) = st.children.remove(&id) {
                        child.stop(None);
                    }
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        st: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                st.children
                    .retain(|_, (child, _, _)| child.get_id() != cell.get_id());
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                // A panicking decider stops only its workflow's actor; the next message reloads it
                // from committed state.
                tracing::error!(partition = %st.ctx.id, error = %err, "workflow actor failed");
                st.children
                    .retain(|_, (child, _, _)| child.get_id() != cell.get_id());
            }
            _ => {}
        }
        Ok(())
    }
}
