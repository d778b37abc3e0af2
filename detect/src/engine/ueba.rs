//! Behaviour analytics alerts and signals: an entity's deviation from its own baseline, and the
//! account alerts of one acting address folded into one incident.

use super::Detector;
use super::book::{MatchAlert, breakdown, entity_ref, round6};
use super::signal::{SignalOrigin, SignalTitle, signal_title, ueba_who};
use super::sink::AlertSink;
use crate::record::DetectRecord;
use crate::ueba::{SubScores, UebaAlert, UebaType, source_text};
use watchpost_proto::{
    Alert, AlertType, AttackMapping, Deviation, DeviationSignal as Signal, Uuid,
    builtin_detector_name, event_id, fmix64,
};
use watchpost_rules::Level;

/// Salt of the dedup keys of new-source UEBA alerts (keyed by the address).
pub(super) const NEW_SOURCE_SALT: u64 = 0x6e65_7773_7263_0003;

/// Salt of `ueba` dedup keys.
pub(super) const UEBA_SALT: u64 = 0x7565_6261_0000_0002;

/// Salt of the rarity keys of UEBA signals (per entity type and kind of deviation).
pub(super) const UEBA_SIGNAL_SALT: u64 = 0x7565_7369_676e_000b;

/// 4 (high) when two or more sub-scores are fully novel, the score is near its maximum, or a
/// single deviation has odds beyond one in a million (20 bits); 3 otherwise.
pub(super) fn ueba_severity(s: &SubScores, score: f64, deviation: Option<&Deviation>) -> u8 {
    let strong = [s.time_of_day, s.source_novelty, s.volume, s.pattern_novelty]
        .iter()
        .filter(|&&x| x >= 0.9)
        .count();
    let extreme = deviation.is_some_and(|d| d.bits >= 20.0);
    if strong >= 2 || score >= 0.8 || extreme {
        4
    } else {
        3
    }
}

/// ATT&CK of a UEBA deviation, worked out once per entity type and signal (as [`ueba_attack`]
/// maps an alert: a first host is a lateral step whoever takes it).
pub(super) fn ueba_attack_of(kind: UebaType, signal: Signal) -> &'static [AttackMapping] {
    const KINDS: [UebaType; 4] = [
        UebaType::User,
        UebaType::Host,
        UebaType::Ip,
        UebaType::ServiceAccount,
    ];
    const SIGNALS: [Signal; 5] = [
        Signal::NewHour,
        Signal::Rate,
        Signal::NewSource,
        Signal::NewHost,
        Signal::Dormancy,
    ];
    static TABLE: std::sync::LazyLock<Vec<Vec<AttackMapping>>> = std::sync::LazyLock::new(|| {
        KINDS
            .iter()
            .flat_map(|&kind| {
                SIGNALS.iter().map(move |&signal| match signal {
                    Signal::NewHost => ueba_attack(UebaType::Host, "source_novelty"),
                    Signal::NewSource => ueba_attack(kind, "source_novelty"),
                    Signal::Rate => ueba_attack(kind, "volume"),
                    Signal::NewHour | Signal::Dormancy => ueba_attack(kind, "time_of_day"),
                })
            })
            .collect()
    });
    let k = KINDS.iter().position(|&x| x == kind).unwrap_or(0);
    let s = SIGNALS.iter().position(|&x| x == signal).unwrap_or(0);
    &TABLE[k * SIGNALS.len() + s]
}

pub(super) fn ueba_detector(kind: UebaType) -> &'static str {
    match kind {
        UebaType::User => "ueba:user",
        UebaType::Host => "ueba:host",
        UebaType::Ip => "ueba:ip",
        UebaType::ServiceAccount => "ueba:service_account",
    }
}

/// The title of an alert raised by one strong deviation: what was extreme, in the analyst's
/// words, with the measure where there is one; a second dimension that took part follows it.
pub(super) fn deviation_title(who: &str, kind: UebaType, d: &Deviation) -> String {
    let first = match (d.signal, d.sustained) {
        (Signal::NewSource, _) if kind == UebaType::Ip => {
            "IP address reached a host it never reached before".to_string()
        }
        (Signal::NewHour, Some(run)) => format!(
            "{who} active at {:02}:00 UTC, an hour it is rarely active in, for {} minutes ({} events)",
            d.value as u32,
            run.seconds / 60,
            run.events
        ),
        (signal, _) => format!("{who} {}", deviation_phrase(kind, signal, d.value)),
    };
    match d.with {
        Some(w) => format!("{first}, {}", deviation_phrase(kind, w.signal, w.value)),
        None => first,
    }
}

