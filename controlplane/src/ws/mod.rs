//! The WebSocket stream at `/api/v1/ws`.
//!
//! One [`Hub`] task per process reads what is new and broadcasts it to the sessions:
//! - events by tailing the store once per `ws_tick_interval_s` (the data plane does nothing for
//!   the stream: no copy, no channel, no cost with or without clients);
//! - alert changes from the data plane's live ring ([`LiveAlerts`]), polled every
//!   [`ALERT_POLL`] (0.1 s).
//!
//! Each session filters on the server, frames (no frame over `ws_frame_max_bytes`), and queues at
//! most `ws_queue_maxlen` frames and `ws_queue_max_bytes` bytes; a
//! separate writer task drains the queue to the socket. A client that reads slowly or not at all
//! only loses its own oldest frames (counted, and reported in a `status` frame); neither the hub,
//! the other clients nor ingestion wait for it. Frames and refusals are documented in
//! `docs/websocket.md`.

pub mod filter;
mod session;

use crate::browser::normalize_origin;
use crate::error::ApiError;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use watchpost_dataplane::{AlertChange, LiveAlerts};
use watchpost_proto::{Config, Event};
use watchpost_store::{BlockKey, Store, block_key_time};

/// How often the live alert ring is read.
pub const ALERT_POLL: Duration = Duration::from_millis(100);

/// Longest an alert change waits for the names of its entities before it is sent without them.
const NAMES_WAIT: Duration = Duration::from_secs(2);

/// Whether every entity of `alert` has its name.
fn all_named(alert: &watchpost_proto::Alert) -> bool {
    alert
        .entity
        .iter()
        .chain(alert.related_entities.iter())
        .all(|e| !e.value.is_empty())
}

/// Events read from the store per tick at most, newest first; older ones in the same tick are
/// skipped (counted in `status`). The stream is a live view: at high rates it is the newest
/// sample, and `GET /events` is the complete record.
const TAIL_MAX_EVENTS: usize = 20_000;

/// How far behind its last block the tail looks again for blocks committed out of order.
const TAIL_OVERLAP_NS: i64 = 3_000_000_000;

/// Largest client frame; a larger one is a read error that ends the connection.
const MAX_CLIENT_FRAME: usize = 64 * 1024;

/// What the hub broadcasts.
#[derive(Debug)]
pub enum HubMsg {
    /// The events of one tick (oldest first) and how many were skipped.
    Events {
        /// Events.
        events: Vec<Event>,
        /// Events of the tick not read (over [`TAIL_MAX_EVENTS`]).
        skipped: u64,
    },
    /// Alert changes, and how many fell off the live ring before they were read.
    Alerts {
        /// Changes, oldest first.
        changes: Vec<AlertChange>,
        /// Lost changes.
        missed: u64,
    },
}

/// The stream's settings, from the `ws_*` keys.
#[derive(Clone, Debug)]
pub struct WsConfig {
    /// Origins allowed to connect (lower case, no trailing slash).
    pub allowed_origins: Vec<String>,
    /// `ws_max_connections`.
    pub max_connections: usize,
    /// `ws_batch_max_events`.
    pub batch_max_events: usize,
    /// `ws_tick_interval_s`.
    pub tick: Duration,
    /// `ws_status_interval_s`.
    pub status_every: Duration,
    /// `ws_filter_min_interval_ms`.
    pub filter_min_interval: Duration,
    /// `ws_queue_maxlen`.
    pub queue_maxlen: usize,
    /// `ws_queue_max_bytes`.
    pub queue_max_bytes: usize,
    /// `ws_frame_max_bytes`.
    pub frame_max_bytes: usize,
}

impl WsConfig {
    /// From the configuration; the default origins are localhost and 127.0.0.1 (and `[::1]`) on
    /// `dashboard_port`, over http and https.
    pub fn from_config(config: &Config) -> WsConfig {
        let allowed_origins = if config.ws_allowed_origins.is_empty() {
            let p = config.dashboard_port;
            ["localhost", "127.0.0.1", "[::1]"]
                .iter()
                .flat_map(|h| [format!("http://{h}:{p}"), format!("https://{h}:{p}")])
                .collect()
        } else {
            config
                .ws_allowed_origins
                .iter()
                .map(|o| normalize_origin(o))
                .collect()
        };
        WsConfig {
            allowed_origins,
            max_connections: config.ws_max_connections as usize,
            batch_max_events: config.ws_batch_max_events as usize,
            tick: Duration::from_secs_f64(config.ws_tick_interval_s),
            status_every: Duration::from_secs_f64(config.ws_status_interval_s),
            filter_min_interval: Duration::from_millis(config.ws_filter_min_interval_ms),
            queue_maxlen: config.ws_queue_maxlen as usize,
            queue_max_bytes: config.ws_queue_max_bytes as usize,
            frame_max_bytes: config.ws_frame_max_bytes as usize,
        }
    }
}

