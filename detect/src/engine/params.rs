//! What the detector takes from the configuration.

use crate::risk::RiskParams;
use crate::ueba::UebaParams;
use std::sync::Arc;
use watchpost_rules::Level;

/// What the detector needs from the configuration.
#[derive(Clone, Debug)]
pub struct DetectorParams {
    /// Raise `ml` alerts.
    pub ml_enabled: bool,
    /// DSPOT risk of each source's threshold: past it, an anomaly (a signal).
    pub ml_risk: f64,
    /// Risk of the quantile past which an anomaly alerts (at most `ml_risk`).
    pub ml_alert_risk: f64,
    /// Cooldown of an `ml` alert, ns.
    pub ml_cooldown_ns: i64,
    /// Cooldown of a `sigma` alert (per rule and entity), ns.
    pub sigma_cooldown_ns: i64,
    /// Cooldown of a `correlation` alert (per rule and group), ns.
    pub correlation_cooldown_ns: i64,
    /// Cooldown of an `ioc` alert (per indicator, and entity unless `ioc_per_indicator`), ns.
    pub ioc_cooldown_ns: i64,
    /// One `ioc` alert per indicator naming every entity seen with it, not one per entity.
    pub ioc_per_indicator: bool,
    /// Matches of indicators the feed is less sure of than this (0 to 100) are signals.
    pub ioc_min_confidence: u8,
    /// Entities a Sigma rule alerts on one by one per source and window before the rest fold
    /// into one group alert; 0 = never group.
    pub group_after: u32,
    /// A rule's grouping window, ns.
    pub group_window_ns: i64,
    /// Correlation groups held at most.
    pub correlation_max_groups: usize,
    /// Ten-minute periods of a day with failed logons from one address that raise its
    /// `persistence` alert; 0 = off.
    pub persistence_min_periods: u32,
    /// Distinct tactics of a kill-chain progression.
    pub killchain_min_tactics: usize,
    /// Window of a kill-chain progression, ns.
    pub killchain_window_ns: i64,
    /// UEBA settings.
    pub ueba: UebaParams,
    /// The least Sigma level that alerts directly (`low` at the lowest: `informational` never
    /// alerts); lower ones are signals.
    pub sigma_alert_min_level: Level,
    /// Rules that alert directly whatever their level.
    pub sigma_alert_rules: Arc<std::collections::HashSet<String>>,
    /// Rules that are only signals whatever their level.
    pub sigma_signal_rules: Arc<std::collections::HashSet<String>>,
    /// Risk-based alerting.
    pub risk: RiskParams,
}

impl DetectorParams {
    /// The settings of one of a fleet's `partitions` detectors: the bounds on what is held
    /// (entities, risk entries, correlation groups) shared out between them, so that a node
    /// owning every partition holds what one stand-alone node would. Entities spread evenly
    /// over partitions by hash; a bound is never below a floor that keeps a small partition
    /// useful.
    pub fn for_partitions(mut self, partitions: usize) -> DetectorParams {
        let share = |n: usize, floor: usize| n.div_ceil(partitions.max(1)).max(floor.min(n));
        self.ueba.max_entities = share(self.ueba.max_entities, 1024);
        self.risk.max_entities = share(self.risk.max_entities, 1024);
        self.correlation_max_groups = share(self.correlation_max_groups, 1024);
        self
    }

    /// From the configuration.
    pub fn from_config(config: &watchpost_proto::Config) -> DetectorParams {
        DetectorParams {
            ml_enabled: config.detection.ml_enabled,
            ml_risk: config.detection.ml_risk,
            ml_alert_risk: config.detection.ml_alert_risk,
            ml_cooldown_ns: (config.detection.ml_alert_cooldown_seconds as i64)
                .saturating_mul(1_000_000_000),
            sigma_cooldown_ns: (config.detection.sigma_alert_cooldown_seconds as i64)
                .saturating_mul(1_000_000_000),
            correlation_cooldown_ns: (config.detection.correlation_alert_cooldown_seconds as i64)
                .saturating_mul(1_000_000_000),
            ioc_cooldown_ns: (config.detection.ioc_alert_cooldown_seconds as i64)
                .saturating_mul(1_000_000_000),
            ioc_per_indicator: config.detection.ioc_alert_per_indicator,
            ioc_min_confidence: config.detection.ioc_alert_min_confidence.min(100) as u8,
            group_after: config.detection.alert_group_after_entities,
            group_window_ns: (config.detection.alert_group_window_seconds as i64)
                .saturating_mul(1_000_000_000),
            correlation_max_groups: config.detection.correlation_max_groups as usize,
            persistence_min_periods: config.detection.persistence_min_periods,
            killchain_min_tactics: config.detection.killchain_min_tactics as usize,
            killchain_window_ns: (config.detection.killchain_window_seconds as i64)
                .saturating_mul(1_000_000_000),
            ueba: UebaParams::from_config(&config.ueba),
            sigma_alert_min_level: Level::parse(&config.detection.sigma_alert_min_level)
                .unwrap_or(Level::Medium),
            sigma_alert_rules: Arc::new(
                config.detection.sigma_alert_rules.iter().cloned().collect(),
            ),
            sigma_signal_rules: Arc::new(
                config
                    .detection
                    .sigma_signal_rules
                    .iter()
                    .cloned()
                    .collect(),
            ),
            risk: RiskParams {
                threshold: config.detection.risk_threshold,
                window_ns: (config.detection.risk_window_hours * 3.6e12) as i64,
                max_entities: config.ueba.max_entities as usize,
                level_weights: config.detection.risk_level_weights.clone(),
            },
        }
    }
}
