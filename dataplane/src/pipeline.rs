//! Builds and runs the data plane: binds the inputs, starts pinned workers and the writer, and
//! stops them in order so that everything accepted is stored.
//!
//! Start-up binds every socket and opens the store before any thread runs, so a busy port or an
//! unwritable data folder is a clear start-up error, not a half-running service. Shutdown goes
//! front to back: inputs stop reading and flush their open batches; closing their rings lets the
//! workers drain and exit; that closes the writer's rings, and the writer commits the last blocks
//! and flushes RocksDB.

use crate::Error;
use crate::batch::{Pool, RawBatch};
use crate::catalog::Catalog;
use crate::exceptions::ExceptionBook;
use crate::input::HttpIngest;
use crate::input::outlet::Outlet;
use crate::input::spool;
use crate::input::{Bound, Delivery, INPUTS, Input, Start};
use crate::ioc::IocFeed;
use crate::live::LiveAlerts;
use crate::remote::{StageB, spawn_publisher};
use crate::ring::{Consumer, Producer, ring};
use crate::stage::{
    DetectHandle, DetectInput, DetectSetup, RecordBatch, control_channels, restore, spawn_detector,
};
use crate::stats::{RingGauge, Stats};
use crate::worker::{WorkerInput, WorkerSetup, spawn_worker};
use crate::writer::spawn_writer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_detect::DetectorParams;
use watchpost_normalize::Format;
use watchpost_normalize::Normalizer;
use watchpost_normalize::{MinerConfig, TemplateMiner};
use watchpost_proto::{Config, InputId};
use watchpost_store::{EncodedBlock, Store};

/// The running data plane.
pub struct Pipeline {
    stats: Arc<Stats>,
    store: Arc<Store>,
    stop: Arc<AtomicBool>,
    inputs: Vec<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    detectors: Vec<JoinHandle<()>>,
    detect: DetectHandle,
    catalog: Arc<Catalog>,
    iocs: Arc<IocFeed>,
    exceptions: Arc<ExceptionBook>,
    live: Arc<LiveAlerts>,
    ioc_watcher: Option<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
    http: Option<HttpIngest>,
    bound: Vec<(InputId, SocketAddr)>,
}

/// Rings between one input and every worker: the input keeps the producers.
struct InputRings {
    id: InputId,
    producers: Vec<Producer<Box<RawBatch>>>,
    pool: Pool,
}

impl Pipeline {
    /// Starts everything `cfg` enables: binds the listeners (failures here leave nothing
    /// running), opens the store and the live content, wires the rings, then starts the writer,
    /// the stage B workers, the stage A workers and the inputs, in the order data flows back
    /// from.
    pub fn start(cfg: &Config) -> Result<Pipeline, Error> {
        Pipeline::start_with(cfg, StageB::Local)
    }

