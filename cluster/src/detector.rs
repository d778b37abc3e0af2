//! A detector's side of the fleet: partition leases, the partitions' consumers and their
//! snapshots (docs/cluster.md, "Who owns a partition").
//!
//! One task keeps the leases. Every third of `cluster.lease_seconds` it renews those it holds
//! (a renewal refused means another detector owns the partition now: it is dropped at once),
//! computes its share (the partition count over the live detectors of the node list, rounded
//! up), hands partitions over past its share to a detector below its own (snapshot first,
//! then the lease is deleted), and claims free ones (`create` succeeds for one detector
//! only): up to its share, and all of them when no other detector has room, so that a dead
//! detector's partitions move as soon as its leases lapse. A partition taken
//! starts from its snapshot in the object store and the stream position the snapshot records:
//! what was published after it is scored again, and the repeats are harmless (alert ids are
//! deterministic; the alert stream drops repeated ids).

use crate::alerts::{AlertOut, alert_queue, publish_loop};
use crate::counters::{FleetCounters, PartitionView};
use crate::partitions::{DetectorKit, Snapshot, Work, WorkSender};
use crate::sensor::SENSOR_HEADER;
use crate::streams::{detect_stream, detect_subject, leases, partition_key, state_store};
use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot};
use watchpost_proto::config::ClusterConfig;
use watchpost_proto::now_ns;

/// A partition this detector holds.
struct Held {
    revision: u64,
    since_ns: i64,
    consumer: tokio::task::JoinHandle<()>,
    progress: Arc<Progress>,
}

/// A consumer's last position, for the views.
#[derive(Default)]
struct Progress {
    sequence: std::sync::atomic::AtomicU64,
    pending: std::sync::atomic::AtomicU64,
}

/// Everything the lease keeper works with.
pub(crate) struct Keeper {
    pub(crate) config: ClusterConfig,
    pub(crate) node: String,
    pub(crate) counters: Arc<FleetCounters>,
    pub(crate) work: WorkSender,
    /// The node list: the live detectors and the partitions each held at its last heartbeat.
    pub(crate) membership: Arc<crate::Membership>,
}

/// Starts a detector: the partition thread, the alert publisher and the lease keeper.
/// Returns the partition thread, and the sender of its work (for the API's questions).
pub(crate) fn start(
    config: &ClusterConfig,
    node: &str,
    kit: DetectorKit,
    save_every: Duration,
    counters: Arc<FleetCounters>,
    membership: Arc<crate::Membership>,
) -> Result<(std::thread::JoinHandle<()>, WorkSender), crate::ClusterError> {
    crate::connect::server_addrs(config)?;
    let (work_tx, work_rx) = crossbeam_channel::bounded(1024);
    let (alerts_tx, alerts_rx) = alert_queue();
    let (snap_tx, snap_rx) = mpsc::channel(4 * config.partitions as usize);
    let thread = crate::partitions::spawn(
        kit,
        work_rx,
        alerts_tx,
        snap_tx,
        save_every,
        Arc::clone(&counters),
    )
    .map_err(|e| crate::ClusterError::Renew(format!("cannot start the partition thread: {e}")))?;
    let keeper = Keeper {
        config: config.clone(),
        node: node.to_string(),
        counters,
        work: work_tx.clone(),
        membership,
    };
    tokio::spawn(run(keeper, alerts_rx, snap_rx));
    Ok((thread, work_tx))
}

async fn run(k: Keeper, alerts: mpsc::Receiver<AlertOut>, mut snapshots: mpsc::Receiver<Snapshot>) {
    let pause = Duration::from_secs(1);
    let Some(client) = crate::connect::client_for(&k.config, &k.node, "detector").await else {
        return;
    };
    let js = jetstream::new(client);
    tokio::spawn(publish_loop(
        js.clone(),
        k.config.clone(),
        alerts,
        Arc::clone(&k.counters),
    ));
    let (bucket, state, stream) = loop {
        let opened = async {
            Ok::<_, crate::ClusterError>((
                leases(&js, &k.config).await?,
                state_store(&js, &k.config).await?,
                detect_stream(&js, &k.config).await?,
            ))
        }
        .await;
        match opened {
            Ok(o) => break o,
            Err(e) => {
                tracing::warn!("cluster: detector: {e}; again in {pause:?}");
                tokio::time::sleep(pause).await;
            }
        }
    };
    let mut held: BTreeMap<u32, Held> = BTreeMap::new();
    let tick = Duration::from_secs(k.config.lease_seconds).div_f64(3.0);
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                keep_leases(&k, &bucket, &state, &stream, &mut held).await;
                k.counters.set_partitions(views(&held));
            }
            Some(s) = snapshots.recv() => save(&k, &bucket, &state, &mut held, s).await,
        }
    }
}

