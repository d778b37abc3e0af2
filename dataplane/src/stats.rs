//! Counters and health flags that the data plane writes and the control plane reads.
//!
//! Hot-path threads add to relaxed atomics once per batch (never per event), and the control plane
//! reads them whenever it is asked: no lock is shared between the two planes, and a slow API
//! request cannot stall ingestion.

use serde::Serialize;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use watchpost_proto::InputId;

/// A counter that is only ever added to.
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `count`.
    #[inline]
    pub fn add(&self, count: u64) {
        if count != 0 {
            self.0.fetch_add(count, Ordering::Relaxed);
        }
    }
    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Upper bounds of [`Histogram`] buckets, seconds: from half a millisecond (a quick commit or
/// request) to ten seconds (a stall worth paging on), about three per decade.
pub const LATENCY_BOUNDS_S: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram of fixed buckets, written with relaxed atomics: per commit or per request,
/// never per event. Exported in Prometheus' cumulative form.
#[derive(Default, Debug)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last one is past every bound.
    buckets: [AtomicU64; LATENCY_BOUNDS_S.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one duration.
    pub fn observe_ns(&self, ns: u64) {
        let s = ns as f64 * 1e-9;
        let i = LATENCY_BOUNDS_S
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(LATENCY_BOUNDS_S.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Cumulative counts per bound of [`LATENCY_BOUNDS_S`] then `+Inf` (the count), and the
    /// sum in seconds.
    pub fn cumulative(&self) -> ([u64; LATENCY_BOUNDS_S.len() + 1], f64) {
        let mut out = [0u64; LATENCY_BOUNDS_S.len() + 1];
        let mut acc = 0;
        for (o, b) in out.iter_mut().zip(&self.buckets) {
            acc += b.load(Ordering::Relaxed);
            *o = acc;
        }
        (out, self.sum_ns.load(Ordering::Relaxed) as f64 * 1e-9)
    }
}

/// Counters of one input.
#[derive(Default, Debug)]
pub struct InputCounters {
    /// Lines (messages) taken in and handed to the pipeline.
    pub received: Counter,
    /// Bytes of those lines.
    pub bytes: Counter,
    /// Lines parsed as their format says.
    pub parsed: Counter,
    /// Lines that did not parse (kept as free text with a `watchpost.parse_error` attribute).
    pub malformed: Counter,
    /// Lines with invalid UTF-8 (kept, invalid bytes replaced).
    pub invalid_utf8: Counter,
    /// Lines cut at `dataplane.max_line_bytes` (kept, flagged `watchpost.truncated`).
    pub truncated: Counter,
    /// Lines dropped: UDP datagrams that met a full ring.
    pub dropped: Counter,
    /// Connections accepted.
    pub connections: Counter,
    /// Connections refused over `max_connections`.
    pub connections_refused: Counter,
    /// Connections that ended in an error (reset, broken pipe).
    pub connection_errors: Counter,
    /// Connections closed after `idle_timeout_s` of silence.
    pub connections_idle_closed: Counter,
    /// The input is listening (or tailing).
    pub up: AtomicBool,
    /// Why the input is down, when it is.
    pub error: Mutex<Option<String>>,
}

/// Counters of the ingest spool, where acknowledging inputs make events durable before they
/// answer.
#[derive(Default, Debug)]
pub struct SpoolCounters {
    /// Requests written to the spool (each acknowledged).
    pub requests: Counter,
    /// Spool writes that failed (their requests were answered 503 and not accepted).
    pub failures: Counter,
    /// Requests replayed at start-up: acknowledged before a stop, not yet stored.
    pub replayed: Counter,
    /// Requests pending in the spool for an input that is disabled now: kept, and replayed once
    /// it is enabled again.
    pub orphaned: AtomicU64,
}

/// Counters of the store writer.
#[derive(Default, Debug)]
pub struct WriterCounters {
    /// Events committed to RocksDB.
    pub stored: Counter,
    /// Write batches committed.
    pub commits: Counter,
    /// Bytes of encoded events committed.
    pub bytes: Counter,
    /// Failed commits (the batch is retried; see the writer).
    pub errors: Counter,
    /// Retention passes that deleted something.
    pub retention_runs: Counter,
    /// Time of each successful RocksDB write batch.
    pub commit_latency: Histogram,
    /// Per committed block, from its first event's arrival to the commit: how far behind the
    /// store is, parsing and queueing included.
    pub ingest_to_store: Histogram,
    /// Last commit error, for `/health`.
    pub last_error: Mutex<Option<String>>,
}

/// Counters of the stage B (detection) workers.
#[derive(Default, Debug)]
pub struct DetectCounters {
    /// Records scored (an event owned by two workers counts twice).
    pub scored: Counter,
    /// New alerts, by type in `AlertType::ALL` order.
    pub alerts: [Counter; 5],
    /// Updates of open alerts (repeats inside the cooldown).
    pub alert_updates: Counter,
    /// Alert write attempts that failed (logged; the alert is kept and retried).
    pub alert_errors: Counter,
    /// Alerts and signals the store refused, kept for a retry, over all workers.
    pub unwritten: AtomicU64,
    /// Alerts and signals dropped because [`crate::MAX_UNWRITTEN`] per detection worker already
    /// waited.
    pub unwritten_dropped: Counter,
    /// New signals (docs/risk.md): matches that add risk instead of alerting.
    pub signals: Counter,
    /// Updates of open signals (repeats inside the signal window).
    pub signal_updates: Counter,
    /// Signal writes that failed (logged).
    pub signal_errors: Counter,
    /// Entities whose risk was dropped at the bound, over all workers.
    pub risk_evicted: AtomicU64,
    /// Hosts whose slot on the workers' shared board of who uses each host another host took
    /// (`watchpost_detect::PeerBoard`): the board's own total, stored, not summed.
    pub peer_board_displaced: AtomicU64,
    /// Sigma rule matches (an event matching three rules counts three).
    pub sigma_matches: Counter,
    /// Matches past `detection.sigma_max_matches_per_event` of their event (its least severe):
    /// counted, neither alerted on nor added to risk.
    pub sigma_dropped: Counter,
    /// Events that matched an indicator of compromise.
    pub ioc_matches: Counter,
    /// Matches of correlated rules that joined a correlation group (one per correlation fed).
    pub correlation_hits: Counter,
    /// Correlation groups with an open window, over all workers.
    pub correlation_groups: AtomicU64,
    /// Hits dropped because a worker held `detection.correlation_max_groups` groups.
    pub correlation_dropped: AtomicU64,
    /// Persistence trails dropped at a worker's bound (`ueba.max_entities`), the least
    /// persistent first.
    pub persistence_dropped: AtomicU64,
    /// Entities with a UEBA baseline in memory, over all workers.
    pub ueba_entities: AtomicU64,
    /// Sources with an ensemble in memory, over all workers.
    pub sources: AtomicU64,
    /// Baselines evicted by the LRU sweep.
    pub ueba_evicted: AtomicU64,
    /// Model and baseline saves completed.
    pub saves: Counter,
    /// Saves that failed.
    pub save_errors: Counter,
    /// Writes of closed series points (anomaly minutes, risk hours) and rule fire counts that
    /// failed: those points are missing from `/anomaly` and the fire counts.
    pub series_errors: Counter,
    /// Time of the last completed save, ns (0 = none yet).
    pub last_save_ns: AtomicI64,
}

/// A pinned thread that has not reported for this long is stale: `/health` degrades and
/// `watchpost_worker_up` reads 0. Workers report after every batch and at least once a second
/// when idle, so ten seconds of silence means stuck, not quiet.
pub const STALE_THREAD_NS: i64 = 10_000_000_000;

/// One pinned thread as `/health` and `/metrics` judge it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadState {
    /// Running, and reported within [`STALE_THREAD_NS`].
    pub up: bool,
    /// Time since its last report, ns.
    pub since_heartbeat_ns: i64,
}

/// Everything the data plane reports.
#[derive(Debug)]
pub struct Stats {
    /// Per input, indexed by `InputId as usize`.
    pub inputs: [InputCounters; 6],
    /// Stage A workers' heartbeat: last time each finished a batch or idled, ns.
    pub worker_heartbeat_ns: Vec<AtomicI64>,
    /// Stage A workers still running.
    pub workers_alive: Vec<AtomicBool>,
    /// Events parsed by all workers.
    pub events_parsed: Counter,
    /// Templates the miners know.
    pub templates: AtomicU64,
    /// The store writer.
    pub writer: WriterCounters,
    /// The ingest spool.
    pub spool: SpoolCounters,
    /// The writer thread is running.
    pub writer_alive: AtomicBool,
    /// While set, the writer commits nothing and the rings behind it fill: how the tests watch
    /// backpressure reach the inputs. Read once per writer wake-up, never per event.
    #[doc(hidden)]
    pub writer_hold: AtomicBool,
    /// Stage B workers still running.
    pub detect_alive: Vec<AtomicBool>,
    /// Stage B workers' heartbeat, ns.
    pub detect_heartbeat_ns: Vec<AtomicI64>,
    /// Stage B counters.
    pub detect: DetectCounters,
    /// When the pipeline started, ns.
    pub started_ns: i64,
    /// Depth gauges of every ring, refreshed by their threads.
    pub rings: Vec<RingGauge>,
}

/// The fill level of one ring, read on demand from the ring itself.
pub struct RingGauge {
    /// `input->workerN` or `workerN->writer`.
    pub name: String,
    /// Slots.
    pub capacity: u64,
    depth: Box<dyn Fn() -> usize + Send + Sync>,
}

impl RingGauge {
    /// A gauge named `name` whose depth `probe` reads.
    pub fn new(
        name: String,
        capacity: usize,
        probe: impl Fn() -> usize + Send + Sync + 'static,
    ) -> RingGauge {
        RingGauge {
            name,
            capacity: capacity as u64,
            depth: Box::new(probe),
        }
    }

    /// Batches waiting now.
    pub fn depth(&self) -> u64 {
        (self.depth)() as u64
    }
}

impl std::fmt::Debug for RingGauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RingGauge({}: {}/{})",
            self.name,
            self.depth(),
            self.capacity
        )
    }
}

