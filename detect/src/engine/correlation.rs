//! Correlation alerts: the hits stage A found, counted in windows per group of the correlations
//! this worker owns.

use super::book::{OpenAlert, entity_ref, group_title, relate};
use super::sink::AlertSink;
use super::{Detector, EventKey};
use crate::record::CorrelationHit;
use std::collections::BTreeMap;
use std::sync::Arc;
use watchpost_proto::{Alert, AlertType, MAX_CONTRIBUTING, Uuid, event_id, fmix64};
use watchpost_rules::{CorrelationKind, Correlator, Fired, Hit, Level, RuleEntry};

/// Salt of `correlation` dedup keys.
pub(super) const CORRELATION_SALT: u64 = 0x636f_7272_0000_0005;

impl Detector {
    /// Evaluates correlation hits (each routed to this worker by its group); correlations they
    /// complete raise `correlation` alerts.
    pub fn correlate(&mut self, hits: &[CorrelationHit], sink: &mut impl AlertSink) {
        for h in hits {
            self.now_ns = self.now_ns.max(h.record.ts_ns);
            if !self.follow_plan(h.version) {
                continue;
            }
            let Some((_, c)) = self.correlator.as_mut() else {
                return;
            };
            if c.plan()
                .correlation(h.corr)
                .is_some_and(|x| x.is_tumbling())
            {
                self.tumbling.insert((h.corr, h.group), *h);
            }
            let mut fired = std::mem::take(&mut self.fired);
            fired.clear();
            c.observe(
                Hit {
                    corr: h.corr,
                    slot: h.slot,
                    group: h.group,
                    value: h.value,
                    ts_ns: h.record.ts_ns,
                    event: (h.record.block, h.record.pos),
                },
                &mut fired,
            );
            for f in &fired {
                self.raise_correlation(f, Some(h), sink);
            }
            self.fired = fired;
        }
    }

    /// Makes sure the windows follow the plan that numbered a hit of plan `version`; false when
    /// the hit comes from a plan already replaced (it is dropped: the numbers mean other rules).
    pub(super) fn follow_plan(&mut self, version: u64) -> bool {
        match &self.correlator {
            None => return false,
            Some((v, _)) if *v == version => return true,
            Some(_) => {}
        }
        let Some(catalog) = &self.catalog else {
            return false;
        };
        let (v, plan) = catalog.plan();
        if v != version {
            return false;
        }
        self.correlator = Some((v, Correlator::new(plan, self.params.correlation_max_groups)));
        self.corr_cache.clear();
        self.tumbling.clear();
        true
    }

    /// Judges the correlation windows that closed by the detector's clock.
    pub(super) fn sweep_correlations(&mut self, sink: &mut impl AlertSink) {
        let now = self.now_ns;
        let Some((_, c)) = self.correlator.as_mut() else {
            return;
        };
        let mut fired = std::mem::take(&mut self.fired);
        fired.clear();
        c.sweep(now, &mut fired);
        for f in &fired {
            let hit = self.tumbling.remove(&(f.corr, f.group));
            self.raise_correlation(f, hit.as_ref(), sink);
        }
        self.fired = fired;
        if let Some((_, c)) = &self.correlator
            && !self.tumbling.is_empty()
        {
            self.tumbling
                .retain(|&(corr, group), _| c.contains(corr, group));
        }
    }

    /// The catalogue entry of plan correlation `i`, cached.
    pub(super) fn correlation_entry(&mut self, i: u32) -> Option<Arc<RuleEntry>> {
        let at = i as usize;
        if let Some(Some(e)) = self.corr_cache.get(at) {
            return Some(e.clone());
        }
        let (_, c) = self.correlator.as_ref()?;
        let id = c.plan().correlation(i)?.rule.id.clone();
        let e = self.catalog.as_ref()?.find(&id)?;
        if self.corr_cache.len() <= at {
            self.corr_cache.resize(at + 1, None);
        }
        self.corr_cache[at] = Some(e.clone());
        Some(e)
    }

    /// A correlation held for a group: one alert per rule and group, repeats inside the
    /// cooldown folded into it. `hit` is the event that completed it (for the group's text and
    /// entities); a window judged at its close has its group's latest hit, if still known.
    pub(super) fn raise_correlation(
        &mut self,
        f: &Fired<EventKey>,
        hit: Option<&CorrelationHit>,
        sink: &mut impl AlertSink,
    ) {
        let Some(entry) = self.correlation_entry(f.corr) else {
            return;
        };
        let suppressed = self
            .correlator
            .as_ref()
            .and_then(|(_, c)| c.plan().correlation(f.corr))
            .is_none_or(|c| c.suppressed);
        self.count_fire(entry.key, f.last_ns);
        if suppressed || entry.rule.level == Some(Level::Informational) {
            return;
        }
        if self.excepted(&entry.rule.id, hit.map(|h| &h.record), f.last_ns) {
            return;
        }
        // Below the alerting level, a correlation is a signal about its completing event's
        // entities, like a single-event rule (docs/risk.md).
        if self.is_signal(&entry) {
            if let Some(h) = hit {
                let record = h.record;
                self.raise_rule_signal(&record, &entry, sink);
            }
            return;
        }
        let key = fmix64(entry.key ^ CORRELATION_SALT ^ f.group.rotate_left(29));
        if let Some(o) = self.open.get_mut(&key)
            && f.last_ns < o.until_ns
        {
            fold_fire(o, f);
            return;
        }
        // A new group for the rule: alerted on alone while the rule's window in this source has
        // room, folded into the rule's group alert after, as Sigma matches are, the window being
        // a correlation alert's cooldown (a day): forty scanners each trying five accounts are
        // three alerts and one naming the other thirty-seven, not forty. A group that joined
        // the group alert re-fires into it the same way, as the window stays full.
        let window = self.params.correlation_cooldown_ns;
        if let Some(h) = hit
            && let Some((group_key, until_ns)) =
                self.group_full(entry.key ^ CORRELATION_SALT, &h.record, window)
        {
            self.join_correlation_group(group_key, until_ns, f, h, &entry, sink);
            return;
        }
        let alert = self.correlation_alert(f, hit, &entry, key);
        let until_ns = f
            .last_ns
            .saturating_add(self.params.correlation_cooldown_ns);
        self.open_alert(key, alert, until_ns, sink);
    }

