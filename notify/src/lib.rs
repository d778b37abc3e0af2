//! Notifications: alerts sent out on the channels of `[[notifications]]` (a webhook, Slack,
//! Teams, e-mail, syslog/CEF), at least once, through the store's outbox
//! (docs/notifications.md).
//!
//! Two kinds of task, both on the API's runtime, never on the data plane's threads:
//!
//! - **The pump** reads the alerts stage B queued with their records, applies each channel's
//!   filters and moves each alert to the queues of the channels that take it (one write batch).
//! - **One task per channel** sends what waits in its queue, oldest first, and deletes an entry
//!   only once the receiver has acknowledged it. A failure is retried with a doubling wait, so a
//!   receiver that is down holds up only its own channel, and a restart resumes from the store.
//!   Past the channel's rate limit, what waits goes out as one digest when the period ends.
//!
//! Counters per channel are in `/stats` (`notifications`), `/metrics` (`watchpost_notify_*`)
//! and `/health`, which shows a channel degraded after `failures_before_degraded` failed
//! deliveries in a row.

mod channel;
mod email;
mod message;
mod syslog;
mod transport;

use channel::Channel;
pub use channel::ChannelSnapshot;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use watchpost_proto::config::NotificationChannel;
use watchpost_store::Store;

/// Alerts the pump reads from the outbox per pass.
const PUMP_BATCH: usize = 256;

/// How often the pump looks for new alerts when it found none: the floor of a notification's
/// latency, and one RocksDB seek per tick.
const PUMP_TICK: Duration = Duration::from_millis(100);

/// Why a delivery failed. Never holds a webhook URL: it is a credential.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeliveryError {
    /// No connection: refused, unreachable, unknown name, TLS handshake.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The exchange broke after connecting.
    #[error("{0}")]
    Exchange(String),
    /// The receiver answered with an error status.
    #[error("HTTP {status}: {body}")]
    Status {
        /// The status.
        status: u16,
        /// The start of the answer's body.
        body: String,
        /// Its `Retry-After`, when it gave one.
        retry_after: Option<Duration>,
    },
    /// No answer in time.
    #[error("no answer within {0:.1} s")]
    Timeout(f64),
    /// The receiver refused the message (retried: the refusal may be fixed on its side).
    #[error("{0}")]
    Refused(String),
    /// No receiver can ever take this message (a UDP datagram too large): the alerts are
    /// discarded, counted and logged rather than hold up the channel for good.
    #[error("{0}")]
    Unsendable(String),
}

/// Why the notifier cannot start: a channel's transport cannot be set up.
#[derive(Debug, Clone, thiserror::Error)]
#[error("notifications[{index}] ({name}): {why}")]
pub struct NotifyError {
    /// The channel's position in the configuration.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// What is wrong (shared: a reload's error is kept and reported more than once).
    #[source]
    pub why: Arc<ChannelError>,
}

