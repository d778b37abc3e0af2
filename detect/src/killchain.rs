//! Kill-chain progression: one entity's alerts reaching several distinct ATT&CK tactics within
//! a window (by default three within 24 hours) raise one `correlation` alert that lists them.
//!
//! It reads alerts, not events: a failed login is nothing, a failed login, then discovery
//! commands, then a large upload by the same account is an intrusion in progress, whichever
//! detectors (Sigma, UEBA, IOC) saw each step. Alerts are rare, so the tracker sits behind one
//! mutex shared by the stage B workers (an entity's alerts may come from any of them); nothing
//! on the per-event path touches it.

use std::collections::{BTreeMap, HashMap};
use watchpost_proto::{
    Alert, AlertType, AttackMapping, MAX_CONTRIBUTING, Uuid, builtin_detector_name, fmix64, hash64,
};
use watchpost_rules::Attack;

/// `detector` of kill-chain alerts.
pub const DETECTOR: &str = "killchain";
/// Alerts remembered per entity (the oldest go first).
const MAX_STEPS: usize = 64;

/// One alert's tactic on an entity's trail.
#[derive(Clone, Debug)]
struct Step {
    ts_ns: i64,
    tactic: AttackMapping,
    alert: String,
    events: Vec<String>,
}

#[derive(Default)]
struct Trail {
    steps: Vec<Step>,
    /// The open kill-chain alert and when it closes.
    open: Option<(Alert, i64)>,
    last_ns: i64,
}

/// The trails of the entities with tactic-mapped alerts.
pub struct KillChain {
    min_tactics: usize,
    window_ns: i64,
    max_entities: usize,
    trails: HashMap<Uuid, Trail>,
    seq: u64,
}

impl KillChain {
    /// `min_tactics` distinct tactics within `window_ns`; at most `max_entities` trails.
    pub fn new(min_tactics: usize, window_ns: i64, max_entities: usize) -> KillChain {
        KillChain {
            min_tactics: min_tactics.max(2),
            window_ns,
            max_entities: max_entities.max(1),
            trails: HashMap::new(),
            seq: 0,
        }
    }

    /// From the configuration.
    pub fn from_config(config: &watchpost_proto::Config) -> KillChain {
        KillChain::new(
            config.detection.killchain_min_tactics as usize,
            (config.detection.killchain_window_seconds as i64).saturating_mul(1_000_000_000),
            config.detection.correlation_max_groups as usize,
        )
    }

    /// Entities tracked.
    pub fn len(&self) -> usize {
        self.trails.len()
    }

    /// None tracked.
    pub fn is_empty(&self) -> bool {
        self.trails.is_empty()
    }

