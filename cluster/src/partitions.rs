//! A detector's partitions: one [`Detector`] per partition owned, on one thread of its own
//! (detection is CPU work, kept off the runtime), fed records by the partitions' consumers.
//!
//! Each partition's detector holds only what hashes to it (entities, sources, correlation
//! groups), so it moves whole: its snapshot, written at the save cadence with the stream
//! position it reflects, is what the next owner starts from.

use crate::alerts::{AlertOut, FleetSink};
use crate::counters::FleetCounters;
use bytes::Bytes;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use watchpost_detect::{
    ContentNumbers, DetectBatch, Detector, DetectorParams, IndicatorBook, KillChain, RuleBook,
};

/// How often repeats folded into open alerts are sent (as a stand-alone node writes them).
const ALERT_FLUSH: Duration = Duration::from_secs(1);

/// The stage B worker number the partition thread writes its rule fires under: each writer
/// of the per-hour counters owns its keys (`Store::add_rule_fires`), and a node's own stage
/// B workers are numbered from 0.
const PARTITIONS_WORKER: u8 = u8::MAX;

/// The series the partitions' detectors hand out, gathered once per flush (reused).
#[derive(Default)]
struct Series {
    minutes: Vec<watchpost_proto::MinutePoint>,
    risk: Vec<watchpost_proto::RiskPoint>,
    fires: Vec<watchpost_proto::RuleFires>,
}

impl Series {
    /// Takes what `d` has gathered since the last call. A detector keeps its minutes, hourly
    /// risk and rule fires until they are taken: not taking them grows it without bound.
    fn take(&mut self, d: &mut Detector) {
        d.take_minutes(&mut self.minutes);
        d.take_risk_points(&mut self.risk);
        d.take_rule_fires(&mut self.fires);
    }

    /// Writes what was taken to the node's store, and empties it.
    fn write(&mut self, store: &watchpost_store::Store, counters: &FleetCounters) {
        if let Err(e) = store.put_series(&self.minutes, &self.risk) {
            FleetCounters::add(&counters.series_errors, 1);
            tracing::warn!("cluster: cannot store the partitions' series: {e}");
        }
        if let Err(e) = store.add_rule_fires(PARTITIONS_WORKER, &self.fires) {
            FleetCounters::add(&counters.series_errors, 1);
            tracing::warn!("cluster: cannot store the partitions' rule fires: {e}");
        }
        self.minutes.clear();
        self.risk.clear();
        self.fires.clear();
    }
}

/// What the partition thread is asked to do.
pub(crate) enum Work {
    /// Start scoring `partition` from `snapshot` (none: from nothing); the reply is the stream
    /// sequence the snapshot reflects (0: none), the consumer starts after it.
    Take {
        partition: u32,
        snapshot: Option<Bytes>,
        reply: oneshot::Sender<u64>,
    },
    /// One message of a partition's records, or an analyst's verdict on an alert (the alert
    /// as JSON, `crate::feedback`).
    Records {
        partition: u32,
        sequence: u64,
        sensor: String,
        payload: Bytes,
        feedback: Option<watchpost_proto::Verdict>,
    },
    /// The live UEBA baseline of the entity with name hash `entity`, if `partition` (the one
    /// its records go to) is owned here and knows it.
    Baseline {
        partition: u32,
        entity: u64,
        reply: oneshot::Sender<Option<watchpost_dataplane::BaselineView>>,
    },
    /// Give `partition` up; the reply is its snapshot (to hand it over) when `snapshot`.
    Give {
        partition: u32,
        snapshot: bool,
        reply: oneshot::Sender<Option<Snapshot>>,
    },
}

/// A partition's state as bytes: the stream sequence it reflects, then the detector's
/// snapshot ([`Detector::snapshot_into`]).
pub(crate) struct Snapshot {
    pub(crate) partition: u32,
    pub(crate) sequence: u64,
    pub(crate) bytes: Vec<u8>,
}

