//! The `[detection]` table.

use super::Config;
use super::problems::Problems;
use serde::{Deserialize, Serialize};

/// `[detection]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DetectionConfig {
    /// Seconds between flushes of detector models and UEBA baselines to the store.
    pub model_save_interval_seconds: u64,
    /// Extra folders of Sigma rules loaded at start (for example a SigmaHQ checkout).
    pub sigma_rules_dirs: Vec<String>,
    /// Extra Sigma field alias files (the format of `rules/mappings/fields.yml`), read after the
    /// bundled table: a name given again replaces the bundled aliases.
    pub sigma_field_mappings: Vec<String>,
    /// Extra logsource files (the format of `rules/mappings/logsources.yml`), read after the
    /// bundled table: their entries add event shapes.
    pub sigma_logsource_mappings: Vec<String>,
    /// Folder of uploaded custom rules; empty = `<storage.data_dir>/sigma-custom`.
    pub sigma_custom_upload_dir: String,
    /// Custom rules the upload folder may hold before uploads answer 507.
    pub sigma_custom_max_rules: u32,
    /// Bytes of rule text the custom rule folder may hold in all: what bounds the custom rules'
    /// memory, since each rule's values become compiled patterns.
    pub sigma_custom_max_total_bytes: u64,
    /// Sigma matches of one event that go on to alerting: past it the most severe are kept and
    /// the rest counted (`sigma_dropped`). A bound on a batch's memory, not on what an event may
    /// match: with the whole SigmaHQ set an event rarely matches more than a dozen rules.
    pub sigma_max_matches_per_event: u32,
    /// Whether the content ensemble raises `ml` alerts (it always scores, for the anomaly
    /// timeline).
    pub ml_enabled: bool,
    /// DSPOT risk of each source's `ml` threshold: the share of events expected above it. An
    /// event past it is an anomaly: a risk signal, or an alert past `ml_alert_risk`.
    pub ml_risk: f64,
    /// Risk of the quantile (of the same fitted tail) past which an anomaly alerts; at most
    /// `ml_risk`, which makes every anomaly an alert.
    pub ml_alert_risk: f64,
    /// Seconds an `ml` alert of one source stays open: repeats inside it bump its count. The
    /// default is the specification's UEBA cooldown (900): one anomaly of a source, such as a
    /// scanner sweeping two web servers within minutes, is one alert for either detector.
    pub ml_alert_cooldown_seconds: u64,
    /// Seconds a `sigma` alert of one rule and entity stays open: repeats inside it bump its
    /// count. Correlation alerts (per rule and group) use it too.
    pub sigma_alert_cooldown_seconds: u64,
    /// Distinct entities a Sigma rule alerts on one by one (per source, within
    /// `alert_group_window_seconds`); a further entity folds into one group alert of the rule
    /// that counts and lists them (an internet scanner sweep, a password spray). 0 = never group:
    /// one alert per rule and entity.
    pub alert_group_after_entities: u32,
    /// Seconds a rule's grouping window lasts, from its first alert; the group alert stays open
    /// for the rest of it.
    pub alert_group_window_seconds: u64,
    /// Seconds a `correlation` alert stays open per rule and group (the group names the actor:
    /// an address guessing passwords); a re-fire within it counts in the same alert.
    pub correlation_alert_cooldown_seconds: u64,
    /// One `ioc` alert per indicator, naming every entity seen with it (true), or one per
    /// indicator and entity (false).
    pub ioc_alert_per_indicator: bool,
    /// The least confidence (0 to 100) a feed must give an indicator for a match to alert; a
    /// match of one it is less sure of is a risk signal. Indicators without a confidence alert.
    pub ioc_alert_min_confidence: u32,
    /// The least Sigma level that alerts directly (`low`, `medium`, `high`, `critical`; the
    /// Sigma specification's `informational` never alerts); matches of rules below it are
    /// signals: stored, searchable, and adding risk to their entities (docs/risk.md).
    pub sigma_alert_min_level: String,
    /// Rule ids that alert directly whatever their level.
    pub sigma_alert_rules: Vec<String>,
    /// Rule ids whose matches are only signals whatever their level.
    pub sigma_signal_rules: Vec<String>,
    /// Risk at which an entity's signals raise one `correlation` alert (detector `risk`); 0 =
    /// signals are kept but never add up to an alert.
    pub risk_threshold: f64,
    /// Hours over which a signal's risk decays to a tenth (and the risk alert stays open).
    pub risk_window_hours: f64,
    /// Base risk of a signal by its level, before fleet rarity and breadth.
    pub risk_level_weights: RiskLevelWeights,
    /// Correlation groups (rule and group-by values) one stage B worker holds windows for;
    /// hits for new groups beyond it are dropped and counted.
    pub correlation_max_groups: u32,
    /// Ten-minute periods of one day in which one address failed a logon (a match of a rule
    /// mapped to T1110 naming an account) that raise its `persistence` alert; 0 = off
    /// (docs/risk.md, "Persistent guessing").
    pub persistence_min_periods: u32,
    /// Distinct ATT&CK tactics of one entity's alerts that make a kill-chain progression.
    pub killchain_min_tactics: u32,
    /// Seconds the tactics of a kill-chain progression must fall within (and that its alert
    /// stays open for).
    pub killchain_window_seconds: u64,
    /// Folder of indicator files (plain lists, CSV, STIX 2.1 bundles); empty =
    /// `<storage.data_dir>/ioc`.
    pub ioc_dir: String,
    /// Seconds between checks of `ioc_dir` for changed files (a change reloads the set).
    pub ioc_reload_interval_seconds: u64,
    /// Seconds an `ioc` alert of one indicator (and entity, see `ioc_alert_per_indicator`) stays
    /// open: repeats bump its count.
    pub ioc_alert_cooldown_seconds: u64,
}