impl Stats {
    /// The stage A (parse) workers, in index order, as of `now_ns`.
    pub fn parse_threads(&self, now_ns: i64) -> Vec<ThreadState> {
        thread_states(&self.workers_alive, &self.worker_heartbeat_ns, now_ns)
    }

    /// The stage B (detect) workers, in index order, as of `now_ns`.
    pub fn detect_threads(&self, now_ns: i64) -> Vec<ThreadState> {
        thread_states(&self.detect_alive, &self.detect_heartbeat_ns, now_ns)
    }

    /// Stats for `workers` stage A workers and `detectors` stage B workers.
    pub fn new(
        workers: usize,
        detectors: usize,
        started_ns: i64,
        rings: Vec<RingGauge>,
    ) -> Arc<Stats> {
        Arc::new(Stats {
            inputs: Default::default(),
            worker_heartbeat_ns: (0..workers).map(|_| AtomicI64::new(started_ns)).collect(),
            workers_alive: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            events_parsed: Counter::default(),
            templates: AtomicU64::new(0),
            writer: WriterCounters::default(),
            spool: SpoolCounters::default(),
            writer_alive: AtomicBool::new(false),
            writer_hold: AtomicBool::new(false),
            detect_alive: (0..detectors).map(|_| AtomicBool::new(false)).collect(),
            detect_heartbeat_ns: (0..detectors).map(|_| AtomicI64::new(started_ns)).collect(),
            detect: DetectCounters::default(),
            started_ns,
            rings,
        })
    }

