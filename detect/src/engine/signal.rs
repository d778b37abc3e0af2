//! Signals: records below an alert that add to an entity's risk (docs/risk.md), one open per
//! origin, entity and signal window.

use super::book::{
    MAX_GROUP_ENTITIES, OpenAlert, actor_address, entity_ref, group_title, primary_entity, relate,
};
use super::risk::RISK_SALT;
use super::sink::AlertSink;
use super::{Detector, SIGNAL_WINDOW_NS};
use crate::record::DetectRecord;
use crate::risk::SignalRisk;
use crate::ueba::UebaType;
use watchpost_proto::{
    Alert, AttackMapping, Deviation, DeviationSignal as Signal, Uuid, event_id, fmix64,
};
use watchpost_rules::Level;

/// Keys of open signals (per rule and entity).
pub(super) const SIGNAL_SALT: u64 = 0x7369_676e_616c_0009;

/// What a signal is of: a Sigma rule below the alerting level, a source's ensemble anomalies
/// below the alert quantile, or an indicator its feed is unsure of (see
/// [`Detector::raise_signal`]).
pub(super) struct SignalOrigin<'a> {
    /// Counts its fires for rarity and keys its records and group: the rule's key, the
    /// source's, or the indicator's.
    pub(super) key: u64,
    /// The detector: the rule's id, `ensemble`, or `ioc:<feed file>`.
    pub(super) id: SignalTitle<'a>,
    /// Names it in its group signal and in a risk alert's contributions.
    pub(super) title: SignalTitle<'a>,
    /// Weighs its risk (`None` counts as medium).
    pub(super) level: Option<Level>,
    pub(super) attack: &'a [AttackMapping],
    /// The entity it is about: the event's entity at this index (a UEBA signal's own), else the
    /// event's primary entity.
    pub(super) entity: Option<usize>,
    /// Whether the address acting in the event takes risk too (a rule's match: the scanner
    /// behind a failed login), or the entity alone (a deviation of its own baseline).
    pub(super) with_actor: bool,
    /// It says an account was tried and failed (a rule mapped only to T1110, or an anomaly on
    /// such an event): on the acting address its repeats are one behaviour whatever account
    /// they name, so a scanner's visit through a dictionary of names adds the risk of one
    /// guess repeated, not of forty victims ("Failed logons are one behaviour",
    /// docs/risk.md). Patience is what `persistence` counts, and breadth over real accounts
    /// is the spraying correlation's.
    pub(super) guessing: bool,
}

/// A signal origin's name, put together only where it is shown: a source's anomalies fold into
/// their open signal on every repeat, and naming them each time would allocate per event.
#[derive(Clone, Copy)]
pub(super) enum SignalTitle<'a> {
    /// A rule's title or id, as it is.
    Rule(&'a str),
    /// A name after a fixed prefix (`ioc:<feed file>`).
    Prefixed { prefix: &'static str, name: &'a str },
    /// `Anomaly in <source>: <finding>`.
    Anomaly {
        source: &'a str,
        finding: &'static str,
    },
    /// A UEBA signal of one kind on entities of one type ([`signal_title`]).
    Deviation {
        kind: UebaType,
        deviation: Deviation,
    },
    /// `IOC match: <kind> <value> (<label>)`.
    Indicator {
        kind: &'static str,
        value: &'a str,
        label: Option<&'a str>,
    },
}

impl<'a> SignalTitle<'a> {
    /// The text; a rule's title is borrowed, not copied (a full group adds risk on every match).
    pub(super) fn text(self) -> std::borrow::Cow<'a, str> {
        match self {
            SignalTitle::Rule(title) => title.into(),
            SignalTitle::Prefixed { prefix, name } => format!("{prefix}{name}").into(),
            SignalTitle::Deviation { kind, deviation } => {
                signal_title(kind, &deviation, false).into()
            }
            SignalTitle::Anomaly { source, finding } => {
                format!("Anomaly in {source}: {finding}").into()
            }
            SignalTitle::Indicator {
                kind,
                value,
                label: Some(label),
            } => format!("IOC match: {kind} {value} ({label})").into(),
            SignalTitle::Indicator { kind, value, .. } => {
                format!("IOC match: {kind} {value}").into()
            }
        }
    }
}

/// The detector name of a UEBA type's alerts.
/// How a UEBA title names an entity of `kind`.
pub(super) fn ueba_who(kind: UebaType) -> &'static str {
    match kind {
        UebaType::User => "User",
        UebaType::Host => "Host",
        UebaType::Ip => "IP address",
        UebaType::ServiceAccount => "Service account",
    }
}

/// The title of a UEBA signal: a deviation short of an alert, so "rarely" where an alert says
/// "never"; with the measure (`specific`) on the record, without it where signals of one kind
/// add up (a risk alert's contributions, a group signal).
pub(super) fn signal_title(kind: UebaType, d: &Deviation, specific: bool) -> String {
    let who = ueba_who(kind);
    match d.signal {
        Signal::NewHour if specific => format!(
            "{who} active at {:02}:00 UTC, an hour it is rarely active in",
            d.value as u32
        ),
        Signal::NewHour => format!("{who} active at an hour it is rarely active in"),
        Signal::Rate if specific => format!(
            "{who} with {:.0} times its usual rate of events",
            d.value.max(1.0)
        ),
        Signal::Rate => format!("{who} with more events than usual"),
        Signal::NewSource if kind == UebaType::Ip => {
            "IP address reached a host new to it".to_string()
        }
        Signal::NewSource => format!("{who} seen from a new address"),
        Signal::NewHost => format!("{who} on a host new to it"),
        Signal::Dormancy => format!("{who} active again after a long silence"),
    }
}

