//! Peers' requests (`proto::peer`): decoded, answered by the service each concerns, and encoded
//! back. A request that concerns a workflow or a partition is answered here only if this node
//! leads it; otherwise it travels on, at most `HOPS_MAX` hops in all.

use super::{backlog, events, wait, workflows};
use super::{Membership, Node, Tasks, Workflows};
use crate::error::{Error, Result};
use crate::host::Host;
use proto::peer::{self, Reply, Request};
use proto::NodeId;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Answers peers' requests from now on (cluster only), for as long as the node's services live.
pub(super) fn serve(node: &Node) {
    let Some(transport) = &node.host.transport else {
        return;
    };
    let serving = WeakServing::of(node);
    transport.register(
        cluster::Service::Forward,
        move |peer: NodeId, bytes: Vec<u8>| {
            let serving = serving.clone();
            async move {
                match serving.upgrade() {
                    Some(serving) => Ok(answer_bytes(&serving, peer, bytes).await),
                    None => Err("node is shutting down".to_owned()),
                }
            }
        },
    );
}

/// Answers one encoded request with an encoded reply (or the error, as its code).
async fn answer_bytes(node: &Serving, peer: NodeId, bytes: Vec<u8>) -> Vec<u8> {
    let reply = match peer::decode_request(&bytes) {
        Err(e) => Err(Error::from(e)),
        Ok(peer::Envelope { hops, request }) => {
            tracing::trace!(%peer, hops, "forwarded request");
            answer(node, hops, request).await
        }
    };
    peer::encode_reply(&reply.map_err(|e| e.failure()))
}

/// Answers a request that arrived after `hops` hops.
async fn answer(node: &Serving, hops: u8, request: Request) -> Result<Reply> {
    let host = &node.host;
    let settled = matches!(request, Request::WaitSettled { .. });
    match request {
        Request::Workflow { id, op } => host.route_op_hops(&id, op, hops).await.map(Reply::Tasks),
        Request::Read { id } => host
            .record_hops(&id, hops)
            .await
            .map(|r| Reply::Record(r.map(Box::new))),
        Request::Wait {
            id,
            task_refs,
            wait_ms,
        }
        | Request::WaitSettled {
            id,
            task_refs,
            wait_ms,
        } => {
            let wait = Duration::from_millis(wait_ms.min(wait::EXECUTE_WAIT_MAX_S * 1_000));
            let until = wait::Until {
                task_refs,
                listening: settled,
            };
            let deadline = tokio::time::Instant::now() + wait;
            node.workflows
                .wait_hops(&id, &until, deadline, hops, None)
                .await
                .map(|r| Reply::Record(Some(Box::new(r))))
        }
        Request::TaskOwner { task } => host.task_owner_hops(&task, hops).await.map(Reply::Owner),
        Request::Poll {
            task_type,
            worker_id,
            domain,
            count,
        } => node
            .tasks
            .lease_local(&task_type, worker_id, domain.as_deref(), count)
            .await
            .map(Reply::Tasks),
        Request::Backlog { wanted, wait_ms } => {
            if wanted.len() > backlog::WANTED_MAX {
                return Err(Error::Invalid(format!(
                    "a backlog poll names {} task types, more than {}",
                    wanted.len(),
                    backlog::WANTED_MAX
                )));
            }
            Ok(Reply::Backlog(node.tasks.backlog(wanted, wait_ms).await))
        }
        Request::Meta(cmd) => host.propose_meta_hops(cmd, hops).await.map(Reply::Meta),
        Request::Partition { partition, command } => host
            .partition_command_hops(partition, command, hops)
            .await
            .map(Reply::Outcome),
        request => answer_scan(node, request).await,
    }
}

/// Answers a scan of partitions hosted here, a keeper's question, or a membership request.
async fn answer_scan(node: &Serving, request: Request) -> Result<Reply> {
    let host = &node.host;
    match request {
        Request::Search { query, partitions } => {
            let (total, hits) = workflows::search_in(&host.replicas_of(&partitions)?, &query)?;
            Ok(Reply::Found { total, hits })
        }
        Request::Running {
            name,
            version,
            partitions,
        } => workflows::running_in(&host.replicas_of(&partitions)?, &name, version).map(Reply::Ids),
        Request::Listening {
            event_type,
            partitions,
        } => {
            let replicas = host.replicas_of(&partitions)?;
            for replica in &replicas {
                if !replica.is_local_leader().await {
                    let p = replica.id;
                    return Err(Error::Unavailable(format!(
                        "partition {p} is not led here; retry"
                    )));
                }
            }
            workflows::listening_in(&replicas, &event_type).map(Reply::Ids)
        }
        Request::Executions {
            partitions,
            handler,
            limit,
        } => events::executions_in(&host.replicas_of(&partitions)?, handler.as_deref(), limit)
            .map(Reply::Executions),
        Request::DeadLetters { partitions, limit } => {
            events::dead_letters_in(&host.replicas_of(&partitions)?, limit).map(Reply::DeadLetters)
        }
        Request::QueueSizes {
            types,
            domain,
            partitions,
        } => {
            let partitions = partitions.into_iter().collect();
            Ok(Reply::Sizes(node.tasks.queue_sizes_in(
                &types,
                &domain,
                &partitions,
            )))
        }
        Request::Permits {
            task_type,
            task_ids,
        } => node
            .tasks
            .permits
            .answer(&task_type, &task_ids)
            .await
            .map(Reply::Permits),
        Request::InProgress {
            task_type,
            partitions,
            pending,
        } => node
            .tasks
            .permits
            .in_progress_in(&task_type, &partitions, &pending)
            .await
            .map(Reply::InProgress),
        request => node.membership.answer(request).await,
    }
}

/// The services peers' requests reach.
struct Serving {
    host: Arc<Host>,
    workflows: Arc<Workflows>,
    tasks: Arc<Tasks>,
    membership: Arc<Membership>,
}

/// [`Serving`], held by the transport's handler without keeping the services alive.
#[derive(Clone)]
struct WeakServing {
    host: Weak<Host>,
    workflows: Weak<Workflows>,
    tasks: Weak<Tasks>,
    membership: Weak<Membership>,
}

impl WeakServing {
    fn of(node: &Node) -> Self {
        Self {
            host: Arc::downgrade(&node.host),
            workflows: Arc::downgrade(&node.workflows),
            tasks: Arc::downgrade(&node.tasks),
            membership: Arc::downgrade(&node.membership),
        }
    }

    fn upgrade(&self) -> Option<Serving> {
        Some(Serving {
            host: self.host.upgrade()?,
            workflows: self.workflows.upgrade()?,
            tasks: self.tasks.upgrade()?,
            membership: self.membership.upgrade()?,
        })
    }
}
