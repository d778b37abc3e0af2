//! The service as `watchpost run` starts it: the data plane and the API wired together on one
//! runtime, started and stopped as one. The binary only loads the configuration and sets up
//! logging; everything that makes the running service is here, in the crate that serves it.

use crate::{AppState, BodyGuard, Hub, Llm, Notifier, NotifyError, RateLimits, RateSampler};
use crate::{Reloader, WsConfig};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use watchpost_dataplane::{Pipeline, StageB, Stopper};
use watchpost_proto::Config;
use watchpost_proto::config::ConfigError;

/// How long the API's in-flight requests may run on after a stop signal.
const API_GRACE: Duration = Duration::from_secs(5);

/// Why the service could not start, or did not stop cleanly. Each message is what the operator
/// reads on standard error; [`ServiceError::exit_code`] is the process's status.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The API's tokio runtime could not be built.
    #[error("cannot start the API runtime: {0}")]
    Runtime(std::io::Error),
    /// A listener could not bind (`dashboard_port` or `health_port`).
    #[error("{key}: cannot listen on {addr}: {source}")]
    Listen {
        /// The configuration key of the port.
        key: &'static str,
        /// The address tried.
        addr: String,
        /// Why not.
        source: std::io::Error,
    },
    /// The data plane did not start (an input's address, the store, the rules...).
    #[error("cannot start: {0}")]
    Pipeline(watchpost_dataplane::Error),
    /// The API's rate limits do not parse.
    #[error("invalid configuration: {0}")]
    RateLimits(ConfigError),
    /// A notification channel cannot be built.
    #[error("cannot start: {0}")]
    Notifications(NotifyError),
    /// The fleet's servers cannot be used as configured.
    #[error("invalid configuration: {0}")]
    Cluster(watchpost_cluster::ClusterError),
    /// A console's client for the sensors' APIs cannot be built (the system's CA roots).
    #[error("cannot start the console's searches across the sensors: {0}")]
    Fanout(watchpost_outbound::TrustError),
    /// The API server failed while serving.
    #[error("API server failed: {0}")]
    Api(std::io::Error),
    /// Stopped at `dataplane.shutdown_timeout_seconds` with accepted events, spooled requests or
    /// alerts not stored (the pipeline has logged how many of each).
    #[error("stopped before everything accepted was stored (dataplane.shutdown_timeout_seconds)")]
    Incomplete,
}

impl ServiceError {
    /// The process's exit status: 2 for a configuration the checks let through but the service
    /// cannot use, 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ServiceError::RateLimits(_)
            | ServiceError::Notifications(_)
            | ServiceError::Cluster(_) => 2,
            _ => 1,
        }
    }
}