    /// Takes a new alert; returns the kill-chain alert it opens (`true`) or extends (`false`).
    pub fn observe(&mut self, alert: &Alert) -> Option<(Alert, bool)> {
        if alert.detector == DETECTOR || alert.attack.is_empty() {
            return None;
        }
        let entity = alert.entity.as_ref()?;
        let ts = alert.first_seen_ns;
        if !self.trails.contains_key(&entity.uuid) && self.trails.len() >= self.max_entities {
            self.prune(ts);
            if self.trails.len() >= self.max_entities {
                return None;
            }
        }
        let window = self.window_ns;
        let trail = self.trails.entry(entity.uuid).or_default();
        trail.last_ns = trail.last_ns.max(ts);
        let mut seen_here: Vec<&str> = Vec::new();
        for m in &alert.attack {
            // A technique kept as written with no tactic (an id ATT&CK does not know) is no step.
            if m.tactic_id.is_empty() || seen_here.contains(&m.tactic_id.as_str()) {
                continue;
            }
            seen_here.push(&m.tactic_id);
            if trail.steps.len() == MAX_STEPS {
                trail.steps.remove(0);
            }
            trail.steps.push(Step {
                ts_ns: ts,
                tactic: m.clone(),
                alert: alert.id.clone(),
                events: alert.contributing_events.iter().take(2).cloned().collect(),
            });
        }
        trail.steps.retain(|s| s.ts_ns >= ts.saturating_sub(window));
        // The latest step of each tactic, in kill-chain order.
        let mut by_tactic: BTreeMap<usize, &Step> = BTreeMap::new();
        for s in &trail.steps {
            let at = tactic_order(&s.tactic.tactic_id);
            if by_tactic.get(&at).is_none_or(|old| s.ts_ns >= old.ts_ns) {
                by_tactic.insert(at, s);
            }
        }
        if by_tactic.len() < self.min_tactics {
            return None;
        }
        let steps: Vec<&Step> = by_tactic.values().copied().collect();
        let names: Vec<&str> = steps.iter().map(|s| s.tactic.tactic.as_str()).collect();
        let title = format!(
            "Kill-chain progression: {} ATT&CK tactics on one {} ({})",
            steps.len(),
            entity.kind.name(),
            names.join(" → ")
        );
        let mut related: Vec<String> = Vec::new();
        let mut events: Vec<String> = Vec::new();
        for s in &trail.steps {
            if !related.contains(&s.alert) {
                related.push(s.alert.clone());
            }
            for e in &s.events {
                if events.len() < MAX_CONTRIBUTING && !events.contains(e) {
                    events.push(e.clone());
                }
            }
        }
        let attack: Vec<AttackMapping> = steps.iter().map(|s| s.tactic.clone()).collect();
        let severity = if steps.len() >= self.min_tactics + 2 {
            5
        } else {
            4
        };
        let first = steps.iter().map(|s| s.ts_ns).min().unwrap_or(ts);
        if let Some((open, until)) = &mut trail.open
            && ts < *until
        {
            open.title = title;
            open.attack = attack;
            open.related_alerts = related;
            open.contributing_events = events;
            open.severity = open.severity.max(severity);
            open.score = steps.len() as f64;
            open.count += 1;
            open.last_seen_ns = open.last_seen_ns.max(ts);
            return Some((open.clone(), false));
        }
        self.seq += 1;
        let key = fmix64(hash64(entity.uuid.as_bytes()) ^ self.seq);
        let new = Alert {
            id: time_id(ts, key),
            alert_type: AlertType::Correlation,
            severity,
            title,
            detector: DETECTOR.into(),
            detector_name: builtin_detector_name(DETECTOR).unwrap_or_default(),
            dedup_key: format!("{DETECTOR}:{}", entity.uuid),
            first_seen_ns: first,
            last_seen_ns: ts,
            count: 1,
            source: alert.source.clone(),
            entity: Some(entity.clone()),
            score: steps.len() as f64,
            threshold: self.min_tactics as f64,
            contributions: BTreeMap::new(),
            attack,
            contributing_events: events,
            related_entities: Vec::new(),
            related_alerts: related,
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
            sensor: String::new(),
        };
        trail.open = Some((new.clone(), ts.saturating_add(window)));
        Some((new, true))
    }

    /// Drops the trails idle for longer than the window.
    fn prune(&mut self, now_ns: i64) {
        let horizon = now_ns.saturating_sub(self.window_ns);
        self.trails.retain(|_, t| t.last_ns >= horizon);
    }
}

/// Position of a tactic in the ATT&CK matrix (Reconnaissance first, Impact last).
fn tactic_order(id: &str) -> usize {
    Attack::get()
        .tactics
        .iter()
        .position(|t| t.id == id)
        .unwrap_or(usize::MAX)
}

