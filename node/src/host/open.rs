//! Opening the host: its storage, its peer transport (cluster), the partition count (joining a
//! running cluster on a first start with `--join`), the members it knows, the groups it hosts,
//! and the watch over their failures. Each step is its own function; [`Host::open`] runs them in
//! order.

use super::{storage, Host};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::meta::{MetaMachine, MetaState};
use crate::options::Options;
use crate::partition::machine::WorkflowMachine;
use crate::partition::{Partition, PartitionEnv};
use crate::placement;
use proto::peer::{Reply, Request};
use proto::record::NodeEntry;
use proto::{NodeId, PartitionId};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Where the partition count is recorded in the data directory, so a restart cannot change it.
const PARTITIONS_KEY: &[u8] = b"baton/partitions";

/// The trees of group `name`.
pub(crate) const GROUP_TREES: [&str; 3] = ["log", "raft", "state"];

/// Partitions with a replica in this database (their trees exist).
fn stored_partitions(db: &cluster::storage::Db, partitions: u16) -> Vec<u16> {
    let names = db.tree_names();
    (0..partitions)
        .filter(|p| {
            let raft = format!("p{p}/raft");
            names.iter().any(|n| n.as_ref() == raft.as_bytes())
        })
        .collect()
}

/// How a group joins the cluster: the node's Raft router, every member's peer address, the group's
/// initial voters and the voter that forms it.
type GroupLink<'a> = (
    &'a cluster::RaftRouter,
    &'a BTreeMap<NodeId, SocketAddr>,
    Vec<NodeId>,
    Option<NodeId>,
);

/// Opens one group, alone (embedded) or with its initial voters (cluster).
pub(crate) async fn open_group(
    db: &cluster::storage::Db,
    name: String,
    node: NodeId,
    link: Option<GroupLink<'_>>,
    sm: Arc<dyn cluster::StateMachine>,
    snapshot_logs: Option<u64>,
) -> Result<cluster::Group> {
    let mut options = cluster::GroupOptions::new(name.clone(), node);
    if name == "meta" {
        // The member list is read from the meta state before the group opens (and replays).
        options.state_checkpoint_entries = 0;
    }
    if let Some(n) = snapshot_logs {
        options.snapshot_logs_since_last = n;
        options.logs_to_keep_after_snapshot = n / 2;
    }
    if let Some((router, addrs, voters, former)) = link {
        let initial: BTreeMap<NodeId, SocketAddr> = voters
            .iter()
            .filter_map(|v| addrs.get(v).map(|a| (*v, *a)))
            .collect();
        options = options.with_cluster(router.clone(), initial);
        if let Some(f) = former {
            options = options.formed_by(f);
        }
    }
    cluster::Group::open(db, options, sm)
        .await
        .map_err(|e| Error::Internal(format!("group {name}: {e}")))
}

/// What a node runs over. `Seams::default()` is production: sled in the data
/// directory, QUIC with the certificates, the system clock, OS randomness. The simulator supplies
/// its own disk, network, clock and seed.
#[derive(Default)]
pub struct Seams {
    /// Storage; `None`: sled in `Options::data_dir`.
    pub db: Option<cluster::storage::Db>,
    /// The peer link (cluster only); `None`: QUIC with mutual TLS from `ClusterOptions::certs`.
    pub transport: Option<cluster::Transport>,
    /// Wall-clock time; `None`: the system clock.
    pub clock: Option<Arc<dyn Clock>>,
    /// Seed of the node's own randomness (new workflow ids); `None`: from the OS.
    pub seed: Option<u64>,
    /// Snapshot every this many log entries instead of the default (the simulator snapshots
    /// often so that snapshot installs happen within a run).
    pub snapshot_logs: Option<u64>,
    /// What to do when storage every group needs fails (the meta group stops, a tree flush or the
    /// Raft log fails); `None`: log it and exit the process with status 70, so that its
    /// supervisor restarts it from what is durable (fail-stop: a replica that cannot write must
    /// not keep answering). A partition whose group alone stops is reopened instead (see
    /// `host::recover`).
    pub on_storage_failure: super::recover::OnNodeFailure,
}

