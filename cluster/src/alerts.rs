//! One queue for the fleet: detectors publish alerts and signals to `wp.alerts`, consoles
//! store them (docs/cluster.md, "One queue for the fleet").
//!
//! A message is an alert's JSON (the API's shape, so that `nats stream view` shows what an
//! analyst would), its kind in a header (`new`, `update`, `signal`, `signal-update`), and a
//! message id the stream deduplicates on: the alert id for a new alert (deterministic from
//! the triggering event, so a partition replayed after a takeover raises it under the same
//! id), the id and count for a later state of it.

use crate::counters::FleetCounters;
use crate::streams::{ALERTS_SUBJECT, alerts_stream, publish_until_acked};
use async_nats::jetstream::{self, consumer, message::PublishMessage};
use bytes::Bytes;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use watchpost_dataplane::LiveAlerts;
use watchpost_detect::AlertSink;
use watchpost_proto::Alert;
use watchpost_proto::config::ClusterConfig;
use watchpost_store::Store;

/// The header naming a message's kind.
const KIND_HEADER: &str = "Wp-Kind";
/// Alerts and signals waiting for the stream at most (alerts are rare: a full queue means the
/// servers have been away long).
const QUEUE: usize = 65_536;

/// What a message says of its alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    New,
    Update,
    Signal,
    SignalUpdate,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::New => "new",
            Kind::Update => "update",
            Kind::Signal => "signal",
            Kind::SignalUpdate => "signal-update",
        }
    }

    fn parse(name: &str) -> Option<Kind> {
        [Kind::New, Kind::Update, Kind::Signal, Kind::SignalUpdate]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// One alert or signal on its way.
pub(crate) struct AlertOut {
    kind: Kind,
    id: String,
    json: Bytes,
}

/// A detector's alert sink: stamps the sensor on new alerts and queues them for the stream.
pub(crate) struct FleetSink<'a> {
    pub(crate) queue: &'a mpsc::Sender<AlertOut>,
    pub(crate) counters: &'a FleetCounters,
    /// The sensor whose records are being scored (empty between batches).
    pub(crate) sensor: &'a str,
}

impl FleetSink<'_> {
    fn send(&mut self, alert: &Alert, kind: Kind) {
        let id = match kind {
            Kind::New | Kind::Signal => alert.id.clone(),
            Kind::Update | Kind::SignalUpdate => format!("{}.{}", alert.id, alert.count),
        };
        let json = if alert.sensor.is_empty() && !self.sensor.is_empty() {
            let mut stamped = alert.clone();
            stamped.sensor = self.sensor.to_string();
            serde_json::to_vec(&stamped)
        } else {
            serde_json::to_vec(alert)
        };
        let Ok(json) = json else {
            FleetCounters::add(&self.counters.alerts_dropped, 1);
            return;
        };
        let out = AlertOut {
            kind,
            id,
            json: Bytes::from(json),
        };
        if self.queue.try_send(out).is_err() {
            FleetCounters::add(&self.counters.alerts_dropped, 1);
        }
    }
}

impl AlertSink for FleetSink<'_> {
    fn alert(&mut self, alert: &Alert, new: bool) {
        self.send(alert, if new { Kind::New } else { Kind::Update });
    }

    fn signal(&mut self, signal: &Alert, new: bool) {
        self.send(
            signal,
            if new {
                Kind::Signal
            } else {
                Kind::SignalUpdate
            },
        );
    }
}

/// The queue a detector's sinks feed, and its receiving end for [`publish_loop`].
pub(crate) fn alert_queue() -> (mpsc::Sender<AlertOut>, mpsc::Receiver<AlertOut>) {
    mpsc::channel(QUEUE)
}