/// Runs the service on `cfg` (read from `config_path`, which a reload reads again) until a
/// stop signal, then stores what was accepted. SIGHUP must be ignored before this is called
/// (its default action ends the process, and the reload listener is installed here).
pub fn run(cfg: Config, config_path: Option<PathBuf>) -> Result<(), ServiceError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("wp-api")
        .enable_all()
        .build()
        .map_err(ServiceError::Runtime)?;
    // Signals are taken over before anything can be reached: a SIGTERM that came between the
    // listener accepting connections and a handler being installed killed the process without
    // its flush, and one that came while the handler was being installed was lost.
    let signals = {
        let _in_runtime = runtime.enter();
        ShutdownSignals::install()
    };
    // SIGHUP reloads the configuration (docs/reload.md). Listened for from here: its default
    // action would end the process, so one that came before the reloader exists waits for it.
    let hangup = {
        let _in_runtime = runtime.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| tracing::error!("cannot listen for SIGHUP: {e}"))
            .ok()
    };
    let api_addr = format!("{}:{}", cfg.dashboard_bind_address, cfg.dashboard_port);
    let api_listener = bind("dashboard_port", &api_addr)?;
    // Probes get their own listener so that they can be reached where the API is not (a pod
    // address for an orchestrator, while the API stays on loopback behind a proxy).
    let probe_listener = if cfg.health_port == 0 {
        None
    } else {
        let addr = format!("{}:{}", cfg.health_bind_address, cfg.health_port);
        Some((bind("health_port", &addr)?, addr))
    };
    // A fleet's node: its data path by its roles (docs/cluster.md). A sensor's records go to
    // the fleet's detectors; a node that is not a sensor reads no input.
    let fleet = cfg.cluster.enabled().then(|| {
        Arc::new(watchpost_cluster::Fleet::new(
            &cfg.cluster,
            &node_name(&cfg.cluster),
        ))
    });
    let mut cfg = cfg;
    let stage_b = match &fleet {
        Some(f) if cfg.cluster.has_role("sensor") => {
            let _in_runtime = runtime.enter();
            let spool = cfg.data_dir().join("cluster-spool");
            StageB::Remote(Box::new(
                f.sensor_link(&spool).map_err(ServiceError::Cluster)?,
            ))
        }
        Some(_) => {
            tracing::info!("cluster: this node is not a sensor: its inputs are not started");
            cfg.inputs.disable_all();
            StageB::Local
        }
        None => StageB::Local,
    };
    let pipeline = Pipeline::start_with(&cfg, stage_b).map_err(ServiceError::Pipeline)?;
    // From here a first signal stops the inputs reading at once (the API then finishes its
    // last requests and the pipeline stores what was accepted); a second exits at once.
    let first_signal = {
        let _in_runtime = runtime.enter();
        signals.watch(pipeline.stopper())
    };
    let shutdown_deadline = Duration::from_secs(cfg.dataplane.shutdown_timeout_seconds);
    let state = match api_state(cfg, config_path, &pipeline, &runtime, hangup, fleet) {
        Ok(s) => s,
        Err(e) => {
            pipeline.shutdown();
            return Err(e);
        }
    };
    tracing::info!("API listening on http://{api_addr}/api/v1");
    let served = runtime.block_on(async move {
        api_listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(api_listener)?;
        let probes = match probe_listener {
            None => None,
            Some((l, addr)) => {
                l.set_nonblocking(true)?;
                tracing::info!("health probes on http://{addr}/health and /metrics");
                Some(tokio::net::TcpListener::from_std(l)?)
            }
        };
        let mut stopped = first_signal.clone();
        let served = crate::serve(listener, probes, state, async move {
            let _ = stopped.wait_for(|s| *s).await;
        });
        // In-flight requests get a grace period after the signal; a client that sends half a
        // request and waits (or never reads its answer) must not hold the stop for longer.
        let mut stopped = first_signal;
        let grace = async move {
            let _ = stopped.wait_for(|s| *s).await;
            tokio::time::sleep(API_GRACE).await;
        };
        tokio::select! {
            r = served => r,
            () = grace => {
                tracing::warn!(
                    "API: connections still open {} s after the stop signal; closing them",
                    API_GRACE.as_secs()
                );
                Ok(())
            }
        }
    });
    tracing::info!(
        "shutting down: storing everything accepted (at most {} s, dataplane.shutdown_timeout_seconds)",
        shutdown_deadline.as_secs()
    );
    // The pipeline's shutdown runs while the runtime still listens for a second signal.
    let report = pipeline.shutdown_within(shutdown_deadline);
    runtime.shutdown_timeout(Duration::from_secs(5));
    match (served, report.completed) {
        (Ok(()), true) => Ok(()),
        (Ok(()), false) => Err(ServiceError::Incomplete),
        (Err(e), _) => Err(ServiceError::Api(e)),
    }
}

fn bind(key: &'static str, addr: &str) -> Result<std::net::TcpListener, ServiceError> {
    std::net::TcpListener::bind(addr).map_err(|source| ServiceError::Listen {
        key,
        addr: addr.to_string(),
        source,
    })
}