/// What every partition's detector is made with: the node's settings (their bounds shared
/// out between partitions, [`DetectorParams::for_partitions`]) and its live content.
pub struct DetectorKit {
    /// The settings of one partition's detector.
    pub params: DetectorParams,
    /// The live Sigma catalogue.
    pub catalog: Arc<dyn RuleBook>,
    /// The live indicators.
    pub iocs: Arc<dyn IndicatorBook>,
    /// The node's kill-chain tracker.
    pub killchain: Arc<Mutex<KillChain>>,
    /// The node's board of who uses each host (the hosts of its own partitions, see
    /// [`watchpost_detect::PeerBoard`]).
    pub peers: Arc<watchpost_detect::PeerBoard>,
    /// The operators' exceptions (shared from the console), and where their hits are kept.
    pub exceptions: Arc<watchpost_dataplane::ExceptionBook>,
    /// The node's store: the partitions' series (sources' minutes, entities' hourly risk, rule
    /// fires) are written there, as a node alone's stage B writes its own, and served from
    /// there (a console asks the partition's owner for an entity's risk history).
    pub store: Arc<watchpost_store::Store>,
}

impl DetectorKit {
    fn detector(&self) -> Detector {
        let mut d = Detector::new(self.params.clone());
        d.set_catalog(Some(Arc::clone(&self.catalog)));
        d.set_iocs(Some(Arc::clone(&self.iocs)));
        d.set_killchain(Arc::clone(&self.killchain));
        d.set_peer_board(Arc::clone(&self.peers));
        d.set_exceptions(self.exceptions.current().1);
        d
    }
}

struct Owned {
    detector: Detector,
    sequence: u64,
}

/// Starts the partition thread; it ends when every sender of `work` is gone.
pub(crate) fn spawn(
    kit: DetectorKit,
    work: Receiver<Work>,
    alerts: mpsc::Sender<AlertOut>,
    snapshots: mpsc::Sender<Snapshot>,
    save_every: Duration,
    counters: Arc<FleetCounters>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("wp-partitions".into())
        .spawn(move || run(&kit, &work, &alerts, &snapshots, save_every, &counters))
}