    /// [`Pipeline::start`] with stage B where `stage_b` says: here, or behind a publisher (a
    /// fleet's sensor, whose records the fleet's detectors score).
    pub fn start_with(cfg: &Config, stage_b: StageB) -> Result<Pipeline, Error> {
        let dp = &cfg.dataplane;
        let workers = dp.parse_workers as usize;
        // A publisher takes every record whole: one ring per stage A worker into it.
        let detectors = match stage_b {
            StageB::Local => dp.detect_workers as usize,
            StageB::Remote(_) => 1,
        };
        let cores = assign_cores(cfg)?;
        let bound = bind_inputs(cfg)?;

        let store = Arc::new(Store::open(&cfg.data_dir(), &cfg.storage)?);
        // New alerts are queued for the notification channels from the first one raised
        // (the control plane's notifier sends them; docs/notifications.md).
        store.set_outbox(cfg.notifications.iter().any(|c| c.enabled));
        let persisted = store.templates()?;
        let catalog = Arc::new(Catalog::load(cfg, Some(Arc::clone(&store)))?);
        tracing::info!(
            "sigma: {} rules loaded ({} could not be read)",
            catalog.all().len(),
            catalog.load_errors().len()
        );
        let iocs = Arc::new(IocFeed::open(cfg, true)?);
        let exceptions = Arc::new(ExceptionBook::load(Some(Arc::clone(&store)))?);

        let enabled: Vec<(InputId, Format)> =
            bound.iter().map(|b| (b.input.id(), b.format)).collect();
        let wiring = Wiring::new(cfg, &enabled, workers, detectors);
        let stats = Stats::new(workers, detectors, watchpost_proto::now_ns(), wiring.gauges);
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Shared {
            cfg,
            store: &store,
            catalog: &catalog,
            iocs: &iocs,
            exceptions: &exceptions,
            stats: &stats,
            stop: &stop,
            cores: &cores,
        };
        let ioc_watcher = Arc::clone(&iocs)
            .spawn_watcher(
                Duration::from_secs(cfg.detection.ioc_reload_interval_seconds),
                Arc::clone(&stop),
            )
            .map_err(Error::Thread)?;
        let writer = spawn_writer(
            Arc::clone(&store),
            wiring.writer_inputs,
            wiring.returns,
            Arc::clone(&stats),
            cfg.storage.retention_days,
            cores.get(workers).copied().flatten(),
        )
        .map_err(Error::Thread)?;
        let live = Arc::new(LiveAlerts::default());
        let (detect, detector_handles) = match stage_b {
            StageB::Local => spawn_detectors(&shared, wiring.detect_inputs, &live)?,
            StageB::Remote(mut publisher) => {
                publisher.content(catalog.clone(), iocs.clone());
                let (detect, mut controls) = control_channels(1);
                let inputs = wiring.detect_inputs.into_iter().flatten().collect();
                let control = controls.pop().expect("one control channel");
                let handle = spawn_publisher(inputs, control, publisher, Arc::clone(&stats))
                    .map_err(Error::Thread)?;
                (detect, vec![handle])
            }
        };
        let worker_handles = spawn_workers(&shared, wiring.workers, &persisted)?;
        let inputs = spawn_inputs(&shared, bound, wiring.input_rings)?;
        tracing::info!(
            "data plane started: {} worker(s), inputs {:?}, store {}",
            workers,
            inputs.bound,
            store.path().display()
        );
        Ok(Pipeline {
            stats,
            store,
            stop,
            inputs: inputs.handles,
            workers: worker_handles,
            detectors: detector_handles,
            detect,
            catalog,
            iocs,
            exceptions,
            live,
            ioc_watcher: Some(ioc_watcher),
            writer: Some(writer),
            http: inputs.http,
            bound: inputs.bound,
        })
    }

    /// Live counters.
    pub fn stats(&self) -> Arc<Stats> {
        Arc::clone(&self.stats)
    }

    /// The store, for queries.
    pub fn store(&self) -> Arc<Store> {
        Arc::clone(&self.store)
    }

    /// The live indicator feed.
    pub fn iocs(&self) -> Arc<IocFeed> {
        Arc::clone(&self.iocs)
    }

    /// The live alert feed (for the WebSocket stream).
    pub fn live_alerts(&self) -> Arc<LiveAlerts> {
        Arc::clone(&self.live)
    }

