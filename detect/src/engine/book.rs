//! The open-alert book: alerts inside their cooldown, keyed by what they are about, folding
//! repeats in; group alerts and their members; ids; the record every single-event match
//! (Sigma, IOC) opens. Every alert kind raises through it.

use super::Detector;
use super::sink::AlertSink;
use crate::record::DetectRecord;
use crate::time::NS_PER_HOUR;
use std::collections::BTreeMap;
use watchpost_proto::{
    Alert, AlertType, AttackMapping, EntityKind, EntityRef, MAX_CONTRIBUTING, Uuid, event_id,
    fmix64,
};

/// Most related entities kept on one alert.
pub(super) const MAX_RELATED: usize = 100;

/// Salt of the alias that finds a rule's open alert by the address acting in it.
pub(super) const ACTOR_SALT: u64 = 0x6163_746f_7200_0008;

/// Salt of the keys of a rule's group alerts.
pub(super) const GROUP_SALT: u64 = 0x6772_6f75_7000_0007;

/// Distinct entities a group alert counts exactly; past it the count stops (the alert says so by
/// its `entity_count` being this value).
pub(super) const MAX_GROUP_ENTITIES: usize = 100_000;

/// An alert inside its cooldown.
pub(super) struct OpenAlert {
    pub(super) alert: Alert,
    pub(super) until_ns: i64,
    /// Changed since the sink last saw it.
    pub(super) dirty: bool,
    /// A group alert's or signal's title before its count of entities: the title says how many
    /// it stands for, and changes as they join (see [`group_title`]).
    pub(super) group_title: Option<String>,
}

impl OpenAlert {
    /// Folds a repeat in: one more, seen later, its event kept while there is room.
    pub(super) fn fold(&mut self, r: &DetectRecord) {
        let a = &mut self.alert;
        a.count += 1;
        a.last_seen_ns = a.last_seen_ns.max(r.ts_ns);
        // The id is only built while there is room for it: a noisy rule's repeats cost no
        // allocation once its alert holds its share of events.
        if a.contributing_events.len() < MAX_CONTRIBUTING {
            let id = event_id(&r.block, r.pos);
            if !a.contributing_events.contains(&id) {
                a.contributing_events.push(id);
            }
        }
        self.dirty = true;
    }
}

/// A Sigma rule's grouping window in one source: how many entities it alerted on one by one.
pub(super) struct GroupWindow {
    pub(super) alerted: u32,
    pub(super) until_ns: i64,
}

/// What differs between the alerts of single-event matches (see [`Detector::open_match`]).
pub(super) struct MatchAlert {
    pub(super) alert_type: AlertType,
    pub(super) severity: u8,
    pub(super) title: String,
    pub(super) detector: String,
    pub(super) detector_name: String,
    /// `dedup_key` before the subject: `sigma:<rule id>`, `ioc:<indicator>`.
    pub(super) dedup: String,
    pub(super) attack: Vec<AttackMapping>,
}

/// The title of a group alert or signal standing for `entities` entities: the rule's title and
/// the count, so that a feed never calls one entity "many".
pub(super) fn group_title(base: &str, entities: u64) -> String {
    if entities == 1 {
        format!("{base} (1 entity)")
    } else {
        format!("{base} ({entities} entities)")
    }
}

/// The entity a rule alert is about: the event's first scored entity (user, reporting host,
/// client address), else its first entity.
pub(super) fn primary_entity(r: &DetectRecord) -> Option<usize> {
    r.entities()
        .iter()
        .position(|e| e.ueba != crate::record::NOT_SCORED)
        .or((r.n_entities > 0).then_some(0))
}

/// The address acting in the event (an IP entity in the `source` role) when it is not the
/// primary entity itself: the attacker's address behind a failed login for an account.
pub(super) fn actor_address(r: &DetectRecord, primary: Option<usize>) -> Option<usize> {
    r.entities().iter().enumerate().position(|(i, e)| {
        Some(i) != primary
            && e.kind == EntityKind::Ip as u8
            && e.role == watchpost_proto::Role::Source as u8
    })
}

/// Lists the entity `uuid` (built by `make`, only when it is listed) among the alert's related
/// entities, unless the alert names it already or lists [`MAX_RELATED`]; true when it was added.
pub(super) fn relate(alert: &mut Alert, uuid: Uuid, make: impl FnOnce() -> EntityRef) -> bool {
    let known = alert.entity.as_ref().is_some_and(|x| x.uuid == uuid)
        || alert.related_entities.iter().any(|x| x.uuid == uuid);
    let added = !known && alert.related_entities.len() < MAX_RELATED;
    if added {
        alert.related_entities.push(make());
    }
    added
}