    /// The counters of `input`.
    #[inline]
    pub fn input(&self, input: InputId) -> &InputCounters {
        &self.inputs[input as usize]
    }

    /// A consistent-enough copy for `/stats` (each counter is read once).
    pub fn snapshot(&self) -> StatsSnapshot {
        let inputs = InputId::ALL
            .iter()
            .map(|&id| {
                let c = self.input(id);
                InputSnapshot {
                    name: id.name(),
                    up: c.up.load(Ordering::Relaxed),
                    received: c.received.get(),
                    bytes: c.bytes.get(),
                    parsed: c.parsed.get(),
                    malformed: c.malformed.get(),
                    invalid_utf8: c.invalid_utf8.get(),
                    truncated: c.truncated.get(),
                    dropped: c.dropped.get(),
                    connections: c.connections.get(),
                    connections_refused: c.connections_refused.get(),
                    connection_errors: c.connection_errors.get(),
                    connections_idle_closed: c.connections_idle_closed.get(),
                }
            })
            .collect::<Vec<_>>();
        StatsSnapshot {
            received_total: inputs.iter().map(|i| i.received).sum(),
            dropped_total: inputs.iter().map(|i| i.dropped).sum(),
            parsed_total: self.events_parsed.get(),
            stored_total: self.writer.stored.get(),
            stored_bytes: self.writer.bytes.get(),
            commits: self.writer.commits.get(),
            write_errors: self.writer.errors.get(),
            templates: self.templates.load(Ordering::Relaxed),
            spool: SpoolSnapshot {
                requests: self.spool.requests.get(),
                failures: self.spool.failures.get(),
                replayed: self.spool.replayed.get(),
                orphaned: self.spool.orphaned.load(Ordering::Relaxed),
            },
            detection: DetectSnapshot {
                scored: self.detect.scored.get(),
                alerts: watchpost_proto::AlertType::ALL
                    .iter()
                    .zip(&self.detect.alerts)
                    .map(|(t, c)| (t.name(), c.get()))
                    .collect(),
                alert_updates: self.detect.alert_updates.get(),
                alert_errors: self.detect.alert_errors.get(),
                unwritten: self.detect.unwritten.load(Ordering::Relaxed),
                unwritten_dropped: self.detect.unwritten_dropped.get(),
                signals: self.detect.signals.get(),
                signal_updates: self.detect.signal_updates.get(),
                signal_errors: self.detect.signal_errors.get(),
                risk_evicted: self.detect.risk_evicted.load(Ordering::Relaxed),
                peer_board_displaced: self.detect.peer_board_displaced.load(Ordering::Relaxed),
                sigma_matches: self.detect.sigma_matches.get(),
                sigma_dropped: self.detect.sigma_dropped.get(),
                ioc_matches: self.detect.ioc_matches.get(),
                correlation_hits: self.detect.correlation_hits.get(),
                correlation_groups: self.detect.correlation_groups.load(Ordering::Relaxed),
                correlation_dropped: self.detect.correlation_dropped.load(Ordering::Relaxed),
                persistence_dropped: self.detect.persistence_dropped.load(Ordering::Relaxed),
                ueba_entities: self.detect.ueba_entities.load(Ordering::Relaxed),
                ueba_evicted: self.detect.ueba_evicted.load(Ordering::Relaxed),
                sources: self.detect.sources.load(Ordering::Relaxed),
                saves: self.detect.saves.get(),
                save_errors: self.detect.save_errors.get(),
                series_errors: self.detect.series_errors.get(),
                last_save_ns: self.detect.last_save_ns.load(Ordering::Relaxed),
            },
            inputs,
            rings: self
                .rings
                .iter()
                .map(|r| RingSnapshot {
                    name: r.name.clone(),
                    depth: r.depth(),
                    capacity: r.capacity,
                })
                .collect(),
        }
    }
}