/// What the API's handlers share: the pipeline's handles, and the API's own parts (rate
/// limits, the stream, the LLM, notifications, reloads), started on `runtime`.
fn api_state(
    cfg: Config,
    config_path: Option<PathBuf>,
    pipeline: &Pipeline,
    runtime: &tokio::runtime::Runtime,
    hangup: Option<tokio::signal::unix::Signal>,
    fleet: Option<Arc<watchpost_cluster::Fleet>>,
) -> Result<AppState, ServiceError> {
    let limits = Arc::new(RateLimits::from_config(&cfg).map_err(ServiceError::RateLimits)?);
    let ws = Arc::new(Hub::new(
        WsConfig::from_config(&cfg),
        pipeline.store(),
        Some(pipeline.live_alerts()),
    ));
    let llm = Arc::new(Llm::new(
        &cfg.llm,
        &cfg.data_dir(),
        watchpost_dataplane::spare_cores(&cfg),
    ));
    let notifier = Arc::new(
        Notifier::new(&cfg.notifications, pipeline.store()).map_err(ServiceError::Notifications)?,
    );
    let cluster = {
        let _in_runtime = runtime.enter();
        notifier.start();
        let membership = join_cluster(&cfg, fleet.as_ref())?;
        if let (Some(fleet), Some(membership)) = (&fleet, &membership) {
            start_fleet_roles(&cfg, pipeline, fleet, membership)?;
        }
        membership
    };
    let fanout = if cluster.is_some() && cfg.cluster.has_role("console") {
        let timeout = Duration::from_millis(cfg.cluster.fanout_timeout_ms);
        Some(Arc::new(
            crate::fanout::Fanout::new(timeout).map_err(ServiceError::Fanout)?,
        ))
    } else {
        None
    };
    let ingest_in_flight = cfg.api_ingest_max_in_flight;
    let bodies = Arc::new(BodyGuard::new(&cfg));
    let cfg = Arc::new(cfg);
    let reloader = Arc::new(Reloader::new(
        config_path,
        Arc::clone(&cfg),
        pipeline.catalog(),
        pipeline.iocs(),
        Arc::clone(&notifier),
    ));
    if let Some(mut hangup) = hangup {
        let reloader = Arc::clone(&reloader);
        runtime.spawn(async move {
            while hangup.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading the configuration");
                // The outcome is logged by the reloader.
                let _ = reloader.reload().await;
            }
        });
    }
    Ok(AppState {
        api_metrics: Default::default(),
        ws,
        config: cfg,
        stats: pipeline.stats(),
        store: pipeline.store(),
        ingest: pipeline.http_ingest(),
        detect: pipeline.detect(),
        catalog: pipeline.catalog(),
        iocs: pipeline.iocs(),
        exceptions: pipeline.exceptions(),
        rates: Arc::new(RateSampler::default()),
        limits,
        llm,
        notifier,
        cluster,
        fleet,
        fanout,
        reloader,
        started: Instant::now(),
        ingest_permits: Arc::new(tokio::sync::Semaphore::new(ingest_in_flight as usize)),
        bodies,
    })
}

/// This node's membership of the fleet when `[cluster]` names servers (inside the runtime).
fn join_cluster(
    cfg: &Config,
    fleet: Option<&Arc<watchpost_cluster::Fleet>>,
) -> Result<Option<Arc<watchpost_cluster::Membership>>, ServiceError> {
    let c = &cfg.cluster;
    let Some(fleet) = fleet else {
        return Ok(None);
    };
    let node = watchpost_cluster::NodeRecord::this_node(fleet.node(), c, &api_url(cfg));
    let membership = watchpost_cluster::Membership::start(c, node, Some(fleet.counters()))
        .map_err(ServiceError::Cluster)?;
    Ok(Some(Arc::new(membership)))
}