    /// The live Sigma catalogue.
    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog)
    }

    /// The operators' exceptions.
    pub fn exceptions(&self) -> Arc<ExceptionBook> {
        Arc::clone(&self.exceptions)
    }

    /// Talks to the detection workers (feedback, baselines).
    pub fn detect(&self) -> DetectHandle {
        self.detect.clone()
    }

    /// The HTTP ingest handle, when that input is enabled.
    pub fn http_ingest(&self) -> Option<HttpIngest> {
        self.http.clone()
    }

    /// Addresses the network inputs actually listen on (useful with port 0 in tests).
    pub fn bound(&self, id: InputId) -> Option<SocketAddr> {
        self.bound.iter().find(|(i, _)| *i == id).map(|(_, a)| *a)
    }

    /// What stops the inputs reading: the service calls it the moment a signal arrives, long
    /// before the API has finished its last requests and [`Pipeline::shutdown_within`] runs.
    pub fn stopper(&self) -> Stopper {
        Stopper(Arc::clone(&self.stop))
    }

    /// [`Pipeline::shutdown`], given at most `deadline`: past it, the report says what was not
    /// stored and the caller exits anyway (the shutdown goes on in its thread until the process
    /// ends). A store that refuses every write would otherwise keep the process alive forever;
    /// what HTTP acknowledged is in the spool and is stored at the next start.
    pub fn shutdown_within(self, deadline: std::time::Duration) -> ShutdownReport {
        let stats = Arc::clone(&self.stats);
        let store = Arc::clone(&self.store);
        self.stop.store(true, Ordering::Relaxed);
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
        let spawned = std::thread::Builder::new()
            .name("wp-shutdown".into())
            .spawn(move || {
                self.shutdown();
                let _ = done_tx.send(());
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the shutdown thread: {e}");
        }
        let completed = done_rx.recv_timeout(deadline).is_ok();
        let s = stats.snapshot();
        let report = ShutdownReport {
            completed,
            unstored_events: s
                .received_total
                .saturating_sub(s.dropped_total)
                .saturating_sub(s.stored_total),
            spooled_requests: if completed {
                0
            } else {
                store.spooled().map_or(0, |p| p.len() as u64)
            },
            // Alerts and signals the store refused, kept in memory for a retry that the exit
            // ends: their events are stored, so nothing raises them again.
            unstored_alerts: if completed { 0 } else { s.detection.unwritten },
        };
        if !completed {
            tracing::error!(
                "shutdown: not finished after {} s ({}): about {} accepted events are not stored; \
                 {} acknowledged requests wait in the ingest spool for the next start; {} alerts \
                 and signals the store refused are lost (they were on the WebSocket stream and \
                 in this log as they were raised)",
                deadline.as_secs(),
                "dataplane.shutdown_timeout_seconds",
                report.unstored_events,
                report.spooled_requests,
                report.unstored_alerts
            );
        }
        report
    }

    /// Stops reading, drains every ring, commits everything accepted and flushes the store.
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.http = None;
        for h in self.inputs.drain(..) {
            let _ = h.join();
        }
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        for h in self.detectors.drain(..) {
            let _ = h.join();
        }
        // The hits of the last moments, counted after the workers' last periodic save.
        if let Err(e) = self.exceptions.save_hits() {
            tracing::error!("cannot save the exceptions' hit counts: {e}");
        }
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        if let Some(w) = self.ioc_watcher.take() {
            let _ = w.join();
        }
        for id in InputId::ALL {
            self.stats.input(id).up.store(false, Ordering::Relaxed);
        }
        tracing::info!(
            "data plane stopped: {} events stored",
            self.stats.writer.stored.get()
        );
    }
}

/// Tells the inputs to stop reading (see [`Pipeline::stopper`]).
#[derive(Clone)]
pub struct Stopper(Arc<AtomicBool>);

impl Stopper {
    /// Every input stops reading at its next check (a read call, a poll, a linger tick).
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// How a shutdown with a deadline ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Everything accepted was stored and the store flushed.
    pub completed: bool,
    /// Accepted events (received, not dropped) that were not stored when the report was made.
    pub unstored_events: u64,
    /// Acknowledged requests left in the ingest spool (stored at the next start).
    pub spooled_requests: u64,
    /// Alerts and signals waiting for a store that refused them: lost at the exit.
    pub unstored_alerts: u64,
}

/// An enabled input, bound: what it is, how its lines are read, and its runtime half.
struct BoundInput {
    input: &'static dyn Input,
    format: Format,
    bound: Box<dyn Bound>,
}

/// Binds every enabled input of the registry, in its order; the first failure names the key of
/// the address and leaves nothing bound.
fn bind_inputs(cfg: &Config) -> Result<Vec<BoundInput>, Error> {
    INPUTS
        .iter()
        .filter(|input| input.enabled(&cfg.inputs))
        .map(|&input| {
            Ok(BoundInput {
                input,
                format: input.format(&cfg.inputs),
                bound: input.bind(cfg)?,
            })
        })
        .collect()
}

/// What every thread the pipeline starts shares.
struct Shared<'a> {
    cfg: &'a Config,
    store: &'a Arc<Store>,
    catalog: &'a Arc<Catalog>,
    iocs: &'a Arc<IocFeed>,
    exceptions: &'a Arc<ExceptionBook>,
    stats: &'a Arc<Stats>,
    stop: &'a Arc<AtomicBool>,
    /// Core of each pinned thread: stage A workers, the writer, then stage B workers.
    cores: &'a [Option<core_affinity::CoreId>],
}