/// What one deviation says of its entity, after its name: "active at 03:00 UTC, ...".
fn deviation_phrase(kind: UebaType, signal: Signal, value: f64) -> String {
    match signal {
        Signal::NewHour => format!(
            "active at {:02}:00 UTC, an hour it has never been active in",
            value as u32
        ),
        Signal::Rate => format!("with {:.0} times its usual rate of events", value.max(1.0)),
        Signal::NewSource if kind == UebaType::Ip => {
            "reaching a host it never reached before".into()
        }
        Signal::NewSource => "seen from an address it has never used".into(),
        Signal::NewHost => "on a host it has never been on".into(),
        Signal::Dormancy => format!("active again after {:.0} days of silence", value.floor()),
    }
}

/// The ATT&CK technique a UEBA deviation most often means, by entity type and the sub-score that
/// dominated (documented in docs/detection.md).
pub(super) fn ueba_attack(kind: UebaType, top: &str) -> Vec<AttackMapping> {
    let m = |tactic_id: &str, tactic: &str, technique_id: &str, technique: &str| AttackMapping {
        tactic_id: tactic_id.into(),
        tactic: tactic.into(),
        technique_id: technique_id.into(),
        technique: technique.into(),
    };
    let one = match (kind, top) {
        (UebaType::Ip | UebaType::Host, "source_novelty") => {
            m("TA0008", "Lateral Movement", "T1021", "Remote Services")
        }
        (_, "source_novelty" | "time_of_day") => {
            m("TA0001", "Initial Access", "T1078", "Valid Accounts")
        }
        (UebaType::Host, "volume") => m(
            "TA0010",
            "Exfiltration",
            "T1048",
            "Exfiltration Over Alternative Protocol",
        ),
        (_, "volume") => m("TA0006", "Credential Access", "T1110", "Brute Force"),
        (UebaType::Ip, _) => m("TA0043", "Reconnaissance", "T1595", "Active Scanning"),
        _ => m(
            "TA0002",
            "Execution",
            "T1059",
            "Command and Scripting Interpreter",
        ),
    };
    vec![one]
}

impl Detector {
    /// A deviation of entity `i` short of an alert: a `low` signal about that entity alone, its
    /// rarity counted per entity type and kind of deviation.
    pub(super) fn raise_ueba_signal(
        &mut self,
        r: &DetectRecord,
        i: usize,
        a: &UebaAlert,
        sink: &mut impl AlertSink,
    ) {
        let Some(d) = a.deviation else {
            return;
        };
        let kind = a.kind;
        let origin = SignalOrigin {
            key: fmix64(UEBA_SIGNAL_SALT ^ ((kind as u64) << 8) ^ d.signal as u64),
            id: SignalTitle::Rule(ueba_detector(kind)),
            title: SignalTitle::Deviation { kind, deviation: d },
            level: Some(Level::Low),
            attack: ueba_attack_of(kind, d.signal),
            entity: Some(i),
            with_actor: false,
            guessing: false,
        };
        let build = |det: &mut Detector, key, primary| {
            let m = MatchAlert {
                alert_type: AlertType::Ueba,
                severity: 2,
                title: signal_title(kind, &d, true),
                detector: ueba_detector(kind).to_string(),
                detector_name: builtin_detector_name(ueba_detector(kind)).unwrap_or_default(),
                dedup: format!("signal:{}", ueba_detector(kind)),
                attack: ueba_attack_of(kind, d.signal).to_vec(),
            };
            let mut signal = det.match_alert(r, key, primary, m);
            signal.score = round6(a.score);
            signal.threshold = round6(a.threshold);
            signal.deviation = Some(d);
            signal
        };
        self.raise_signal(r, &origin, build, sink);
    }

