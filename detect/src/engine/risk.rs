//! Risk alerts: an entity whose risk from its signals crossed the threshold.

use super::book::round6;
use super::sink::AlertSink;
use super::{Detector, RISK_DETECTOR};
use crate::record::DetectRecord;
use crate::risk::Crossing;
use watchpost_proto::{Alert, AlertType, EntityKind, builtin_detector_name};

/// Keys of entities' risk and of their `risk` alerts.
pub(super) const RISK_SALT: u64 = 0x7269_736b_0000_000a;

impl Detector {
    /// The `risk` alert of an entity whose risk crossed the threshold, or its repeat while open.
    pub(super) fn raise_risk(
        &mut self,
        r: &DetectRecord,
        key: u64,
        c: Crossing,
        sink: &mut impl AlertSink,
    ) {
        if self.excepted(RISK_DETECTOR, Some(r), r.ts_ns) {
            return;
        }
        let threshold = self.params.risk.threshold;
        if let Some(o) = self.open.get_mut(&key)
            && r.ts_ns < o.until_ns
        {
            let a = &mut o.alert;
            a.count += 1;
            a.last_seen_ns = a.last_seen_ns.max(r.ts_ns);
            a.score = round6(c.risk);
            a.contributions = c
                .contributions
                .into_iter()
                .map(|(title, weight)| (title, round6(weight)))
                .collect();
            a.attack = c.attack;
            a.contributing_events = c.events;
            a.related_alerts = c.signals;
            o.dirty = true;
            return;
        }
        let n = c.matches;
        let alert = Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: AlertType::Correlation,
            severity: if c.risk >= 2.0 * threshold { 4 } else { 3 },
            // The entity's name is not known here (stage B sees hashes; the API names the
            // entity field), so the title says what kind it is.
            title: format!(
                "Risk threshold crossed by {}: {n} signal{} across {} tactic{}",
                match c.entity.kind {
                    EntityKind::Ip => "an address",
                    EntityKind::User => "an account",
                    EntityKind::Host => "a host",
                    EntityKind::Domain => "a domain",
                },
                if n == 1 { "" } else { "s" },
                c.tactics,
                if c.tactics == 1 { "" } else { "s" },
            ),
            detector: RISK_DETECTOR.to_string(),
            detector_name: builtin_detector_name(RISK_DETECTOR).unwrap_or_default(),
            dedup_key: format!("risk:{}", c.entity.uuid),
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source: r.source_name().to_string(),
            entity: Some(c.entity),
            score: round6(c.risk),
            threshold,
            contributions: c
                .contributions
                .into_iter()
                .map(|(title, weight)| (title, round6(weight)))
                .collect(),
            attack: c.attack,
            contributing_events: c.events,
            related_entities: Vec::new(),
            related_alerts: c.signals,
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
            sensor: String::new(),
        };
        let until_ns = r.ts_ns.saturating_add(self.params.risk.window_ns);
        self.open_alert(key, alert, until_ns, sink);
    }
}
