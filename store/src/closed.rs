//! Alerts that analysts closed, announced to the detection workers.
//!
//! A detector keeps an alert open for its cooldown (a day for correlations) and folds
//! repeats into it. Once an analyst closes it, a repeat must open a new alert instead, or the
//! next step of an attack would only bump the count of an alert out of everyone's queue. The
//! workers cannot read the triage family per repeat, so every close that lands here is logged
//! with a generation number; a worker compares one atomic per batch and reads the ids it has not
//! seen only when the number moved.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many recent closes are kept. A worker reads them within a batch of their landing, so a
/// worker that missed more than this many (at most a few thousand bulk closes at once) only
/// misses the chance to end those alerts' cooldowns early; nothing is lost from the store.
const KEPT: usize = 4096;

/// The closes of the last [`KEPT`] alerts, each with its generation.
#[derive(Default)]
pub(crate) struct ClosedLog {
    generation: AtomicU64,
    recent: Mutex<VecDeque<(u64, String)>>,
}

impl ClosedLog {
    /// Logs the close of alert `id`.
    pub(crate) fn record(&self, id: &str) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let generation = self.generation.load(Ordering::Relaxed) + 1;
        if recent.len() == KEPT {
            recent.pop_front();
        }
        recent.push_back((generation, id.to_string()));
        // Published after the id is in place: a reader that sees the number finds the id.
        self.generation.store(generation, Ordering::Release);
    }

    /// The generation of the latest close (0 before any).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Appends to `out` the ids closed after generation `seen`; returns the generation read to.
    pub(crate) fn since(&self, seen: u64, out: &mut Vec<String>) -> u64 {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(
            recent
                .iter()
                .filter(|(generation, _)| *generation > seen)
                .map(|(_, id)| id.clone()),
        );
        recent.back().map_or(seen, |(generation, _)| *generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_each_close_once_and_the_oldest_go_first_when_full() {
        let log = ClosedLog::default();
        assert_eq!(log.generation(), 0);
        let mut out = Vec::new();
        assert_eq!(log.since(0, &mut out), 0);
        assert!(out.is_empty());
        log.record("a");
        log.record("b");
        let seen = log.since(0, &mut out);
        assert_eq!(
            (seen, out.as_slice()),
            (2, ["a", "b"].map(String::from).as_slice())
        );
        out.clear();
        log.record("c");
        assert_eq!(log.since(seen, &mut out), 3);
        assert_eq!(out, ["c"]);
        for i in 0..KEPT + 10 {
            log.record(&i.to_string());
        }
        out.clear();
        log.since(0, &mut out);
        assert_eq!(out.len(), KEPT);
        assert_eq!(out[0], "10");
    }
}