/// One stage A worker's ends of the rings: its inputs, its ring to the writer and the blocks
/// coming back, its rings to every stage B worker and the vectors coming back.
struct WorkerRings {
    inputs: Vec<WorkerInput>,
    to_writer: Producer<Box<EncodedBlock>>,
    free_blocks: crossbeam_channel::Receiver<Box<EncodedBlock>>,
    to_detect: Vec<Producer<RecordBatch>>,
    detect_free: Vec<crossbeam_channel::Receiver<RecordBatch>>,
}

/// Every ring of the pipeline: every enabled input to every stage A worker, every stage A
/// worker to the writer and to every stage B worker, each with a gauge for `/stats`.
struct Wiring {
    input_rings: Vec<InputRings>,
    workers: Vec<WorkerRings>,
    writer_inputs: Vec<Consumer<Box<EncodedBlock>>>,
    returns: Vec<crossbeam_channel::Sender<Box<EncodedBlock>>>,
    detect_inputs: Vec<Vec<DetectInput>>,
    gauges: Vec<RingGauge>,
}

impl Wiring {
    fn new(
        cfg: &Config,
        enabled: &[(InputId, Format)],
        workers: usize,
        detectors: usize,
    ) -> Wiring {
        let dp = &cfg.dataplane;
        let ring_cap = dp.ring_capacity as usize;
        let pool_cap = ring_cap * workers + 2 * workers + 2;
        let mut worker_inputs: Vec<Vec<WorkerInput>> = (0..workers).map(|_| Vec::new()).collect();
        let mut input_rings = Vec::new();
        let mut gauges = Vec::new();
        for &(id, format) in enabled {
            let pool = Pool::new(
                id,
                format,
                pool_cap,
                dp.batch_size as usize,
                dp.batch_bytes as usize,
            );
            let mut producers = Vec::new();
            for (w, inputs) in worker_inputs.iter_mut().enumerate() {
                let (p, c): (Producer<Box<RawBatch>>, Consumer<Box<RawBatch>>) = ring(ring_cap);
                let probe = c.receiver().clone();
                gauges.push(RingGauge::new(
                    format!("{}->worker{w}", id.name()),
                    ring_cap,
                    move || probe.len(),
                ));
                producers.push(p);
                inputs.push(WorkerInput {
                    ring: c,
                    pool: pool.clone(),
                });
            }
            input_rings.push(InputRings {
                id,
                producers,
                pool,
            });
        }
        let mut to_writer = Vec::new();
        let mut writer_inputs = Vec::new();
        let mut returns = Vec::new();
        let mut free_blocks = Vec::new();
        for w in 0..workers {
            let (p, c) = ring::<Box<EncodedBlock>>(ring_cap);
            let probe = c.receiver().clone();
            gauges.push(RingGauge::new(
                format!("worker{w}->writer"),
                ring_cap,
                move || probe.len(),
            ));
            to_writer.push(p);
            writer_inputs.push(c);
            let (tx, rx) = crossbeam_channel::bounded(ring_cap + 4);
            returns.push(tx);
            free_blocks.push(rx);
        }
        // Stage A to stage B: one ring per pair, and a way back for the emptied vectors.
        let mut to_detect: Vec<Vec<Producer<RecordBatch>>> =
            (0..workers).map(|_| Vec::new()).collect();
        let mut detect_free: Vec<Vec<crossbeam_channel::Receiver<RecordBatch>>> =
            (0..workers).map(|_| Vec::new()).collect();
        let mut detect_inputs: Vec<Vec<DetectInput>> = (0..detectors).map(|_| Vec::new()).collect();
        for w in 0..workers {
            for (b, inputs) in detect_inputs.iter_mut().enumerate() {
                let (p, c) = ring::<RecordBatch>(ring_cap);
                let probe = c.receiver().clone();
                gauges.push(RingGauge::new(
                    format!("worker{w}->detect{b}"),
                    ring_cap,
                    move || probe.len(),
                ));
                let (tx, rx) = crossbeam_channel::bounded(ring_cap + 4);
                to_detect[w].push(p);
                detect_free[w].push(rx);
                inputs.push(DetectInput {
                    ring: c,
                    returns: tx,
                });
            }
        }
        let workers = worker_inputs
            .into_iter()
            .zip(to_writer.into_iter().zip(free_blocks))
            .zip(to_detect.into_iter().zip(detect_free))
            .map(
                |((inputs, (to_writer, free_blocks)), (to_detect, detect_free))| WorkerRings {
                    inputs,
                    to_writer,
                    free_blocks,
                    to_detect,
                    detect_free,
                },
            )
            .collect();
        Wiring {
            input_rings,
            workers,
            writer_inputs,
            returns,
            detect_inputs,
            gauges,
        }
    }
}

