//! The `[ueba]` table.

use super::Config;
use super::problems::Problems;
use serde::{Deserialize, Serialize};

/// `[ueba]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UebaConfig {
    /// Produce UEBA alerts. Baselines keep learning while off, so re-enabling starts no new warmup.
    pub enabled: bool,
    /// Days from an entity's first event before it is scored.
    pub warmup_days: f64,
    /// Events an entity must have before it is scored.
    pub warmup_min_events: u64,
    /// Distinct source IPs remembered per entity (top-K).
    pub source_ip_cap: u32,
    /// Templates remembered per entity (top-K, LFU weighted).
    pub template_top_k: u32,
    /// Smoothing factor of the per-minute volume EMA.
    pub ema_alpha: f64,
    /// Seconds an entity stays in cooldown after an alert.
    pub alert_cooldown_seconds: u64,
    /// Entities tracked before the coldest are evicted.
    pub max_entities: u64,
    /// DSPOT risk level of the per-entity-type threshold.
    pub dspot_risk: f64,
    /// Weights of the four sub-scores; must sum to 1.0.
    pub sub_score_weights: SubScoreWeights,
    /// Surprisal, in bits, from which one dimension alone alerts (an hour, rate, source or
    /// host far outside the entity's own history); 0 turns the single-deviation path off.
    pub strong_deviation_bits: f64,
    /// Surprisal, in bits, from which one dimension short of `strong_deviation_bits` is a risk
    /// signal (stored, adding risk to the entity) rather than nothing; 0 turns UEBA signals off.
    pub signal_bits: f64,
    /// Least silence, in days, after which an entity active again counts as dormant (when the
    /// silence is also at least twice its longest before); 0 turns dormancy off.
    pub dormancy_days: f64,
}

impl Default for UebaConfig {
    fn default() -> UebaConfig {
        UebaConfig {
            enabled: true,
            warmup_days: 7.0,
            warmup_min_events: 200,
            source_ip_cap: 64,
            template_top_k: 32,
            ema_alpha: 0.05,
            alert_cooldown_seconds: 900,
            max_entities: 100_000,
            dspot_risk: 0.0001,
            sub_score_weights: SubScoreWeights::default(),
            strong_deviation_bits: 9.0,
            signal_bits: 7.0,
            dormancy_days: 14.0,
        }
    }
}

/// `[ueba.sub_score_weights]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SubScoreWeights {
    /// Weight of the hour-of-day rarity sub-score.
    pub time_of_day: f64,
    /// Weight of the source IP novelty sub-score.
    pub source_novelty: f64,
    /// Weight of the volume sub-score.
    pub volume: f64,
    /// Weight of the template rarity sub-score.
    pub pattern_novelty: f64,
}

impl Default for SubScoreWeights {
    fn default() -> SubScoreWeights {
        SubScoreWeights {
            time_of_day: 0.25,
            source_novelty: 0.30,
            volume: 0.20,
            pattern_novelty: 0.25,
        }
    }
}

/// Checks the table's keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    let u = &config.ueba;
    p.range_f64("ueba.warmup_days", u.warmup_days, 0.0, 365.0);
    p.range_u64("ueba.warmup_min_events", u.warmup_min_events, 0, 1 << 40);
    p.range_u64("ueba.source_ip_cap", u.source_ip_cap.into(), 1, 4096);
    p.range_u64("ueba.template_top_k", u.template_top_k.into(), 1, 4096);
    p.open_unit("ueba.ema_alpha", u.ema_alpha);
    p.range_u64(
        "ueba.alert_cooldown_seconds",
        u.alert_cooldown_seconds,
        0,
        30 * 86_400,
    );
    p.range_u64("ueba.max_entities", u.max_entities, 1, 100_000_000);
    p.risk("ueba.dspot_risk", u.dspot_risk);
    let bits = u.strong_deviation_bits;
    if !(bits == 0.0 || (4.0..=40.0).contains(&bits)) {
        p.add(
            "ueba.strong_deviation_bits",
            format!("{bits} must be 0 (off) or from 4 to 40"),
        );
    }
    let signal = u.signal_bits;
    if !(signal == 0.0 || (4.0..=40.0).contains(&signal)) {
        p.add(
            "ueba.signal_bits",
            format!("{signal} must be 0 (off) or from 4 to 40"),
        );
    } else if signal > 0.0 && (4.0..=40.0).contains(&bits) && signal >= bits {
        p.add(
            "ueba.signal_bits",
            format!(
                "{signal} is not below ueba.strong_deviation_bits ({bits}): a signal is a deviation short of an alert"
            ),
        );
    }
    p.range_f64("ueba.dormancy_days", u.dormancy_days, 0.0, 3650.0);
    let w = &u.sub_score_weights;
    let parts = [
        ("time_of_day", w.time_of_day),
        ("source_novelty", w.source_novelty),
        ("volume", w.volume),
        ("pattern_novelty", w.pattern_novelty),
    ];
    for (name, v) in parts {
        p.range_f64(&format!("ueba.sub_score_weights.{name}"), v, 0.0, 1.0);
    }
    let sum: f64 = parts.iter().map(|(_, v)| v).sum();
    if (sum - 1.0).abs() > 1e-6 {
        p.add(
            "ueba.sub_score_weights",
            format!("the four weights must sum to 1.0, they sum to {sum}"),
        );
    }
}