impl Default for DetectionConfig {
    fn default() -> DetectionConfig {
        DetectionConfig {
            model_save_interval_seconds: 300,
            sigma_rules_dirs: Vec::new(),
            sigma_field_mappings: Vec::new(),
            sigma_logsource_mappings: Vec::new(),
            sigma_custom_upload_dir: String::new(),
            sigma_custom_max_rules: 1000,
            sigma_custom_max_total_bytes: 16 << 20,
            sigma_max_matches_per_event: 64,
            ml_enabled: true,
            ml_risk: 1e-4,
            ml_alert_risk: 3e-6,
            ml_alert_cooldown_seconds: 900,
            sigma_alert_cooldown_seconds: 300,
            alert_group_after_entities: 3,
            alert_group_window_seconds: 3600,
            ioc_alert_per_indicator: true,
            ioc_alert_min_confidence: 50,
            correlation_alert_cooldown_seconds: 86_400,
            sigma_alert_min_level: "medium".into(),
            sigma_alert_rules: Vec::new(),
            sigma_signal_rules: Vec::new(),
            risk_threshold: 60.0,
            risk_window_hours: 24.0,
            risk_level_weights: RiskLevelWeights::default(),
            correlation_max_groups: 100_000,
            persistence_min_periods: 12,
            killchain_min_tactics: 3,
            killchain_window_seconds: 86_400,
            ioc_dir: String::new(),
            ioc_reload_interval_seconds: 30,
            ioc_alert_cooldown_seconds: 3600,
        }
    }
}

/// `[detection.risk_level_weights]`: a signal's base risk by its level (Splunk's defaults scaled
/// to a threshold of 60: four low signals, or two medium, or a high and a low, cross it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RiskLevelWeights {
    /// An informational signal.
    pub informational: f64,
    /// A low signal (and an `ml` anomaly short of alerting).
    pub low: f64,
    /// A medium signal (and one of a rule without a level).
    pub medium: f64,
    /// A high signal.
    pub high: f64,
    /// A critical signal.
    pub critical: f64,
}

impl Default for RiskLevelWeights {
    fn default() -> RiskLevelWeights {
        RiskLevelWeights {
            informational: 5.0,
            low: 15.0,
            medium: 30.0,
            high: 50.0,
            critical: 80.0,
        }
    }
}