/// `/stats` counters of one input.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "InputStats")]
pub struct InputSnapshot {
    /// Input name.
    pub name: &'static str,
    /// Listening or tailing.
    pub up: bool,
    /// Lines (messages) taken in and handed to the pipeline.
    pub received: u64,
    /// Bytes of those lines.
    pub bytes: u64,
    /// Lines parsed as their format says.
    pub parsed: u64,
    /// Lines that did not parse (kept as free text with a `watchpost.parse_error` attribute).
    pub malformed: u64,
    /// Lines with invalid UTF-8 (kept, invalid bytes replaced).
    pub invalid_utf8: u64,
    /// Lines cut at `dataplane.max_line_bytes` (kept, flagged `watchpost.truncated`).
    pub truncated: u64,
    /// Lines dropped: UDP datagrams that met a full ring.
    pub dropped: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Connections refused over `max_connections`.
    pub connections_refused: u64,
    /// Connections that ended in an error (reset, broken pipe).
    pub connection_errors: u64,
    /// Connections closed after `idle_timeout_s` of silence.
    pub connections_idle_closed: u64,
}

/// `/stats` depth of one ring between pipeline stages.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "RingStats")]
pub struct RingSnapshot {
    /// Which ring.
    pub name: String,
    /// Batches waiting.
    pub depth: u64,
    /// Slots.
    pub capacity: u64,
}

