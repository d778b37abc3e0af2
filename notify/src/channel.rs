//! One notification channel at run time: its queue in the store, its counters, and the task
//! that sends what waits.
//!
//! The queue is shared by two writers: the pump adds alerts (and discards the oldest past
//! `max_pending`), the channel's task reads a batch and deletes it once delivered. Both hold
//! the channel's queue lock while they read or change it, and the batch being delivered is
//! marked in flight, so the pump never discards what is being sent and the count of waiting
//! alerts is exact.

use super::message::Payload;
use super::transport::Transport;
use super::{ChannelError, DeliveryError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use watchpost_dataplane::Histogram;
use watchpost_proto::config::NotificationChannel;
use watchpost_proto::{Alert, RateLimit};
use watchpost_store::{Store, StoreError};

/// Alerts one digest carries at most; more waiting go in the next.
const DIGEST_MAX: usize = 1000;

/// The first wait after a failure; it doubles up to `max_backoff_s`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// How long an idle channel sleeps between looks at its queue when nothing wakes it (the pump
/// wakes it for each alert it queues).
const IDLE_LOOK: Duration = Duration::from_secs(1);

/// Queue times kept for the latency histogram; alerts queued past it are sent but not timed.
const TIMED_MAX: usize = 100_000;

/// The longest `Retry-After` honoured: a receiver asking for more is asked again after this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Counters of one channel, kept across a reload that keeps the channel.
#[derive(Default)]
pub(crate) struct Counters {
    queued: AtomicU64,
    filtered: AtomicU64,
    pending: AtomicU64,
    messages: AtomicU64,
    alerts_sent: AtomicU64,
    digests: AtomicU64,
    digested_alerts: AtomicU64,
    failures: AtomicU64,
    consecutive_failures: AtomicU64,
    dropped: AtomicU64,
    undeliverable: AtomicU64,
    vanished: AtomicU64,
    tests: AtomicU64,
    last_delivery_ns: AtomicU64,
    last_error: Mutex<Option<(i64, String)>>,
    latency: Histogram,
}

/// What the queue lock guards: the keys of the batch being delivered.
#[derive(Default)]
pub(crate) struct InFlight(Vec<[u8; 16]>);

/// See the module's documentation.
pub(crate) struct Channel {
    pub(crate) config: NotificationChannel,
    pub(crate) id: u64,
    rate: RateLimit,
    transport: Transport,
    pub(crate) counters: Arc<Counters>,
    /// The queue lock (see the module's documentation).
    queue: Mutex<InFlight>,
    /// When each queued alert was queued, for the latency histogram.
    queued_at: Mutex<HashMap<[u8; 16], Instant>>,
    /// The pump's signal that something was queued.
    wake: tokio::sync::Notify,
    /// Set when the channel is replaced by a reload.
    stop: tokio::sync::watch::Sender<bool>,
    /// Its task, once started.
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// One channel in `/stats`.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct ChannelSnapshot {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// Whether alerts are queued for it.
    pub enabled: bool,
    /// `ok`, or `degraded` after `failures_before_degraded` failed deliveries in a row.
    pub status: &'static str,
    /// Alerts queued for it since start.
    pub queued: u64,
    /// Alerts its filters passed over.
    pub filtered: u64,
    /// Alerts waiting now.
    pub pending: u64,
    /// Messages the receiver acknowledged (alerts and digests; tests are counted apart).
    pub messages: u64,
    /// Alerts sent one by one.
    pub alerts_sent: u64,
    /// Digests sent.
    pub digests: u64,
    /// Alerts sent inside digests.
    pub digested_alerts: u64,
    /// Failed deliveries (each retry counts; tests included).
    pub failures: u64,
    /// Failed deliveries of queued alerts since the last success.
    pub consecutive_failures: u64,
    /// Alerts discarded because `max_pending` were already waiting.
    pub dropped: u64,
    /// Alerts discarded because no receiver could ever take their message (a UDP datagram
    /// too large), each logged.
    pub undeliverable: u64,
    /// Alerts gone from the store before their turn.
    pub vanished: u64,
    /// Test messages delivered (`POST /notifications/test`).
    pub tests: u64,
    /// Time of the last acknowledged delivery, ns (0 = none yet).
    pub last_delivery_ns: u64,
    /// The last failure, when there was one.
    pub last_error: Option<String>,
    /// Its time, ns.
    pub last_error_ns: i64,
    /// Queue-to-acknowledgement time: median, seconds (upper bound of its histogram bucket).
    pub latency_p50_s: Option<f64>,
    /// Queue-to-acknowledgement time: 99th percentile, seconds (bucket upper bound).
    pub latency_p99_s: Option<f64>,
}

/// A batch read from the queue: the keys of the alerts still in the store and the alerts.
struct Batch {
    keys: Vec<[u8; 16]>,
    alerts: Vec<Alert>,
}

/// What a read of the queue found.
enum Read {
    Batch(Batch),
    /// Nothing waits.
    Empty,
    /// Only alerts gone from the store, taken off: read again.
    Again,
}

impl Channel {
    /// A channel of a validated configuration, keeping `counters` (a reload); the error says
    /// what cannot be set up.
    pub(crate) fn new(
        config: &NotificationChannel,
        counters: Option<Arc<Counters>>,
    ) -> Result<Channel, ChannelError> {
        let rate = RateLimit::parse(config.rate())?;
        Ok(Channel {
            config: config.clone(),
            id: super::channel_id(&config.name),
            rate,
            transport: Transport::new(config)?,
            counters: counters.unwrap_or_default(),
            queue: Mutex::default(),
            queued_at: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            stop: tokio::sync::watch::channel(false).0,
            task: Mutex::default(),
        })
    }

    /// Whether its filters take `alert`; counted when they do not.
    pub(crate) fn takes(&self, alert: &Alert) -> bool {
        let takes = self.config.accepts(alert);
        if !takes {
            self.counters.filtered.fetch_add(1, Relaxed);
        }
        takes
    }

    /// The queue lock.
    pub(crate) fn lock_queue(&self) -> MutexGuard<'_, InFlight> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the count of waiting alerts from the store (at start and reload).
    pub(crate) fn set_pending(&self, count: u64) {
        self.counters.pending.store(count, Relaxed);
    }

    /// Before an alert is queued, under the queue lock: when `max_pending` already wait, the
    /// oldest not in flight is discarded, counted and logged.
    pub(crate) fn make_room(&self, store: &Store, in_flight: &InFlight) {
        if self.counters.pending.load(Relaxed) < self.config.max_pending {
            return;
        }
        let oldest = match store.outbox_pending(self.id, in_flight.0.len() + 1) {
            Ok(keys) => keys.into_iter().find(|k| !in_flight.0.contains(k)),
            Err(e) => {
                tracing::error!(channel = %self.config.name, "notifications: {e}");
                return;
            }
        };
        let Some(oldest) = oldest else {
            return;
        };
        match store.outbox_done(self.id, &[oldest]) {
            Ok(()) => {
                self.counters.dropped.fetch_add(1, Relaxed);
                self.less_pending(1);
                self.queued_at
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&oldest);
                tracing::warn!(
                    channel = %self.config.name,
                    "notifications: {} alerts already wait; the oldest, {}, is discarded (max_pending)",
                    self.config.max_pending,
                    watchpost_store::alert_id(&oldest)
                );
            }
            Err(e) => tracing::error!(channel = %self.config.name, "notifications: {e}"),
        }
    }

    /// After an alert was queued (under the queue lock).
    pub(crate) fn queued(&self, key: [u8; 16], at: Instant) {
        self.counters.queued.fetch_add(1, Relaxed);
        self.counters.pending.fetch_add(1, Relaxed);
        let mut times = self.queued_at.lock().unwrap_or_else(|p| p.into_inner());
        if times.len() < TIMED_MAX {
            times.insert(key, at);
        }
        drop(times);
        self.wake.notify_one();
    }

    fn less_pending(&self, n: u64) {
        let _ = self
            .counters
            .pending
            .fetch_update(Relaxed, Relaxed, |p| Some(p.saturating_sub(n)));
    }

    /// Starts the channel's task (an enabled channel's) on the current runtime.
    pub(crate) fn spawn(self: &Arc<Self>, store: Arc<Store>) {
        if !self.config.enabled {
            return;
        }
        let me = Arc::clone(self);
        let handle = tokio::spawn(async move { me.run(store).await });
        *self.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    }

    /// Stops the channel's task and waits for it to end (after its current attempt).
    pub(crate) async fn stop(&self) {
        self.stop.send_replace(true);
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Sends what waits, oldest first, until stopped. A batch that failed is sent again as it
    /// was (the same alerts, so the same delivery id); a batch delivered but not deleted (the
    /// store refused the write) is deleted before anything else is sent, so a full disk never
    /// makes it send the same alert again and again.
    async fn run(self: Arc<Self>, store: Arc<Store>) {
        let mut stop = self.stop.subscribe();
        let period = Duration::from_secs(u64::from(self.rate.per_seconds));
        let mut window_start = Instant::now();
        let mut window_used = 0u32;
        let mut backoff = FIRST_BACKOFF;
        let max_backoff = Duration::from_secs_f64(self.config.max_backoff_s);
        let mut batch: Option<Batch> = None;
        let mut undeleted: Option<Vec<[u8; 16]>> = None;
        loop {
            if *stop.borrow() {
                return;
            }
            if let Some(keys) = undeleted.take() {
                if let Err(e) = self.delete(&store, &keys).await {
                    tracing::error!(
                        channel = %self.config.name,
                        "notifications: delivered, but the outbox cannot be updated (retried; the alerts are not sent again meanwhile): {e}"
                    );
                    undeleted = Some(keys);
                    if sleep_or_stop(backoff, &mut stop).await {
                        return;
                    }
                    backoff = (backoff * 2).min(max_backoff);
                }
                continue;
            }
            let Some(current) = batch.take() else {
                if window_start.elapsed() >= period {
                    window_start = Instant::now();
                    window_used = 0;
                }
                let over = window_used >= self.rate.count;
                if over {
                    // Past the limit: what waits goes out as one digest when the period ends.
                    let end = tokio::time::Instant::from_std(window_start + period);
                    tokio::select! {
                        () = tokio::time::sleep_until(end) => {}
                        _ = stop.changed() => return,
                    }
                    window_start = Instant::now();
                    window_used = 0;
                }
                match self.read(&store, if over { DIGEST_MAX } else { 1 }).await {
                    Ok(Read::Batch(b)) => batch = Some(b),
                    Ok(Read::Again) => {}
                    Ok(Read::Empty) => {
                        tokio::select! {
                            () = self.wake.notified() => {}
                            () = tokio::time::sleep(IDLE_LOOK) => {}
                            _ = stop.changed() => return,
                        }
                    }
                    Err(e) => {
                        self.failed(&DeliveryError::Refused(format!("the outbox: {e}")));
                        if sleep_or_stop(backoff, &mut stop).await {
                            return;
                        }
                        backoff = (backoff * 2).min(max_backoff);
                    }
                }
                continue;
            };
            let payload = if current.alerts.len() > 1 {
                Payload::Digest(&current.alerts)
            } else {
                Payload::Alert(&current.alerts[0])
            };
            match self.transport.deliver(&self.config, payload).await {
                Ok(()) => {
                    window_used += 1;
                    backoff = FIRST_BACKOFF;
                    self.delivered(payload);
                    undeleted = Some(current.keys);
                }
                Err(DeliveryError::Unsendable(why)) => {
                    // No receiver will ever take this message: kept, it would hold up every
                    // alert behind it for good.
                    tracing::error!(
                        channel = %self.config.name,
                        "notifications: {} alerts cannot be sent on this channel and are discarded: {why}",
                        current.keys.len()
                    );
                    self.counters
                        .undeliverable
                        .fetch_add(current.keys.len() as u64, Relaxed);
                    undeleted = Some(current.keys);
                }
                Err(e) => {
                    self.failed(&e);
                    let wait = match &e {
                        DeliveryError::Status {
                            retry_after: Some(after),
                            ..
                        } => (*after).min(MAX_RETRY_AFTER).max(backoff),
                        _ => backoff,
                    };
                    backoff = (backoff * 2).min(max_backoff);
                    batch = Some(current);
                    if sleep_or_stop(wait, &mut stop).await {
                        return;
                    }
                }
            }
        }
    }

    /// The next `want` alerts of the queue, marked in flight. Alerts gone from the store
    /// (retention) are taken off the queue and counted.
    async fn read(self: &Arc<Self>, store: &Arc<Store>, want: usize) -> Result<Read, StoreError> {
        let (me, store) = (Arc::clone(self), Arc::clone(store));
        tokio::task::spawn_blocking(move || {
            let mut in_flight = me.lock_queue();
            let keys = store.outbox_pending(me.id, want)?;
            if keys.is_empty() {
                // Exact: the pump queues under the same lock.
                me.set_pending(0);
                return Ok(Read::Empty);
            }
            let mut batch = Batch {
                keys: Vec::with_capacity(keys.len()),
                alerts: Vec::with_capacity(keys.len()),
            };
            let mut gone = Vec::new();
            for k in keys {
                match store.alert(&watchpost_store::alert_id(&k))? {
                    Some(mut a) => {
                        // Sent with its entities' names, as the API shows it ("Entity: user
                        // alice", not "Entity: user").
                        store.name_alert(&mut a)?;
                        batch.alerts.push(a);
                        batch.keys.push(k);
                    }
                    None => gone.push(k),
                }
            }
            if !gone.is_empty() {
                store.outbox_done(me.id, &gone)?;
                me.counters.vanished.fetch_add(gone.len() as u64, Relaxed);
                me.less_pending(gone.len() as u64);
            }
            if batch.keys.is_empty() {
                return Ok(Read::Again);
            }
            in_flight.0.clone_from(&batch.keys);
            Ok(Read::Batch(batch))
        })
        .await
        .map_err(|e| StoreError::Decode {
            what: "outbox read",
            reason: e.to_string(),
        })?
    }

    /// Deletes delivered (or undeliverable) alerts from the queue, times them, and clears the
    /// in-flight mark.
    async fn delete(&self, store: &Arc<Store>, keys: &[[u8; 16]]) -> Result<(), StoreError> {
        let (store2, id, owned) = (Arc::clone(store), self.id, keys.to_vec());
        tokio::task::spawn_blocking(move || store2.outbox_done(id, &owned))
            .await
            .map_err(|e| StoreError::Decode {
                what: "outbox delete",
                reason: e.to_string(),
            })??;
        let now = Instant::now();
        {
            let mut times = self.queued_at.lock().unwrap_or_else(|p| p.into_inner());
            for k in keys {
                if let Some(at) = times.remove(k) {
                    self.counters
                        .latency
                        .observe_ns((now - at).as_nanos().min(u128::from(u64::MAX)) as u64);
                }
            }
        }
        let mut in_flight = self.lock_queue();
        in_flight.0.clear();
        self.less_pending(keys.len() as u64);
        Ok(())
    }

    fn delivered(&self, payload: Payload<'_>) {
        let c = &self.counters;
        c.messages.fetch_add(1, Relaxed);
        match payload {
            Payload::Alert(_) => {
                c.alerts_sent.fetch_add(1, Relaxed);
            }
            Payload::Digest(alerts) => {
                c.digests.fetch_add(1, Relaxed);
                c.digested_alerts.fetch_add(alerts.len() as u64, Relaxed);
            }
            Payload::Test => {}
        }
        c.last_delivery_ns
            .store(watchpost_proto::now_ns().max(0) as u64, Relaxed);
        if c.consecutive_failures.swap(0, Relaxed) > 0 {
            tracing::info!(channel = %self.config.name, "notifications: the receiver takes messages again");
        }
    }

    fn failed(&self, e: &DeliveryError) {
        let c = &self.counters;
        c.failures.fetch_add(1, Relaxed);
        let run = c.consecutive_failures.fetch_add(1, Relaxed) + 1;
        // The first failure of a run and then every tenth: a receiver down for an hour must
        // not fill the log.
        if run == 1 || run.is_multiple_of(10) {
            tracing::warn!(
                channel = %self.config.name,
                "notifications: delivery failed ({run} in a row), retried: {e}"
            );
        }
        self.note_error(e);
    }

    fn note_error(&self, e: &DeliveryError) {
        *self
            .counters
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some((watchpost_proto::now_ns(), e.to_string()));
    }

    /// Sends a test message now, outside the queue. Counted apart: a test that passes says the
    /// receiver is reachable, not that the queue is moving, so it leaves the run of failures
    /// (and `/health`) as it is.
    pub(crate) async fn send_test(&self) -> Result<(), DeliveryError> {
        let result = self.transport.deliver(&self.config, Payload::Test).await;
        match &result {
            Ok(()) => {
                self.counters.tests.fetch_add(1, Relaxed);
            }
            Err(e) => {
                self.counters.failures.fetch_add(1, Relaxed);
                self.note_error(e);
            }
        }
        result
    }

    pub(crate) fn snapshot(&self) -> ChannelSnapshot {
        let c = &self.counters;
        let consecutive = c.consecutive_failures.load(Relaxed);
        let last = c
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (counts, _) = c.latency.cumulative();
        ChannelSnapshot {
            name: self.config.name.clone(),
            kind: self.config.kind.clone(),
            enabled: self.config.enabled,
            status: if consecutive >= u64::from(self.config.failures_before_degraded) {
                "degraded"
            } else {
                "ok"
            },
            queued: c.queued.load(Relaxed),
            filtered: c.filtered.load(Relaxed),
            pending: c.pending.load(Relaxed),
            messages: c.messages.load(Relaxed),
            alerts_sent: c.alerts_sent.load(Relaxed),
            digests: c.digests.load(Relaxed),
            digested_alerts: c.digested_alerts.load(Relaxed),
            failures: c.failures.load(Relaxed),
            consecutive_failures: consecutive,
            dropped: c.dropped.load(Relaxed),
            undeliverable: c.undeliverable.load(Relaxed),
            vanished: c.vanished.load(Relaxed),
            tests: c.tests.load(Relaxed),
            last_delivery_ns: c.last_delivery_ns.load(Relaxed),
            last_error_ns: last.as_ref().map_or(0, |l| l.0),
            last_error: last.map(|l| l.1),
            latency_p50_s: quantile(&counts, 0.5),
            latency_p99_s: quantile(&counts, 0.99),
        }
    }

    /// The latency histogram, for `/metrics`.
    pub(crate) fn latency(&self) -> &Histogram {
        &self.counters.latency
    }
}

/// The upper bound of the histogram bucket holding quantile `q`; `None` with no observation,
/// `+Inf` past the last bound.
fn quantile(cumulative: &[u64], q: f64) -> Option<f64> {
    let total = *cumulative.last()?;
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).ceil().max(1.0) as u64;
    let i = cumulative.iter().position(|&c| c >= rank)?;
    Some(
        watchpost_dataplane::LATENCY_BOUNDS_S
            .get(i)
            .copied()
            .unwrap_or(f64::INFINITY),
    )
}

/// Waits `wait` or until the channel is stopped; true when stopped.
async fn sleep_or_stop(wait: Duration, stop: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => false,
        _ = stop.changed() => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_the_bounds_of_their_buckets() {
        let h = Histogram::default();
        for _ in 0..98 {
            h.observe_ns(2_000_000); // 2 ms: the 2.5 ms bucket
        }
        h.observe_ns(300_000_000); // 0.3 s: the 0.5 s bucket
        h.observe_ns(300_000_000);
        let (c, _) = h.cumulative();
        assert_eq!(quantile(&c, 0.5), Some(0.0025));
        assert_eq!(quantile(&c, 0.99), Some(0.5));
        assert_eq!(quantile(&[0; 15], 0.5), None);
    }
}
