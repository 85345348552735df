//! The node's services, one owner per concern, each with its own state, its own loops and a
//! shutdown that stops them. The HTTP API (`crate::api`), the QUIC gateway (`crate::gateway`) and
//! peers' requests ([`peer`]) call them through [`Node`]. Every service works through the shared
//! [`Host`] (groups, members, routing); a service calls only services listed before it here:
//!
//! - [`Access`]: applications, their roles and access keys, and tokens;
//! - [`Secrets`]: the replicated secrets store, sealed under the operator's key;
//! - [`Definitions`]: task and workflow definitions, the schemas they enforce, and Serverless
//!   Workflow documents;
//! - [`Workflows`]: start, execute, read, operate on and search workflows (and DSL instances);
//! - [`Tasks`]: polls, task results and reads, the ready-task queues and the peers' backlogs;
//! - [`Events`]: event handlers, the event gate, the consumers of queues, dead letters, and the
//!   outbox of effects addressed outside a workflow;
//! - [`Triggers`]: webhooks and cron schedules;
//! - [`Upgrade`]: the cluster's active version, the members' binaries, and activation;
//! - [`Membership`]: members, replicas and the controller that places them (and activates);
//! - [`Admin`]: health, gauges, quarantine, digests;
//! - [`A2a`]: workflows served as the skills of an A2A agent.
//!
//! [`Stopping`] is shared by all of them: once the node's graceful shutdown has begun
//! ([`Node::begin_shutdown`]) it takes no new work while what it runs finishes.

pub mod a2a;
pub mod access;
mod admin;
pub mod backlog;
mod definitions;
mod dsl;
mod dsl_schedule;
mod events;
mod follow;
mod membership;
mod peer;
mod permits;
mod schemas;
mod secrets;
mod stopping;
mod tasks;
pub mod triggers;
mod upgrade;
pub mod wait;
mod workflows;

pub use a2a::A2a;
pub use access::Access;
pub use admin::{Admin, Health, QuarantineEntry, StoppedPartition};
pub use definitions::Definitions;
pub use dsl::{DslListing, PutDslError};
pub use events::Events;
pub use membership::{ClusterStatus, GroupSummary, Membership, NodeStatus, ReplicaStatus};
pub use secrets::Secrets;
pub use stopping::Stopping;
pub use tasks::{PollRequest, Tasks};
pub use triggers::Triggers;
pub use upgrade::{MemberVersion, Upgrade, VersionStatus};
pub use workflows::{SearchQuery, TaskSearchQuery, TaskSummary, Workflows};

use crate::error::Result;
use crate::host::{Host, Seams};
use crate::options::Options;
use crate::partition::PartitionEnv;
use crate::queue::TaskQueues;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// Most effects waiting for the node to perform them (failure-workflow starts, EVENT tasks'
/// messages).
const OUTBOX_LEN_MAX: usize = 1_024;

/// A running node: its services. Cheap to clone.
#[derive(Clone)]
pub struct Node {
    pub access: Arc<Access>,
    pub secrets: Arc<Secrets>,
    pub definitions: Arc<Definitions>,
    pub workflows: Arc<Workflows>,
    pub tasks: Arc<Tasks>,
    pub events: Arc<Events>,
    pub triggers: Arc<Triggers>,
    pub membership: Arc<Membership>,
    pub upgrade: Arc<Upgrade>,
    pub admin: Arc<Admin>,
    pub a2a: Arc<A2a>,
    /// Whether the node's graceful shutdown has begun.
    pub stopping: Stopping,
    pub(crate) host: Arc<Host>,
}

/// Opens a node with production seams (see [`open_with`]).
pub async fn open(options: &Options) -> Result<Node> {
    open_with(options, Seams::default()).await
}

