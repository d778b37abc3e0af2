//! Builds and runs the data plane: binds the inputs, starts pinned workers and the writer, and
//! stops them in order so that everything accepted is stored.
//!
//! Start-up binds every socket and opens the store before any thread runs, so a busy port or an
//! unwritable data folder is a clear start-up error, not a half-running service. Shutdown goes
//! front to back: inputs stop reading and flush their open batches; closing their rings lets the
//! workers drain and exit; that closes the writer's rings, and the writer commits the last blocks
//! and flushes RocksDB.

use crate::Error;
use crate::batch::{Format, Pool, RawBatch};

use crate::catalog::Catalog;
use crate::input::framing::Framing;
use crate::input::http::HttpIngest;
use crate::input::outlet::Outlet;
use crate::input::tcp::TcpSettings;
use crate::input::{file, http, tcp, udp};
use crate::ioc::IocFeed;
use crate::live::LiveAlerts;
use crate::normalize::Normalizer;
use crate::ring::{Consumer, Producer, ring};
use crate::stage::{
    DetectHandle, DetectInput, DetectSetup, RecordBatch, control_channels, restore, spawn_detector,
};
use crate::stats::{RingGauge, Stats};
use crate::template::{MinerConfig, TemplateMiner};
use crate::worker::{WorkerInput, WorkerSetup, spawn_worker};
use crate::writer::spawn_writer;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_detect::DetectorParams;
use watchpost_proto::Config;
use watchpost_proto::InputId;
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
    /// Starts everything `cfg` enables.
    pub fn start(cfg: &Config) -> Result<Pipeline, Error> {
        let dp = &cfg.dataplane;
        let workers = dp.parse_workers as usize;
        let detectors = dp.detect_workers as usize;
        let cores = assign_cores(cfg)?;
        let miner_cfg = MinerConfig::from_config(&cfg.templates);

        // Bind first: failures here leave nothing running.
        let i = &cfg.inputs;
        let udp_socket = if i.syslog_udp.enabled {
            let s = UdpSocket::bind(&i.syslog_udp.address).map_err(|source| Error::Bind {
                key: "inputs.syslog_udp.address",
                addr: i.syslog_udp.address.clone(),
                source,
            })?;
            udp::set_recv_buffer(&s, i.syslog_udp.recv_buffer_bytes);
            Some(s)
        } else {
            None
        };
        let bind_tcp =
            |enabled: bool, addr: &str, key: &'static str| -> Result<Option<TcpListener>, Error> {
                if !enabled {
                    return Ok(None);
                }
                TcpListener::bind(addr)
                    .map(Some)
                    .map_err(|source| Error::Bind {
                        key,
                        addr: addr.to_string(),
                        source,
                    })
            };
        let syslog_tcp = bind_tcp(
            i.syslog_tcp.enabled,
            &i.syslog_tcp.address,
            "inputs.syslog_tcp.address",
        )?;
        let json_tcp = bind_tcp(
            i.json_tcp.enabled,
            &i.json_tcp.address,
            "inputs.json_tcp.address",
        )?;

        let store = Arc::new(Store::open(&cfg.data_dir(), &cfg.storage)?);
        let persisted = store.templates()?;
        let catalog = Arc::new(Catalog::load(cfg, Some(Arc::clone(&store)))?);
        tracing::info!(
            "sigma: {} rules loaded ({} could not be read)",
            catalog.all().len(),
            catalog.load_errors.len()
        );
        let iocs = Arc::new(IocFeed::open(cfg, true)?);

        // Rings: every enabled input to every worker, every worker to the writer.
        let ring_cap = dp.ring_capacity as usize;
        let pool_cap = ring_cap * workers + 2 * workers + 2;
        let mut enabled: Vec<(InputId, Format)> = Vec::new();
        if udp_socket.is_some() {
            enabled.push((InputId::SyslogUdp, Format::Syslog));
        }
        if syslog_tcp.is_some() {
            enabled.push((InputId::SyslogTcp, Format::Syslog));
        }
        if json_tcp.is_some() {
            enabled.push((InputId::JsonTcp, Format::Json));
        }
        if i.file.enabled {
            let format = match i.file.format.as_str() {
                "json" => Format::Json,
                "syslog" => Format::Syslog,
                _ => Format::Auto,
            };
            enabled.push((InputId::File, format));
        }
        if i.http.enabled {
            enabled.push((InputId::Http, Format::Json));
        }
        let mut gauges = Vec::new();
        let mut worker_inputs: Vec<Vec<WorkerInput>> = (0..workers).map(|_| Vec::new()).collect();
        let mut input_rings = Vec::new();
        for &(id, format) in &enabled {
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
        let stats = Stats::new(workers, detectors, watchpost_proto::now_ns(), gauges);
        let stop = Arc::new(AtomicBool::new(false));
        let ioc_watcher = Arc::clone(&iocs)
            .spawn_watcher(
                Duration::from_secs(cfg.detection.ioc_reload_interval_seconds),
                Arc::clone(&stop),
            )
            .map_err(Error::Thread)?;

        let writer = spawn_writer(
            Arc::clone(&store),
            writer_inputs,
            returns,
            Arc::clone(&stats),
            cfg.storage.retention_days,
            cores.get(workers).copied().flatten(),
        )
        .map_err(Error::Thread)?;

        let (detect, controls) = control_channels(detectors);
        let params = DetectorParams::from_config(cfg);
        // One kill-chain tracker for every stage B worker: an entity's alerts come from several.
        let killchain = Arc::new(std::sync::Mutex::new(
            watchpost_detect::KillChain::from_config(cfg),
        ));
        let live = Arc::new(LiveAlerts::default());
        let mut detector_handles = Vec::new();
        for (b, (inputs, control)) in detect_inputs.into_iter().zip(controls).enumerate() {
            let mut detector = restore(&store, b, detectors, params.clone())?;
            detector.set_catalog(Some(catalog.clone()));
            detector.set_iocs(Some(iocs.clone()));
            detector.set_killchain(Arc::clone(&killchain));
            let setup = DetectSetup {
                index: b,
                inputs,
                control,
                save_interval: Duration::from_secs(cfg.detection.model_save_interval_seconds),
                core: cores.get(workers + 1 + b).copied().flatten(),
                live: Arc::clone(&live),
            };
            detector_handles.push(
                spawn_detector(setup, detector, Arc::clone(&store), Arc::clone(&stats))
                    .map_err(Error::Thread)?,
            );
        }

        let mut worker_handles = Vec::new();
        for (w, ((inputs, (to_writer, free)), (to_detect, detect_free))) in worker_inputs
            .into_iter()
            .zip(to_writer.into_iter().zip(free_blocks))
            .zip(to_detect.into_iter().zip(detect_free))
            .enumerate()
        {
            let mut miner = TemplateMiner::new(&miner_cfg)?;
            for (id, text) in &persisted {
                miner.restore(*id, text);
            }
            let setup = WorkerSetup {
                index: w,
                inputs,
                to_writer,
                free_blocks: free,
                max_blocks: ring_cap + 2,
                batch_size: dp.batch_size as usize,
                normalizer: Normalizer::new(miner),
                core: cores.get(w).copied().flatten(),
                to_detect,
                detect_free,
                store: Arc::clone(&store),
                catalog: Some(Arc::clone(&catalog)),
                iocs: Some(Arc::clone(&iocs)),
            };
            worker_handles.push(spawn_worker(setup, Arc::clone(&stats)).map_err(Error::Thread)?);
        }

        let max_line = dp.max_line_bytes as usize;
        let linger = dp.batch_linger_ms;
        let mut input_handles = Vec::new();
        let mut bound = Vec::new();
        let mut http_handle = None;
        for r in input_rings {
            let outlet = Outlet::new(r.producers, r.pool, linger, Arc::clone(&stats), r.id);
            let counters = stats.input(r.id);
            counters.up.store(true, Ordering::Relaxed);
            let h = match r.id {
                InputId::SyslogUdp => {
                    let s = udp_socket.as_ref().and_then(|s| s.try_clone().ok());
                    let Some(s) = s else { continue };
                    if let Ok(a) = s.local_addr() {
                        bound.push((r.id, a));
                    }
                    udp::spawn(s, outlet, max_line, linger, Arc::clone(&stop))
                        .map_err(Error::Thread)?
                }
                InputId::SyslogTcp | InputId::JsonTcp => {
                    let (listener, t) = if r.id == InputId::SyslogTcp {
                        (syslog_tcp.as_ref(), &i.syslog_tcp)
                    } else {
                        (json_tcp.as_ref(), &i.json_tcp)
                    };
                    let Some(l) = listener.and_then(|l| l.try_clone().ok()) else {
                        continue;
                    };
                    if let Ok(a) = l.local_addr() {
                        bound.push((r.id, a));
                    }
                    let settings = TcpSettings {
                        input: r.id,
                        framing: if r.id == InputId::SyslogTcp {
                            Framing::Syslog
                        } else {
                            Framing::Newline
                        },
                        max_line,
                        max_connections: t.max_connections as usize,
                        idle_timeout: Duration::from_secs(t.idle_timeout_s),
                        linger: Duration::from_millis(linger),
                    };
                    tcp::spawn(l, outlet, settings, Arc::clone(&stats), Arc::clone(&stop))
                        .map_err(Error::Thread)?
                }
                InputId::File => file::spawn(
                    file::FileSettings {
                        patterns: i.file.paths.clone(),
                        from_beginning: i.file.start_at == "beginning",
                        poll: Duration::from_millis(i.file.poll_interval_ms),
                        max_line,
                    },
                    outlet,
                    Arc::clone(&store),
                    Arc::clone(&stats),
                    Arc::clone(&stop),
                )
                .map_err(Error::Thread)?,
                InputId::Http => {
                    let (handle, h) = http::spawn(outlet, max_line, linger, Arc::clone(&stop))
                        .map_err(Error::Thread)?;
                    http_handle = Some(handle);
                    h
                }
            };
            input_handles.push(h);
        }
        tracing::info!(
            "data plane started: {} worker(s), inputs {:?}, store {}",
            workers,
            bound,
            store.path().display()
        );
        Ok(Pipeline {
            stats,
            store,
            stop,
            inputs: input_handles,
            workers: worker_handles,
            detectors: detector_handles,
            detect,
            catalog,
            iocs,
            live,
            ioc_watcher: Some(ioc_watcher),
            writer: Some(writer),
            http: http_handle,
            bound,
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
