//! What each LLM feature cost: model calls, failures, answers served from the cache, and the
//! calls' latency, for `/stats` and `/metrics`. Counted per request, never per event.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use watchpost_dataplane::Histogram;

/// A feature that calls the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// `POST /alerts/{id}/explain`.
    Explain,
    /// `POST /hunt` (translation).
    Hunt,
    /// `POST /sigma/rule-suggestions/{key}`.
    RuleSuggestion,
}

impl Feature {
    /// Every feature, in index order.
    pub const ALL: [Feature; 3] = [Feature::Explain, Feature::Hunt, Feature::RuleSuggestion];

    /// Its name in `/stats` and the `feature` label of `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Explain => "explain",
            Feature::Hunt => "hunt",
            Feature::RuleSuggestion => "rule_suggestion",
        }
    }
}

/// One feature's counters.
#[derive(Default, Debug)]
pub struct FeatureUsage {
    /// Model calls made.
    pub calls: AtomicU64,
    /// Of those, failed (an upstream failure or a timeout; a refusal before any call, the
    /// backend off, not ready or busy, is not a call).
    pub failures: AtomicU64,
    /// Answers served from the cache without a call.
    pub cache_hits: AtomicU64,
    /// Each call's time, successful or not.
    pub latency: Histogram,
}

/// Every feature's counters.
#[derive(Default, Debug)]
pub struct Usage([FeatureUsage; 3]);

impl Usage {
    /// The counters of `feature`.
    pub fn of(&self, feature: Feature) -> &FeatureUsage {
        &self.0[feature as usize]
    }

    /// A call of `feature` that took `elapsed_ns` and succeeded or not.
    pub fn call(&self, feature: Feature, elapsed_ns: u64, ok: bool) {
        let u = self.of(feature);
        u.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            u.failures.fetch_add(1, Ordering::Relaxed);
        }
        u.latency.observe_ns(elapsed_ns);
    }

    /// An answer of `feature` served from the cache.
    pub fn cache_hit(&self, feature: Feature) {
        self.of(feature).cache_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters as `/stats` shows them.
    pub fn snapshot(&self) -> UsageSnapshot {
        let one = |f: Feature| {
            let u = self.of(f);
            let calls = u.calls.load(Ordering::Relaxed);
            let (_, sum_s) = u.latency.cumulative();
            FeatureSnapshot {
                calls,
                failures: u.failures.load(Ordering::Relaxed),
                cache_hits: u.cache_hits.load(Ordering::Relaxed),
                latency_ms_mean: if calls == 0 {
                    0.0
                } else {
                    (sum_s * 1000.0 / calls as f64 * 10.0).round() / 10.0
                },
            }
        };
        UsageSnapshot {
            explain: one(Feature::Explain),
            hunt: one(Feature::Hunt),
            rule_suggestion: one(Feature::RuleSuggestion),
        }
    }
}

/// The LLM's part of `/stats`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct UsageSnapshot {
    /// Alert explanations.
    pub explain: FeatureSnapshot,
    /// Hunt translations (entity lookups do not call the model and are not counted).
    pub hunt: FeatureSnapshot,
    /// Sigma rule drafts (a refused draft's second call counts too).
    pub rule_suggestion: FeatureSnapshot,
}

/// One feature in `/stats`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct FeatureSnapshot {
    /// Model calls made since start.
    pub calls: u64,
    /// Of those, failed.
    pub failures: u64,
    /// Answers served from the cache.
    pub cache_hits: u64,
    /// Mean time of a call, ms (0 without calls).
    pub latency_ms_mean: f64,
}
