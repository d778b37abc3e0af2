//! Stage B: the detection workers.
//!
//! Each owns a [`Detector`] outright: the ensembles of the sources and the baselines of the
//! entities that hash to it. Stage A workers route every event's [`DetectRecord`] to the workers
//! that own a part of it, over one SPSC ring per (stage A, stage B) pair, in pooled vectors that
//! come back the same way. Alerts are written to the store as they are raised (they are rare);
//! anomaly minutes and risk hours once a second; models and baselines every
//! `detection.model_save_interval_seconds` and when the worker stops.
//!
//! The control plane never touches a detector: it sends a [`Control`] message (feedback, a
//! baseline request) and the worker answers between two batches.

use crate::exceptions::ExceptionBook;
use crate::live::LiveAlerts;
use crate::ring::{Consumer, Pop};
use crate::stats::Stats;
use crate::unwritten::{RecordKind, Unwritten};
use crossbeam_channel::{Receiver, Select, Sender};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use watchpost_detect::{
    AlertSink, Baseline, DetectBatch, Detector, DetectorParams, Dspot, SourceState, shard_of,
    source_text,
};
use watchpost_proto::{
    Alert, AlertType, MinutePoint, RiskPoint, ThresholdChange, Verdict, bincode_config, now_ns,
};
use watchpost_store::Store;

/// How often repeats folded into open alerts are written out (and cooldowns expire).
const ALERT_FLUSH: Duration = Duration::from_secs(1);

/// A batch of records on its way from stage A to stage B.
pub type RecordBatch = Box<DetectBatch>;

/// One stage A worker's ring into a stage B worker, and the way its vectors go home.
pub struct DetectInput {
    /// Records from the stage A worker.
    pub ring: Consumer<RecordBatch>,
    /// Where emptied vectors go back.
    pub returns: Sender<RecordBatch>,
}

/// What the control plane may ask of a stage B worker.
pub enum Control {
    /// An operator's verdict on an alert: move the threshold that raised it.
    Feedback {
        /// The alert.
        alert: Box<Alert>,
        /// tp or fp.
        verdict: Verdict,
        /// The change made, if this worker owns the threshold.
        reply: Sender<Option<ThresholdChange>>,
    },
    /// The live baseline of an entity.
    Baseline {
        /// Entity hash.
        entity: u64,
        /// The answer.
        reply: Sender<Option<BaselineView>>,
    },
}

/// An entity's baseline as the API shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BaselineView {
    /// UEBA type (`user`, `host`, `ip`, `service_account`).
    pub entity_type: &'static str,
    /// See the spec's baseline resource.
    pub first_seen_ns: i64,
    /// Events seen.
    pub event_count: u64,
    /// Observed UTC hours.
    pub hours_active: Vec<u8>,
    /// Top sources: addresses, or `host:<hash>` for an address's peer hosts.
    pub top_source_ips: Vec<String>,
    /// Top templates: `(template id hex, weight)`.
    pub top_templates: Vec<(String, f64)>,
    /// Per-minute volume EMA.
    pub volume_ema_minute: f64,
    /// Inside the warmup window.
    pub warming_up: bool,
    /// Events still needed to finish warming up.
    pub warmup_events_remaining: u64,
    /// Seconds still to pass before warmup can end.
    pub warmup_seconds_remaining: f64,
    /// Events the warmup needs in all.
    pub warmup_min_events: u64,
    /// Days the warmup lasts.
    pub warmup_days: f64,
}

impl BaselineView {
    /// The view of `b`, a baseline of detector `d`, at event time `now_ns`.
    pub fn of(b: &Baseline, now_ns: i64, d: &Detector) -> BaselineView {
        let p = d.ueba().params();
        // Event time is the clock; after a restart, before new events, the entity's own last
        // event is the latest time known.
        let now_ns = now_ns.max(b.last_seen_ns);
        let (events_left, ns_left) = b.warmup_remaining(now_ns, p);
        BaselineView {
            entity_type: b.kind.name(),
            first_seen_ns: b.first_seen_ns,
            event_count: b.event_count,
            hours_active: b.hours_active(),
            top_source_ips: b.top_sources().into_iter().map(source_text).collect(),
            top_templates: b
                .top_templates()
                .into_iter()
                .map(|t| (format!("{:016x}", t.template_id), t.weight))
                .collect(),
            volume_ema_minute: b.volume_ema(),
            warming_up: b.warming_up(now_ns, p),
            warmup_events_remaining: events_left,
            warmup_seconds_remaining: ns_left as f64 / 1e9,
            warmup_min_events: p.warmup_min_events,
            warmup_days: p.warmup_ns as f64 / 86_400e9,
        }
    }
}

