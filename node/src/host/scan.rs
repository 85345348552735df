//! Questions for every partition: the partitions hosted here answer from their replicas, the
//! others through their leaders, a group of partitions per leader at a time.

use super::Host;
use crate::error::{Error, Result};
use crate::partition::Partition;
use proto::peer::{Reply, Request, HOPS_MAX};
use proto::{NodeId, PartitionId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl Host {
    /// What every partition answers: `local` over the partitions hosted here, and the leader of
    /// the others, asked `ask` for a group of them at a time, through `add` (which hands back a
    /// reply it does not expect).
    pub(crate) async fn ask_every_partition<T>(
        &self,
        local: impl FnOnce(&[Arc<Partition>]) -> Result<T>,
        ask: impl Fn(Vec<PartitionId>) -> Request,
        mut add: impl FnMut(&mut T, Reply) -> std::result::Result<(), Reply>,
    ) -> Result<T> {
        let mut out = local(&self.hosted())?;
        for (peer, partitions) in self.hosted_elsewhere().await? {
            let reply = self
                .ask_leader_of(&partitions, peer, ask(partitions.clone()))
                .await?;
            add(&mut out, reply)
                .map_err(|other| Error::Internal(format!("unexpected answer {other:?}")))?;
        }
        Ok(out)
    }

    /// [`Host::ask_every_partition`] for answers that are lists: the lists of every partition,
    /// one after another.
    pub(crate) async fn list_every_partition<I>(
        &self,
        local: impl FnOnce(&[Arc<Partition>]) -> Result<Vec<I>>,
        ask: impl Fn(Vec<PartitionId>) -> Request,
        unpack: impl Fn(Reply) -> std::result::Result<Vec<I>, Reply>,
    ) -> Result<Vec<I>> {
        self.ask_every_partition(local, ask, |out, reply| {
            out.extend(unpack(reply)?);
            Ok(())
        })
        .await
    }

    /// Asks `peer`, the leader of `partitions` as located, to scan them; a failure forgets where
    /// they were led, so a retry locates them again.
    pub(crate) async fn ask_leader_of(
        &self,
        partitions: &[PartitionId],
        peer: NodeId,
        ask: Request,
    ) -> Result<Reply> {
        let answer = self.forward(peer, HOPS_MAX - 1, ask).await;
        if answer.is_err() {
            partitions.iter().for_each(|p| self.forget_leader(*p));
        }
        answer
    }

    /// The partitions this node does not host, grouped by the node that leads each.
    pub(crate) async fn hosted_elsewhere(&self) -> Result<BTreeMap<NodeId, Vec<PartitionId>>> {
        let mut by_leader: BTreeMap<NodeId, Vec<PartitionId>> = BTreeMap::new();
        for p in (0..self.partition_count()).map(PartitionId) {
            if self.partition(p).is_some() {
                continue;
            }
            let leader = self.locate(p).await.ok_or_else(|| {
                Error::Unavailable(format!("partition {p} has no known leader now; retry"))
            })?;
            by_leader.entry(leader).or_default().push(p);
        }
        Ok(by_leader)
    }

    /// The partitions `led` leaves out (this node leads the ones in it), grouped by the node
    /// that leads each; a partition whose leader is this node but which `led` leaves out is
    /// becoming led here, and is left out too (its queue is not published yet).
    pub(crate) async fn led_elsewhere(
        &self,
        led: &BTreeSet<PartitionId>,
    ) -> Result<BTreeMap<NodeId, Vec<PartitionId>>> {
        let mut by_leader: BTreeMap<NodeId, Vec<PartitionId>> = BTreeMap::new();
        for p in (0..self.partition_count()).map(PartitionId) {
            if led.contains(&p) {
                continue;
            }
            let known = self.member_replica(p).and_then(|r| r.group.leader());
            let leader = match known {
                Some(l) => Some(l),
                None => self.locate(p).await,
            };
            match leader {
                Some(l) if l == self.node => {}
                Some(l) => by_leader.entry(l).or_default().push(p),
                None => {
                    return Err(Error::Unavailable(format!(
                        "partition {p} has no known leader now; retry"
                    )))
                }
            }
        }
        Ok(by_leader)
    }

    /// Every partition by the node that leads it now: those this node leads, and the others
    /// grouped by their leader. A partition becoming led here, or with no known leader, is
    /// `Unavailable`: a question that must reach every leader is asked again later.
    pub(crate) async fn every_leader(
        &self,
    ) -> Result<(Vec<PartitionId>, BTreeMap<NodeId, Vec<PartitionId>>)> {
        let led = self.led_partitions().await;
        let elsewhere = self.led_elsewhere(&led).await?;
        let placed = led.len() + elsewhere.values().map(Vec::len).sum::<usize>();
        if placed < usize::from(self.partition_count()) {
            return Err(Error::Unavailable(
                "a partition is becoming led here and has no leader to ask now; retry".into(),
            ));
        }
        Ok((led.into_iter().collect(), elsewhere))
    }

    /// The local replicas of `partitions`; all of them must be hosted here.
    pub(crate) fn replicas_of(&self, partitions: &[PartitionId]) -> Result<Vec<Arc<Partition>>> {
        partitions
            .iter()
            .map(|p| {
                self.partition(*p).ok_or_else(|| {
                    Error::Unavailable(format!("partition {p} is not hosted here any more; retry"))
                })
            })
            .collect()
    }
}
