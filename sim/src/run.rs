//! One run: builds the simulated cluster, drives it step by step through the safety phase (faults)
//! and the liveness phase (healed), samples every replica for the invariants, and reports.

use crate::counters::{Counter, Counters};
use crate::disk::Disk;
use crate::faults::{Fault, Plan, MAX_SKEW_MS};
use crate::host::{self, NodeSlot};
use crate::invariants::{Checker, Ending, GroupSample, Violation};
use crate::ms;
use crate::net::{Net, NetFaults};
use crate::upgrade;
use crate::workload::{Oracle, Workload};
use proto::record::WorkflowRecord;
use proto::NodeId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Simulated time per step.
const TICK_MS: u64 = 2;
/// The nodes' own counters the simulator reads (see `node_metrics`), in the order it reads them.
const NODE_COUNTERS: [&str; 3] = [
    node::metrics::STALE_PROPOSALS,
    node::metrics::REPLICA_FAILURES,
    node::metrics::UNDECODABLE_COMMANDS,
];
/// Raft groups snapshot this often in the simulation (production: 10,000), so snapshots are
/// built, purged and installed within a run.
const SNAPSHOT_LOGS: u64 = 200;
/// The longest election timeout (cluster::GroupOptions default), which bounds long delays.
const ELECTION_MAX_MS: u64 = 400;
/// After the faults heal, how long the cluster gets to settle (elect leaders, restart nodes) before
/// the timers must be on time again.
const SETTLE_MS: u64 = 5_000;
/// Starts made after the faults healed (that many per ten workflows), spread over this long from
/// when the cluster settled.
const LATE_STARTS_PER_TEN: usize = 1;
const LATE_START_WINDOW_MS: u64 = 10_000;
/// How often leaders and terms are sampled; digests and records less often.
const SAMPLE_GROUPS_MS: u64 = 10;
const SAMPLE_DIGESTS_MS: u64 = 200;
const SAMPLE_RECORDS_MS: u64 = 250;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub nodes: u64,
    pub partitions: u16,
    pub workflows: usize,
    pub faults: bool,
    /// Length of the safety phase (faults on), simulated milliseconds.
    pub safety_ms: u64,
    /// Most the liveness phase may take before unfinished work is a violation.
    pub liveness_ms: u64,
    /// `concurrentExecLimit` of the workload's `sim_work` tasks (none by default).
    pub concurrency_limit: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 0,
            nodes: 3,
            partitions: 2,
            workflows: 40,
            faults: true,
            safety_ms: 30_000,
            liveness_ms: 60_000,
            concurrency_limit: None,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Report {
    pub seed: u64,
    pub trace_hash: u64,
    pub sim_ms: u64,
    pub steps: u64,
    pub faults: BTreeMap<&'static str, u64>,
    pub counters: Vec<(Counter, u64)>,
    pub violations: Vec<Violation>,
    /// Workflows acknowledged, and how they ended.
    pub started: usize,
    pub outcomes: BTreeMap<String, usize>,
}

/// A fault to undo later.
enum Undo {
    Restart(NodeId),
    Heal,
}

struct Run {
    config: Config,
    rng: ChaCha8Rng,
    plan: Plan,
    net: Arc<Net>,
    slots: Vec<NodeSlot>,
    counters: Arc<Counters>,
    oracle: Arc<Oracle>,
    checker: Checker,
    trace: u64,
    faults: BTreeMap<&'static str, u64>,
    undo: Vec<(u64, Undo)>,
    down: Vec<NodeId>,
    /// Last leader seen per group, and its snapshot index per replica.
    leaders: BTreeMap<String, NodeId>,
    applied: BTreeMap<(String, NodeId), Option<u64>>,
    /// Per group, the highest index any replica was ever seen to have applied (a committed index).
    max_applied: BTreeMap<String, u64>,
    last_records: BTreeMap<String, WorkflowRecord>,
    /// Simulated milliseconds at the last completed step.
    elapsed_hint: u64,
    /// The nodes still to upgrade (an upgrade seed), see [`upgrade`], and those seen at a
    /// newer cluster version.
    upgrades: upgrade::Schedule,
    activated: std::collections::BTreeSet<NodeId>,
}