/// Talks to the stage B workers from the control plane.
#[derive(Clone)]
pub struct DetectHandle {
    controls: Vec<Sender<Control>>,
}

/// How long the control plane waits for a worker (it answers between batches, in microseconds
/// normally; a worker stuck behind a full store is the only slow case).
const CONTROL_WAIT: Duration = Duration::from_secs(5);

impl DetectHandle {
    /// Applies feedback on `alert` to the worker(s) owning its threshold; returns the change.
    /// Blocking: call from a blocking task.
    pub fn feedback(&self, alert: &Alert, verdict: Verdict) -> Option<ThresholdChange> {
        let n = self.controls.len();
        let targets: Vec<usize> = match alert.alert_type {
            AlertType::Ml => vec![shard_of(
                watchpost_proto::hash64(alert.source.as_bytes()),
                n,
            )],
            // Thresholds are per entity type in every worker: all of them move together.
            _ => (0..n).collect(),
        };
        let mut first = None;
        for t in targets {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let msg = Control::Feedback {
                alert: Box::new(alert.clone()),
                verdict,
                reply: tx,
            };
            if self.controls[t].send(msg).is_ok()
                && let Ok(Some(c)) = rx.recv_timeout(CONTROL_WAIT)
                && first.is_none()
            {
                first = Some(c);
            }
        }
        first
    }

    /// The live baseline of the entity with name hash `entity`. Blocking.
    pub fn baseline(&self, entity: u64) -> Option<BaselineView> {
        let t = shard_of(entity, self.controls.len());
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.controls[t]
            .send(Control::Baseline { entity, reply: tx })
            .ok()?;
        rx.recv_timeout(CONTROL_WAIT).ok().flatten()
    }
}

/// Everything one stage B worker needs.
pub struct DetectSetup {
    /// Worker number.
    pub index: usize,
    /// One ring per stage A worker.
    pub inputs: Vec<DetectInput>,
    /// Control messages.
    pub control: Receiver<Control>,
    /// Seconds between model saves.
    pub save_interval: Duration,
    /// Core to pin to.
    pub core: Option<core_affinity::CoreId>,
    /// The live alert feed of the WebSocket stream.
    pub live: Arc<LiveAlerts>,
    /// The operators' exceptions (worker 0 also writes their hit counts back).
    pub exceptions: Arc<ExceptionBook>,
}

/// The control channel and its receiver, one per stage B worker.
pub fn control_channels(workers: usize) -> (DetectHandle, Vec<Receiver<Control>>) {
    let (tx, rx): (Vec<_>, Vec<_>) = (0..workers).map(|_| crossbeam_channel::bounded(64)).unzip();
    (DetectHandle { controls: tx }, rx)
}

/// Writes alerts to the store as they are raised, and hands them to the live feed.
struct StoreSink<'a> {
    store: &'a Store,
    stats: &'a Stats,
    live: &'a LiveAlerts,
    unwritten: &'a mut Unwritten,
}

impl AlertSink for StoreSink<'_> {
    fn alert(&mut self, alert: &Alert, new: bool) {
        if new {
            let i = AlertType::ALL
                .iter()
                .position(|t| *t == alert.alert_type)
                .unwrap_or(0);
            self.stats.detect.alerts[i].add(1);
        } else {
            self.stats.detect.alert_updates.add(1);
        }
        let kind = if new {
            RecordKind::NewAlert
        } else {
            RecordKind::Alert
        };
        self.unwritten.write(self.store, self.stats, kind, alert);
        self.live.publish(alert, new);
    }

    fn signal(&mut self, signal: &Alert, new: bool) {
        if new {
            self.stats.detect.signals.add(1);
        } else {
            self.stats.detect.signal_updates.add(1);
        }
        self.unwritten
            .write(self.store, self.stats, RecordKind::Signal, signal);
    }
}