/// The event's entities other than `primary`, as related entities.
pub(super) fn others(r: &DetectRecord, primary: Option<usize>) -> Vec<EntityRef> {
    r.entities()
        .iter()
        .enumerate()
        .filter(|(j, _)| Some(*j) != primary)
        .map(|(_, e)| entity_ref(e))
        .collect()
}

pub(super) fn entity_ref(e: &crate::record::RecordEntity) -> EntityRef {
    EntityRef {
        kind: EntityKind::from_u8(e.kind).unwrap_or(EntityKind::Host),
        role: watchpost_proto::Role::from_u8(e.role).name().to_string(),
        // Names are resolved from the entity table when the alert is read; the record carries
        // only the UUID.
        value: String::new(),
        uuid: Uuid::from_bytes(e.uuid),
    }
}

/// The named parts of a score, rounded for output, and the name of the largest.
pub(super) fn breakdown(parts: &[(&'static str, f64)]) -> (&'static str, BTreeMap<String, f64>) {
    let top = parts
        .iter()
        .copied()
        .fold(("", f64::MIN), |a, b| if b.1 > a.1 { b } else { a })
        .0;
    let map = parts
        .iter()
        .map(|(k, v)| (k.to_string(), round6(*v)))
        .collect();
    (top, map)
}

/// Six decimals, and finite: a UEBA type's threshold is infinite until it calibrates, and JSON
/// cannot hold an infinity (see [`watchpost_proto::finite`]).
pub(super) fn round6(x: f64) -> f64 {
    if !x.is_finite() {
        return watchpost_proto::finite(x);
    }
    (x * 1e6).round() / 1e6
}

impl Detector {
    /// Counts a new entity in rule `rule_key`'s grouping window (`window_ns` long, from its
    /// first alert) for the record's source. `None` while the window has room for an alert of
    /// its own (or grouping is off); else the key of the rule's group alert and when the window
    /// ends.
    pub(super) fn group_full(
        &mut self,
        rule_key: u64,
        r: &DetectRecord,
        window_ns: i64,
    ) -> Option<(u64, i64)> {
        if self.params.group_after == 0 {
            return None;
        }
        let group_key = fmix64(rule_key ^ GROUP_SALT ^ r.source.rotate_left(13));
        let window = self.groups.entry(group_key).or_insert(GroupWindow {
            alerted: 0,
            until_ns: i64::MIN,
        });
        if r.ts_ns >= window.until_ns {
            window.alerted = 0;
            window.until_ns = r.ts_ns.saturating_add(window_ns);
        }
        if window.alerted < self.params.group_after {
            window.alerted += 1;
            return None;
        }
        Some((group_key, window.until_ns))
    }

    /// Counts `subject` among the distinct entities of open alert `key`; the alert says how many
    /// once there are several.
    pub(super) fn note_member(&mut self, key: u64, subject: u64) {
        let members = self.members.entry(key).or_default();
        if members.len() < MAX_GROUP_ENTITIES && members.insert(subject) && members.len() > 1 {
            let count = members.len() as u64;
            if let Some(o) = self.open.get_mut(&key) {
                o.alert.entity_count = count;
                if let Some(base) = &o.group_title {
                    o.alert.title = group_title(base, count);
                }
                o.dirty = true;
            }
        }
    }

    /// Counts and lists every entity of `r` with open alert `key` (an indicator's alert names
    /// every entity seen with it).
    pub(super) fn note_entities(&mut self, key: u64, r: &DetectRecord) {
        for e in r.entities() {
            self.note_member(key, e.hash);
            if let Some(o) = self.open.get_mut(&key)
                && relate(&mut o.alert, Uuid::from_bytes(e.uuid), || entity_ref(e))
            {
                o.dirty = true;
            }
        }
    }

    /// Counts a fire of rule `key` in the (event-time) hour of `ts_ns`.
    pub(super) fn count_fire(&mut self, key: u64, ts_ns: i64) {
        let hour_ns = ts_ns.div_euclid(NS_PER_HOUR) * NS_PER_HOUR;
        *self.fires.entry((key, hour_ns)).or_insert(0) += 1;
    }

    /// Opens the alert of a single-event match (a Sigma rule, an indicator) about the event's
    /// primary entity, with the event's other entities as related ones.
    pub(super) fn open_match(
        &mut self,
        r: &DetectRecord,
        key: u64,
        primary: Option<usize>,
        m: MatchAlert,
        until_ns: i64,
        sink: &mut impl AlertSink,
    ) {
        let alert = self.match_alert(r, key, primary, m);
        self.open_alert(key, alert, until_ns, sink);
    }

    /// Opens a group alert: about its first entity (so that a feed, a search and a stream frame
    /// all name one), the entities that join it listed among the related and counted in
    /// `entity_count` and in the title (`base`, see [`group_title`]). Its dedup key is the
    /// rule's and source's, not the first entity's: the group stands for all of them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn open_group(
        &mut self,
        r: &DetectRecord,
        key: u64,
        primary: Option<usize>,
        m: MatchAlert,
        base: String,
        until_ns: i64,
        sink: &mut impl AlertSink,
    ) {
        let mut alert = self.match_alert(r, key, None, m);
        alert.entity = primary.map(|i| entity_ref(&r.entities[i]));
        alert.related_entities = others(r, primary);
        alert.entity_count = 1;
        self.open_alert(key, alert, until_ns, sink);
        if let Some(o) = self.open.get_mut(&key) {
            o.group_title = Some(base);
        }
    }

    /// The new alert of a single-event match about `primary` (the source when `None`).
    pub(super) fn match_alert(
        &mut self,
        r: &DetectRecord,
        key: u64,
        primary: Option<usize>,
        m: MatchAlert,
    ) -> Alert {
        let source = r.source_name().to_string();
        let entity = primary.map(|i| entity_ref(&r.entities[i]));
        Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: m.alert_type,
            severity: m.severity,
            title: m.title,
            detector: m.detector,
            detector_name: m.detector_name,
            dedup_key: match &entity {
                Some(e) => format!("{}:{}", m.dedup, e.uuid),
                None => format!("{}:{source}", m.dedup),
            },
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source,
            entity,
            score: 1.0,
            threshold: 0.0,
            contributions: BTreeMap::new(),
            attack: m.attack,
            contributing_events: vec![event_id(&r.block, r.pos)],
            related_entities: others(r, primary),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
            sensor: String::new(),
        }
    }

    /// Hands a new alert to the sink and keeps it open (repeats fold into it) until `until_ns`.
    pub(super) fn open_alert(
        &mut self,
        key: u64,
        alert: Alert,
        until_ns: i64,
        sink: &mut impl AlertSink,
    ) {
        // An alert of the same key whose time is over may still hold changes the sink has not
        // heard (offline, flushes come only at the end): they go out before it is replaced.
        if let Some(old) = self.open.get(&key)
            && old.dirty
        {
            sink.alert(&old.alert, false);
        }
        self.members.remove(&key);
        sink.alert(&alert, true);
        let step = self
            .killchain
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(&alert);
        if let Some((chain, new)) = step {
            sink.alert(&chain, new);
        }
        self.open.insert(
            key,
            OpenAlert {
                alert,
                until_ns,
                dirty: false,
                group_title: None,
            },
        );
    }

    /// A repeat inside an open alert's cooldown: bump its count, keep the event. The sink hears
    /// of it at the next [`Detector::flush`], not per repeat: a burst is one update.
    /// With `entity`, that entity joins the alert's related entities when it is new there.
    pub(super) fn repeat(
        &mut self,
        key: u64,
        r: &DetectRecord,
        score: f64,
        entity: Option<EntityRef>,
    ) {
        if let Some(o) = self.open.get_mut(&key) {
            if let Some(e) = entity {
                relate(&mut o.alert, e.uuid, || e);
            }
            o.alert.score = o.alert.score.max(round6(score));
            o.fold(r);
        }
    }

    /// A UUIDv7 from the triggering event's time, with the rest derived from the dedup key and
    /// that time: the same event raising the same alert gives the same id, however much came
    /// before it. A replay of the same input gives the same ids, and so does a fleet's
    /// detector that takes a partition over and scores its records again from a snapshot (the
    /// alert stream then drops the repeats by id). One key has one open alert at a time, so
    /// two of its alerts never share a triggering event.
    pub(super) fn next_id(&self, ts_ns: i64, key: u64) -> String {
        let ms = (ts_ns.max(0) / 1_000_000) as u64 & ((1 << 48) - 1);
        let r1 = fmix64(key ^ (ts_ns as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let r2 = fmix64(r1 ^ key.rotate_left(17));
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        b[6..14].copy_from_slice(&r1.to_be_bytes());
        b[14..].copy_from_slice(&r2.to_be_bytes()[..2]);
        b[6] = 0x70 | (b[6] & 0x0f);
        b[8] = 0x80 | (b[8] & 0x3f);
        Uuid::from_bytes(b).to_string()
    }
}
