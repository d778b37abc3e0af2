//! What every handler can reach: the configuration, the data plane's counters and store, and the
//! rate sampler. All of it is read-only or atomic from here.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use watchpost_dataplane::{Catalog, DetectHandle, HttpIngest, Stats};
use watchpost_proto::Config;
use watchpost_store::Store;

/// Shared state of the API.
#[derive(Clone)]
pub struct AppState {
    /// The running configuration.
    pub config: Arc<Config>,
    /// Data-plane counters.
    pub stats: Arc<Stats>,
    /// The event store.
    pub store: Arc<Store>,
    /// HTTP ingest, when enabled.
    pub ingest: Option<HttpIngest>,
    /// The detection workers (feedback, live baselines).
    pub detect: DetectHandle,
    /// The live Sigma catalogue.
    pub catalog: Arc<Catalog>,
    /// The live indicator feed.
    pub iocs: Arc<watchpost_dataplane::IocFeed>,
    /// The operators' exceptions.
    pub exceptions: Arc<watchpost_dataplane::ExceptionBook>,
    /// Rates over the last seconds.
    pub rates: Arc<RateSampler>,
    /// Per-client rate limits of the API.
    pub limits: Arc<crate::ratelimit::RateLimits>,
    /// The WebSocket stream.
    pub ws: Arc<crate::ws::Hub>,
    /// The API's own request counters and latencies, for `/metrics`.
    pub api_metrics: Arc<crate::metrics::ApiMetrics>,
    /// LLM assistance (explanations) and its caches.
    pub llm: Arc<watchpost_llm::Llm>,
    /// The notification channels.
    pub notifier: Arc<watchpost_notify::Notifier>,
    /// This node's membership of a fleet (`[cluster]`); `None` when it stands alone.
    pub cluster: Option<Arc<watchpost_cluster::Membership>>,
    /// This node's part of the fleet's data path (its roles' counters); `None` alone.
    pub fleet: Option<Arc<watchpost_cluster::Fleet>>,
    /// A console's searches across the sensors (`crate::fanout`); `None` on any other node.
    pub fanout: Option<Arc<crate::fanout::Fanout>>,
    /// Configuration reloads, and the running configuration they leave.
    pub reloader: Arc<crate::reload::Reloader>,
    /// When the API started.
    pub started: Instant,
    /// One permit per ingest request being served (`api_ingest_max_in_flight`).
    pub ingest_permits: Arc<tokio::sync::Semaphore>,
    /// Every route's request bodies: their deadlines, their clients' slots and the memory they
    /// hold (`crate::body`).
    pub bodies: Arc<crate::body::BodyGuard>,
}

/// The stream's handler takes only the hub: the stream needs nothing else of the state, and so
/// `ws` does not depend on `state`.
impl axum::extract::FromRef<AppState> for Arc<crate::ws::Hub> {
    fn from_ref(state: &AppState) -> Arc<crate::ws::Hub> {
        Arc::clone(&state.ws)
    }
}

/// Samples the received and stored totals once a second to report rates without the data plane
/// doing any timing.
#[derive(Default)]
pub struct RateSampler {
    samples: Mutex<Vec<(Instant, u64, u64)>>,
}

/// Samples kept: the rate is over this many seconds.
const WINDOW: usize = 10;

/// Events per second, received and stored, over the sampling window.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, schemars::JsonSchema)]
pub struct Rates {
    /// Lines received per second.
    pub received_per_s: f64,
    /// Events stored per second.
    pub stored_per_s: f64,
    /// Seconds the rates are taken over.
    pub window_s: f64,
}

impl RateSampler {
    /// Records the current totals.
    pub fn sample(&self, received: u64, stored: u64) {
        if let Ok(mut s) = self.samples.lock() {
            s.push((Instant::now(), received, stored));
            if s.len() > WINDOW + 1 {
                s.remove(0);
            }
        }
    }

    /// Rates between the oldest and newest sample.
    pub fn rates(&self) -> Rates {
        let Ok(s) = self.samples.lock() else {
            return Rates::default();
        };
        match (s.first(), s.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => {
                let dt = (b.0 - a.0).as_secs_f64();
                Rates {
                    received_per_s: (b.1 - a.1) as f64 / dt,
                    stored_per_s: (b.2 - a.2) as f64 / dt,
                    window_s: dt,
                }
            }
            _ => Rates::default(),
        }
    }

    /// Samples every second until the runtime stops.
    pub fn spawn(self: &Arc<Self>, stats: Arc<Stats>) {
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let s = stats.snapshot();
                me.sample(s.received_total, s.stored_total);
            }
        });
    }
}