/// Model key of a source.
fn source_key(source: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b's');
    k.extend_from_slice(&source.to_be_bytes());
    k
}

/// Model key of a worker's UEBA thresholds.
fn thresholds_key(shard: usize) -> Vec<u8> {
    vec![b't', shard as u8]
}

/// A detector with the state this worker owns restored from the store. A record that does not
/// decode (another layout) is skipped with a warning; a read that fails is an error, so that a
/// bad disk stops the start instead of the service learning afresh and saving over what it had.
pub fn restore(
    store: &Store,
    index: usize,
    shards: usize,
    params: DetectorParams,
) -> Result<Detector, watchpost_store::StoreError> {
    let mut d = Detector::new(params);
    let cfg = bincode_config();
    let mut sources = 0;
    for (k, v) in store.models()? {
        match k.first() {
            Some(b's') if k.len() == 9 => {
                let h = u64::from_be_bytes(k[1..].try_into().unwrap_or([0; 8]));
                if shard_of(h, shards) != index {
                    continue;
                }
                match bincode::decode_from_slice::<SourceState, _>(&v, cfg) {
                    Ok((s, _)) => {
                        d.restore_source(h, s);
                        sources += 1;
                    }
                    Err(e) => tracing::warn!("ignoring a saved source model: {e}"),
                }
            }
            Some(b't') if k.get(1) == Some(&(index as u8)) => {
                if let Ok((t, _)) = bincode::decode_from_slice::<[Dspot; 4], _>(&v, cfg) {
                    d.ueba_mut().restore_thresholds(t);
                }
            }
            _ => {}
        }
    }
    let (mut baselines, mut unreadable) = (0, 0);
    let mut first_error = None;
    store.for_each_baseline(|h, v| {
        if shard_of(h, shards) != index {
            return;
        }
        match bincode::decode_from_slice::<Baseline, _>(v, cfg) {
            Ok((b, _)) => {
                d.ueba_mut().restore(h, b);
                baselines += 1;
            }
            Err(e) => {
                unreadable += 1;
                first_error.get_or_insert(e);
            }
        }
    })?;
    // A baseline saved in another layout (an older version) is refused whole rather than read at
    // the wrong offsets; its entity warms up again.
    if let Some(e) = first_error {
        tracing::warn!(
            "detector {index}: {unreadable} saved baseline(s) could not be read and start a new \
             warmup (first error: {e})"
        );
    }
    if sources + baselines > 0 {
        tracing::info!(
            "detector {index}: restored {sources} source model(s) and {baselines} baseline(s)"
        );
    }
    Ok(d)
}

/// Saves what changed since the last save: every source model, the thresholds, and the
/// baselines that learned something.
pub fn save(
    detector: &mut Detector,
    store: &Store,
    index: usize,
) -> Result<usize, watchpost_store::StoreError> {
    let cfg = bincode_config();
    let mut models = Vec::new();
    for (h, s) in detector.sources() {
        if let Ok(v) = bincode::encode_to_vec(s, cfg) {
            models.push((source_key(h), v));
        }
    }
    if let Ok(v) = bincode::encode_to_vec(detector.ueba().thresholds(), cfg) {
        models.push((thresholds_key(index), v));
    }
    let mut baselines = Vec::new();
    detector.ueba_mut().save_dirty(|h, b| {
        if let Ok(v) = bincode::encode_to_vec(b, cfg) {
            baselines.push((h, v));
        }
    });
    // Written in slices so one save of 100,000 baselines is not one 200 MB write batch.
    for chunk in baselines.chunks(10_000) {
        store.save_detection(&[], chunk)?;
    }
    store.save_detection(&models, &[])?;
    Ok(baselines.len())
}