/// A UUIDv7 from `ts_ns` with the rest from `key`, as the detectors' ids are made.
fn time_id(ts_ns: i64, key: u64) -> String {
    let ms = (ts_ns.max(0) / 1_000_000) as u64 & ((1 << 48) - 1);
    let r = fmix64(key);
    let mut b = [0u8; 16];
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    b[6..14].copy_from_slice(&r.to_be_bytes());
    b[14..].copy_from_slice(&fmix64(r ^ 0x6b63).to_be_bytes()[..2]);
    b[6] = 0x70 | (b[6] & 0x0f);
    b[8] = 0x80 | (b[8] & 0x3f);
    Uuid::from_bytes(b).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use watchpost_proto::{EntityKind, EntityRef};

    const H: i64 = 3_600_000_000_000;

    fn alert(id: &str, ts: i64, user: u8, tags: &[&str]) -> Alert {
        Alert {
            id: id.into(),
            alert_type: AlertType::Sigma,
            severity: 3,
            title: id.into(),
            detector: format!("rule-{id}"),
            detector_name: String::new(),
            dedup_key: id.into(),
            first_seen_ns: ts,
            last_seen_ns: ts,
            count: 1,
            source: "sshd".into(),
            entity: Some(EntityRef {
                kind: EntityKind::User,
                role: "subject".into(),
                value: String::new(),
                uuid: Uuid::from_bytes([user; 16]),
            }),
            score: 1.0,
            threshold: 0.0,
            contributions: BTreeMap::new(),
            attack: Attack::get().mappings(&tags.iter().map(|t| t.to_string()).collect::<Vec<_>>()),
            contributing_events: vec![format!("ev-{id}")],
            related_entities: Vec::new(),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
            sensor: String::new(),
        }
    }

    #[test]
    fn three_tactics_on_one_entity_within_the_window_raise_one_alert_that_grows() {
        let mut k = KillChain::new(3, 24 * H, 1000);
        assert!(
            k.observe(&alert("a", 0, 1, &["attack.t1110.001"]))
                .is_none()
        );
        assert!(
            k.observe(&alert("b", H, 1, &["attack.t1110.001"]))
                .is_none(),
            "same tactic"
        );
        assert!(
            k.observe(&alert("c", 2 * H, 2, &["attack.t1087"]))
                .is_none(),
            "another user"
        );
        assert!(
            k.observe(&alert("d", 3 * H, 1, &["attack.t1087"]))
                .is_none(),
            "two tactics"
        );
        let (kc, new) = k
            .observe(&alert("e", 4 * H, 1, &["attack.t1048"]))
            .expect("credential access, discovery, exfiltration");
        assert!(new);
        assert_eq!(kc.alert_type, AlertType::Correlation);
        assert_eq!(kc.related_alerts, vec!["a", "b", "d", "e"]);
        assert_eq!(
            kc.attack
                .iter()
                .map(|m| m.tactic.as_str())
                .collect::<Vec<_>>(),
            vec!["Credential Access", "Discovery", "Exfiltration"],
            "in kill-chain order"
        );
        assert!(
            kc.title
                .contains("Credential Access → Discovery → Exfiltration")
        );
        assert_eq!(kc.first_seen_ns, H, "the latest step of each tactic");
        let (more, new) = k
            .observe(&alert("f", 5 * H, 1, &["attack.t1053.003"]))
            .unwrap();
        assert!(!new, "folded into the open alert");
        assert_eq!(
            (more.id, more.count, more.attack.len()),
            (kc.id.clone(), 2, 6)
        );
        assert!(k.observe(&kc).is_none(), "its own alerts are not steps");
    }

    #[test]
    fn steps_older_than_the_window_do_not_count() {
        let mut k = KillChain::new(3, 24 * H, 1000);
        k.observe(&alert("a", 0, 1, &["attack.t1110.001"]));
        k.observe(&alert("b", 20 * H, 1, &["attack.t1087"]));
        assert!(
            k.observe(&alert("c", 25 * H, 1, &["attack.t1048"]))
                .is_none()
        );
        assert!(
            k.observe(&alert("d", 26 * H, 1, &["attack.t1110"]))
                .is_some()
        );
    }

    #[test]
    fn alerts_without_entity_or_tactics_are_ignored_and_the_table_is_bounded() {
        let mut k = KillChain::new(3, 24 * H, 2);
        let mut a = alert("a", 0, 1, &[]);
        assert!(k.observe(&a).is_none());
        a.attack = Attack::get().mappings(&["attack.t1087".to_string()]);
        a.entity = None;
        assert!(k.observe(&a).is_none());
        assert!(k.is_empty());
        for u in 0..5 {
            k.observe(&alert("x", 0, u, &["attack.t1087"]));
        }
        assert_eq!(k.len(), 2);
    }
}
