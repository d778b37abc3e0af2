//! Sigma alerts and signals: a rule's match named from the catalogue, raised at or above its
//! alerting level, a signal below it.

use super::Detector;
use super::book::{ACTOR_SALT, MatchAlert, actor_address, entity_ref, group_title, primary_entity};
use super::signal::{SignalOrigin, SignalTitle};
use super::sink::AlertSink;
use crate::record::DetectRecord;
use std::sync::Arc;
use watchpost_proto::{AlertType, fmix64};
use watchpost_rules::{Level, RuleEntry};

/// Salt of `sigma` dedup keys.
pub(super) const SIGMA_SALT: u64 = 0x7369_676d_6100_0004;

/// The record of a Sigma rule's match: an alert (`dedup` `sigma`) or a signal (`signal`).
pub(super) fn rule_match_alert(entry: &RuleEntry, dedup: &str) -> MatchAlert {
    MatchAlert {
        alert_type: AlertType::Sigma,
        severity: entry.severity,
        title: entry.rule.title.clone(),
        detector: entry.rule.id.clone(),
        detector_name: entry.rule.title.clone(),
        dedup: format!("{dedup}:{}", entry.rule.id),
        attack: entry.attack.clone(),
    }
}

impl Detector {
    /// The catalogue entry of detection rule number `i`, cached.
    pub(super) fn rule_entry(&mut self, i: u32) -> Option<Arc<RuleEntry>> {
        self.cached_rule(i).cloned()
    }

    /// The cached entry of catalogue rule `i`, borrowed (see [`Detector::rule_entry`]): for a
    /// question about the rule that needs no entry of its own, without a reference count's
    /// increment and decrement per match.
    fn cached_rule(&mut self, i: u32) -> Option<&Arc<RuleEntry>> {
        let at = i as usize;
        // An atomic load per match: a reload or an upload may have replaced the rule.
        let version = self.catalog.as_ref()?.version();
        if version != self.rule_cache_version {
            self.rule_cache.clear();
            self.rule_cache_version = version;
        }
        if !matches!(self.rule_cache.get(at), Some(Some(_))) {
            let e = self.catalog.as_ref()?.detection(i)?;
            if self.rule_cache.len() <= at {
                self.rule_cache.resize(at + 1, None);
            }
            self.rule_cache[at] = Some(e);
        }
        self.rule_cache.get(at)?.as_ref()
    }

    /// Whether any of `matches` (catalogue numbers) says the event is a failed logon (see
    /// `persistence::is_guessing`).
    pub(super) fn names_failed_logon(&mut self, matches: &[u32]) -> bool {
        matches.iter().any(|&rule| {
            self.cached_rule(rule)
                .is_some_and(|e| super::persistence::is_guessing(e))
        })
    }