/// Counters of the stream, in `/stats` under `websocket`.
#[derive(Default, Debug)]
pub struct WsCounters {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Upgrades refused for their Origin (403).
    pub refused_origin: AtomicU64,
    /// Upgrades refused at `ws_max_connections` (503).
    pub refused_capacity: AtomicU64,
    /// Frames written to sockets.
    pub frames_sent: AtomicU64,
    /// Frames dropped from full client queues.
    pub frames_dropped: AtomicU64,
    /// Filter frames applied.
    pub filters_applied: AtomicU64,
    /// Filter frames held back by `ws_filter_min_interval_ms` (the latest is applied later).
    pub filters_throttled: AtomicU64,
    /// Client frames that were not a valid filter.
    pub invalid_frames: AtomicU64,
    /// Events not read by the tail (over its per-tick budget).
    pub tail_skipped: AtomicU64,
}

/// The stream's shared state.
pub struct Hub {
    /// Settings.
    pub config: WsConfig,
    store: Arc<Store>,
    live: Option<Arc<LiveAlerts>>,
    tx: broadcast::Sender<Arc<HubMsg>>,
    /// Open connections (slots taken, upgrades in progress included).
    pub connections: AtomicUsize,
    /// Counters.
    pub counters: WsCounters,
}

impl Hub {
    /// A hub over `store` and the live alert ring (none without a running pipeline).
    pub fn new(config: WsConfig, store: Arc<Store>, live: Option<Arc<LiveAlerts>>) -> Hub {
        let (tx, _) = broadcast::channel(64);
        Hub {
            config,
            store,
            live,
            tx,
            connections: AtomicUsize::new(0),
            counters: WsCounters::default(),
        }
    }

    /// Starts the tail and the alert poll; they run until the runtime stops.
    pub fn spawn(self: &Arc<Self>) {
        let hub = Arc::clone(self);
        tokio::spawn(async move { hub.tail_events().await });
        let hub = Arc::clone(self);
        tokio::spawn(async move { hub.poll_alerts().await });
    }