/// One round of the keeper (see the module's documentation).
async fn keep_leases(
    k: &Keeper,
    bucket: &kv::Store,
    state: &object_store::ObjectStore,
    stream: &stream::Stream,
    held: &mut BTreeMap<u32, Held>,
) {
    let value = Bytes::from(k.node.clone());
    let mut lost = Vec::new();
    for (&p, h) in held.iter_mut() {
        match bucket
            .update(partition_key(p), value.clone(), h.revision)
            .await
        {
            Ok(revision) => h.revision = revision,
            Err(e) => {
                tracing::warn!("cluster: partition {p}: lease not renewed ({e}); giving it up");
                lost.push(p);
            }
        }
    }
    for p in lost {
        if let Some(h) = held.remove(&p) {
            release(k, p, h, false).await;
        }
    }
    let partitions = k.config.partitions;
    // The other live detectors, with the partitions each held at its last heartbeat.
    let others: Vec<usize> = k
        .membership
        .snapshot()
        .nodes
        .iter()
        .filter(|n| n.record.name != k.node && n.record.roles.iter().any(|r| r == "detector"))
        .map(|n| n.record.partitions.len())
        .collect();
    let share = partitions.div_ceil(others.len() as u32 + 1) as usize;
    // Past the share, hand the highest partitions over (snapshot first), but only to a
    // detector that has room below its share: one that just joined. A dead detector stays in
    // the node list, with its partitions, for three heartbeats; its partitions are free once
    // its leases lapse, and taking them must not be undone while it still seems alive.
    let room: usize = others.iter().map(|&n| share.saturating_sub(n)).sum();
    let mut handed = 0;
    while held.len() > share && handed < room {
        let Some((p, h)) = held.pop_last() else { break };
        handed += 1;
        if let Some(s) = release(k, p, h, true).await {
            save_object(state, &s, &k.counters).await;
        }
        if let Err(e) = bucket.delete(partition_key(p)).await {
            tracing::warn!("cluster: partition {p}: cannot release the lease ({e}); it ages out");
        }
    }
    // The leases of the partitions not held here, read one by one (a direct read: unlike a
    // listing, it makes no consumer on the servers). A lease gone (lapsed, released) is free.
    let mut taken = BTreeSet::new();
    for p in (0..partitions).filter(|p| !held.contains_key(p)) {
        match bucket.entry(partition_key(p)).await {
            Ok(Some(e)) if e.operation == kv::Operation::Put => {
                taken.insert(partition_key(p));
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("cluster: cannot read the leases: {e}");
                return;
            }
        }
    }
    // Start the scan at a place of this node's own, so that detectors starting together do
    // not all race for partition 0 first.
    let offset = (watchpost_proto::hash64(k.node.as_bytes()) % u64::from(partitions)) as u32;
    // Free partitions (no lease: never owned, released, or their owner's lease lapsed) are
    // claimed up to the share, and beyond it when no other detector is below its own: a
    // dead detector's partitions move after its leases lapse, whatever the node list says.
    let free = (0..partitions)
        .filter(|p| !held.contains_key(p) && !taken.contains(&partition_key(*p)))
        .count();
    let limit = if free > room { usize::MAX } else { share };
    for i in 0..partitions {
        if held.len() >= limit {
            break;
        }
        let p = (offset + i) % partitions;
        if held.contains_key(&p) || taken.contains(&partition_key(p)) {
            continue;
        }
        let Ok(revision) = bucket.create(partition_key(p), value.clone()).await else {
            continue; // another detector was first
        };
        match take(k, state, stream, p).await {
            Some((consumer, progress)) => {
                held.insert(
                    p,
                    Held {
                        revision,
                        since_ns: now_ns(),
                        consumer,
                        progress,
                    },
                );
            }
            None => {
                let _ = bucket.delete(partition_key(p)).await;
            }
        }
    }
}

/// Takes partition `p`: its snapshot to the partition thread, then its consumer from the
/// position after it.
async fn take(
    k: &Keeper,
    state: &object_store::ObjectStore,
    stream: &stream::Stream,
    p: u32,
) -> Option<(tokio::task::JoinHandle<()>, Arc<Progress>)> {
    let snapshot = match state.get(partition_key(p)).await {
        Ok(mut object) => {
            let mut bytes = Vec::new();
            match object.read_to_end(&mut bytes).await {
                Ok(_) => Some(Bytes::from(bytes)),
                Err(e) => {
                    FleetCounters::add(&k.counters.snapshot_errors, 1);
                    tracing::error!("cluster: partition {p}: cannot read its snapshot: {e}");
                    return None;
                }
            }
        }
        Err(e) if e.kind() == object_store::GetErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!("cluster: partition {p}: cannot fetch its snapshot: {e}");
            return None;
        }
    };
    let (reply, sequence) = oneshot::channel();
    let sent = hand(
        &k.work,
        Work::Take {
            partition: p,
            snapshot,
            reply,
        },
    )
    .await;
    let sequence = match (sent, sequence.await) {
        (true, Ok(s)) => s,
        _ => return None,
    };
    FleetCounters::add(&k.counters.partitions_taken, 1);
    let progress = Arc::new(Progress::default());
    progress
        .sequence
        .store(sequence, std::sync::atomic::Ordering::Relaxed);
    let consumer = tokio::spawn(consume(
        stream.clone(),
        p,
        sequence,
        k.work.clone(),
        Arc::clone(&progress),
    ));
    tracing::info!(
        "cluster: {} owns partition {p} from sequence {}",
        k.node,
        sequence + 1
    );
    Some((consumer, progress))
}

