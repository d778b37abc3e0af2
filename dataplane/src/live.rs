//! The live alert feed that the WebSocket stream reads: a short ring of the latest alert changes
//! with sequence numbers.
//!
//! Why a ring and not a channel: stage B must never wait for a reader, and readers come and go.
//! Publishing is one short lock and a push, and only while someone watches (`watchers > 0`), so
//! with no dashboard open it costs one atomic load per alert. A reader remembers the last
//! sequence it saw and asks for what came after; what fell off the ring meanwhile is reported as
//! missed, so a slow reader knows it lost alerts (they are all in the store).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use watchpost_proto::Alert;

/// Alert changes kept for readers.
pub const LIVE_ALERTS: usize = 4096;

/// One change: a new alert, or an open alert whose count or events changed.
#[derive(Clone, Debug)]
pub struct AlertChange {
    /// Sequence number, from 1.
    pub seq: u64,
    /// The alert as it is now.
    pub alert: Arc<Alert>,
    /// It was just raised (rather than updated).
    pub new: bool,
}

/// The ring.
#[derive(Default)]
pub struct LiveAlerts {
    ring: Mutex<(u64, VecDeque<AlertChange>)>,
    /// Readers subscribed; publishing is skipped while there are none.
    pub watchers: AtomicUsize,
}

impl LiveAlerts {
    /// Records a change, when anyone watches.
    pub fn publish(&self, alert: &Alert, new: bool) {
        if self.watchers.load(Ordering::Relaxed) == 0 {
            return;
        }
        let alert = Arc::new(alert.clone());
        let mut g = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        g.0 += 1;
        let seq = g.0;
        if g.1.len() == LIVE_ALERTS {
            g.1.pop_front();
        }
        g.1.push_back(AlertChange { seq, alert, new });
    }

    /// The sequence number of the latest change (where a new reader starts).
    pub fn latest(&self) -> u64 {
        self.ring.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// Appends the changes after `seq` to `out`; returns how many of them were no longer kept.
    pub fn since(&self, seq: u64, out: &mut Vec<AlertChange>) -> u64 {
        let g = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let Some(first) = g.1.front().map(|c| c.seq) else {
            return 0;
        };
        out.extend(g.1.iter().filter(|c| c.seq > seq).cloned());
        first.saturating_sub(seq + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert() -> Alert {
        serde_json::from_value(serde_json::json!({
            "id": "a", "type": "ml", "severity": 3, "title": "t", "detector": "d",
            "dedup_key": "k", "first_seen_ns": 0, "last_seen_ns": 0, "count": 1, "source": "s",
            "entity": null, "score": 0.0, "threshold": 0.0, "contributions": {}, "attack": [],
            "contributing_events": [], "related_entities": []
        }))
        .unwrap()
    }

    #[test]
    fn readers_get_what_came_after_and_learn_what_they_missed() {
        let live = LiveAlerts::default();
        let a = alert();
        live.publish(&a, true);
        assert_eq!(live.latest(), 0, "nobody watches: nothing kept");
        live.watchers.fetch_add(1, Ordering::Relaxed);
        for _ in 0..LIVE_ALERTS + 10 {
            live.publish(&a, true);
        }
        let mut out = Vec::new();
        assert_eq!(live.since(0, &mut out), 10);
        assert_eq!(out.len(), LIVE_ALERTS);
        out.clear();
        let last = live.latest();
        assert_eq!(live.since(last - 2, &mut out), 0);
        assert_eq!(
            out.iter().map(|c| c.seq).collect::<Vec<_>>(),
            [last - 1, last]
        );
    }
}