/// Opens a node over `seams`: the host (storage, transport, groups), then each service in order,
/// each starting its own loops; in a cluster, peers' requests are answered from then on.
pub async fn open_with(options: &Options, mut seams: Seams) -> Result<Node> {
    let queues = Arc::new(TaskQueues::default());
    let (outbox, outbox_rx) = tokio::sync::mpsc::channel(OUTBOX_LEN_MAX);
    let env = |clock, partitions, defs: crate::meta::MetaState| PartitionEnv {
        clock,
        queues: queues.clone(),
        watches: Default::default(),
        outbox,
        partitions,
        catalog: Arc::new(crate::catalog::Catalog {
            defs,
            secrets: options.secret_files.clone(),
            lifecycle_events: options.events.lifecycle_sink.is_some(),
        }),
    };
    let host = Host::open(options, &mut seams, env).await?;
    let stopping = Stopping::default();
    let oidc = options.oidc.clone().map(crate::access::oidc::Oidc::new);
    let oidc = oidc.transpose().map_err(crate::Error::Internal)?;
    let access = Access::new(host.clone(), oidc);
    let secrets = Secrets::new(host.clone(), options.secrets_keys.clone());
    let providers = crate::events::Providers::new(options.events.clone());
    let definitions = Arc::new(Definitions::new(
        host.clone(),
        providers.clone(),
        options.secret_files.clone(),
        options.events.processes,
    ));
    let workflows = Workflows::new(host.clone(), definitions.clone(), seams.seed);
    let tasks = Tasks::start(host.clone(), queues, stopping.clone());
    let scripts = if options.events.scripts_in_process {
        crate::events::pool::ScriptPool::in_process()
    } else {
        crate::events::pool::ScriptPool::for_node(options.events.script_host.clone())
    };
    let events = Events::start(
        events::Parts {
            host: host.clone(),
            workflows: workflows.clone(),
            tasks: tasks.clone(),
            secrets: secrets.clone(),
            providers,
            scripts,
            http: crate::events::http::HttpCaller::new(&options.events.http),
            processes: crate::events::process::ProcessRunner::new(options.events.processes),
        },
        outbox_rx,
    );
    let triggers = Triggers::start(triggers::Parts {
        host: host.clone(),
        definitions: definitions.clone(),
        workflows: workflows.clone(),
        events: events.clone(),
    });
    let upgrade = Upgrade::start(host.clone());
    let membership = Membership::start(host.clone(), upgrade.clone(), stopping.clone());
    let admin = Arc::new(Admin::new(
        host.clone(),
        tasks.clone(),
        workflows.clone(),
        stopping.clone(),
    ));
    let a2a = A2a::new(definitions.clone(), workflows.clone(), options.http);
    let node = Node {
        access,
        secrets,
        definitions,
        workflows,
        tasks,
        events,
        triggers,
        membership,
        upgrade,
        admin,
        a2a,
        stopping,
        host,
    };
    peer::serve(&node);
    Ok(node)
}

impl Node {
    /// This node's id.
    pub fn id(&self) -> proto::NodeId {
        self.host.node
    }

    /// Begins a graceful shutdown (see [`Stopping`]): the node takes no new work from now on, and
    /// once this returns its membership controller has stopped, so it starts no step while the
    /// node drains or its groups stop (a step then would, say, add this node back as a voter of a
    /// partition it just left, leaving that group a voter down once it is gone). Everything else
    /// keeps running until [`Node::shutdown`].
    pub async fn begin_shutdown(&self) {
        self.stopping.begin();
        self.membership.stop_controller().await;
    }

    /// Stops the services' loops (the highest first), then the host's groups and transport; begins
    /// the shutdown first if nothing did (which stops the membership loop).
    pub async fn shutdown(&self) {
        self.begin_shutdown().await;
        // First of the rest: a script still running must not hold anything below up.
        self.events.shutdown();
        self.triggers.loops.stop();
        self.upgrade.loops.stop();
        self.access.loops.stop();
        self.tasks.loops.stop();
        self.host.shutdown().await;
    }
}

/// The loops a service started; [`Loops::stop`] aborts them (shutdown).
#[derive(Default)]
pub(crate) struct Loops(Mutex<Vec<JoinHandle<()>>>);

impl Loops {
    pub(crate) fn add(&self, handle: JoinHandle<()>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(handle);
    }

    pub(crate) fn stop(&self) {
        for l in self.take() {
            l.abort();
        }
    }

    /// Aborts the loops and waits until each has ended: none runs on past this.
    pub(crate) async fn stop_and_wait(&self) {
        for l in self.take() {
            l.abort();
            // An aborted loop ends with a cancellation; a loop that had ended answers its end.
            let _ = l.await;
        }
    }

    fn take(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