/// Starts a stage B worker with `detector`; it ends when every input ring is closed and drained,
/// after a last save.
pub fn spawn_detector(
    setup: DetectSetup,
    detector: Detector,
    store: Arc<Store>,
    stats: Arc<Stats>,
) -> std::io::Result<JoinHandle<()>> {
    let index = setup.index;
    // Alive from the spawn on (see `spawn_worker`).
    stats.detect_alive[index].store(true, Ordering::Relaxed);
    let alive = stats.clone();
    std::thread::Builder::new()
        .name(format!("wp-detect-{index}"))
        .spawn(move || {
            if let Some(core) = setup.core {
                core_affinity::set_for_current(core);
            }
            run(setup, detector, &store, &stats);
            stats.detect_alive[index].store(false, Ordering::Relaxed);
        })
        .inspect_err(|_| alive.detect_alive[index].store(false, Ordering::Relaxed))
}

fn run(setup: DetectSetup, mut d: Detector, store: &Store, stats: &Stats) {
    let DetectSetup {
        index,
        inputs,
        control,
        save_interval,
        core: _,
        live,
        exceptions,
    } = setup;
    let mut exceptions_version = 0;
    let mut closed_seen = store.closed_generation();
    let mut closed_ids: Vec<String> = Vec::new();
    let mut sel = Select::new();
    for inp in &inputs {
        sel.recv(inp.ring.receiver());
    }
    let control_slot = sel.recv(&control);
    let mut open = inputs.len();
    let mut minutes: Vec<MinutePoint> = Vec::with_capacity(4096);
    let mut risk: Vec<RiskPoint> = Vec::with_capacity(4096);
    let mut reported = [0u64; 7];
    let mut last_series = Instant::now();
    let mut last_save = Instant::now();
    let mut last_flush = Instant::now();
    let mut unwritten = Unwritten::default();
    while open > 0 {
        stats.detect_heartbeat_ns[index].store(now_ns(), Ordering::Relaxed);
        unwritten.retry(store, stats, false);
        if last_series.elapsed() >= Duration::from_secs(1) {
            last_series = Instant::now();
            publish(
                index,
                &mut d,
                store,
                stats,
                &mut minutes,
                &mut risk,
                &mut reported,
            );
        }
        // New alerts are written as they are raised; repeats folded into open alerts are
        // written at most once per ALERT_FLUSH, so a rule matching thousands of events a second
        // costs one alert write a second, not one per batch.
        if last_flush.elapsed() >= ALERT_FLUSH {
            last_flush = Instant::now();
            d.flush(&mut StoreSink {
                store,
                stats,
                live: &live,
                unwritten: &mut unwritten,
            });
        }
        if last_save.elapsed() >= save_interval {
            last_save = Instant::now();
            save_logged(&mut d, store, stats, index);
            if index == 0 {
                save_hits_logged(&exceptions, stats);
            }
        }
        let slot = match sel.ready_timeout(Duration::from_millis(250)) {
            Ok(i) => i,
            Err(_) => continue,
        };
        if slot == control_slot {
            match control.try_recv() {
                Ok(msg) => answer(&mut d, msg),
                Err(crossbeam_channel::TryRecvError::Empty) => {}
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    sel.remove(control_slot);
                }
            }
            continue;
        }
        let inp = &inputs[slot];
        match inp.ring.try_pop() {
            Pop::Item(mut batch) => {
                // One atomic load per batch; a changed book hands over its new set.
                if exceptions.version() != exceptions_version {
                    let (version, set) = exceptions.current();
                    exceptions_version = version;
                    d.set_exceptions(set);
                }
                let mut sink = StoreSink {
                    store,
                    stats,
                    live: &live,
                    unwritten: &mut unwritten,
                };
                // Likewise for alerts analysts closed: this batch's firings open new ones.
                if store.closed_generation() != closed_seen {
                    closed_seen = store.closed_since(closed_seen, &mut closed_ids);
                    d.forget_closed(&closed_ids, &mut sink);
                    closed_ids.clear();
                }
                d.process_all(&batch, &mut sink);
                d.correlate(&batch.hits, &mut sink);
                stats.detect.scored.add(batch.records.len() as u64);
                stats.detect.correlation_hits.add(batch.hits.len() as u64);
                batch.clear();
                let _ = inp.returns.try_send(batch);
            }
            Pop::Empty => {}
            Pop::Closed => {
                sel.remove(slot);
                open -= 1;
            }
        }
    }
    let mut sink = StoreSink {
        store,
        stats,
        live: &live,
        unwritten: &mut unwritten,
    };
    d.flush(&mut sink);
    unwritten.retry(store, stats, true);
    if !unwritten.is_empty() {
        tracing::error!(
            "stage B worker {index}: {} alerts and signals could not be stored before the stop",
            unwritten.len()
        );
    }
    publish(
        index,
        &mut d,
        store,
        stats,
        &mut minutes,
        &mut risk,
        &mut reported,
    );
    save_logged(&mut d, store, stats, index);
}