fn host_name(id: NodeId) -> String {
    format!("n{}", id.0)
}

/// Runs one seed.
pub fn run(config: &Config) -> Report {
    cluster::runtime::seed_thread(config.seed ^ 0x5eed_0f0e_7af7);
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let plan = if config.faults {
        Plan::draw(&mut rng, ELECTION_MAX_MS)
    } else {
        Plan::calm()
    };
    let counters = Arc::new(Counters::default());
    crate::node_metrics::install();
    crate::node_metrics::take_counters(NODE_COUNTERS);
    let net = Net::new(
        ChaCha8Rng::seed_from_u64(rng.gen()),
        plan.net,
        counters.clone(),
    );
    let mut sim = simulation(config, &mut rng);
    let members = members(config.nodes);
    let supports = if upgrade::upgrades(config.seed) {
        upgrade::OLD
    } else {
        proto::version::VersionRange::BUILD
    };
    let slots = add_nodes(
        &mut sim,
        &members,
        &net,
        &mut rng,
        config.partitions,
        supports,
    );
    let oracle = Arc::new(Oracle::default());
    let stop = Arc::new(AtomicBool::new(false));
    let chaos = Arc::new(AtomicBool::new(config.faults));
    let workload = Workload {
        net: net.clone(),
        nodes: members.keys().copied().collect(),
        workflows: config.workflows,
        start_window_ms: config.safety_ms * 2 / 3,
        late_starts: config.workflows * LATE_STARTS_PER_TEN / 10,
        late_window_ms: (
            config.safety_ms + SETTLE_MS,
            config.safety_ms + SETTLE_MS + LATE_START_WINDOW_MS,
        ),
        oracle: oracle.clone(),
        counters: counters.clone(),
        rng: Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(rng.gen()))),
        stop: stop.clone(),
        chaos: chaos.clone(),
        concurrency_limit: config.concurrency_limit,
        upgrades: upgrade::upgrades(config.seed),
    };
    sim.client("clients", workload.run());
    let run = Run::new(config, rng, plan, net, slots, counters, oracle);
    run.drive(sim, &stop, &chaos)
}

/// The turmoil simulation: long enough for both phases (plus slack), seeded from `rng`.
fn simulation(config: &Config, rng: &mut ChaCha8Rng) -> turmoil::Sim<'static> {
    let total_ms = config.safety_ms + config.liveness_ms;
    turmoil::Builder::new()
        .simulation_duration(Duration::from_millis(total_ms + 60_000))
        .tick_duration(Duration::from_millis(TICK_MS))
        .epoch(std::time::UNIX_EPOCH + Duration::from_millis(crate::EPOCH_MS))
        .rng_seed(rng.gen())
        .enable_random_order()
        .build()
}

/// The cluster's members: nodes 1..=`nodes` at 10.0.0.<id>:7000.
fn members(nodes: u64) -> BTreeMap<NodeId, SocketAddr> {
    (1..=nodes)
        .map(|i| {
            let octet = u8::try_from(i).unwrap_or(u8::MAX);
            (NodeId(i), SocketAddr::from(([10, 0, 0, octet], 7000)))
        })
        .collect()
}

/// Adds a host per member running the node software, each with its own simulated disk; returns
/// their slots in member order.
fn add_nodes(
    sim: &mut turmoil::Sim<'static>,
    members: &BTreeMap<NodeId, SocketAddr>,
    net: &Arc<Net>,
    rng: &mut ChaCha8Rng,
    partitions: u16,
    supports: proto::version::VersionRange,
) -> Vec<NodeSlot> {
    let mut slots = Vec::new();
    for (id, addr) in members {
        net.register_addr(*id, *addr);
        let slot = NodeSlot {
            id: *id,
            addr: *addr,
            disk: Disk::new((500, 12_000), rng.gen()),
            skew_ms: Arc::new(AtomicI64::new(0)),
            running: Arc::new(Mutex::new(None)),
            seed: rng.gen(),
            incarnation: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicBool::new(false)),
            supports: Arc::new(Mutex::new(supports)),
        };
        let options = host::options(*id, *addr, members, partitions);
        let (s, n) = (slot.clone(), net.clone());
        sim.host(host_name(*id), move || {
            host::software(s.clone(), options.clone(), n.clone(), SNAPSHOT_LOGS)
        });
        slots.push(slot);
    }
    slots
}