/// Starts what the node's detector and console roles run (inside the runtime).
fn start_fleet_roles(
    cfg: &Config,
    pipeline: &Pipeline,
    fleet: &watchpost_cluster::Fleet,
    membership: &Arc<watchpost_cluster::Membership>,
) -> Result<(), ServiceError> {
    let c = &cfg.cluster;
    fleet
        .share_content(watchpost_cluster::ContentParts {
            catalog: pipeline.catalog(),
            exceptions: pipeline.exceptions(),
            ioc_dir: cfg.ioc_dir(),
            ioc_scan: Duration::from_secs(cfg.detection.ioc_reload_interval_seconds),
        })
        .map_err(ServiceError::Cluster)?;
    if c.has_role("detector") {
        let kit = watchpost_cluster::DetectorKit {
            params: watchpost_detect::DetectorParams::from_config(cfg)
                .for_partitions(c.partitions as usize),
            catalog: pipeline.catalog(),
            iocs: pipeline.iocs(),
            killchain: Arc::new(std::sync::Mutex::new(
                watchpost_detect::KillChain::from_config(cfg),
            )),
            peers: Arc::new(watchpost_detect::PeerBoard::default()),
            exceptions: pipeline.exceptions(),
            store: pipeline.store(),
        };
        fleet
            .start_detector(
                kit,
                Duration::from_secs(cfg.detection.model_save_interval_seconds),
                Arc::clone(membership),
            )
            .map_err(ServiceError::Cluster)?;
    }
    if c.has_role("console") {
        fleet
            .start_console(
                pipeline.store(),
                pipeline.live_alerts(),
                Arc::clone(membership),
            )
            .map_err(ServiceError::Cluster)?;
    }
    Ok(())
}

/// Where the other nodes of the fleet reach this node's API: `cluster.api_url`, or `http://`
/// the dashboard's address and port (the host's name for an unspecified address, which no
/// other host can connect to).
fn api_url(cfg: &Config) -> String {
    if !cfg.cluster.api_url.is_empty() {
        return cfg.cluster.api_url.trim_end_matches('/').to_string();
    }
    let host = match cfg.dashboard_bind_address.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_unspecified() => node_name_of_host(),
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => cfg.dashboard_bind_address.clone(),
    };
    format!("http://{host}:{}", cfg.dashboard_port)
}

/// This node's name in the fleet: `cluster.node_name`, or the host's.
fn node_name(c: &watchpost_proto::config::ClusterConfig) -> String {
    if c.node_name.is_empty() {
        node_name_of_host()
    } else {
        c.node_name.clone()
    }
}

/// The host's name as a node name: its first label, with what a node name cannot hold as `-`.
fn node_name_of_host() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let label = host.trim().split('.').next().unwrap_or_default();
    let name: String = label
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if watchpost_proto::config::valid_node_name(&name) {
        name
    } else {
        "watchpost".into()
    }
}

/// SIGTERM and SIGINT, listened for from the moment they are installed: one that arrives before
/// the service waits for it is kept, not lost.
struct ShutdownSignals {
    term: Option<tokio::signal::unix::Signal>,
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignals {
    /// Installs both (inside the runtime). One that cannot be installed is logged and left out.
    fn install() -> ShutdownSignals {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &str| {
            signal(kind)
                .map_err(|e| tracing::error!("cannot listen for {name}: {e}"))
                .ok()
        };
        ShutdownSignals {
            term: listen(SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    /// Completes at the first of them.
    async fn received(&mut self) {
        async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = next(&mut self.term) => {}
            _ = next(&mut self.interrupt) => {}
        }
    }

    /// Watches for signals for the rest of the process (inside the runtime): at the first the
    /// inputs stop reading and the returned flag turns true, which stops the API; a second
    /// exits the process at once, whatever is left to store (what HTTP acknowledged waits in
    /// the ingest spool). A signal that came before this was called is kept and counts.
    fn watch(mut self, stopper: Stopper) -> tokio::sync::watch::Receiver<bool> {
        let (first_tx, first_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            self.received().await;
            stopper.stop();
            let _ = first_tx.send(true);
            self.received().await;
            tracing::warn!("second signal: exiting now, without storing what is left");
            eprintln!("watchpost: second signal, exiting without storing what is left");
            std::process::exit(130);
        });
        first_rx
    }
}