    fn watched(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    async fn tail_events(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut from_ns = watchpost_proto::now_ns();
        let mut seen: HashSet<BlockKey> = HashSet::new();
        loop {
            tick.tick().await;
            if !self.watched() {
                // Nobody listens: start from now when someone does.
                from_ns = watchpost_proto::now_ns();
                seen.clear();
                continue;
            }
            let store = Arc::clone(&self.store);
            let since = from_ns - TAIL_OVERLAP_NS;
            let known: HashSet<BlockKey> = std::mem::take(&mut seen);
            let read = tokio::task::spawn_blocking(move || read_tail(&store, since, known)).await;
            let Ok((events, skipped, keys, newest)) = read else {
                continue;
            };
            seen = keys;
            from_ns = from_ns.max(newest);
            if skipped > 0 {
                self.counters
                    .tail_skipped
                    .fetch_add(skipped, Ordering::Relaxed);
            }
            // Every tick is sent, empty or not: it is the sessions' flush tick.
            let _ = self.tx.send(Arc::new(HubMsg::Events { events, skipped }));
        }
    }

    /// Sends an alert changed by the API (a triage) to the sessions as an update: it reaches
    /// each client in its next `alert_batch`, if the client's filter takes it.
    pub fn publish_update(&self, alert: watchpost_proto::Alert) {
        let change = AlertChange {
            seq: 0,
            alert: Arc::new(alert),
            new: false,
        };
        let _ = self.tx.send(Arc::new(HubMsg::Alerts {
            changes: vec![change],
            missed: 0,
        }));
    }

    async fn poll_alerts(self: Arc<Self>) {
        let Some(live) = self.live.clone() else {
            return;
        };
        let mut tick = tokio::time::interval(ALERT_POLL);
        let mut last = live.latest();
        // Changes waiting for their entities' names, oldest first, with when they came.
        let mut held: VecDeque<(AlertChange, Instant)> = VecDeque::new();
        loop {
            tick.tick().await;
            // Publishing starts the moment a client subscribes (its `Watch`), not at this
            // poll's next tick: an alert raised in between would otherwise reach nobody. With no
            // client, the ring holds nothing new and `last` follows it.
            if !self.watched() {
                last = live.latest();
                held.clear();
                continue;
            }
            let mut fresh = Vec::new();
            let mut missed = live.since(last, &mut fresh);
            if let Some(c) = fresh.last() {
                last = c.seq;
            }
            let now = Instant::now();
            held.extend(fresh.into_iter().map(|c| (c, now)));
            // The detector's copy of an alert names its entities by UUID only (names live in the
            // store's entity table, as the API resolves them), and a folding alert's copy knows
            // nothing of triage: without this, frames would carry `entity.value: ""` and a
            // repeat would show a closed alert as open. Done once per change here, not per
            // client. When the store cannot be read (counted by the store, shown on /health),
            // the change is not sent half made up: it counts as missed, as an overflow would.
            // A new entity's name is written with its event's block, which the writer may
            // commit a moment after stage B raised the alert: a just-raised alert whose names
            // are not all there yet waits for them (and the changes after it, to keep their
            // order) for up to `NAMES_WAIT`, then goes as it is. Only a new alert waits: a
            // repeat names entities recorded when it was raised, and one whose name is never
            // recorded must not hold every repeat of its alert back.
            let mut changes = Vec::new();
            while let Some((mut c, since)) = held.pop_front() {
                let alert = Arc::make_mut(&mut c.alert);
                let read = self.store.name_alert(alert).and_then(|()| {
                    if !c.new {
                        alert.triage = self.store.alert_triage(&alert.id)?;
                    }
                    Ok(())
                });
                match read {
                    Err(_) => missed += 1,
                    Ok(()) if c.new && !all_named(alert) && since.elapsed() < NAMES_WAIT => {
                        held.push_front((c, since));
                        break;
                    }
                    Ok(()) => changes.push(c),
                }
            }
            if !changes.is_empty() || missed > 0 {
                let _ = self.tx.send(Arc::new(HubMsg::Alerts { changes, missed }));
            }
        }
    }
}

/// Reads the blocks received since `since_ns` that are not in `known`, newest first up to the
/// budget. Returns the events oldest first, how many were skipped, the keys now known (those
/// still inside the overlap window) and the newest block time.
fn read_tail(
    store: &Store,
    since_ns: i64,
    known: HashSet<BlockKey>,
) -> (Vec<Event>, u64, HashSet<BlockKey>, i64) {
    // A failed read is counted and logged by the store; the next tick asks again.
    let Ok(keys) = store.blocks_since(since_ns) else {
        return (Vec::new(), 0, known, since_ns);
    };
    let newest = keys.last().map_or(since_ns, |k| block_key_time(k));
    let mut chunks: Vec<Vec<Event>> = Vec::new();
    let mut budget = TAIL_MAX_EVENTS;
    let mut skipped = 0u64;
    // A block that could not be read (counted by the store, shown on /health) is not marked
    // known: the next tick reads it again instead of the stream skipping it.
    let mut unread: Vec<BlockKey> = Vec::new();
    for key in keys.iter().rev().filter(|k| !known.contains(*k)) {
        match store.block_events(key, budget) {
            Ok((events, left_out)) => {
                budget -= events.len();
                skipped += left_out;
                chunks.push(events);
            }
            Err(_) => unread.push(*key),
        }
    }
    let events = chunks.into_iter().rev().flatten().collect();
    let keep_from = newest - TAIL_OVERLAP_NS;
    let now_known = keys
        .into_iter()
        .filter(|k| block_key_time(k) >= keep_from && !unread.contains(k))
        .collect();
    (events, skipped, now_known, newest)
}

/// A subscribed client: while one exists, stage B publishes alert changes to the live ring
/// (see `dataplane::live`). Taken right after subscribing, so that every change published from
/// then on is read by the poll and reaches the client.
struct Watch(Option<Arc<watchpost_dataplane::LiveAlerts>>);

impl Watch {
    fn new(hub: &Hub) -> Watch {
        if let Some(live) = &hub.live {
            live.watchers.fetch_add(1, Ordering::Relaxed);
        }
        Watch(hub.live.clone())
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(live) = &self.0 {
            live.watchers.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A connection slot, given back when the session (or an upgrade that never completed) ends.
struct Slot(Arc<Hub>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `GET /api/v1/ws`: checks the Origin and the connection cap before upgrading.
pub async fn upgrade(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    // Browsers always send Origin; a missing one is a non-browser client, which cross-site
    // hijacking cannot involve.
    if let Some(origin) = headers.get(header::ORIGIN) {
        let o = normalize_origin(origin.to_str().unwrap_or(""));
        if !hub.config.allowed_origins.contains(&o) {
            hub.counters.refused_origin.fetch_add(1, Ordering::Relaxed);
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                format!("Origin `{o}` is not in ws_allowed_origins"),
            )
            .into_response();
        }
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => {
            return ApiError::new(
                StatusCode::UPGRADE_REQUIRED,
                "websocket_required",
                format!("this route speaks WebSocket only: {e}"),
            )
            .into_response();
        }
    };
    let taken = hub.connections.fetch_add(1, Ordering::Relaxed);
    let slot = Slot(Arc::clone(&hub));
    if taken >= hub.config.max_connections {
        drop(slot);
        hub.counters
            .refused_capacity
            .fetch_add(1, Ordering::Relaxed);
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_connections",
            format!(
                "{} WebSocket clients are connected (ws_max_connections)",
                hub.config.max_connections
            ),
        )
        .retry_after(10)
        .into_response();
    }
    hub.counters.accepted.fetch_add(1, Ordering::Relaxed);
    let rx = hub.tx.subscribe();
    let watch = Watch::new(&hub);
    ws.max_message_size(MAX_CLIENT_FRAME)
        .max_frame_size(MAX_CLIENT_FRAME)
        .on_upgrade(move |socket| async move {
            session::run(socket, Arc::clone(&hub), rx).await;
            drop(watch);
            drop(slot);
        })
}