    pub(super) fn raise_ueba(
        &mut self,
        r: &DetectRecord,
        i: usize,
        a: &UebaAlert,
        sink: &mut impl AlertSink,
    ) {
        let e = r.entities[i];
        let key = e.hash ^ UEBA_SALT;
        let w = &self.params.ueba.weights;
        let sub = a.sub_scores;
        let parts = [
            ("time_of_day", w[0] * sub.time_of_day),
            ("source_novelty", w[1] * sub.source_novelty),
            ("volume", w[2] * sub.volume),
            ("pattern_novelty", w[3] * sub.pattern_novelty),
        ];
        let (blend_top, contributions) = breakdown(&parts);
        // A single strong deviation names the alert: it is what made it an alert.
        let top = match a.deviation.map(|d| d.signal) {
            Some(Signal::NewHour | Signal::Dormancy) => "time_of_day",
            Some(Signal::NewSource | Signal::NewHost) => "source_novelty",
            Some(Signal::Rate) => "volume",
            None => blend_top,
        };
        let entity = entity_ref(&e);
        let kind = a.kind;
        // Entities of one type seen from one new address within the cooldown are one incident
        // (password spraying, a compromised jump host): they fold into one alert keyed by the
        // address and type, each entity joining its related entities.
        // A first host reached from a new address folds the same way: one address trying many
        // accounts on a server none of them used is the spray, seen from the accounts' side.
        // So does a pair of deviations one of which is the new address (an hour never used,
        // from an address never used): the address is what the incident is about.
        let new_host = a.deviation.is_some_and(|d| d.signal == Signal::NewHost);
        let with_new_source = a
            .deviation
            .and_then(|d| d.with)
            .is_some_and(|w| w.signal == Signal::NewSource);
        let by_source = ((top == "source_novelty" && (!new_host || sub.source_novelty > 0.0))
            || with_new_source)
            && kind != UebaType::Ip
            && r.client_ip != 0;
        let key = if by_source {
            fmix64(
                (r.client_ip as u64)
                    ^ ((r.client_ip >> 64) as u64)
                    ^ NEW_SOURCE_SALT
                    ^ (kind as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            )
        } else {
            key
        };
        if by_source {
            self.alias.insert(e.hash ^ UEBA_SALT, key);
            if self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns) {
                self.repeat(key, r, a.score, Some(entity));
                return;
            }
        }
        if let Some(joined) = self.incident_of(r, kind) {
            self.alias.insert(e.hash ^ UEBA_SALT, joined);
            self.repeat(joined, r, a.score, Some(entity));
            return;
        }
        let who = ueba_who(kind);
        let title = match a.deviation {
            Some(d) => deviation_title(who, kind, &d),
            None => match top {
                "time_of_day" => format!("{who} active at an unusual hour"),
                "source_novelty" if kind == UebaType::Ip => {
                    "IP address reached a host it never reached before".to_string()
                }
                "source_novelty" => format!("{who} seen from a new network"),
                "volume" => format!("{who} with far more events than usual"),
                _ => format!("{who} showing a log pattern it and its peers rarely show"),
            },
        };
        let attack = if new_host {
            ueba_attack(UebaType::Host, "source_novelty")
        } else {
            ueba_attack(kind, top)
        };
        let alert = Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: AlertType::Ueba,
            severity: ueba_severity(&sub, a.score, a.deviation.as_ref()),
            title,
            detector: ueba_detector(kind).to_string(),
            detector_name: builtin_detector_name(ueba_detector(kind)).unwrap_or_default(),
            dedup_key: if by_source {
                format!(
                    "ueba:new_source:{}:{}",
                    kind.name(),
                    source_text(r.client_ip)
                )
            } else {
                format!("ueba:{}:{}", kind.name(), Uuid::from_bytes(e.uuid))
            },
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source: r.source_name().to_string(),
            entity: Some(entity),
            score: round6(a.score),
            threshold: round6(a.threshold),
            contributions,
            attack,
            contributing_events: vec![event_id(&r.block, r.pos)],
            related_entities: r
                .entities()
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, e)| entity_ref(e))
                .collect(),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: a.deviation,
            triage: Default::default(),
            sensor: String::new(),
        };
        let until_ns = r.ts_ns.saturating_add(self.params.ueba.cooldown_ns);
        self.open_alert(key, alert, until_ns, sink);
        if matches!(kind, UebaType::User | UebaType::ServiceAccount) && r.client_ip != 0 {
            self.actors.insert(r.client_ip, key);
        }
    }

    /// The open UEBA alert that a server's alert joins: an account's, raised from the same
    /// acting address within its cooldown. A user doing something new on a server is one
    /// incident, and the account is its actor, so the account's alert leads (accounts are
    /// judged before hosts on one event); an account's alert never joins a server's. Two
    /// accounts from one address stay apart (an office NAT) unless the address itself is new to
    /// both (the by-source fold).
    pub(super) fn incident_of(&self, r: &DetectRecord, kind: UebaType) -> Option<u64> {
        if kind != UebaType::Host || r.client_ip == 0 {
            return None;
        }
        let &key = self.actors.get(&r.client_ip)?;
        self.open
            .get(&key)
            .is_some_and(|o| r.ts_ns < o.until_ns)
            .then_some(key)
    }
}