/// Starts the stage B workers, each with its detector restored from the store; returns the
/// handle the API reaches them through.
fn spawn_detectors(
    shared: &Shared<'_>,
    detect_inputs: Vec<Vec<DetectInput>>,
    live: &Arc<LiveAlerts>,
) -> Result<(DetectHandle, Vec<JoinHandle<()>>), Error> {
    let cfg = shared.cfg;
    let workers = cfg.dataplane.parse_workers as usize;
    let detectors = detect_inputs.len();
    let (detect, controls) = control_channels(detectors);
    let params = DetectorParams::from_config(cfg);
    // One kill-chain tracker for every stage B worker: an entity's alerts come from several.
    let killchain = Arc::new(std::sync::Mutex::new(
        watchpost_detect::KillChain::from_config(cfg),
    ));
    // One board of who uses each host: a host's baseline is one worker's, the people who come
    // to it are others'.
    let peers = Arc::new(watchpost_detect::PeerBoard::default());
    let mut handles = Vec::new();
    for (b, (inputs, control)) in detect_inputs.into_iter().zip(controls).enumerate() {
        let mut detector = restore(shared.store, b, detectors, params.clone())?;
        detector.set_catalog(Some(shared.catalog.clone()));
        detector.set_iocs(Some(shared.iocs.clone()));
        detector.set_killchain(Arc::clone(&killchain));
        detector.set_peer_board(Arc::clone(&peers));
        let setup = DetectSetup {
            index: b,
            inputs,
            control,
            save_interval: Duration::from_secs(cfg.detection.model_save_interval_seconds),
            core: shared.cores.get(workers + 1 + b).copied().flatten(),
            live: Arc::clone(live),
            exceptions: Arc::clone(shared.exceptions),
        };
        handles.push(
            spawn_detector(
                setup,
                detector,
                Arc::clone(shared.store),
                Arc::clone(shared.stats),
            )
            .map_err(Error::Thread)?,
        );
    }
    Ok((detect, handles))
}

/// Starts the stage A workers, each with a template miner that knows the stored templates.
fn spawn_workers(
    shared: &Shared<'_>,
    rings: Vec<WorkerRings>,
    persisted: &[(u64, String)],
) -> Result<Vec<JoinHandle<()>>, Error> {
    let dp = &shared.cfg.dataplane;
    let miner_cfg = MinerConfig::from_config(&shared.cfg.templates);
    let mut handles = Vec::new();
    for (w, r) in rings.into_iter().enumerate() {
        let mut miner = TemplateMiner::new(&miner_cfg)?;
        for (id, text) in persisted {
            miner.restore(*id, text);
        }
        let setup = WorkerSetup {
            index: w,
            inputs: r.inputs,
            to_writer: r.to_writer,
            free_blocks: r.free_blocks,
            max_blocks: dp.ring_capacity as usize + 2,
            batch_size: dp.batch_size as usize,
            normalizer: {
                let mut n = Normalizer::new(miner);
                n.set_max_matches(shared.cfg.detection.sigma_max_matches_per_event as usize);
                n.set_severity_scales(&shared.cfg.severity);
                n
            },
            core: shared.cores.get(w).copied().flatten(),
            to_detect: r.to_detect,
            detect_free: r.detect_free,
            store: Arc::clone(shared.store),
            catalog: Some(Arc::clone(shared.catalog)),
            iocs: Some(Arc::clone(shared.iocs)),
        };
        handles.push(spawn_worker(setup, Arc::clone(shared.stats)).map_err(Error::Thread)?);
    }
    Ok(handles)
}

/// The running inputs: their threads, the addresses they bound, the HTTP ingest handle.
struct Inputs {
    handles: Vec<JoinHandle<()>>,
    bound: Vec<(InputId, SocketAddr)>,
    http: Option<HttpIngest>,
}