fn thread_states(alive: &[AtomicBool], heartbeats: &[AtomicI64], now_ns: i64) -> Vec<ThreadState> {
    alive
        .iter()
        .zip(heartbeats)
        .map(|(alive, beat)| {
            let since_heartbeat_ns = now_ns - beat.load(Ordering::Relaxed);
            ThreadState {
                up: alive.load(Ordering::Relaxed) && since_heartbeat_ns < STALE_THREAD_NS,
                since_heartbeat_ns,
            }
        })
        .collect()
}

/// Everything `/stats` reports from the data plane.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct StatsSnapshot {
    /// Lines received over all inputs.
    pub received_total: u64,
    /// Lines dropped over all inputs.
    pub dropped_total: u64,
    /// Events parsed and normalised.
    pub parsed_total: u64,
    /// Events committed to the store.
    pub stored_total: u64,
    /// Encoded bytes committed.
    pub stored_bytes: u64,
    /// RocksDB write batches committed.
    pub commits: u64,
    /// Failed commits.
    pub write_errors: u64,
    /// Known templates.
    pub templates: u64,
    /// The ingest spool (acknowledged ingest).
    pub spool: SpoolSnapshot,
    /// Detection.
    pub detection: DetectSnapshot,
    /// Per input.
    pub inputs: Vec<InputSnapshot>,
    /// Ring depths.
    pub rings: Vec<RingSnapshot>,
}

/// `/stats` counters of the ingest spool.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "SpoolStats")]
pub struct SpoolSnapshot {
    /// Requests written to the spool, each acknowledged after its write.
    pub requests: u64,
    /// Spool writes that failed: their requests were answered 503, nothing accepted.
    pub failures: u64,
    /// Requests replayed at start-up (acknowledged before a stop, not yet stored then).
    pub replayed: u64,
    /// Requests kept in the spool for an input that is disabled now.
    pub orphaned: u64,
}

/// `/stats` counters of detection.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "DetectionStats")]
pub struct DetectSnapshot {
    /// Records scored (an event owned by two workers counts twice).
    pub scored: u64,
    /// New alerts by type.
    pub alerts: std::collections::BTreeMap<&'static str, u64>,
    /// Updates of open alerts (repeats inside the cooldown).
    pub alert_updates: u64,
    /// Alert write attempts that failed (logged; the alert is kept and retried).
    pub alert_errors: u64,
    /// Alerts and signals the store refused, waiting for a retry (the store is full or
    /// failing; `/health` is degraded while any wait).
    pub unwritten: u64,
    /// Alerts and signals dropped because too many already waited for the store.
    pub unwritten_dropped: u64,
    /// New signals: matches that add risk instead of alerting.
    pub signals: u64,
    /// Updates of open signals.
    pub signal_updates: u64,
    /// Signal writes that failed.
    pub signal_errors: u64,
    /// Entities whose risk was dropped at the bound (`ueba.max_entities` per worker).
    pub risk_evicted: u64,
    /// Hosts whose slot on the board of who uses each host another host took: their first
    /// visits are judged on the person's history alone (docs/detection.md).
    pub peer_board_displaced: u64,
    /// Sigma rule matches (an event matching three rules counts three).
    pub sigma_matches: u64,
    /// Matches past `detection.sigma_max_matches_per_event` of their event (its least severe):
    /// counted, neither alerted on nor added to risk.
    pub sigma_dropped: u64,
    /// Events that matched an indicator of compromise.
    pub ioc_matches: u64,
    /// Matches of correlated rules that joined a correlation group (one per correlation fed).
    pub correlation_hits: u64,
    /// Correlation groups with an open window, over all workers.
    pub correlation_groups: u64,
    /// Hits dropped because a worker held `detection.correlation_max_groups` groups.
    pub correlation_dropped: u64,
    /// Persistence trails dropped at the bound, the least persistent first.
    pub persistence_dropped: u64,
    /// Entities with a UEBA baseline in memory, over all workers.
    pub ueba_entities: u64,
    /// Baselines evicted by the LRU sweep.
    pub ueba_evicted: u64,
    /// Sources with an ensemble in memory, over all workers.
    pub sources: u64,
    /// Model and baseline saves completed.
    pub saves: u64,
    /// Saves that failed.
    pub save_errors: u64,
    /// Writes of closed series points (anomaly minutes, risk hours) and rule fire counts that
    /// failed: those points are missing from `/anomaly` and the fire counts.
    pub series_errors: u64,
    /// Time of the last completed save, ns (0 = none yet).
    pub last_save_ns: i64,
}