/// Checks the table's keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    let d = &config.detection;
    p.range_u64(
        "detection.model_save_interval_seconds",
        d.model_save_interval_seconds,
        1,
        86_400,
    );
    p.range_u64(
        "detection.sigma_max_matches_per_event",
        d.sigma_max_matches_per_event.into(),
        1,
        65_535,
    );
    p.range_u64(
        "detection.sigma_custom_max_total_bytes",
        d.sigma_custom_max_total_bytes,
        64 << 10,
        1 << 30,
    );
    p.range_u64(
        "detection.sigma_custom_max_rules",
        d.sigma_custom_max_rules.into(),
        1,
        1_000_000,
    );
    p.range_f64("detection.ml_risk", d.ml_risk, 1e-7, 0.1);
    p.range_f64("detection.ml_alert_risk", d.ml_alert_risk, 1e-9, 0.1);
    if d.ml_alert_risk > d.ml_risk {
        p.add(
            "detection.ml_alert_risk",
            format!(
                "{} is above detection.ml_risk ({}): an alert must be rarer than an anomaly",
                d.ml_alert_risk, d.ml_risk
            ),
        );
    }
    p.range_u64(
        "detection.ml_alert_cooldown_seconds",
        d.ml_alert_cooldown_seconds,
        0,
        86_400 * 7,
    );
    p.range_u64(
        "detection.sigma_alert_cooldown_seconds",
        d.sigma_alert_cooldown_seconds,
        0,
        86_400 * 7,
    );
    p.range_u64(
        "detection.alert_group_after_entities",
        d.alert_group_after_entities.into(),
        0,
        10_000,
    );
    p.range_u64(
        "detection.alert_group_window_seconds",
        d.alert_group_window_seconds,
        60,
        86_400 * 7,
    );
    const LEVELS: [&str; 4] = ["low", "medium", "high", "critical"];
    if !LEVELS.contains(&d.sigma_alert_min_level.as_str()) {
        p.add(
            "detection.sigma_alert_min_level",
            format!(
                "`{}` must be low, medium, high or critical (informational rules never alert)",
                d.sigma_alert_min_level
            ),
        );
    }
    for (key, ids) in [
        ("detection.sigma_alert_rules", &d.sigma_alert_rules),
        ("detection.sigma_signal_rules", &d.sigma_signal_rules),
    ] {
        if let Some(blank) = ids.iter().find(|id| id.trim().is_empty()) {
            p.add(key, format!("`{blank}` is not a rule id"));
        }
    }
    if let Some(both) = d
        .sigma_alert_rules
        .iter()
        .find(|id| d.sigma_signal_rules.contains(id))
    {
        p.add(
            "detection.sigma_signal_rules",
            format!("rule {both} is also in detection.sigma_alert_rules"),
        );
    }
    p.range_f64("detection.risk_threshold", d.risk_threshold, 0.0, 1e6);
    let w = &d.risk_level_weights;
    for (name, v) in [
        ("informational", w.informational),
        ("low", w.low),
        ("medium", w.medium),
        ("high", w.high),
        ("critical", w.critical),
    ] {
        p.range_f64(&format!("detection.risk_level_weights.{name}"), v, 0.0, 1e6);
    }
    p.range_u64(
        "detection.correlation_alert_cooldown_seconds",
        d.correlation_alert_cooldown_seconds,
        0,
        86_400 * 30,
    );
    p.range_f64(
        "detection.risk_window_hours",
        d.risk_window_hours,
        1.0,
        24.0 * 90.0,
    );
    p.range_u64(
        "detection.correlation_max_groups",
        d.correlation_max_groups.into(),
        100,
        10_000_000,
    );
    p.range_u64(
        "detection.persistence_min_periods",
        d.persistence_min_periods.into(),
        0,
        144,
    );
    p.range_u64(
        "detection.killchain_min_tactics",
        d.killchain_min_tactics.into(),
        2,
        14,
    );
    p.range_u64(
        "detection.killchain_window_seconds",
        d.killchain_window_seconds,
        60,
        86_400 * 30,
    );
    p.range_u64(
        "detection.ioc_reload_interval_seconds",
        d.ioc_reload_interval_seconds,
        1,
        86_400,
    );
    p.range_u64(
        "detection.ioc_alert_cooldown_seconds",
        d.ioc_alert_cooldown_seconds,
        0,
        86_400 * 7,
    );
    p.range_u64(
        "detection.ioc_alert_min_confidence",
        d.ioc_alert_min_confidence.into(),
        0,
        100,
    );
}