    /// A Sigma match: a new alert per rule and entity (the event's first scored entity, or its
    /// source when it has none), repeats inside the cooldown folded into it. Every match counts
    /// as a fire of the rule in its hour.
    pub(super) fn raise_sigma(&mut self, r: &DetectRecord, rule: u32, sink: &mut impl AlertSink) {
        let Some(entry) = self.rule_entry(rule) else {
            return;
        };
        self.count_fire(entry.key, r.ts_ns);
        // A building block of a correlation without `generate: true` feeds it and nothing else,
        // except that a failed logon counts on its address's persistence trail whatever becomes
        // of the match: persistence is measured across every rule that says a credential was
        // tried.
        let building_block = self
            .correlator
            .as_ref()
            .is_some_and(|(_, c)| c.plan().is_suppressed(rule));
        let guessing = super::persistence::is_guessing(&entry);
        if building_block && !guessing {
            return;
        }
        // An exception on the rule (an operator's own scanner) holds the match back from the
        // trail too.
        if self.excepted(&entry.rule.id, Some(r), r.ts_ns) {
            return;
        }
        if guessing {
            self.note_guess(r, &entry, sink);
        }
        if building_block {
            return;
        }
        // Below the alerting level (the Sigma specification's `informational`: "no case or
        // alerting should be triggered by such rules"; `low` by default too), or named a
        // signal rule: a signal that adds risk, not an alert.
        if self.is_signal(&entry) {
            self.raise_rule_signal(r, &entry, sink);
            return;
        }
        let primary = primary_entity(r);
        let subject = primary.map_or(r.source, |i| r.entities[i].hash);
        let key = fmix64(entry.key ^ SIGMA_SALT ^ subject.rotate_left(29));
        if self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns) {
            self.repeat(key, r, 1.0, None);
            return;
        }
        // A new entity acted on by an address the rule already has an open alert for (a password
        // spray, one address guessing forty accounts) joins that alert: one attacker, one alert.
        let actor = actor_address(r, primary)
            .filter(|_| self.params.group_after > 0)
            .map(|i| fmix64(entry.key ^ ACTOR_SALT ^ r.entities[i].hash.rotate_left(7)));
        if let Some(actor_key) = actor
            && let Some(&key) = self.alias.get(&actor_key)
            && self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns)
        {
            let entity = primary.map(|i| entity_ref(&r.entities[i]));
            self.repeat(key, r, 1.0, entity);
            self.note_member(key, subject);
            return;
        }
        // A new entity for the rule: alerted on alone while the rule's window has room,
        // folded into the rule's group alert after.
        if let Some((group_key, until_ns)) =
            self.group_full(entry.key, r, self.params.group_window_ns)
        {
            if self
                .open
                .get(&group_key)
                .is_some_and(|o| r.ts_ns < o.until_ns)
            {
                let entity = primary.map(|i| entity_ref(&r.entities[i]));
                self.repeat(group_key, r, 1.0, entity);
                self.note_member(group_key, subject);
                return;
            }
            let m = MatchAlert {
                alert_type: AlertType::Sigma,
                severity: entry.severity,
                title: group_title(&entry.rule.title, 1),
                detector: entry.rule.id.clone(),
                detector_name: entry.rule.title.clone(),
                dedup: format!("sigma:{}:group", entry.rule.id),
                attack: entry.attack.clone(),
            };
            let base = entry.rule.title.clone();
            self.open_group(r, group_key, primary, m, base, until_ns, sink);
            self.note_member(group_key, subject);
            return;
        }
        let m = rule_match_alert(&entry, "sigma");
        let until_ns = r.ts_ns.saturating_add(self.params.sigma_cooldown_ns);
        self.open_match(r, key, primary, m, until_ns, sink);
        if let Some(actor_key) = actor {
            self.alias.insert(actor_key, key);
            self.note_member(key, subject);
        }
    }

    /// Whether a match of `entry` is a signal rather than an alert (docs/risk.md). The Sigma
    /// specification's `informational` ("no case or alerting should be triggered by such
    /// rules") is always a signal, whatever else is configured; a rule without a level is
    /// `medium`, as its alert severity is.
    pub(super) fn is_signal(&self, entry: &RuleEntry) -> bool {
        let p = &self.params;
        let level = entry.rule.level.unwrap_or(Level::Medium);
        if level == Level::Informational {
            return true;
        }
        if p.sigma_alert_rules.contains(&entry.rule.id) {
            return false;
        }
        p.sigma_signal_rules.contains(&entry.rule.id) || level < p.sigma_alert_min_level
    }

    /// A signal of a rule (a Sigma match or a correlation below the alerting level).
    pub(super) fn raise_rule_signal(
        &mut self,
        r: &DetectRecord,
        entry: &Arc<RuleEntry>,
        sink: &mut impl AlertSink,
    ) {
        let origin = SignalOrigin {
            key: entry.key,
            id: SignalTitle::Rule(&entry.rule.id),
            title: SignalTitle::Rule(&entry.rule.title),
            level: entry.rule.level,
            attack: &entry.attack,
            entity: None,
            with_actor: true,
            guessing: super::persistence::is_guessing(entry),
        };
        // Built only for a new signal: repeats fold in without allocating.
        let build = |d: &mut Detector, key, primary| {
            d.match_alert(r, key, primary, rule_match_alert(entry, "signal"))
        };
        self.raise_signal(r, &origin, build, sink);
    }
}