/// Why one channel cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// Its `rate` does not parse.
    #[error("{0}")]
    Rate(#[from] watchpost_proto::ParseError),
    /// Its `tls_ca_file` does not load as roots (webhook, Slack, Teams, syslog over TLS).
    #[error("{0}")]
    Trust(#[from] watchpost_outbound::TrustError),
    /// Its `tls_ca_file` cannot be read (e-mail).
    #[error("tls_ca_file {path}: {source}")]
    CaFile {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// SMTP's TLS cannot be set up, or its `tls_ca_file` is not a certificate (e-mail).
    #[error("{context}: {source}")]
    SmtpTls {
        /// `TLS set-up`, or the CA file.
        context: String,
        /// Why.
        source: lettre::transport::smtp::Error,
    },
    /// `email_from` is not an address.
    #[error("email_from: {0}")]
    From(lettre::address::AddressError),
    /// An address of `email_to` is not one.
    #[error("email_to `{value}`: {source}")]
    To {
        /// The address as configured.
        value: String,
        /// Why.
        source: lettre::address::AddressError,
    },
    /// A `kind` this build does not know (validation refuses it first).
    #[error("unknown kind `{0}`")]
    UnknownKind(String),
}

pub(crate) use watchpost_outbound::causes;

/// The channel id in the outbox: a hash of its name, so that a queue survives a restart and a
/// reordering of the channels in the file.
pub(crate) fn channel_id(name: &str) -> u64 {
    watchpost_proto::hash64(name.as_bytes())
}

/// The configured channels and the tasks that serve them.
pub struct Notifier {
    store: Arc<Store>,
    channels: std::sync::RwLock<Arc<Vec<Arc<Channel>>>>,
    /// Held by each pump pass and by a reload, so that a pass never queues for a channel a
    /// reload is replacing.
    pump_lock: tokio::sync::Mutex<()>,
    /// Queued alerts of channels no longer configured, discarded at start or reload.
    discarded_removed: std::sync::atomic::AtomicU64,
    /// Alerts the pump found gone from the store (deleted by retention before they were sent).
    vanished: std::sync::atomic::AtomicU64,
    /// The pump's last store error.
    pump_error: std::sync::Mutex<Option<String>>,
}

/// Channels set up by [`Notifier::prepare`], not yet running.
pub struct Prepared(Vec<Arc<Channel>>);

/// The result of sending a test message on one channel.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct TestResult {
    /// The channel.
    pub channel: String,
    /// Its kind.
    pub kind: String,
    /// The receiver took it.
    pub delivered: bool,
    /// Why not, when it did not.
    pub error: Option<String>,
    /// Milliseconds the delivery took.
    pub latency_ms: f64,
}

impl Notifier {
    /// Sets up every channel of `config` (nothing is sent yet). The outbox queues new alerts
    /// from here on while any channel is enabled.
    pub fn new(config: &[NotificationChannel], store: Arc<Store>) -> Result<Notifier, NotifyError> {
        let channels = build_channels(config, &[])?;
        store.set_outbox(channels.iter().any(|c| c.config.enabled));
        Ok(Notifier {
            store,
            channels: std::sync::RwLock::new(Arc::new(channels)),
            pump_lock: tokio::sync::Mutex::new(()),
            discarded_removed: Default::default(),
            vanished: Default::default(),
            pump_error: Default::default(),
        })
    }

    /// The channels now.
    fn channels(&self) -> Arc<Vec<Arc<Channel>>> {
        Arc::clone(&self.channels.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Starts the pump and the channels' tasks on the current runtime: counts what each
    /// channel's queue holds, discards the queues of channels no longer configured.
    pub fn start(self: &Arc<Self>) {
        let channels = self.channels();
        self.adopt_queues(&channels);
        for c in channels.iter() {
            c.spawn(Arc::clone(&self.store));
        }
        let me = Arc::clone(self);
        tokio::spawn(async move { me.pump().await });
    }

    /// Sets up `config`'s channels (their transports: CA files read, addresses parsed) without
    /// starting them: what a reload does before it applies anything, so that applying them
    /// cannot fail. A channel named as a running one keeps its counters.
    pub fn prepare(&self, config: &[NotificationChannel]) -> Result<Prepared, NotifyError> {
        build_channels(config, &self.channels()).map(Prepared)
    }

    /// Replaces the channels with `prepared` (a configuration reload): the old channels' tasks
    /// finish their current attempt and are awaited, then the new ones start from what the
    /// store holds for them.
    pub async fn replace(self: &Arc<Self>, prepared: Prepared) {
        let fresh = prepared.0;
        let _pump = self.pump_lock.lock().await;
        let old = {
            let mut held = self.channels.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *held, Arc::new(fresh))
        };
        for c in old.iter() {
            c.stop().await;
        }
        let channels = self.channels();
        self.store
            .set_outbox(channels.iter().any(|c| c.config.enabled));
        let me = Arc::clone(self);
        let adopt = Arc::clone(&channels);
        let _ = tokio::task::spawn_blocking(move || me.adopt_queues(&adopt)).await;
        for c in channels.iter() {
            c.spawn(Arc::clone(&self.store));
        }
    }

    /// Sets each channel's pending count from the store and discards queues nobody serves.
    fn adopt_queues(&self, channels: &[Arc<Channel>]) {
        let queues = match self.store.outbox_channels() {
            Ok(q) => q,
            Err(e) => {
                tracing::error!("notifications: cannot read the outbox: {e}");
                return;
            }
        };
        let by_id: HashMap<u64, &Arc<Channel>> = channels.iter().map(|c| (c.id, c)).collect();
        for (id, count) in queues {
            match by_id.get(&id) {
                Some(c) => c.set_pending(count),
                None => {
                    tracing::warn!(
                        "notifications: {count} alerts queued for a channel no longer configured are discarded"
                    );
                    match self.store.outbox_purge(id) {
                        Ok(()) => {
                            self.discarded_removed
                                .fetch_add(count, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) => tracing::error!("notifications: cannot discard them: {e}"),
                    }
                }
            }
        }
    }

    /// Moves new alerts from the outbox to the queues of the channels that take them, for as
    /// long as the runtime runs.
    async fn pump(self: Arc<Self>) {
        loop {
            let me = Arc::clone(&self);
            let pass = self.pump_lock.lock().await;
            let moved = tokio::task::spawn_blocking(move || me.pump_once())
                .await
                .unwrap_or(0);
            drop(pass);
            if moved < PUMP_BATCH {
                tokio::time::sleep(PUMP_TICK).await;
            }
        }
    }

    /// One pass of the pump; returns how many alerts it moved.
    fn pump_once(&self) -> usize {
        let keys = match self.store.outbox_new(PUMP_BATCH) {
            Ok(k) => k,
            Err(e) => {
                self.pump_failed(e);
                return 0;
            }
        };
        let channels = self.channels();
        let mut moved = 0;
        for key in &keys {
            let id = watchpost_store::alert_id(key);
            let alert = match self.store.alert(&id) {
                Ok(a) => a,
                Err(e) => {
                    self.pump_failed(e);
                    return moved;
                }
            };
            let now = Instant::now();
            let takers: Vec<&Arc<Channel>> = match &alert {
                None => {
                    self.vanished
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Vec::new()
                }
                Some(a) => channels
                    .iter()
                    .filter(|c| c.config.enabled && c.takes(a))
                    .collect(),
            };
            // Each taker's queue lock, in channel order (only the pump takes more than one),
            // held while it makes room, queues and counts: its task reads under the same lock.
            let locks: Vec<_> = takers.iter().map(|c| c.lock_queue()).collect();
            for (c, in_flight) in takers.iter().zip(&locks) {
                c.make_room(&self.store, in_flight);
            }
            let ids: Vec<u64> = takers.iter().map(|c| c.id).collect();
            if let Err(e) = self.store.outbox_fan_out(key, &ids) {
                self.pump_failed(e);
                return moved;
            }
            for c in &takers {
                c.queued(*key, now);
            }
            drop(locks);
            moved += 1;
        }
        let mut error = self.pump_error.lock().unwrap_or_else(|p| p.into_inner());
        if error.take().is_some() {
            tracing::info!("notifications: the outbox is readable again");
        }
        moved
    }

    /// Records a store error of the pump; logged when it first happens or changes, not at
    /// every tick while it lasts.
    fn pump_failed(&self, e: watchpost_store::StoreError) {
        let text = e.to_string();
        let mut last = self.pump_error.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_deref() != Some(text.as_str()) {
            tracing::error!("notifications: the outbox cannot be read or written: {text}");
        }
        *last = Some(text);
    }

    /// Every channel's counters.
    pub fn snapshot(&self) -> NotifySnapshot {
        use std::sync::atomic::Ordering::Relaxed;
        NotifySnapshot {
            queueing: self.store.outbox_on(),
            discarded_removed: self.discarded_removed.load(Relaxed),
            vanished: self.vanished.load(Relaxed),
            outbox_error: self
                .pump_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            channels: self.channels().iter().map(|c| c.snapshot()).collect(),
        }
    }

    /// Calls `visit` with each channel's name and latency histogram, for `/metrics`.
    pub fn latencies(&self, mut visit: impl FnMut(&str, &watchpost_dataplane::Histogram)) {
        for c in self.channels().iter() {
            visit(&c.config.name, c.latency());
        }
    }

    /// Sends a test message on the channel named `name`, or on every channel; `None` when no
    /// channel has that name (or none is configured).
    pub async fn test(&self, name: Option<&str>) -> Option<Vec<TestResult>> {
        let channels = self.channels();
        let chosen: Vec<Arc<Channel>> = channels
            .iter()
            .filter(|c| name.is_none_or(|n| n == c.config.name))
            .cloned()
            .collect();
        if chosen.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        for c in chosen {
            let started = Instant::now();
            let result = c.send_test().await;
            out.push(TestResult {
                channel: c.config.name.clone(),
                kind: c.config.kind.clone(),
                delivered: result.is_ok(),
                error: result.err().map(|e| e.to_string()),
                latency_ms: started.elapsed().as_secs_f64() * 1e3,
            });
        }
        Some(out)
    }
}

/// The channels of `config`; one named as one of `previous` keeps its counters.
fn build_channels(
    config: &[NotificationChannel],
    previous: &[Arc<Channel>],
) -> Result<Vec<Arc<Channel>>, NotifyError> {
    config
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let kept = previous
                .iter()
                .find(|p| p.config.name == c.name)
                .map(|p| Arc::clone(&p.counters));
            Channel::new(c, kept)
                .map(Arc::new)
                .map_err(|why| NotifyError {
                    index,
                    name: c.name.clone(),
                    why: Arc::new(why),
                })
        })
        .collect()
}

/// `/stats` `notifications`.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct NotifySnapshot {
    /// New alerts are queued (some channel is enabled).
    pub queueing: bool,
    /// Queued alerts discarded because their channel was removed from the configuration.
    pub discarded_removed: u64,
    /// Queued alerts no longer in the store when their turn came (retention deleted them).
    pub vanished: u64,
    /// The outbox's last read or write error, until a pass succeeds.
    pub outbox_error: Option<String>,
    /// Each channel.
    pub channels: Vec<ChannelSnapshot>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback HTTP receiver recording each JSON body and answering 200; `on_request`
    /// runs as each request arrives, before the answer.
    async fn receiver(
        on_request: impl Fn() + Send + Sync + 'static,
    ) -> (u16, Arc<Mutex<Vec<serde_json::Value>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&got);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut raw = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    raw.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&raw).to_string();
                    if let Some(at) = text.find("\r\n\r\n") {
                        let length: usize = text[..at]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if raw.len() >= at + 4 + length {
                            let body =
                                serde_json::from_slice(&raw[at + 4..at + 4 + length]).unwrap();
                            record.lock().unwrap().push(body);
                            break;
                        }
                    }
                }
                on_request();
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    )
                    .await;
            }
        });
        (port, got)
    }

    fn webhook(port: u16, rate_limit: &str) -> NotificationChannel {
        NotificationChannel {
            name: "hook".into(),
            kind: "webhook".into(),
            url: format!("http://127.0.0.1:{port}/hook").as_str().into(),
            min_severity: 0,
            rate_limit: rate_limit.into(),
            max_backoff_s: 1.0,
            ..NotificationChannel::default()
        }
    }

    fn store_with(alerts: u64) -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path(), &Default::default()).unwrap());
        store.set_outbox(true);
        for n in 1..=alerts {
            store.put_new_alert(&alert(n)).unwrap();
        }
        (dir, store)
    }

    fn queue_empty(store: &Store) -> bool {
        store
            .outbox_pending(channel_id("hook"), 10)
            .unwrap()
            .is_empty()
    }

    async fn until(what: impl Fn() -> bool) {
        let t = Instant::now();
        while !what() && t.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn alert(n: u64) -> watchpost_proto::Alert {
        serde_json::from_value(serde_json::json!({
            "id": format!("0190f5a1-0000-7000-8000-{n:012}"), "type": "sigma", "severity": 4,
            "title": format!("alert {n}"), "detector": "d", "dedup_key": format!("k{n}"),
            "first_seen_ns": 0, "last_seen_ns": 0, "count": 1, "source": "s", "entity": null,
            "score": 0.0, "threshold": 0.0, "contributions": {}, "attack": [],
            "contributing_events": [], "related_entities": []
        }))
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_the_rate_limit_what_waits_goes_out_as_one_digest() {
        let (port, got) = receiver(|| {}).await;
        let (_dir, store) = store_with(5);
        let channel = webhook(port, "2/second");
        let notifier = Arc::new(Notifier::new(&[channel], Arc::clone(&store)).unwrap());
        notifier.start();
        until(|| notifier.snapshot().channels[0].pending == 0 && !got.lock().unwrap().is_empty())
            .await;
        let bodies = got.lock().unwrap().clone();
        // Two alone, then the rest together once the second is over (had the first two
        // straddled the second's end, three alone and two together).
        let titles = |b: &serde_json::Value| -> Vec<String> {
            match b["kind"].as_str().unwrap() {
                "alert" => vec![b["alert"]["title"].as_str().unwrap().to_string()],
                _ => b["alerts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["title"].as_str().unwrap().to_string())
                    .collect(),
            }
        };
        let all: Vec<String> = bodies.iter().flat_map(titles).collect();
        assert_eq!(all, ["alert 1", "alert 2", "alert 3", "alert 4", "alert 5"]);
        let kinds: Vec<&str> = bodies.iter().map(|b| b["kind"].as_str().unwrap()).collect();
        assert!(
            kinds == ["alert", "alert", "digest"] || kinds == ["alert", "alert", "alert", "digest"],
            "{kinds:?}"
        );
        let s = &notifier.snapshot().channels[0];
        assert_eq!(s.alerts_sent + s.digested_alerts, 5);
        assert_eq!((s.digests, s.pending), (1, 0));
        assert!(queue_empty(&store));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_delivered_alert_the_store_cannot_dequeue_is_not_sent_again() {
        let (_dir, store) = store_with(1);
        // The disk fills up just as the receiver takes the message.
        let full = Arc::clone(&store);
        let (port, got) = receiver(move || full.inject_write_fault(true)).await;
        let notifier = Arc::new(Notifier::new(&[webhook(port, "")], Arc::clone(&store)).unwrap());
        notifier.start();
        until(|| !got.lock().unwrap().is_empty()).await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(
            got.lock().unwrap().len(),
            1,
            "sent once while the delete fails"
        );
        assert_eq!(notifier.snapshot().channels[0].pending, 1);
        store.inject_write_fault(false);
        until(|| notifier.snapshot().channels[0].pending == 0).await;
        assert_eq!(notifier.snapshot().channels[0].pending, 0);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(got.lock().unwrap().len(), 1);
        assert!(queue_empty(&store));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_max_pending_the_oldest_waiting_alerts_are_discarded_and_counted() {
        let (_dir, store) = store_with(5);
        // Nothing listens there: every delivery fails, and the queue only grows.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let mut channel = webhook(port, "");
        channel.max_pending = 2;
        let notifier = Arc::new(Notifier::new(&[channel], Arc::clone(&store)).unwrap());
        notifier.start();
        until(|| notifier.snapshot().channels[0].queued == 5).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let s = &notifier.snapshot().channels[0];
        assert_eq!((s.queued, s.dropped, s.pending), (5, 3, 2), "{s:?}");
        let left = store.outbox_pending(channel_id("hook"), 10).unwrap();
        assert_eq!(left.len(), 2);
        // The newest is always kept.
        assert_eq!(
            watchpost_store::alert_id(&left[1]),
            "0190f5a1-0000-7000-8000-000000000005"
        );
        assert!(s.failures >= 1 && s.last_error.as_deref().unwrap().contains("cannot connect"));
    }
}