fn run(
    kit: &DetectorKit,
    work: &Receiver<Work>,
    alerts: &mpsc::Sender<AlertOut>,
    snapshots: &mpsc::Sender<Snapshot>,
    save_every: Duration,
    counters: &FleetCounters,
) {
    let mut owned: BTreeMap<u32, Owned> = BTreeMap::new();
    let mut batch = DetectBatch::default();
    let mut numbers = ContentNumbers::new(Arc::clone(&kit.catalog), Arc::clone(&kit.iocs));
    let mut exceptions_version = kit.exceptions.version();
    let mut last_flush = Instant::now();
    let mut last_save = Instant::now();
    let mut series = Series::default();
    loop {
        match work.recv_timeout(Duration::from_millis(250)) {
            Ok(Work::Records {
                partition,
                sequence,
                sensor,
                payload,
                feedback,
            }) => {
                // Records of a partition given up meanwhile, or a repeat: not ours to score.
                let Some(o) = owned.get_mut(&partition) else {
                    continue;
                };
                if sequence <= o.sequence {
                    continue;
                }
                o.sequence = sequence;
                if kit.exceptions.version() != exceptions_version {
                    let (version, set) = kit.exceptions.current();
                    exceptions_version = version;
                    for o in owned.values_mut() {
                        o.detector.set_exceptions(Arc::clone(&set));
                    }
                }
                let Some(o) = owned.get_mut(&partition) else {
                    continue;
                };
                if let Some(verdict) = feedback {
                    apply_feedback(&mut o.detector, partition, &payload, verdict, counters);
                    continue;
                }
                match batch.decode_from(&payload, &mut numbers) {
                    Ok(dropped) => {
                        FleetCounters::add(&counters.content_unresolved, dropped.total());
                    }
                    Err(e) => {
                        FleetCounters::add(&counters.messages_refused, 1);
                        tracing::warn!(
                            "cluster: partition {partition}, message {sequence} refused: {e}"
                        );
                        continue;
                    }
                }
                let mut sink = FleetSink {
                    queue: alerts,
                    counters,
                    sensor: &sensor,
                };
                o.detector.process_all(&batch, &mut sink);
                o.detector.correlate(&batch.hits, &mut sink);
                FleetCounters::add(
                    &counters.records_scored,
                    (batch.records.len() + batch.hits.len()) as u64,
                );
            }
            Ok(Work::Take {
                partition,
                snapshot,
                reply,
            }) => {
                let (detector, sequence) = restore(kit, partition, snapshot.as_deref(), counters);
                owned.insert(partition, Owned { detector, sequence });
                let _ = reply.send(sequence);
            }
            Ok(Work::Baseline {
                partition,
                entity,
                reply,
            }) => {
                let view = owned.get(&partition).and_then(|o| {
                    let d = &o.detector;
                    d.ueba()
                        .baseline(entity)
                        .map(|b| watchpost_dataplane::BaselineView::of(b, d.now_ns(), d))
                });
                let _ = reply.send(view);
            }
            Ok(Work::Give {
                partition,
                snapshot,
                reply,
            }) => {
                let given = owned.remove(&partition).and_then(|mut o| {
                    flush(&mut o.detector, alerts, counters);
                    series.take(&mut o.detector);
                    series.write(&kit.store, counters);
                    snapshot.then(|| snapshot_of(partition, &o))
                });
                let _ = reply.send(given);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if last_flush.elapsed() >= ALERT_FLUSH {
            last_flush = Instant::now();
            for o in owned.values_mut() {
                flush(&mut o.detector, alerts, counters);
                series.take(&mut o.detector);
            }
            series.write(&kit.store, counters);
        }
        if last_save.elapsed() >= save_every {
            last_save = Instant::now();
            if let Err(e) = kit.exceptions.save_hits() {
                tracing::error!("cluster: cannot save the exceptions' hit counts: {e}");
            }
            for (&p, o) in &owned {
                if snapshots.try_send(snapshot_of(p, o)).is_err() {
                    FleetCounters::add(&counters.snapshot_errors, 1);
                }
            }
        }
    }
}

/// An analyst's verdict on an alert, applied to the partition's threshold that raised it.
fn apply_feedback(
    d: &mut Detector,
    partition: u32,
    payload: &[u8],
    verdict: watchpost_proto::Verdict,
    counters: &FleetCounters,
) {
    let alert: watchpost_proto::Alert = match serde_json::from_slice(payload) {
        Ok(a) => a,
        Err(e) => {
            FleetCounters::add(&counters.messages_refused, 1);
            return tracing::warn!("cluster: partition {partition}: a verdict refused: {e}");
        }
    };
    if let Some(change) = d.feedback(&alert, verdict) {
        FleetCounters::add(&counters.feedback_applied, 1);
        tracing::info!(
            "cluster: partition {partition}: {verdict:?} on {} moved {} from {} to {}",
            alert.id,
            change.detector,
            change.old_threshold,
            change.new_threshold
        );
    }
}

fn flush(d: &mut Detector, alerts: &mpsc::Sender<AlertOut>, counters: &FleetCounters) {
    d.flush(&mut FleetSink {
        queue: alerts,
        counters,
        sensor: "",
    });
}

fn snapshot_of(partition: u32, o: &Owned) -> Snapshot {
    let mut bytes = Vec::with_capacity(1 << 16);
    bytes.extend_from_slice(&o.sequence.to_le_bytes());
    o.detector.snapshot_into(&mut bytes);
    Snapshot {
        partition,
        sequence: o.sequence,
        bytes,
    }
}

/// A partition's detector from its snapshot, and the sequence the snapshot reflects. A
/// snapshot that cannot be read is reported and the partition starts from nothing at the
/// oldest record the stream keeps, rather than not at all.
fn restore(
    kit: &DetectorKit,
    partition: u32,
    snapshot: Option<&[u8]>,
    counters: &FleetCounters,
) -> (Detector, u64) {
    let mut detector = kit.detector();
    let Some(bytes) = snapshot else {
        return (detector, 0);
    };
    let read = bytes
        .split_first_chunk::<8>()
        .ok_or_else(|| "shorter than its header".to_string())
        .and_then(|(sequence, rest)| {
            detector
                .restore_snapshot(rest)
                .map(|read| (u64::from_le_bytes(*sequence), read))
                .map_err(|e| e.to_string())
        });
    match read {
        Ok((sequence, read)) => {
            tracing::info!(
                "cluster: partition {partition} taken from its snapshot at sequence {sequence} \
                 ({} baselines, {} open alerts and signals)",
                read.baselines,
                read.open_alerts
            );
            (detector, sequence)
        }
        Err(e) => {
            FleetCounters::add(&counters.snapshot_errors, 1);
            tracing::error!(
                "cluster: partition {partition}: the snapshot cannot be read ({e}); starting it \
                 from the oldest record kept"
            );
            (kit.detector(), 0)
        }
    }
}

/// The sending end for the consumers and the lease keeper.
pub(crate) type WorkSender = Sender<Work>;