impl Host {
    /// Opens the host over `seams`: the storage, then the peer transport (cluster), the partition
    /// count, the members known, the groups this node hosts (their partitions delivering through
    /// `env`, whose clock and partition count are set here), and the watch over their failures.
    pub(crate) async fn open(
        options: &Options,
        seams: &mut Seams,
        env: impl FnOnce(Arc<dyn Clock>, u16, MetaState) -> PartitionEnv,
    ) -> Result<Arc<Host>> {
        if options.partitions == 0 {
            return Err(Error::Invalid("--partitions must be at least 1".into()));
        }
        let binary = proto::version::Binary::this_build(options.supports);
        let version_file = seams
            .db
            .is_none()
            .then(|| crate::meta::VersionFile::in_dir(&options.data_dir));
        if let Some(file) = &version_file {
            file.check(&binary)?;
        }
        let db = open_db(options, seams.db.take())?;
        let stored = stored_partition_count(&db)?;
        let fresh = stored.is_none();
        check_cluster_version(&db, &binary, version_file.as_ref(), fresh)?;
        let (transport, router) = start_transport(options, &db, seams.transport.take())?;
        let partitions = partition_count(options, stored, transport.as_ref(), &binary).await?;
        let members = known_members(options, &db, transport.as_ref())?;
        let hosted = hosted_partitions(options, &db, fresh, partitions);
        create_trees(&db, &hosted)?;
        if fresh {
            record_partition_count(&db, partitions).await?;
        }
        let plan = GroupPlan {
            db: &db,
            options,
            router: router.as_ref(),
            initial: &initial_members(options),
            snapshot_logs: seams.snapshot_logs,
            version_file,
        };
        let (meta, groups) = plan.open_all(&hosted).await;
        let meta = meta?;
        let clock: Arc<dyn Clock> = seams.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
        let env = env(
            clock.clone(),
            partitions,
            MetaState::new(meta.state().clone()),
        );
        let parts = start_partitions(&hosted, groups, &env)?;
        let host = Arc::new(Host {
            node: options.node,
            binary,
            hold_version: options.hold_cluster_version,
            members: RwLock::new(members),
            clock,
            defs: MetaState::new(meta.state().clone()),
            meta,
            partition_count: partitions,
            partitions: RwLock::new(parts),
            env,
            hosting: tokio::sync::Mutex::new(()),
            leader_hints: Mutex::new(BTreeMap::new()),
            listen: options.cluster.as_ref().map(|c| c.listen),
            transport,
            router,
            peers_down: Mutex::new(BTreeMap::new()),
            snapshot_logs: seams.snapshot_logs,
            db,
            queued: Mutex::default(),
            recovering: Mutex::default(),
            watch: Mutex::default(),
        });
        let watch = tokio::spawn(super::recover::watch_failures(
            Arc::downgrade(&host),
            seams.on_storage_failure.take(),
        ));
        *host.watch.lock().unwrap_or_else(|e| e.into_inner()) = Some(watch);
        Ok(host)
    }
}

/// The initial members (the initial placement is computed from them only, the same on every node).
fn initial_members(options: &Options) -> Vec<NodeId> {
    match &options.cluster {
        None => vec![options.node],
        Some(c) => c.members.keys().copied().collect(),
    }
}

/// The partitions this node hosts: by the initial placement in a fresh data directory, else those
/// it has a replica of.
fn hosted_partitions(
    options: &Options,
    db: &cluster::storage::Db,
    fresh: bool,
    partitions: u16,
) -> Vec<u16> {
    if fresh {
        let initial = initial_members(options);
        (0..partitions)
            .filter(|p| initially_hosts(*p, &initial, options.node))
            .collect()
    } else {
        stored_partitions(db, partitions)
    }
}

/// Starts following the leadership of every hosted partition's group.
fn start_partitions(
    hosted: &[u16],
    groups: Vec<Result<cluster::Group>>,
    env: &PartitionEnv,
) -> Result<BTreeMap<u16, Arc<Partition>>> {
    let mut parts = BTreeMap::new();
    for (p, group) in hosted.iter().zip(groups) {
        let partition = Partition::start(PartitionId(*p), group?, env.clone());
        parts.insert(*p, Arc::new(partition));
    }
    Ok(parts)
}

/// The node's database: the seam's, or sled in the data directory.
fn open_db(options: &Options, seam: Option<cluster::storage::Db>) -> Result<cluster::storage::Db> {
    match seam {
        Some(db) => Ok(db),
        None => {
            std::fs::create_dir_all(&options.data_dir).map_err(storage)?;
            cluster::storage::Db::open_sled(&options.data_dir).map_err(storage)
        }
    }
}

/// Refuses a data directory whose meta group records a cluster version `binary` does not serve,
/// before any group opens (the meta state is written through: see `open_group`), and brings the
/// data directory's version file up to that version. A fresh data directory has no version yet:
/// it takes the cluster's as its meta replica catches up.
fn check_cluster_version(
    db: &cluster::storage::Db,
    binary: &proto::version::Binary,
    file: Option<&crate::meta::VersionFile>,
    fresh: bool,
) -> Result<()> {
    let meta_state = db.open_tree("meta/state").map_err(storage)?;
    let active = MetaState::new(meta_state).cluster_version();
    if !fresh {
        binary
            .serves(active)
            .map_err(|e| Error::Conflict(e.to_string()))?;
    }
    match file {
        Some(file) if file.read()?.is_none_or(|kept| kept < active) => file.write(active),
        _ => Ok(()),
    }
}

