//! Where alerts and signals leave the detector: the store and the stream live, memory offline.

use std::collections::BTreeMap;
use watchpost_proto::Alert;

/// Where alerts go: the store and the WebSocket hub live, standard output offline.
pub trait AlertSink {
    /// A new alert, or an open one whose count, time or events changed.
    fn alert(&mut self, alert: &Alert, new: bool);

    /// A new signal (docs/risk.md), or an open one whose count or events changed. Signals are
    /// alert records kept apart: they add risk, they are not in the analysts' queue.
    fn signal(&mut self, signal: &Alert, new: bool) {
        let _ = (signal, new);
    }
}

/// Collects alerts and signals in memory (tests, `watchpost analyze`).
#[derive(Default, Debug)]
pub struct Collect {
    /// Alerts by id, latest state.
    pub alerts: BTreeMap<String, Alert>,
    /// Signals by id, latest state.
    pub signals: BTreeMap<String, Alert>,
}

impl AlertSink for Collect {
    fn alert(&mut self, alert: &Alert, _new: bool) {
        self.alerts.insert(alert.id.clone(), alert.clone());
    }

    fn signal(&mut self, signal: &Alert, _new: bool) {
        self.signals.insert(signal.id.clone(), signal.clone());
    }
}
