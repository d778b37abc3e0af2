//! One notification channel at run time: its transport, its counters, and the task that sends
//! what waits in its queue.

use super::DeliveryError;
use super::email::EmailTransport;
use super::message::{self, Payload};
use super::syslog::SyslogTransport;
use crate::outbound::{HttpClient, OutboundError, Trust};
use hyper::Method;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use watchpost_dataplane::Histogram;
use watchpost_proto::config::NotificationChannel;
use watchpost_proto::{Alert, RateLimit};
use watchpost_store::Store;

/// Alerts one digest carries at most; more waiting go in the next.
const DIGEST_MAX: usize = 1000;

/// The first wait after a failed delivery; it doubles up to `max_backoff_s`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// How long an idle channel sleeps between looks at its queue when nothing wakes it (the pump
/// wakes it for each alert it queues; this catches what a reload or restart left).
const IDLE_LOOK: Duration = Duration::from_secs(1);

/// Queue times kept for the latency histogram; alerts queued past it are sent but not timed.
const TIMED_MAX: usize = 100_000;

/// Bytes of a receiver's error answer kept in the last error.
const ERROR_BODY_BYTES: usize = 200;

enum Transport {
    Http {
        client: HttpClient,
        format: HttpFormat,
    },
    Syslog(SyslogTransport),
    Email(EmailTransport),
}

#[derive(Clone, Copy)]
enum HttpFormat {
    Webhook,
    Slack,
    Teams,
}

/// Counters of one channel.
#[derive(Default)]
struct Counters {
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
    vanished: AtomicU64,
    last_delivery_ns: AtomicU64,
    last_error: Mutex<Option<(i64, String)>>,
}