/// The message of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Where the run is: whether the faults healed, and when the next fault is due.
struct Phase {
    healed: bool,
    next_fault: u64,
}

impl Run {
    fn new(
        config: &Config,
        rng: ChaCha8Rng,
        plan: Plan,
        net: Arc<Net>,
        slots: Vec<NodeSlot>,
        counters: Arc<Counters>,
        oracle: Arc<Oracle>,
    ) -> Run {
        let ids: Vec<NodeId> = slots.iter().map(|s| s.id).collect();
        let upgrades = match upgrade::upgrades(config.seed) {
            true => upgrade::Schedule::spread(&ids, config.safety_ms),
            false => upgrade::Schedule::default(),
        };
        Run {
            config: config.clone(),
            rng,
            plan,
            net,
            slots,
            counters,
            oracle,
            checker: Checker::new(config.concurrency_limit),
            trace: proto::hash::FNV_OFFSET,
            faults: BTreeMap::new(),
            undo: Vec::new(),
            down: Vec::new(),
            leaders: BTreeMap::new(),
            applied: BTreeMap::new(),
            max_applied: BTreeMap::new(),
            last_records: BTreeMap::new(),
            elapsed_hint: 0,
            upgrades,
            activated: Default::default(),
        }
    }

    /// Steps the simulation through both phases until the work is done after healing, the time
    /// is up, or a node panics, then reports. Sets `stop` at the end and clears `chaos` on healing.
    fn drive(
        mut self,
        mut sim: turmoil::Sim<'static>,
        stop: &AtomicBool,
        chaos: &AtomicBool,
    ) -> Report {
        let total_ms = self.config.safety_ms + self.config.liveness_ms;
        let mut phase = Phase {
            healed: false,
            next_fault: self.next_fault_gap(),
        };
        let mut steps = 0u64;
        let mut failure = None;
        loop {
            // A panic in any node (openraft's own safety assertions included) is a finding, not a
            // crash of the simulator: it is reported like a violation and the run ends there.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.step())) {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    failure = Some(e.to_string());
                    break;
                }
                Err(panic) => {
                    let message = panic_message(&*panic);
                    self.checker
                        .report_now("no node panics", self.elapsed_hint, message);
                    // The runtimes may be mid-borrow after the unwind: do not run their destructors.
                    std::mem::forget(sim);
                    stop.store(true, Ordering::Relaxed);
                    let at = self.elapsed_hint;
                    return self.finish(at, steps);
                }
            }
            steps += 1;
            let now = u64::try_from(sim.elapsed().as_millis()).unwrap_or(u64::MAX);
            if self.after_step(&mut sim, now, &mut phase, chaos) || now >= total_ms {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let now = u64::try_from(sim.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(e) = failure {
            self.checker.report_now("the simulation runs", now, e);
        }
        self.finish(now, steps)
    }

    /// What follows each step at simulated time `now`: undo and inject faults, heal at the end of
    /// the safety phase, sample the replicas. True once the healed cluster finished its work.
    fn after_step(
        &mut self,
        sim: &mut turmoil::Sim<'static>,
        now: u64,
        phase: &mut Phase,
        chaos: &AtomicBool,
    ) -> bool {
        self.elapsed_hint = now;
        for (inv, detail) in self.net.take_violations() {
            self.checker.report_now(inv, now, detail);
        }
        self.undo_due(sim, now);
        self.restart_failed(sim, now);
        self.upgrade_due(sim, now);
        if !phase.healed && now >= self.config.safety_ms {
            self.heal_all(sim, now);
            chaos.store(false, Ordering::Relaxed);
            phase.healed = true;
        }
        if !phase.healed && now >= phase.next_fault {
            self.inject(sim, now);
            phase.next_fault = now + self.next_fault_gap();
        }
        if now.is_multiple_of(SAMPLE_GROUPS_MS) {
            self.sample_groups(now, now.is_multiple_of(SAMPLE_DIGESTS_MS));
        }
        if now.is_multiple_of(SAMPLE_RECORDS_MS) {
            self.sample_records(now);
            if phase.healed && self.finished() {
                return true;
            }
        }
        false
    }

    fn fold(&mut self, bytes: &[u8]) {
        self.trace = proto::hash::fnv1a(self.trace, bytes);
        self.trace = proto::hash::fnv1a(self.trace, &[0xff]);
    }

    fn next_fault_gap(&mut self) -> u64 {
        if self.plan.fault_gap_ms == 0 {
            return u64::MAX / 2;
        }
        self.rng
            .gen_range(self.plan.fault_gap_ms / 2..=self.plan.fault_gap_ms * 3 / 2)
    }

    fn record_fault(&mut self, now: u64, name: &'static str, detail: String) {
        *self.faults.entry(name).or_default() += 1;
        self.fold(format!("{now} fault {name} {detail}").as_bytes());
        tracing::debug!(at_ms = now, fault = name, %detail, "fault injected");
    }

    fn up(&self) -> Vec<NodeId> {
        self.slots
            .iter()
            .map(|s| s.id)
            .filter(|id| !self.down.contains(id))
            .collect()
    }

    fn pick_up(&mut self) -> Option<NodeId> {
        let up = self.up();
        if up.is_empty() {
            return None;
        }
        Some(up[self.rng.gen_range(0..up.len())])
    }

    fn slot(&self, id: NodeId) -> Option<&NodeSlot> {
        self.slots.iter().find(|s| s.id == id)
    }

    fn inject(&mut self, sim: &mut turmoil::Sim<'_>, now: u64) {
        let Some(fault) = self.plan.pick(&mut self.rng) else {
            return;
        };
        // Keep a majority up: crashes and pauses take at most a minority at once.
        let minority = (self.slots.len() - 1) / 2;
        match fault {
            Fault::Crash if self.down.len() < minority => {
                let Some(id) = self.pick_up() else { return };
                self.crash(sim, id, now);
                let back = now + self.rng.gen_range(300..5_000);
                self.undo.push((back, Undo::Restart(id)));
            }
            Fault::Pause if self.down.len() < minority => {
                let Some(id) = self.pick_up() else { return };
                let until = now + self.rng.gen_range(2 * ELECTION_MAX_MS..3_000);
                self.net.pause(id, until);
                self.counters.bump(Counter::NodePaused);
                // The pause ends by itself: the network holds the node's messages until then.
                self.record_fault(now, "pause", format!("{id} until {until}"));
            }
            Fault::Cut | Fault::OneWayCut => {
                let ids: Vec<NodeId> = self.slots.iter().map(|s| s.id).collect();
                let a = ids[self.rng.gen_range(0..ids.len())];
                let b = ids[self.rng.gen_range(0..ids.len())];
                if a == b {
                    return;
                }
                self.net.cut(a, b);
                if fault == Fault::Cut {
                    self.net.cut(b, a);
                }
                self.counters.bump(Counter::LinkCut);
                let kind = if fault == Fault::Cut {
                    "cut"
                } else {
                    "one-way cut"
                };
                self.record_fault(now, kind, format!("{a} -> {b}"));
                let heal = now + self.rng.gen_range(500..4_000);
                self.undo.push((heal, Undo::Heal));
            }
            Fault::StorageError => {
                let Some(id) = self.pick_up() else { return };
                if let Some(slot) = self.slot(id) {
                    slot.disk.fail_next_write();
                }
                self.counters.bump(Counter::StorageWriteError);
                self.record_fault(now, "storage error", format!("{id} next write fails"));
            }
            Fault::Clock => {
                let Some(id) = self.pick_up() else { return };
                let skew = self.rng.gen_range(-MAX_SKEW_MS..=MAX_SKEW_MS);
                if let Some(slot) = self.slot(id) {
                    slot.skew_ms.store(skew, Ordering::Relaxed);
                }
                self.counters.bump(Counter::ClockJump);
                self.record_fault(now, "clock", format!("{id} skew {skew} ms"));
            }
            _ => {}
        }
    }

    /// Replaces the next node due for its upgrade: its binary serves the new range from its next
    /// start; one that is up is stopped and started again later, if a majority stays up.
    fn upgrade_due(&mut self, sim: &mut turmoil::Sim<'_>, now: u64) {
        let Some(id) = self.upgrades.next_due(now) else {
            return;
        };
        let minority = (self.slots.len() - 1) / 2;
        let up = !self.down.contains(&id);
        if up && self.down.len() >= minority {
            return;
        }
        if let Some(slot) = self.slot(id) {
            *slot.supports.lock().unwrap_or_else(|e| e.into_inner()) = upgrade::NEW;
        }
        self.upgrades.done(id);
        self.record_fault(now, "upgrade", format!("{id}"));
        if up {
            self.crash(sim, id, now);
            let back = now + self.rng.gen_range(200..2_000);
            self.undo.push((back, Undo::Restart(id)));
        }
    }

    fn crash(&mut self, sim: &mut turmoil::Sim<'_>, id: NodeId, now: u64) {
        // What the leaders counted as replicated on this node, before it goes.
        let mut matched: BTreeMap<String, u64> = BTreeMap::new();
        for slot in &self.slots {
            let Some(node) = slot.node() else { continue };
            for g in node.admin.groups() {
                if g.role != "Leader" {
                    continue;
                }
                if let Some(Some(index)) = g.matched.get(&id) {
                    let e = matched.entry(g.name.clone()).or_default();
                    *e = (*e).max(*index);
                }
            }
        }
        sim.crash(host_name(id));
        self.net.detach(id);
        let Some(slot) = self.slot(id).cloned() else {
            return;
        };
        *slot.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let lost = slot.disk.crash(&mut self.rng);
        if lost > 0 {
            self.counters.bump(Counter::UnflushedWritesLost);
        }
        self.counters.bump(Counter::NodeCrashed);
        let durable = matched
            .keys()
            .map(|g| (g.clone(), slot.disk.recoverable_index(g)))
            .collect();
        self.checker.at_crash(now, id, &matched, &durable);
        self.down.push(id);
        self.record_fault(now, "crash", format!("{id} lost {lost} unflushed writes"));
    }

    /// Nodes that stopped themselves on a storage failure go down and come back, as a process
    /// supervisor would restart them.
    fn restart_failed(&mut self, sim: &mut turmoil::Sim<'_>, now: u64) {
        let failed: Vec<NodeId> = self
            .slots
            .iter()
            .filter(|s| s.failed.swap(false, Ordering::Relaxed))
            .map(|s| s.id)
            .collect();
        for id in failed {
            if self.down.contains(&id) {
                continue;
            }
            self.crash(sim, id, now);
            let back = now + self.rng.gen_range(200..2_000);
            self.undo.push((back, Undo::Restart(id)));
        }
    }

    fn restart(&mut self, sim: &mut turmoil::Sim<'_>, id: NodeId, now: u64) {
        if let Some(i) = self.down.iter().position(|d| *d == id) {
            self.down.remove(i);
            sim.bounce(host_name(id));
            self.record_fault(now, "restart", format!("{id}"));
        }
    }

    fn undo_due(&mut self, sim: &mut turmoil::Sim<'_>, now: u64) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.undo)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.undo = later;
        for (_, undo) in due {
            match undo {
                Undo::Restart(id) => self.restart(sim, id, now),
                // Cuts heal all at once, when the last one is due.
                Undo::Heal => {
                    if !self.undo.iter().any(|(_, u)| matches!(u, Undo::Heal)) {
                        self.net.heal();
                    }
                }
            }
        }
    }

    /// The end of the safety phase: every fault heals.
    fn heal_all(&mut self, sim: &mut turmoil::Sim<'_>, now: u64) {
        self.net.set_faults(NetFaults::calm());
        self.net.heal();
        self.net.resume_all();
        for slot in &self.slots {
            slot.skew_ms.store(0, Ordering::Relaxed);
        }
        for id in self.down.clone() {
            self.restart(sim, id, now);
        }
        self.undo.clear();
        self.fold(format!("{now} healed").as_bytes());
    }

    fn sample_groups(&mut self, now: u64, digests: bool) {
        let mut samples = Vec::new();
        for slot in &self.slots {
            let Some(node) = slot.node() else { continue };
            if digests {
                let (active, serves) = node.upgrade.served();
                self.checker.observe_version(now, slot.id, active, serves);
                let upgraded = upgrade::upgrades(self.config.seed);
                if upgraded
                    && active > proto::version::ClusterVersion::FIRST
                    && self.activated.insert(slot.id)
                {
                    self.counters.bump(Counter::VersionActivated);
                }
            }
            let digest_of: BTreeMap<String, (Option<u64>, u64)> = if digests {
                node.admin
                    .digests()
                    .into_iter()
                    .map(|(g, applied, d)| (g, (applied, d)))
                    .collect()
            } else {
                BTreeMap::new()
            };
            for g in node.admin.groups() {
                if g.stopped.is_some() {
                    continue;
                }
                let is_leader = g.role == "Leader";
                let (applied, digest) = match digest_of.get(&g.name) {
                    Some((a, d)) => (*a, Some(*d)),
                    None => (g.last_applied_index, None),
                };
                // A replica whose applied index jumped past what it had, to a snapshot, installed
                // that snapshot from its leader.
                let key = (g.name.clone(), slot.id);
                if let (Some(Some(before)), Some(snap)) = (self.applied.get(&key), g.snapshot_index)
                {
                    if !is_leader && snap > *before && g.purged_index.is_some() {
                        self.counters.bump(Counter::SnapshotInstalled);
                    }
                }
                self.applied.insert(key, g.last_applied_index);
                if let Some(a) = g.last_applied_index {
                    let max = self.max_applied.entry(g.name.clone()).or_default();
                    *max = (*max).max(a);
                }
                samples.push(GroupSample {
                    group: g.name.clone(),
                    node: slot.id,
                    term: g.term,
                    is_leader,
                    applied,
                    digest,
                });
            }
        }
        self.checker.observe_groups(now, &samples);
        for s in samples.iter().filter(|s| s.is_leader) {
            let previous = self.leaders.insert(s.group.clone(), s.node);
            if previous.is_some_and(|p| p != s.node) {
                self.leader_changed(&s.group, now);
            }
        }
    }

    /// Counts the interesting things a leader change interrupted.
    fn leader_changed(&mut self, group: &str, now: u64) {
        let Some(p) = group.strip_prefix('p').and_then(|p| p.parse::<u16>().ok()) else {
            return;
        };
        let in_partition = |id: &str| {
            proto::WorkflowId::parse(id)
                .map(|w| w.partition(self.config.partitions).0 == p)
                .unwrap_or(false)
        };
        let in_flight = self
            .oracle
            .facts()
            .in_flight
            .values()
            .any(|w| in_partition(w));
        if in_flight {
            self.counters.bump(Counter::LeaderChangeTaskInFlight);
        }
        let wall = crate::EPOCH_MS + now;
        let due = self.last_records.values().any(|r| {
            in_partition(r.workflow.workflow_id.as_str())
                && r.workflow.tasks.iter().any(|t| {
                    t.status == proto::model::TaskStatus::InProgress
                        && t.response_timeout_seconds > 0
                        && t.update_time + ms(t.response_timeout_seconds * 1_000) <= ms(wall)
                })
        });
        if due {
            self.counters.bump(Counter::TimerDueDuringFailover);
        }
    }

    /// Every workflow record, read from each partition's current leader, provided that leader has
    /// applied everything any replica was ever seen to apply (a leader just elected may not have
    /// applied the last committed entries yet; reading it then would look like time going back).
    fn leader_records(&self) -> BTreeMap<String, WorkflowRecord> {
        let mut out = BTreeMap::new();
        for p in 0..self.config.partitions {
            let group = format!("p{p}");
            let floor = self.max_applied.get(&group).copied().unwrap_or(0);
            let leader = self.slots.iter().filter_map(|s| s.node()).find(|n| {
                n.admin.groups().iter().any(|g| {
                    g.name == group
                        && g.role == "Leader"
                        && g.stopped.is_none()
                        && g.last_applied_index.unwrap_or(0) >= floor
                })
            });
            let Some(node) = leader else { continue };
            for r in node.admin.records(p) {
                out.insert(r.workflow.workflow_id.as_str().to_owned(), r);
            }
        }
        out
    }

    fn sample_records(&mut self, now: u64) {
        let records = self.leader_records();
        self.checker.observe_records(now, &records);
        self.last_records = records;
    }

    /// The liveness phase is over when every start is settled, every acknowledged workflow is
    /// terminal (with the workflow its EVENT task's message started), and every group's replicas
    /// agree.
    fn finished(&self) -> bool {
        let facts = self.oracle.facts();
        if facts.started.len() as u64 + facts.abandoned < self.config.workflows as u64 {
            return false;
        }
        let all_done = facts.started.values().all(|id| {
            self.last_records.get(id).is_some_and(|r| {
                r.workflow.status.is_terminal()
                    && (r.workflow.workflow_name != crate::workload::EVENT_WORKFLOW
                        || self.event_child_done(id))
            })
        });
        drop(facts);
        all_done && self.converged()
    }

    /// Whether the workflow an EVENT_WORKFLOW run's message started exists and is terminal.
    fn event_child_done(&self, id: &str) -> bool {
        let key = crate::workload::event_child_key(id);
        self.last_records.values().any(|r| {
            r.workflow.correlation_id.as_deref() == Some(key.as_str())
                && r.workflow.status.is_terminal()
        })
    }

    /// Every partition is back to its full replication (as many voters as the controller keeps,
    /// no learner left over), and every group's replicas (as many as its leader's membership
    /// names) have the same applied index and state.
    fn converged(&self) -> bool {
        let full = node::placement::REPLICATION_FACTOR.min(self.config.nodes as usize);
        let mut per_group: BTreeMap<String, Vec<(Option<u64>, u64)>> = BTreeMap::new();
        let mut members: BTreeMap<String, usize> = BTreeMap::new();
        for slot in &self.slots {
            let Some(node) = slot.node() else {
                return false;
            };
            for (g, applied, digest) in node.admin.digests() {
                per_group.entry(g).or_default().push((applied, digest));
            }
            for g in node
                .admin
                .groups()
                .into_iter()
                .filter(|g| g.role == "Leader")
            {
                if g.name != "meta" && (g.voters.len() != full || !g.learners.is_empty()) {
                    return false;
                }
                members.insert(g.name.clone(), g.voters.len() + g.learners.len());
            }
        }
        per_group.iter().all(|(g, v)| {
            members.get(g).is_some_and(|n| v.len() == *n) && v.windows(2).all(|w| w[0] == w[1])
        })
    }

    /// The nodes' wall clock once the healed cluster has settled.
    fn settled_wall_ms(&self) -> u64 {
        crate::EPOCH_MS + self.config.safety_ms + SETTLE_MS
    }

    fn finish(mut self, now: u64, steps: u64) -> Report {
        let records = self.leader_records();
        self.check_ending(&records, now);
        if !self.converged() {
            self.report_divergence(now);
        }
        let late = self.late_results_absorbed(&records);
        self.counters.add(Counter::LateResultAbsorbed, late);
        let outcomes = self.count_outcomes(&records);
        let started = self.fold_ending(&records, now, steps);
        let [stale, reopened, undecodable] = crate::node_metrics::take_counters(NODE_COUNTERS);
        self.checker.observe_undecodable(now, undecodable);
        self.counters.add(Counter::StaleProposal, stale);
        self.counters.add(Counter::ReplicaReopened, reopened);
        Report {
            seed: self.config.seed,
            trace_hash: self.trace,
            sim_ms: now,
            steps,
            faults: self.faults,
            counters: self.counters.snapshot(),
            violations: self.checker.violations().to_vec(),
            started,
            outcomes,
        }
    }

    /// The invariants checked once, on the final records.
    fn check_ending(&mut self, records: &BTreeMap<String, WorkflowRecord>, now: u64) {
        let facts = self.oracle.facts();
        let end = Ending {
            records,
            facts: &facts,
            skew_ms: MAX_SKEW_MS.unsigned_abs(),
            concurrency_limit: self.config.concurrency_limit,
            now_ms: now,
            settled_wall_ms: self.settled_wall_ms(),
            now_wall_ms: crate::EPOCH_MS + now,
        };
        self.checker.finish(&end);
    }

    /// Reports that the replicas still differ, with every replica's view of every group.
    fn report_divergence(&mut self, now: u64) {
        let mut detail = Vec::new();
        for slot in &self.slots {
            let Some(node) = slot.node() else {
                detail.push(format!("{} down", slot.id));
                continue;
            };
            let digests: BTreeMap<String, u64> = node
                .admin
                .digests()
                .into_iter()
                .map(|(g, _, d)| (g, d))
                .collect();
            for g in node.admin.groups() {
                detail.push(format!(
                    "{}/{} {} t{} applied {:?} log {:?} digest {:016x} voters {:?} learners {:?}",
                    slot.id,
                    g.name,
                    g.role,
                    g.term,
                    g.last_applied_index,
                    g.last_log_index,
                    digests.get(&g.name).copied().unwrap_or_default(),
                    g.voters,
                    g.learners
                ));
            }
        }
        self.checker.report_now(
            "replicas converge once faults heal",
            now,
            format!(
                "replicas still differ at the end of the liveness phase: {}",
                detail.join("; ")
            ),
        );
    }

    /// Late results that a terminal task absorbed: reported with a status the task does not have.
    fn late_results_absorbed(&self, records: &BTreeMap<String, WorkflowRecord>) -> u64 {
        let facts = self.oracle.facts();
        facts
            .results
            .iter()
            .filter(|(task, wf, status, _)| {
                records.get(wf).is_some_and(|r| {
                    r.workflow.tasks.iter().any(|t| {
                        t.task_id.as_str() == task
                            && t.status != proto::model::TaskStatus::from(*status)
                    })
                })
            })
            .count() as u64
    }

    /// How many workflows ended in each status; counts the retried, timed out, joined and
    /// republished tasks on the way.
    fn count_outcomes(
        &mut self,
        records: &BTreeMap<String, WorkflowRecord>,
    ) -> BTreeMap<String, usize> {
        let mut outcomes = BTreeMap::new();
        for r in records.values() {
            *outcomes
                .entry(r.workflow.status.as_str().to_owned())
                .or_insert(0) += 1;
            for t in &r.workflow.tasks {
                if t.retried {
                    self.counters.bump(Counter::TaskRetried);
                }
                if t.status == proto::model::TaskStatus::TimedOut {
                    self.counters.bump(Counter::TaskTimedOut);
                    if t.start_time >= ms(self.settled_wall_ms()) {
                        self.counters.bump(Counter::TimedOutAfterHealing);
                    }
                }
                if t.task_type == proto::model::task_type::JOIN
                    && t.status == proto::model::TaskStatus::Completed
                {
                    self.counters.bump(Counter::JoinCompleted);
                }
                if t.task_type == proto::model::task_type::EVENT && t.poll_count > 0 {
                    self.counters.bump(Counter::EventPublishedAgain);
                }
                if t.task_type == engine::dsl::run::LISTEN_TASK_TYPE
                    && t.status == proto::model::TaskStatus::Completed
                {
                    self.counters.bump(Counter::ListenConsumed);
                }
            }
        }
        outcomes
    }

    /// Folds into the trace what was acknowledged, the final records and every replica's digest;
    /// returns how many workflows were acknowledged.
    fn fold_ending(
        &mut self,
        records: &BTreeMap<String, WorkflowRecord>,
        now: u64,
        steps: u64,
    ) -> usize {
        let (started, lines) = {
            let facts = self.oracle.facts();
            let mut lines = Vec::new();
            for (k, id) in &facts.started {
                lines.push(format!("started {k} {id}"));
            }
            for (task, wf, status, at) in &facts.results {
                lines.push(format!("result {task} {wf} {status:?} {at}"));
            }
            lines.push(format!("abandoned {}", facts.abandoned));
            (facts.started.len(), lines)
        };
        for line in lines {
            self.fold(line.as_bytes());
        }
        for (id, r) in records {
            let json = serde_json::to_vec(r).unwrap_or_default();
            self.fold(id.as_bytes());
            self.fold(&json);
        }
        for slot in self.slots.clone() {
            if let Some(node) = slot.node() {
                for (g, applied, d) in node.admin.digests() {
                    self.fold(format!("{} {g} {applied:?} {d:016x}", slot.id).as_bytes());
                }
            }
        }
        self.fold(format!("end {now} {steps}").as_bytes());
        started
    }
}