/// Publishes the queued alerts, each until the stream acknowledges it.
pub(crate) async fn publish_loop(
    js: jetstream::Context,
    config: ClusterConfig,
    mut rx: mpsc::Receiver<AlertOut>,
    counters: Arc<FleetCounters>,
) {
    while let Err(e) = alerts_stream(&js, &config).await {
        tracing::warn!("cluster: alerts: {e}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    while let Some(out) = rx.recv().await {
        let message = || {
            PublishMessage::build()
                .payload(out.json.clone())
                .message_id(&out.id)
                .header(KIND_HEADER, out.kind.name())
        };
        let what = format!("alert {}", out.id);
        publish_until_acked(&js, ALERTS_SUBJECT.into(), message, &counters, &what).await;
        FleetCounters::add(&counters.alerts_published, 1);
    }
}

/// A console's consumer: stores every alert and signal of the stream, and hands alerts to the
/// live feed. Durable (named after the node), so a console that was away resumes where it
/// stopped; a message is acknowledged once stored.
pub(crate) async fn consume_loop(
    js: jetstream::Context,
    config: ClusterConfig,
    node: String,
    store: Arc<Store>,
    live: Arc<LiveAlerts>,
    counters: Arc<FleetCounters>,
    namer: crate::names::Namer,
) {
    let pause = Duration::from_secs(1);
    loop {
        let messages = async {
            let stream = alerts_stream(&js, &config)
                .await
                .map_err(|e| e.to_string())?;
            let name = format!("console-{node}");
            let consumer = stream
                .get_or_create_consumer(
                    &name,
                    consumer::pull::Config {
                        durable_name: Some(name.clone()),
                        description: Some(format!("Watchpost console {node}")),
                        ack_policy: consumer::AckPolicy::Explicit,
                        // Its default of 1,000 stops delivery without a word when reached.
                        max_ack_pending: 100_000,
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| e.to_string())?;
            consumer.messages().await.map_err(|e| e.to_string())
        }
        .await;
        let mut messages = match messages {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("cluster: console: {e}; again in {pause:?}");
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        while let Some(message) = messages.next().await {
            let message = match message {
                Ok(m) => m,
                Err(e) => {
                    // A missed heartbeat, the consumer's leader moved: pull afresh rather than
                    // wait on requests a dead server held.
                    tracing::warn!("cluster: console: {e}; pulling afresh");
                    break;
                }
            };
            let kind = message
                .headers
                .as_ref()
                .and_then(|h| h.get(KIND_HEADER))
                .and_then(|v| Kind::parse(v.as_str()));
            let alert = serde_json::from_slice::<Alert>(&message.payload);
            let (Some(kind), Ok(mut alert)) = (kind, alert) else {
                // Not ours to read (another version's, damaged): acknowledged, so it does not
                // come back for ever, and counted.
                FleetCounters::add(&counters.alert_store_errors, 1);
                tracing::warn!("cluster: console: a message of {ALERTS_SUBJECT} is not an alert");
                let _ = message.ack().await;
                continue;
            };
            // A later state keeps the sensor its first state named (a detector's periodic
            // flush does not know it), before its new entities are named by that sensor.
            if alert.sensor.is_empty() && matches!(kind, Kind::Update) {
                let stored = tokio::task::block_in_place(|| store.alert(&alert.id));
                if let Ok(Some(stored)) = stored {
                    alert.sensor = stored.sensor;
                }
            }
            namer.name(&mut alert).await;
            // A RocksDB write: off the runtime's async work while it lasts.
            let stored = tokio::task::block_in_place(|| store_alert(&store, &live, kind, alert));
            match stored {
                Ok(()) => {
                    FleetCounters::add(&counters.alerts_received, 1);
                    if let Err(e) = message.ack().await {
                        tracing::warn!("cluster: console: acknowledging: {e}");
                    }
                }
                Err(e) => {
                    // Not acknowledged: the stream delivers it again.
                    FleetCounters::add(&counters.alert_store_errors, 1);
                    tracing::error!("cluster: console: cannot store an alert: {e}");
                }
            }
        }
        tokio::time::sleep(pause).await;
    }
}

/// Stores one alert or signal as its kind says.
fn store_alert(
    store: &Store,
    live: &LiveAlerts,
    kind: Kind,
    alert: Alert,
) -> Result<(), watchpost_store::StoreError> {
    match kind {
        Kind::New => store.put_new_alert(&alert)?,
        Kind::Update => store.put_alert(&alert)?,
        Kind::Signal | Kind::SignalUpdate => return store.put_signal(&alert),
    }
    live.publish(&alert, kind == Kind::New);
    Ok(())
}