/// Gives `p` up: its consumer stops, then the partition thread drops it (its snapshot back
/// when `snapshot`, to hand it over).
async fn release(k: &Keeper, p: u32, h: Held, snapshot: bool) -> Option<Snapshot> {
    h.consumer.abort();
    let _ = h.consumer.await;
    FleetCounters::add(&k.counters.partitions_released, 1);
    let (reply, given) = oneshot::channel();
    let item = Work::Give {
        partition: p,
        snapshot,
        reply,
    };
    if !hand(&k.work, item).await {
        return None;
    }
    given.await.ok().flatten()
}

/// Hands `item` to the partition thread, waiting while its queue is full without holding a
/// thread of the runtime (the keeper and every consumer share two); false when the thread is
/// gone.
pub(crate) async fn hand(work: &WorkSender, mut item: Work) -> bool {
    loop {
        match work.try_send(item) {
            Ok(()) => return true,
            Err(crossbeam_channel::TrySendError::Full(back)) => {
                item = back;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => return false,
        }
    }
}

/// Reads partition `p` from after `sequence`, forever: an ordered consumer (the client makes
/// it again after a gap or a server's loss), made again from the last position on an error.
async fn consume(
    stream: stream::Stream,
    p: u32,
    sequence: u64,
    work: WorkSender,
    progress: Arc<Progress>,
) {
    use std::sync::atomic::Ordering::Relaxed;
    loop {
        let after = progress.sequence.load(Relaxed).max(sequence);
        let config = consumer::pull::OrderedConfig {
            filter_subject: detect_subject(p),
            deliver_policy: if after == 0 {
                consumer::DeliverPolicy::All
            } else {
                consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: after + 1,
                }
            },
            ..Default::default()
        };
        let messages = match stream.create_consumer(config).await {
            Ok(c) => c.messages().await,
            Err(e) => {
                tracing::warn!("cluster: partition {p}: cannot open its consumer: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut messages = match messages {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("cluster: partition {p}: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(message) = messages.next().await {
            let message = match message {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!("cluster: partition {p}: {e}");
                    break;
                }
            };
            let Ok(info) = message.info() else { continue };
            let (sequence, pending) = (info.stream_sequence, info.pending);
            let sensor = message
                .headers
                .as_ref()
                .and_then(|h| h.get(SENSOR_HEADER))
                .map(|v| v.as_str().to_string())
                .unwrap_or_default();
            let item = Work::Records {
                partition: p,
                sequence,
                sensor,
                payload: message.payload.clone(),
                feedback: crate::feedback::verdict_of(message.headers.as_ref()),
            };
            // The partition thread is busy: wait here, so that the stream holds the rest.
            if !hand(&work, item).await {
                return;
            }
            progress.sequence.store(sequence, Relaxed);
            progress.pending.store(pending, Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Writes a periodic snapshot, if this detector still holds the partition: the lease is
/// renewed first, by its revision (a compare-and-set), so a detector whose lease another has
/// taken since its last renewal (paused, cut off, its clock behind) cannot overwrite the new
/// owner's snapshot with an older state. The lease's revision is the fencing token; what is
/// left is the time between the renewal and the write, milliseconds, not a keeper's tick.
async fn save(
    k: &Keeper,
    bucket: &kv::Store,
    state: &object_store::ObjectStore,
    held: &mut BTreeMap<u32, Held>,
    s: Snapshot,
) {
    let Some(h) = held.get_mut(&s.partition) else {
        return;
    };
    let node = Bytes::from(k.node.clone());
    match bucket
        .update(partition_key(s.partition), node, h.revision)
        .await
    {
        Ok(revision) => {
            h.revision = revision;
            save_object(state, &s, &k.counters).await;
        }
        Err(e) => {
            FleetCounters::add(&k.counters.snapshot_errors, 1);
            tracing::warn!(
                "cluster: partition {}: snapshot at sequence {} not written, the lease could \
                 not be renewed ({e}); the keeper gives the partition up",
                s.partition,
                s.sequence
            );
        }
    }
}

async fn save_object(state: &object_store::ObjectStore, s: &Snapshot, counters: &FleetCounters) {
    let mut bytes = s.bytes.as_slice();
    match state
        .put(partition_key(s.partition).as_str(), &mut bytes)
        .await
    {
        Ok(_) => FleetCounters::add(&counters.snapshots_written, 1),
        Err(e) => {
            FleetCounters::add(&counters.snapshot_errors, 1);
            tracing::warn!(
                "cluster: partition {}: snapshot at sequence {} not written: {e}",
                s.partition,
                s.sequence
            );
        }
    }
}

fn views(held: &BTreeMap<u32, Held>) -> Vec<PartitionView> {
    use std::sync::atomic::Ordering::Relaxed;
    held.iter()
        .map(|(&p, h)| PartitionView {
            partition: p,
            sequence: h.progress.sequence.load(Relaxed),
            pending: h.progress.pending.load(Relaxed),
            since_ns: h.since_ns,
            lease_revision: h.revision,
        })
        .collect()
}