/// The partition count recorded when the data directory was created (`None`: a fresh one).
fn stored_partition_count(db: &cluster::storage::Db) -> Result<Option<u16>> {
    let stored = db
        .default_tree()
        .map_err(storage)?
        .get(PARTITIONS_KEY)
        .map_err(storage)?;
    Ok(match stored {
        Some(v) if v.len() == 2 => Some(u16::from_be_bytes([v[0], v[1]])),
        _ => None,
    })
}

/// Records the partition count in a fresh data directory, durably.
async fn record_partition_count(db: &cluster::storage::Db, partitions: u16) -> Result<()> {
    db.default_tree()
        .map_err(storage)?
        .insert(PARTITIONS_KEY, &partitions.to_be_bytes())
        .map_err(storage)?;
    db.flush().await.map_err(storage)
}

type Link = (Option<cluster::Transport>, Option<cluster::RaftRouter>);

/// The peer transport and Raft router of a cluster node (the seam's, or QUIC with mutual TLS from
/// the certificates, whose hellos check each peer's binary against the active version this node's
/// meta replica holds); none for the embedded node.
fn start_transport(
    options: &Options,
    db: &cluster::storage::Db,
    seam: Option<cluster::Transport>,
) -> Result<Link> {
    let Some(c) = &options.cluster else {
        return Ok((None, None));
    };
    if c.join.is_none() && !c.members.contains_key(&options.node) {
        return Err(Error::Invalid(format!(
            "--cluster must list this node ({}), or use --join to add it to a running cluster",
            options.node
        )));
    }
    let transport = match seam {
        Some(transport) => transport,
        None => {
            cluster::tls::install_crypto_provider();
            let identity = cluster::tls::Identity::load(&c.certs, options.node).map_err(|e| {
                Error::Invalid(format!("certificates in {}: {e}", c.certs.display()))
            })?;
            let peers = c
                .members
                .iter()
                .filter(|(id, _)| **id != options.node)
                .map(|(id, a)| (*id, *a));
            let defs = MetaState::new(db.open_tree("meta/state").map_err(storage)?);
            let versions =
                cluster::PeerVersions::new(options.supports, move || defs.cluster_version());
            cluster::Transport::start(
                cluster::TransportOptions::new(identity, c.listen)
                    .with_peers(peers)
                    .with_versions(versions),
            )
            .map_err(|e| Error::Internal(format!("peer transport on {}: {e}", c.listen)))?
        }
    };
    let router = cluster::RaftRouter::new(transport.clone());
    Ok((Some(transport), Some(router)))
}

/// The cluster's partition count: the one recorded here, else the one of the cluster this node
/// joins (its first start with `--join`), else the one asked for.
async fn partition_count(
    options: &Options,
    stored: Option<u16>,
    transport: Option<&cluster::Transport>,
    binary: &proto::version::Binary,
) -> Result<u16> {
    if let Some(stored) = stored {
        if stored != options.partitions && options.cluster.as_ref().is_none_or(|c| c.join.is_none())
        {
            tracing::warn!(
                stored,
                requested = options.partitions,
                "data directory was created with another partition count; keeping it"
            );
        }
        return Ok(stored);
    }
    if let (Some(c), Some(t)) = (&options.cluster, transport) {
        if let Some(seed) = c.join {
            return join(t, seed, options.node, c.listen, binary).await;
        }
    }
    Ok(options.partitions)
}

/// Every member this node knows of with its peer address: the initial members, this node, and
/// those the meta group recorded; each is made known to the transport.
fn known_members(
    options: &Options,
    db: &cluster::storage::Db,
    transport: Option<&cluster::Transport>,
) -> Result<BTreeMap<NodeId, SocketAddr>> {
    let meta_state = db.open_tree("meta/state").map_err(storage)?;
    let mut members: BTreeMap<NodeId, SocketAddr> = match &options.cluster {
        None => BTreeMap::from([(options.node, SocketAddr::from(([127, 0, 0, 1], 0)))]),
        Some(c) => {
            let mut m = c.members.clone();
            m.insert(options.node, c.listen);
            m
        }
    };
    for entry in MetaState::new(meta_state).nodes() {
        if let Ok(addr) = entry.addr.parse() {
            members.entry(entry.id).or_insert(addr);
        }
    }
    if let Some(t) = transport {
        for (id, addr) in members.iter().filter(|(id, _)| **id != options.node) {
            t.set_peer(*id, *addr);
        }
    }
    Ok(members)
}