    /// Folds a fire of a new group into the rule's group alert (opened by this fire when the
    /// window has none yet): the group's entity (the address spraying) joins the related
    /// entities and the count of entities in the title.
    fn join_correlation_group(
        &mut self,
        group_key: u64,
        until_ns: i64,
        f: &Fired<EventKey>,
        h: &CorrelationHit,
        entry: &RuleEntry,
        sink: &mut impl AlertSink,
    ) {
        if let Some(o) = self.open.get_mut(&group_key)
            && f.last_ns < o.until_ns
        {
            fold_fire(o, f);
            if let Some(e) = h.entity {
                relate(&mut o.alert, Uuid::from_bytes(e.uuid), || entity_ref(&e));
            }
        } else {
            let mut alert = self.correlation_alert(f, Some(h), entry, group_key);
            alert.title = group_title(&entry.rule.title, 1);
            alert.dedup_key = format!("correlation:{}:group", entry.rule.id);
            alert.entity_count = 1;
            self.open_alert(group_key, alert, until_ns, sink);
            if let Some(o) = self.open.get_mut(&group_key) {
                o.group_title = Some(entry.rule.title.clone());
            }
        }
        self.note_member(group_key, f.group);
    }

    /// The new alert of a correlation's fire for one group (`key` its dedup key's hash).
    fn correlation_alert(
        &self,
        f: &Fired<EventKey>,
        hit: Option<&CorrelationHit>,
        entry: &RuleEntry,
        key: u64,
    ) -> Alert {
        let events: Vec<String> = newest_joined(f)
            .iter()
            .map(|(b, p)| event_id(b, *p))
            .collect();
        let r = hit.map(|h| h.record);
        // The alert is about what the correlation counted by (the address spraying, the host
        // a local address belongs to), not about whichever entity its last event named first;
        // a group by a value that is no entity (a command line) is about no entity.
        let entity = hit.and_then(|h| h.entity);
        let text = hit.map_or("", |h| h.text());
        let rule = &entry.rule;
        let measure = match self
            .correlator
            .as_ref()
            .and_then(|(_, c)| c.plan().correlation(f.corr))
            .map(|c| c.kind)
        {
            Some(CorrelationKind::EventCount) => "events",
            Some(CorrelationKind::ValueCount) => "distinct_values",
            _ => "rules",
        };
        Alert {
            id: self.next_id(f.last_ns, key),
            alert_type: AlertType::Correlation,
            severity: entry.severity,
            title: if text.is_empty() {
                rule.title.clone()
            } else {
                format!("{} ({text})", rule.title)
            },
            detector: rule.id.clone(),
            detector_name: rule.title.clone(),
            dedup_key: format!("correlation:{}:{:016x}", rule.id, f.group),
            first_seen_ns: f.first_ns,
            last_seen_ns: f.last_ns,
            count: 1,
            source: r
                .as_ref()
                .map_or_else(String::new, |r| r.source_name().to_string()),
            entity: entity.as_ref().map(entity_ref),
            score: f.measure as f64,
            threshold: 0.0,
            contributions: BTreeMap::from([(measure.to_string(), f.measure as f64)]),
            attack: entry.attack.clone(),
            contributing_events: events,
            related_entities: r.as_ref().map_or_else(Vec::new, |r| {
                r.entities()
                    .iter()
                    .filter(|e| entity.is_none_or(|g| g.uuid != e.uuid))
                    .map(entity_ref)
                    .collect()
            }),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
            sensor: String::new(),
        }
    }
}

/// The events a fire joined that an alert keeps: the newest [`MAX_CONTRIBUTING`].
fn newest_joined(f: &Fired<EventKey>) -> &[EventKey] {
    let joined = f.events.as_slice();
    &joined[joined.len().saturating_sub(MAX_CONTRIBUTING)..]
}

/// Folds a re-fire into an open correlation alert: one more, seen later, the highest measure,
/// its joined events kept while there is room.
fn fold_fire(o: &mut OpenAlert, f: &Fired<EventKey>) {
    let a = &mut o.alert;
    a.count += 1;
    a.last_seen_ns = a.last_seen_ns.max(f.last_ns);
    a.score = a.score.max(f.measure as f64);
    // Ids are built only while there is room: a busy group's repeats allocate nothing once
    // its alert holds its share of events.
    for (b, p) in newest_joined(f) {
        if a.contributing_events.len() >= MAX_CONTRIBUTING {
            break;
        }
        let id = event_id(b, *p);
        if !a.contributing_events.contains(&id) {
            a.contributing_events.push(id);
        }
    }
    o.dirty = true;
}
