//! Alert and signal writes that the store refused (a full disk, a failing device), kept and
//! retried as the writer retries event blocks: an alert raised while the disk is full reaches
//! the store once it has room again.
//!
//! Why keyed by record: an open alert is written again whenever repeats fold into it, and each
//! write is the whole record. Only the newest state of each needs to reach the store, so a rule
//! firing all through an outage holds one entry here, not one per update.
//!
//! Bounded: past [`MAX_UNWRITTEN`] records (a disk full for hours under an alert storm), the
//! oldest is dropped, counted in `/stats` and `/metrics` and logged with its id; it is still on
//! the WebSocket stream and in the log.

use crate::stats::Stats;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use watchpost_proto::Alert;
use watchpost_store::Store;

/// Records kept per stage B worker while the store refuses writes: at a few kilobytes each, tens
/// of megabytes at most.
pub const MAX_UNWRITTEN: usize = 10_000;

/// The first wait before a retry, doubled after each failed one up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Which table a record goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// `alerts`: a change of an open alert.
    Alert,
    /// `alerts`: an alert just raised, queued for the notification channels with its record.
    NewAlert,
    /// `signals`.
    Signal,
}

/// The records a stage B worker could not write yet, oldest first.
#[derive(Debug)]
pub struct Unwritten {
    records: VecDeque<(RecordKind, Alert)>,
    next_try: Instant,
    backoff: Duration,
    /// What this worker last added to the sum over workers in `/stats`.
    reported: u64,
}

impl Default for Unwritten {
    fn default() -> Self {
        Unwritten {
            records: VecDeque::new(),
            next_try: Instant::now(),
            backoff: FIRST_BACKOFF,
            reported: 0,
        }
    }
}

impl Unwritten {
    /// Records waiting.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Writes `record`, or keeps it for a retry when the store refuses it. While older records
    /// wait, it joins them without a try, so the store sees each record's states in order.
    pub fn write(&mut self, store: &Store, stats: &Stats, kind: RecordKind, record: &Alert) {
        if self.records.is_empty() {
            match put(store, kind, record) {
                Ok(()) => return,
                Err(e) => {
                    count_error(stats, kind);
                    tracing::error!(
                        "cannot store {} {} (kept, retried): {e}",
                        what(kind),
                        record.id
                    );
                    self.next_try = Instant::now() + self.backoff;
                }
            }
        }
        self.keep(stats, kind, record);
    }

    fn keep(&mut self, stats: &Stats, kind: RecordKind, record: &Alert) {
        if let Some(slot) = self
            .records
            .iter_mut()
            .find(|(k, r)| table(*k) == table(kind) && r.id == record.id)
        {
            // A new alert not yet written stays new through its updates: its first write
            // queues it for the notification channels.
            if slot.0 != RecordKind::NewAlert {
                slot.0 = kind;
            }
            slot.1 = record.clone();
        } else {
            if self.records.len() >= MAX_UNWRITTEN
                && let Some((k, dropped)) = self.records.pop_front()
            {
                stats.detect.unwritten_dropped.add(1);
                tracing::error!(
                    "{} {} dropped: {MAX_UNWRITTEN} records already wait for the store",
                    what(k),
                    dropped.id
                );
            }
            self.records.push_back((kind, record.clone()));
        }
        self.publish(stats);
    }

    /// Retries the waiting records, oldest first, when their back-off has passed (or at once
    /// with `now_or_never`, at shutdown): stops at the first the store still refuses.
    pub fn retry(&mut self, store: &Store, stats: &Stats, now_or_never: bool) {
        if self.records.is_empty() || (!now_or_never && Instant::now() < self.next_try) {
            return;
        }
        while let Some((kind, record)) = self.records.front() {
            match put(store, *kind, record) {
                Ok(()) => {
                    self.records.pop_front();
                }
                Err(e) => {
                    count_error(stats, *kind);
                    self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                    self.next_try = Instant::now() + self.backoff;
                    tracing::warn!(
                        "{} records still wait for the store (next try in {:?}): {e}",
                        self.records.len(),
                        self.backoff
                    );
                    self.publish(stats);
                    return;
                }
            }
        }
        self.backoff = FIRST_BACKOFF;
        tracing::info!("every alert and signal the store refused is now stored");
        self.publish(stats);
    }

    /// Adds the change since the last report to the gauge summed over workers.
    fn publish(&mut self, stats: &Stats) {
        let now = self.records.len() as u64;
        stats
            .detect
            .unwritten
            .fetch_add(now.wrapping_sub(self.reported), Ordering::Relaxed);
        self.reported = now;
    }
}

/// The table a kind of record goes to: a new alert and its updates are one record.
fn table(kind: RecordKind) -> RecordKind {
    match kind {
        RecordKind::NewAlert => RecordKind::Alert,
        other => other,
    }
}

fn put(store: &Store, kind: RecordKind, record: &Alert) -> Result<(), watchpost_store::StoreError> {
    match kind {
        RecordKind::Alert => store.put_alert(record),
        RecordKind::NewAlert => store.put_new_alert(record),
        RecordKind::Signal => store.put_signal(record),
    }
}

fn count_error(stats: &Stats, kind: RecordKind) {
    match kind {
        RecordKind::Alert | RecordKind::NewAlert => stats.detect.alert_errors.add(1),
        RecordKind::Signal => stats.detect.signal_errors.add(1),
    }
}

fn what(kind: RecordKind) -> &'static str {
    match kind {
        RecordKind::Alert | RecordKind::NewAlert => "alert",
        RecordKind::Signal => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(id: &str, count: u64) -> Alert {
        serde_json::from_value(serde_json::json!({
            "id": id, "type": "sigma", "severity": 4, "title": "t", "detector": "d",
            "dedup_key": "k", "first_seen_ns": 0, "last_seen_ns": 0, "count": count,
            "source": "s", "entity": null, "score": 0.0, "threshold": 0.0, "contributions": {},
            "attack": [], "contributing_events": [], "related_entities": []
        }))
        .unwrap()
    }

    #[test]
    fn a_new_alert_the_store_refused_is_queued_for_notification_when_its_update_lands() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Default::default()).unwrap();
        store.set_outbox(true);
        let stats = Stats::new(1, 1, 0, Vec::new());
        let mut unwritten = Unwritten::default();
        let id = "0190f5a1-0000-7000-8000-00000000000a";
        store.inject_write_fault(true);
        unwritten.write(&store, &stats, RecordKind::NewAlert, &alert(id, 1));
        // A repeat folds in while the disk still refuses: one record waits, still new.
        unwritten.write(&store, &stats, RecordKind::Alert, &alert(id, 2));
        assert_eq!(unwritten.len(), 1);
        store.inject_write_fault(false);
        unwritten.retry(&store, &stats, true);
        assert!(unwritten.is_empty());
        assert_eq!(store.alert(id).unwrap().unwrap().count, 2);
        let queued = store.outbox_new(10).unwrap();
        assert_eq!(queued.len(), 1, "the alert's first write queues it");
        assert_eq!(watchpost_store::alert_id(&queued[0]), id);
    }
}