impl Detector {
    /// A signal: one open record per origin (rule, or source's anomalies) and entity and signal
    /// window, repeats folded in; a new one adds risk to its entity and to the acting address,
    /// and an entity whose risk crosses the threshold raises (or joins) its `risk` alert.
    /// `build` makes a new signal's record for its key and subject entity (`None` for a group
    /// signal, which names its entities among the related ones).
    pub(super) fn raise_signal(
        &mut self,
        r: &DetectRecord,
        origin: &SignalOrigin,
        build: impl FnOnce(&mut Self, u64, Option<usize>) -> Alert,
        sink: &mut impl AlertSink,
    ) {
        let primary = origin.entity.or_else(|| primary_entity(r));
        let subject = primary.map_or(r.source, |i| r.entities[i].hash);
        let own_key = fmix64(origin.key ^ SIGNAL_SALT ^ subject.rotate_left(29));
        self.risk.fire(origin.key, r.ts_ns);
        if let Some(o) = self.signals.get_mut(&own_key)
            && r.ts_ns < o.until_ns
        {
            o.fold(r);
            return;
        }
        // A new entity for the rule: a signal of its own while the rule's window has room, the
        // rule's group signal after, as alerts group (an internet-facing sensor meets a new
        // address every few events, and a stored record for each would cost a write each). The
        // risk is still the entity's own.
        let window = self.params.group_window_ns;
        let (key, until_ns) = match self.group_full(origin.key ^ SIGNAL_SALT, r, window) {
            Some((group_key, until_ns)) => (group_key, until_ns),
            None => (own_key, r.ts_ns.saturating_add(SIGNAL_WINDOW_NS)),
        };
        let grouped = key != own_key;
        let open = self.signals.get(&key).is_some_and(|o| r.ts_ns < o.until_ns);
        // Whether this match is the entity's first for the rule in the window: only then does it
        // add risk (a flood of one rule on one entity is one signal's worth).
        let mut fresh = true;
        if grouped && open {
            let members = self.members.entry(key).or_default();
            let full = members.len() >= MAX_GROUP_ENTITIES;
            let counted = !full && members.insert(subject);
            fresh = counted || full;
            let count = members.len() as u64;
            if let Some(o) = self.signals.get_mut(&key) {
                o.fold(r);
                if counted {
                    o.alert.entity_count = count;
                    if let Some(base) = &o.group_title {
                        o.alert.title = group_title(base, count);
                    }
                }
                // The entity and the address acting on it, so that a search by either finds
                // the group (up to MAX_RELATED of them).
                for i in primary.into_iter().chain(actor_address(r, primary)) {
                    let e = r.entities[i];
                    relate(&mut o.alert, Uuid::from_bytes(e.uuid), || entity_ref(&e));
                }
            }
        } else {
            let mut signal = build(self, key, if grouped { None } else { primary });
            let group_base = grouped.then(|| origin.title.text().into_owned());
            if let Some(base) = &group_base {
                // About its first entity, as a group alert is, its count in the title.
                signal.title = group_title(base, 1);
                signal.dedup_key = format!("signal:{}:group:{}", origin.id.text(), signal.source);
                signal.entity = primary.map(|i| entity_ref(&r.entities[i]));
                signal.related_entities = actor_address(r, primary)
                    .map(|i| entity_ref(&r.entities[i]))
                    .into_iter()
                    .collect();
                signal.entity_count = 1;
                self.members.insert(key, std::iter::once(subject).collect());
            }
            if let Some(old) = self.signals.get(&key)
                && old.dirty
            {
                sink.signal(&old.alert, false);
            }
            sink.signal(&signal, true);
            self.signals.insert(
                key,
                OpenAlert {
                    alert: signal,
                    until_ns,
                    dirty: false,
                    group_title: group_base,
                },
            );
        }
        // The entity, and the address acting on it (a scanner probing many accounts gathers
        // the risk of all of them). A host that only reported the event (a web server logging
        // a scanner's request) is where it happened, not who did it: with an actor, the actor
        // alone takes the risk. A deviation of an entity's own baseline is that entity's alone.
        let actor = actor_address(r, primary).filter(|_| origin.with_actor);
        let reporter_only = primary.is_some_and(|i| {
            r.entities[i].role == watchpost_proto::Role::Reporter as u8 && actor.is_some()
        });
        let subject_at = primary.filter(|_| !reporter_only && fresh);
        for i in subject_at.into_iter().chain(actor.filter(|_| fresh)) {
            let e = r.entities[i];
            let risk_key = e.hash ^ RISK_SALT;
            let Some(signal) = self.signals.get(&key).map(|o| &o.alert) else {
                continue;
            };
            let on_actor = actor.is_some_and(|a| a == i);
            let addition = SignalRisk {
                id: &signal.id,
                rule_key: origin.key,
                subject,
                guessing: origin.guessing && on_actor,
                rule_title: &origin.title.text(),
                level: origin.level,
                attack: origin.attack,
                event: event_id(&r.block, r.pos),
                ts_ns: r.ts_ns,
            };
            if let Some(c) = self.risk.add(risk_key, &entity_ref(&e), &addition) {
                self.raise_risk(r, risk_key, c, sink);
            }
        }
    }
}