/// Starts every bound input on its rings, each replaying first what it acknowledged before the
/// last stop and did not store; an input is marked up only once its thread runs.
fn spawn_inputs(
    shared: &Shared<'_>,
    bound: Vec<BoundInput>,
    input_rings: Vec<InputRings>,
) -> Result<Inputs, Error> {
    let linger = shared.cfg.dataplane.batch_linger_ms;
    let mut out = Inputs {
        handles: Vec::new(),
        bound: Vec::new(),
        http: None,
    };
    // Acknowledged before the last stop and not stored then: each acknowledging input replays
    // its own before it takes new requests.
    let mut pending = shared.store.spooled()?;
    for (b, r) in bound.into_iter().zip(input_rings) {
        let id = b.input.id();
        debug_assert_eq!(id, r.id, "rings are wired in the order inputs are bound");
        if let Some(addr) = b.bound.local_addr() {
            out.bound.push((id, addr));
        }
        let replay = if b.input.delivery() == Delivery::Durable {
            take_pending(&mut pending, id)
        } else {
            Vec::new()
        };
        let running = b.bound.start(Start {
            cfg: shared.cfg,
            outlet: Outlet::new(r.producers, r.pool, linger, Arc::clone(shared.stats), id),
            store: shared.store,
            stats: shared.stats,
            stop: shared.stop,
            pending: replay,
        })?;
        shared.stats.input(id).up.store(true, Ordering::Relaxed);
        out.handles.push(running.thread);
        if running.http.is_some() {
            out.http = running.http;
        }
    }
    let stats = shared.stats;
    if !pending.is_empty() {
        let inputs: std::collections::BTreeSet<&str> = pending
            .iter()
            .filter_map(|r| spool::input_of(&r.record).map(InputId::name))
            .collect();
        tracing::warn!(
            "{} acknowledged request(s) wait in the ingest spool for input(s) {:?}, which are \
             disabled: they stay there and are stored once those inputs are enabled again",
            pending.len(),
            inputs
        );
        stats
            .spool
            .orphaned
            .store(pending.len() as u64, Ordering::Relaxed);
    }
    Ok(out)
}

/// Takes the spooled requests of `input` out of `pending`.
fn take_pending(
    pending: &mut Vec<watchpost_store::SpooledRequest>,
    input: InputId,
) -> Vec<watchpost_store::SpooledRequest> {
    let (mine, rest) = std::mem::take(pending)
        .into_iter()
        .partition(|r| spool::input_of(&r.record) == Some(input));
    *pending = rest;
    mine
}

/// The cores no pinned thread of the data plane uses, for work that must stay off its cores
/// (the local LLM runner); empty when pinning is off (the data plane may then run anywhere) or
/// every core is taken.
pub fn spare_cores(cfg: &Config) -> Vec<usize> {
    let Ok(assigned) = assign_cores(cfg) else {
        return Vec::new();
    };
    if assigned.iter().any(Option::is_none) {
        return Vec::new();
    }
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .filter(|id| !assigned.iter().flatten().any(|a| a.id == *id))
        .collect()
}

/// Cores for each worker, then the writer (`None` = not pinned).
fn assign_cores(cfg: &Config) -> Result<Vec<Option<core_affinity::CoreId>>, Error> {
    // Stage A workers, the writer, then stage B workers.
    let n = cfg.dataplane.parse_workers as usize + 1 + cfg.dataplane.detect_workers as usize;
    if !cfg.dataplane.pin_workers {
        return Ok(vec![None; n]);
    }
    let available = core_affinity::get_core_ids().unwrap_or_default();
    if available.is_empty() {
        return Ok(vec![None; n]);
    }
    if cfg.dataplane.cores.is_empty() {
        return Ok((0..n)
            .map(|i| Some(available[i % available.len()]))
            .collect());
    }
    let mut chosen = Vec::new();
    for &c in &cfg.dataplane.cores {
        match available.iter().find(|a| a.id == c as usize) {
            Some(a) => chosen.push(*a),
            None => {
                let list: Vec<String> = available.iter().map(|a| a.id.to_string()).collect();
                return Err(Error::Core {
                    core: c,
                    available: list.join(", "),
                });
            }
        }
    }
    Ok((0..n).map(|i| Some(chosen[i % chosen.len()])).collect())
}