/// Whether the initial placement puts a replica of partition `p` on `node`.
fn initially_hosts(p: u16, initial: &[NodeId], node: NodeId) -> bool {
    placement::partition_voters(PartitionId(p), initial).contains(&node)
}

/// Creates every hosted group's sled trees, one after another, before any group starts: creating
/// a tree while other groups already flush the same database is the suspect of a start-up hang
/// seen once in the cluster tests (sled 0.34 has known flush and lock deadlocks), and opening an
/// existing tree again inside `Group::open` is only a lookup.
fn create_trees(db: &cluster::storage::Db, hosted: &[u16]) -> Result<()> {
    let names = std::iter::once("meta".to_owned()).chain(hosted.iter().map(|p| format!("p{p}")));
    for name in names {
        for tree in GROUP_TREES {
            db.open_tree(format!("{name}/{tree}")).map_err(storage)?;
        }
    }
    Ok(())
}

/// What opening this node's groups needs.
struct GroupPlan<'a> {
    db: &'a cluster::storage::Db,
    options: &'a Options,
    router: Option<&'a cluster::RaftRouter>,
    initial: &'a [NodeId],
    snapshot_logs: Option<u64>,
    version_file: Option<crate::meta::VersionFile>,
}

type Opened = (Result<cluster::Group>, Vec<Result<cluster::Group>>);

impl GroupPlan<'_> {
    /// Opens the meta group and the hosted partitions' groups. Groups wait for a quorum as they
    /// open: they open all at once, not one after another. A group not in the initial placement (a
    /// replica placed here later, or the meta group of a node that joined) has no initial voters:
    /// it waits for its leader to reach it.
    async fn open_all(&self, hosted: &[u16]) -> Opened {
        let addrs = self
            .options
            .cluster
            .as_ref()
            .map(|c| c.members.clone())
            .unwrap_or_default();
        let link = |voters: Vec<NodeId>, former: Option<NodeId>| {
            self.router.map(|r| (r, &addrs, voters, former))
        };
        let node = self.options.node;
        let meta_open = open_group(
            self.db,
            "meta".into(),
            node,
            link(
                placement::meta_voters(self.initial),
                self.initial.first().copied(),
            ),
            Arc::new(MetaMachine {
                version_file: self.version_file.clone(),
                reads: self.options.supports,
            }),
            self.snapshot_logs,
        );
        let partition_opens = hosted.iter().map(|p| {
            let id = PartitionId(*p);
            let voters = if initially_hosts(*p, self.initial, node) {
                placement::partition_voters(id, self.initial)
            } else {
                Vec::new()
            };
            open_group(
                self.db,
                format!("p{p}"),
                node,
                link(voters, placement::partition_former(id, self.initial)),
                Arc::new(WorkflowMachine),
                self.snapshot_logs,
            )
        });
        tokio::join!(meta_open, futures::future::join_all(partition_opens))
    }
}

/// Longest a node keeps trying to join through its seed.
const JOIN_DEADLINE_MS: u64 = 60_000;
/// Pause between attempts to join.
const JOIN_RETRY_MS: u64 = 500;

/// Joins a running cluster through the member at `seed`: the meta leader records this node and adds
/// it to the meta group; answers the cluster's partition count. Retries until the deadline (the
/// seed may still be starting).
async fn join(
    transport: &cluster::Transport,
    seed: SocketAddr,
    node: NodeId,
    listen: SocketAddr,
    binary: &proto::version::Binary,
) -> Result<u16> {
    let entry = NodeEntry {
        id: node,
        addr: listen.to_string(),
        draining: false,
        binary: Some(binary.clone()),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(JOIN_DEADLINE_MS);
    loop {
        let request = super::encode_request(0, Request::Join(entry.clone()));
        let timeout = Duration::from_millis(proto::peer::FORWARD_TIMEOUT_MS);
        let error = match transport
            .introduce(seed, cluster::Service::Forward, request, timeout)
            .await
        {
            Ok((seed_id, bytes)) => match super::decode_reply(&bytes) {
                Ok(Reply::Joined {
                    partitions,
                    members,
                }) => {
                    for m in &members {
                        if let (true, Ok(addr)) = (m.id != node, m.addr.parse()) {
                            transport.set_peer(m.id, addr);
                        }
                    }
                    tracing::info!(%node, seed = %seed_id, partitions, members = members.len(), "joined the cluster");
                    return Ok(partitions);
                }
                Ok(other) => format!("unexpected answer {other:?}"),
                Err(e @ Error::Invalid(_)) | Err(e @ Error::Conflict(_)) => return Err(e),
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Unavailable(format!(
                "could not join the cluster through {seed}: {error}"
            )));
        }
        tracing::info!(%seed, reason = %error, "join not accepted yet; retrying");
        tokio::time::sleep(Duration::from_millis(JOIN_RETRY_MS)).await;
    }
}