fn answer(d: &mut Detector, msg: Control) {
    match msg {
        Control::Feedback {
            alert,
            verdict,
            reply,
        } => {
            let _ = reply.send(d.feedback(&alert, verdict));
        }
        Control::Baseline { entity, reply } => {
            let now = d.now_ns();
            let v = d
                .ueba()
                .baseline(entity)
                .map(|b| BaselineView::of(b, now, d));
            let _ = reply.send(v);
        }
    }
}

fn publish(
    index: usize,
    d: &mut Detector,
    store: &Store,
    stats: &Stats,
    minutes: &mut Vec<MinutePoint>,
    risk: &mut Vec<RiskPoint>,
    reported: &mut [u64; 7],
) {
    d.take_minutes(minutes);
    d.take_risk_points(risk);
    if let Err(e) = store.put_series(minutes, risk) {
        stats.detect.series_errors.add(1);
        tracing::warn!("cannot store anomaly series: {e}");
    }
    let mut fires = Vec::new();
    d.take_rule_fires(&mut fires);
    if let Err(e) = store.add_rule_fires(index as u8, &fires) {
        stats.detect.series_errors.add(1);
        tracing::warn!("cannot store rule fire counts: {e}");
    }
    minutes.clear();
    risk.clear();
    // The board is shared by the workers, so its count is theirs together: stored, not summed.
    stats
        .detect
        .peer_board_displaced
        .store(d.peer_board_displaced(), Ordering::Relaxed);
    // Values summed over workers: each adds the change since its last report. A counter
    // restarts from 0 when its owner is rebuilt (a new correlation plan after a rule upload or
    // toggle): a drop then means "counted anew", and only the new count is added, so the sums
    // exported as Prometheus counters never go down. A gauge adds its (wrapping) difference.
    let published = [
        (&stats.detect.ueba_entities, d.ueba().len() as u64, false),
        (&stats.detect.ueba_evicted, d.ueba().evicted(), true),
        (&stats.detect.sources, d.sources().count() as u64, false),
        (
            &stats.detect.correlation_groups,
            d.correlation_groups() as u64,
            false,
        ),
        (
            &stats.detect.correlation_dropped,
            d.correlation_dropped(),
            true,
        ),
        (&stats.detect.risk_evicted, d.risk_evicted(), true),
        (
            &stats.detect.persistence_dropped,
            d.persistence_dropped(),
            true,
        ),
    ];
    for ((sum, new, is_counter), old) in published.into_iter().zip(reported.iter_mut()) {
        let delta = if is_counter && new < *old {
            new
        } else {
            new.wrapping_sub(*old)
        };
        sum.fetch_add(delta, Ordering::Relaxed);
        *old = new;
    }
}

fn save_hits_logged(exceptions: &ExceptionBook, stats: &Stats) {
    match exceptions.save_hits() {
        Ok(n) => tracing::debug!("saved the hit counts of {n} exception(s)"),
        Err(e) => {
            stats.detect.save_errors.add(1);
            tracing::error!("cannot save the exceptions' hit counts: {e}");
        }
    }
}

fn save_logged(d: &mut Detector, store: &Store, stats: &Stats, index: usize) {
    match save(d, store, index) {
        Ok(n) => {
            stats.detect.saves.add(1);
            stats.detect.last_save_ns.store(now_ns(), Ordering::Relaxed);
            tracing::debug!("detector {index}: saved models and {n} baseline(s)");
        }
        Err(e) => {
            stats.detect.save_errors.add(1);
            tracing::error!("detector {index}: cannot save models: {e}");
        }
    }
}