/// See the module's documentation.
pub(crate) struct Channel {
    pub(crate) config: NotificationChannel,
    pub(crate) id: u64,
    rate: RateLimit,
    transport: Transport,
    counters: Counters,
    /// Queue-to-acknowledgement times.
    latency: Arc<Histogram>,
    /// When each queued alert was queued, for the latency histogram.
    queued_at: Mutex<HashMap<[u8; 16], Instant>>,
    /// The pump's signal that something was queued.
    wake: tokio::sync::Notify,
    /// Set when the channel is replaced by a reload.
    stop: tokio::sync::watch::Sender<bool>,
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
    /// Messages the receiver acknowledged (alerts, digests and tests).
    pub messages: u64,
    /// Alerts sent one by one.
    pub alerts_sent: u64,
    /// Digests sent.
    pub digests: u64,
    /// Alerts sent inside digests.
    pub digested_alerts: u64,
    /// Failed deliveries (each retry counts).
    pub failures: u64,
    /// Failed deliveries since the last success.
    pub consecutive_failures: u64,
    /// Alerts discarded because `max_pending` were already waiting.
    pub dropped: u64,
    /// Alerts gone from the store before their turn.
    pub vanished: u64,
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

impl Channel {
    /// A channel of a validated configuration; the error says what cannot be set up.
    pub(crate) fn new(config: &NotificationChannel) -> Result<Channel, String> {
        let rate = RateLimit::parse(config.rate()).map_err(|e| e.to_string())?;
        let ca =
            (!config.tls_ca_file.is_empty()).then(|| std::path::PathBuf::from(&config.tls_ca_file));
        let timeout = Duration::from_secs_f64(config.timeout_s);
        let http = |format| -> Result<Transport, String> {
            Ok(Transport::Http {
                client: HttpClient::new(Trust::System {
                    extra_ca_file: ca.clone(),
                })?,
                format,
            })
        };
        let transport = match config.kind.as_str() {
            "webhook" => http(HttpFormat::Webhook)?,
            "slack" => http(HttpFormat::Slack)?,
            "teams" => http(HttpFormat::Teams)?,
            "email" => Transport::Email(EmailTransport::new(config, timeout)?),
            "syslog" => Transport::Syslog(SyslogTransport::new(
                &config.syslog_address,
                &config.syslog_transport,
                ca.as_deref(),
            )?),
            other => return Err(format!("unknown kind `{other}`")),
        };
        Ok(Channel {
            config: config.clone(),
            id: super::channel_id(&config.name),
            rate,
            transport,
            counters: Counters::default(),
            latency: Arc::default(),
            queued_at: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            stop: tokio::sync::watch::channel(false).0,
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

    /// Sets the count of waiting alerts (from the store, at start).
    pub(crate) fn set_pending(&self, count: u64) {
        self.counters.pending.store(count, Relaxed);
    }

    /// Before an alert is queued: when `max_pending` already wait, the oldest is discarded,
    /// counted and logged.
    pub(crate) fn make_room(&self, store: &Store) {
        if self.counters.pending.load(Relaxed) < self.config.max_pending {
            return;
        }
        match store.outbox_pending(self.id, 1) {
            Ok(oldest) if !oldest.is_empty() => match store.outbox_done(self.id, &oldest) {
                Ok(()) => {
                    self.counters.dropped.fetch_add(1, Relaxed);
                    self.counters.pending.fetch_sub(1, Relaxed);
                    tracing::warn!(
                        channel = %self.config.name,
                        "notifications: {} alerts already wait; the oldest, {}, is discarded (max_pending)",
                        self.config.max_pending,
                        watchpost_store::alert_id(&oldest[0])
                    );
                }
                Err(e) => tracing::error!(channel = %self.config.name, "notifications: {e}"),
            },
            Ok(_) => self.counters.pending.store(0, Relaxed),
            Err(e) => tracing::error!(channel = %self.config.name, "notifications: {e}"),
        }
    }

    /// After an alert was queued.
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

    pub(crate) fn latency(&self) -> Arc<Histogram> {
        Arc::clone(&self.latency)
    }

    /// Stops the channel's task after its current delivery.
    pub(crate) fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Starts the channel's task (an enabled channel's).
    pub(crate) fn spawn(self: &Arc<Self>, store: Arc<Store>) {
        if !self.config.enabled {
            return;
        }
        let me = Arc::clone(self);
        tokio::spawn(async move { me.run(store).await });
    }

    /// Sends what waits, oldest first, until stopped.
    async fn run(self: Arc<Self>, store: Arc<Store>) {
        let mut stop = self.stop.subscribe();
        let period = Duration::from_secs(u64::from(self.rate.per_seconds));
        let mut window_start = Instant::now();
        let mut window_used = 0u32;
        let mut backoff = FIRST_BACKOFF;
        let max_backoff = Duration::from_secs_f64(self.config.max_backoff_s);
        loop {
            if *stop.borrow() {
                return;
            }
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
            let want = if over { DIGEST_MAX } else { 1 };
            let batch = {
                let (store, id) = (Arc::clone(&store), self.id);
                tokio::task::spawn_blocking(move || read_batch(&store, id, want)).await
            };
            let (keys, alerts, gone) = match batch {
                Ok(Ok(b)) => b,
                Ok(Err(e)) => {
                    self.failed(&DeliveryError::Refused(format!("the outbox: {e}")));
                    sleep_or_stop(backoff, &mut stop).await;
                    continue;
                }
                Err(e) => {
                    tracing::error!("notifications: {e}");
                    return;
                }
            };
            if !gone.is_empty() {
                self.counters.vanished.fetch_add(gone.len() as u64, Relaxed);
                self.finish(&store, gone).await;
            }
            if alerts.is_empty() {
                if keys.is_empty() {
                    self.counters.pending.store(0, Relaxed);
                    tokio::select! {
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep(IDLE_LOOK) => {}
                        _ = stop.changed() => return,
                    }
                }
                continue;
            }
            let payload = if alerts.len() > 1 {
                Payload::Digest(&alerts)
            } else {
                Payload::Alert(&alerts[0])
            };
            match self.deliver(payload).await {
                Ok(()) => {
                    window_used += 1;
                    backoff = FIRST_BACKOFF;
                    self.delivered(payload);
                    self.finish(&store, keys).await;
                }
                Err(e) => {
                    self.failed(&e);
                    let wait = match &e {
                        DeliveryError::Status {
                            retry_after: Some(after),
                            ..
                        } => (*after).max(backoff),
                        _ => backoff,
                    }
                    .min(max_backoff);
                    backoff = (backoff * 2).min(max_backoff);
                    if sleep_or_stop(wait, &mut stop).await {
                        return;
                    }
                }
            }
        }
    }

    /// Deletes delivered (or vanished) alerts from the queue and times them.
    async fn finish(&self, store: &Arc<Store>, keys: Vec<[u8; 16]>) {
        let n = keys.len() as u64;
        {
            let now = Instant::now();
            let mut times = self.queued_at.lock().unwrap_or_else(|p| p.into_inner());
            for k in &keys {
                if let Some(at) = times.remove(k) {
                    self.latency
                        .observe_ns((now - at).as_nanos().min(u128::from(u64::MAX)) as u64);
                }
            }
        }
        let (store, id) = (Arc::clone(store), self.id);
        match tokio::task::spawn_blocking(move || store.outbox_done(id, &keys)).await {
            Ok(Ok(())) => {}
            // Sent but still queued: it goes out again (at least once), which the delivery id
            // lets the receiver see.
            Ok(Err(e)) => tracing::error!(
                channel = %self.config.name,
                "notifications: delivered, but the outbox entry cannot be deleted (it will be sent again): {e}"
            ),
            Err(e) => tracing::error!("notifications: {e}"),
        }
        let _ = self
            .counters
            .pending
            .fetch_update(Relaxed, Relaxed, |p| Some(p.saturating_sub(n)));
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
        *c.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((watchpost_proto::now_ns(), e.to_string()));
    }

    /// Sends a test message now, outside the queue; counted as a message or a failure.
    pub(crate) async fn send_test(&self) -> Result<(), DeliveryError> {
        let result = self.deliver(Payload::Test).await;
        match &result {
            Ok(()) => self.delivered(Payload::Test),
            Err(e) => self.failed(e),
        }
        result
    }

    /// One delivery attempt.
    async fn deliver(&self, payload: Payload<'_>) -> Result<(), DeliveryError> {
        let name = &self.config.name;
        let delivery = message::delivery_id(name, payload);
        let deadline = Duration::from_secs_f64(self.config.timeout_s);
        match &self.transport {
            Transport::Http { client, format } => {
                let body = match format {
                    HttpFormat::Webhook => message::webhook(name, &delivery, payload),
                    HttpFormat::Slack => message::slack(&delivery, payload),
                    HttpFormat::Teams => message::teams(&delivery, payload),
                };
                let mut headers: Vec<(&str, String)> = vec![
                    ("idempotency-key", delivery.clone()),
                    ("x-watchpost-delivery", delivery.clone()),
                ];
                if !self.config.secret.is_empty() {
                    let ts = (watchpost_proto::now_ns() / 1_000_000_000).to_string();
                    headers.push((
                        "x-watchpost-signature",
                        sign(self.config.secret.expose(), &ts, &body),
                    ));
                    headers.push(("x-watchpost-timestamp", ts));
                }
                let refs: Vec<(&str, &str)> =
                    headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let reply = client
                    .send(
                        Method::POST,
                        self.config.url.expose(),
                        &refs,
                        Some(body),
                        deadline,
                    )
                    .await
                    .map_err(outbound)?;
                if (200..300).contains(&reply.status) {
                    Ok(())
                } else {
                    let text = String::from_utf8_lossy(&reply.body);
                    let mut end = text.len().min(ERROR_BODY_BYTES);
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    Err(DeliveryError::Status {
                        status: reply.status,
                        body: text[..end].trim().to_string(),
                        retry_after: reply.retry_after,
                    })
                }
            }
            Transport::Syslog(t) => {
                let (severity, msg_id) = match payload {
                    Payload::Alert(a) => (a.severity, "alert"),
                    Payload::Digest(alerts) => (
                        alerts.iter().map(|a| a.severity).max().unwrap_or(0),
                        "digest",
                    ),
                    Payload::Test => (1, "test"),
                };
                let text = if self.config.syslog_format == "json" {
                    message::syslog_json(name, &delivery, payload)
                } else {
                    message::cef(&delivery, payload)
                };
                t.send(&text, severity, msg_id, deadline).await
            }
            Transport::Email(t) => {
                let (subject, body) = message::email(&delivery, payload);
                t.send(&subject, body, &delivery, deadline).await
            }
        }
    }

    pub(crate) fn snapshot(&self) -> ChannelSnapshot {
        let c = &self.counters;
        let consecutive = c.consecutive_failures.load(Relaxed);
        let last = c
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (counts, _) = self.latency.cumulative();
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
            vanished: c.vanished.load(Relaxed),
            last_delivery_ns: c.last_delivery_ns.load(Relaxed),
            last_error_ns: last.as_ref().map_or(0, |l| l.0),
            last_error: last.map(|l| l.1),
            latency_p50_s: quantile(&counts, 0.5),
            latency_p99_s: quantile(&counts, 0.99),
        }
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

/// The next alerts of a channel's queue: their keys, the alerts still in the store, and the
/// keys of those that are not.
type Batch = (Vec<[u8; 16]>, Vec<Alert>, Vec<[u8; 16]>);

fn read_batch(
    store: &Store,
    channel: u64,
    want: usize,
) -> Result<Batch, watchpost_store::StoreError> {
    let keys = store.outbox_pending(channel, want)?;
    let mut alerts = Vec::with_capacity(keys.len());
    let mut present = Vec::with_capacity(keys.len());
    let mut gone = Vec::new();
    for k in keys {
        match store.alert(&watchpost_store::alert_id(&k))? {
            Some(a) => {
                alerts.push(a);
                present.push(k);
            }
            None => gone.push(k),
        }
    }
    Ok((present, alerts, gone))
}

/// Waits `wait` or until the channel is stopped; true when stopped.
async fn sleep_or_stop(wait: Duration, stop: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => false,
        _ = stop.changed() => true,
    }
}

/// `sha256=<hex>` of the HMAC-SHA256 of `<timestamp>.<body>` under `secret`: the receiver
/// recomputes it, and the timestamp in the signed text stops a captured message being replayed
/// later.
fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(timestamp.as_bytes());
    ctx.update(b".");
    ctx.update(body);
    let tag = ctx.sign();
    let mut out = String::from("sha256=");
    for b in tag.as_ref() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// An outbound error as a delivery error, without the URL (a credential).
fn outbound(e: OutboundError) -> DeliveryError {
    match e {
        OutboundError::Url { why, .. } => {
            DeliveryError::Refused(format!("the URL cannot be used: {why}"))
        }
        OutboundError::Connect { target, why } => {
            DeliveryError::Connect(format!("{target}: {why}"))
        }
        OutboundError::Timeout(s) => DeliveryError::Timeout(s),
        OutboundError::Exchange { target, why } => {
            DeliveryError::Exchange(format!("{target}: {why}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hmac_of_the_timestamp_and_body() {
        // What a receiver computes: one HMAC over `<timestamp>.<body>`.
        let joined = b"1700000000.{\"a\":1}";
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"s3cret");
        let want: String = ring::hmac::sign(&key, joined)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            sign("s3cret", "1700000000", b"{\"a\":1}"),
            format!("sha256={want}")
        );
    }

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
