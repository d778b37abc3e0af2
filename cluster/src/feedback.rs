//! Analysts' verdicts, from the console to the detectors that own the thresholds they move.
//!
//! On a node alone, a verdict on an anomaly alert moves the threshold that raised it in the
//! stage B worker that owns it. In a fleet that threshold lives in a partition's detector:
//! the source's ensemble in the partition of the source, a UEBA type's threshold in every
//! partition (each scores its own entities against its own copy). So the console sends the
//! verdict into the partitions' own subjects of the detection stream (`wp.detect.<p>`), as a
//! message marked [`FEEDBACK_HEADER`] holding the alert: the owner applies it in stream order
//! with the records, its snapshot carries the moved threshold, and a partition that moves to
//! another detector takes the verdict along, or meets it again when it replays from the
//! snapshot before it. The message id (`fb.<alert>.<time>.<partition>`) makes a resend
//! harmless.
//!
//! The API records the verdict and hands it here at once; a task sends it, trying again until
//! the stream acknowledges (the queue is bounded, and what does not fit is counted).

use crate::counters::FleetCounters;
use crate::streams::{detect_subject, publish_until_acked};
use async_nats::HeaderMap;
use std::sync::Arc;
use tokio::sync::mpsc;
use watchpost_proto::config::ClusterConfig;
use watchpost_proto::{Alert, AlertType, Verdict};

/// The header that marks a verdict in the detection stream (its value: `tp` or `fp`).
pub const FEEDBACK_HEADER: &str = "Wp-Feedback";
/// Verdicts waiting to be sent.
const QUEUE: usize = 10_000;

/// One verdict to send.
pub(crate) struct Sent {
    alert: Alert,
    verdict: Verdict,
    at_ns: i64,
}

/// The console's end (see the module's documentation). Cheap to clone.
#[derive(Clone)]
pub struct FeedbackQueue {
    tx: mpsc::Sender<Sent>,
    counters: Arc<FleetCounters>,
}

impl FeedbackQueue {
    /// Queues `verdict` on `alert` for the detectors; false (and counted) when the queue is
    /// full.
    pub fn send(&self, alert: &Alert, verdict: Verdict) -> bool {
        let sent = Sent {
            alert: alert.clone(),
            verdict,
            at_ns: watchpost_proto::now_ns(),
        };
        let queued = self.tx.try_send(sent).is_ok();
        if !queued {
            FleetCounters::add(&self.counters.feedback_dropped, 1);
        }
        queued
    }
}

/// The partitions whose detectors own the threshold an alert of `kind` from log `source` came
/// from; none for an alert no threshold raised (a Sigma match, an indicator).
pub(crate) fn partitions_of(kind: AlertType, source: &str, partitions: u32) -> Vec<u32> {
    match kind {
        AlertType::Ml => {
            let source = watchpost_proto::hash64(source.as_bytes());
            vec![watchpost_detect::shard_of(source, partitions as usize) as u32]
        }
        AlertType::Ueba => (0..partitions).collect(),
        _ => Vec::new(),
    }
}

/// The verdict of a message of the detection stream, when it is one.
pub(crate) fn verdict_of(headers: Option<&HeaderMap>) -> Option<Verdict> {
    match headers?.get(FEEDBACK_HEADER)?.as_str() {
        "tp" => Some(Verdict::Tp),
        "fp" => Some(Verdict::Fp),
        _ => None,
    }
}

/// Starts the sending task (on the current runtime) and returns its queue.
pub(crate) fn start(
    config: ClusterConfig,
    node: String,
    counters: Arc<FleetCounters>,
) -> FeedbackQueue {
    let (tx, mut rx) = mpsc::channel::<Sent>(QUEUE);
    let queue = FeedbackQueue {
        tx,
        counters: Arc::clone(&counters),
    };
    tokio::spawn(async move {
        let Some(client) = crate::connect::client_for(&config, &node, "feedback").await else {
            return;
        };
        let js = async_nats::jetstream::new(client);
        while let Some(sent) = rx.recv().await {
            let Ok(body) = serde_json::to_vec(&sent.alert) else {
                continue;
            };
            let verdict = match sent.verdict {
                Verdict::Tp => "tp",
                Verdict::Fp => "fp",
            };
            let (kind, source) = (sent.alert.alert_type, &sent.alert.source);
            for p in partitions_of(kind, source, config.partitions) {
                let message = || {
                    async_nats::jetstream::message::PublishMessage::build()
                        .payload(body.clone().into())
                        .message_id(format!("fb.{}.{}.{p}", sent.alert.id, sent.at_ns))
                        .header(FEEDBACK_HEADER, verdict)
                };
                // Until the stream takes it: a verdict is rare and worth the wait.
                let what = format!("feedback on {} to partition {p}", sent.alert.id);
                publish_until_acked(&js, detect_subject(p), message, &counters, &what).await;
                FleetCounters::add(&counters.feedback_sent, 1);
            }
        }
    });
    queue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_goes_where_its_threshold_lives() {
        let ml = partitions_of(AlertType::Ml, "sshd", 64);
        assert_eq!(ml.len(), 1);
        assert_eq!(
            ml[0] as usize,
            watchpost_detect::shard_of(watchpost_proto::hash64(b"sshd"), 64)
        );
        assert_eq!(partitions_of(AlertType::Ueba, "sshd", 64).len(), 64);
        assert!(partitions_of(AlertType::Sigma, "sshd", 64).is_empty());
    }
}
