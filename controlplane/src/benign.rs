//! Why an alert may be benign: the nearest innocent story in the entity's own history, the facts
//! it rests on, and what would confirm it.
//!
//! An analyst closes most alerts as benign, and the time goes into finding the story that makes
//! one so: the traveller's hotel, the on-call page, the month-end job. Each alert detail carries
//! that story where the evidence allows one, worked out from what raised the alert (its
//! deviation, its rule's `falsepositives`, its contributions) and the entity's baseline as the
//! data plane holds it now (its usual hours, addresses and rate). It is a reading, never a
//! verdict: nothing is closed or scored by it, and an alert whose rule names no benign cause says
//! so. Deterministic and cheap (one baseline lookup), so it needs no LLM.

use serde::{Deserialize, Serialize};
use watchpost_proto::{Alert, AlertType, Deviation, DeviationSignal as Signal, EntityKind};

/// The benign reading of an alert.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Benign {
    /// The likeliest innocent story, in an analyst's words.
    pub explanation: String,
    /// The facts from the alert and the entity's history it rests on.
    pub evidence: Vec<String>,
    /// What would confirm it (and let the alert close as benign).
    pub confirm: String,
}

/// What the entity's baseline says, as far as the reading needs it.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// UTC hours it is active in.
    pub hours_active: Vec<u8>,
    /// Its addresses (or, for an address, the hosts it reaches), most used first.
    pub top_sources: Vec<String>,
    /// Events seen.
    pub event_count: u64,
    /// Its usual events per active minute.
    pub volume_per_minute: f64,
}

/// The benign reading of `alert`, given its entity's `history` (absent when the entity has no
/// baseline here: warming up, evicted, held by another detector) and, for a rule's alert, the
/// rule's `falsepositives`.
pub fn reading(alert: &Alert, history: Option<&History>, falsepositives: &[String]) -> Benign {
    let mut evidence = Vec::new();
    if let Some(h) = history {
        if !h.hours_active.is_empty() {
            evidence.push(format!(
                "usually active {} UTC ({} events of history)",
                hour_ranges(&h.hours_active),
                h.event_count
            ));
        }
        if !h.top_sources.is_empty() {
            let shown: Vec<&str> = h.top_sources.iter().take(3).map(String::as_str).collect();
            evidence.push(format!("its usual addresses: {}", shown.join(", ")));
        }
    }
    let (explanation, confirm) = match alert.alert_type {
        AlertType::Ueba => ueba_story(alert, history, &mut evidence),
        AlertType::Sigma | AlertType::Correlation => rule_story(falsepositives, &mut evidence),
        _ => other_story(alert, &mut evidence),
    };
    Benign {
        explanation,
        evidence,
        confirm,
    }
}

/// A behaviour alert: the story of each deviation that raised it.
fn ueba_story(
    alert: &Alert,
    history: Option<&History>,
    evidence: &mut Vec<String>,
) -> (String, String) {
    let address = acting_address(alert);
    let known_address =
        address.is_some_and(|a| history.is_some_and(|h| h.top_sources.iter().any(|s| s == a)));
    if let Some(a) = address {
        evidence.push(if known_address {
            format!("from {a}, an address it has used before")
        } else {
            format!("from {a}, an address not among those it uses")
        });
    }
    let Some(d) = alert.deviation else {
        let top = alert
            .contributions
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or("", |(k, _)| k.as_str());
        let signal = match top {
            "time_of_day" => Signal::NewHour,
            "source_novelty" => Signal::NewSource,
            "volume" => Signal::Rate,
            _ => return pattern_story(),
        };
        return signal_story(signal, None, history, known_address, evidence);
    };
    let (first, confirm) = signal_story(d.signal, Some(&d), history, known_address, evidence);
    match d.with {
        Some(w) => {
            let (second, also) = signal_story(w.signal, None, history, known_address, evidence);
            (
                format!("{first} And: {second}"),
                format!("{confirm} {also}"),
            )
        }
        None => (first, confirm),
    }
}

/// The story of one kind of deviation.
fn signal_story(
    signal: Signal,
    d: Option<&Deviation>,
    history: Option<&History>,
    known_address: bool,
    evidence: &mut Vec<String>,
) -> (String, String) {
    match signal {
        Signal::NewHour => {
            if let (Some(d), Some(h)) = (d, history)
                && let Some((near, gap)) = nearest_hour(d.value as u8, &h.hours_active)
            {
                evidence.push(format!(
                    "{:02}:00 UTC is {gap} hours from its nearest usual hour ({near:02}:00)",
                    d.value as u8
                ));
            }
            if let Some(run) = d.and_then(|d| d.sustained) {
                evidence.push(format!(
                    "it went on for {} minutes ({} events)",
                    run.seconds / 60,
                    run.events
                ));
            }
            let story = if known_address {
                "The account's own address at an unusual hour: the person working early or \
                 late, or paged on call, is the likeliest story."
            } else {
                "An unusual hour from an unfamiliar address: travel to another time zone would \
                 explain both."
            };
            (
                story.into(),
                "The person, the on-call rota or the travel calendar places them at work then; \
                 a sign-in they confirm (their device, an MFA prompt they answered) settles it."
                    .into(),
            )
        }
        Signal::NewSource => (
            "A first address: a new home connection, a mobile network, a VPN exit or a hotel \
             would explain it."
                .into(),
            "The person confirms the sign-in from that place, and the address belongs to an \
             access provider (home, mobile, hotel, the VPN's pool) rather than a hosting company."
                .into(),
        ),
        Signal::NewHost => {
            // The people who used the host before the visit (the deviation's value; 0 also
            // when not known, so only a count is said).
            if let Some(d) = d
                && d.value >= 1.0
            {
                let people = d.value as u64;
                evidence.push(if people == 1 {
                    "one other person has used this host".to_string()
                } else {
                    format!("{people} other people have used this host")
                });
            }
            (
                "A first visit to this host: a new task, an on-call page or a planned change \
                 would explain it."
                    .into(),
                "A change ticket or an on-call page covers the visit, or the host's owner \
                 expected it."
                    .into(),
            )
        }
        Signal::Rate => {
            if let Some(h) = history {
                evidence.push(format!(
                    "its usual rate: {:.1} events a minute",
                    h.volume_per_minute
                ));
            }
            (
                "A burst far above its usual rate: a scheduled job's larger run (month-end, a \
                 backup), a report, or a client retrying in a loop."
                    .into(),
                "The job's schedule or owner accounts for a run of this size at this time, and \
                 the events are the job's usual commands from its usual source."
                    .into(),
            )
        }
        Signal::Dormancy => {
            if let Some(d) = d {
                evidence.push(format!("silent for {:.0} days before", d.value.floor()));
            }
            (
                "Back after a long silence: a return from leave, a seasonal task or a \
                 contractor's new engagement."
                    .into(),
                "HR or the account's owner confirms the return. If the person has left, the \
                 account should have been disabled: disable it now."
                    .into(),
            )
        }
    }
}

/// A log message the entity and its peers rarely show.
fn pattern_story() -> (String, String) {
    (
        "A log message it rarely shows: new software, an upgrade or a changed configuration \
         writes new messages."
            .into(),
        "A deploy or a change on the host at that time accounts for the new messages.".into(),
    )
}

/// A rule's alert: the benign causes its authors list.
fn rule_story(falsepositives: &[String], evidence: &mut Vec<String>) -> (String, String) {
    let known: Vec<&str> = falsepositives
        .iter()
        .map(|f| f.trim())
        .filter(|f| !f.is_empty() && !f.eq_ignore_ascii_case("unknown"))
        .collect();
    if known.is_empty() {
        return (
            "The rule's authors know no benign cause: treat it as malicious until the events \
             show otherwise."
                .into(),
            "The contributing events show an owner and a purpose for the activity (an \
             administrator's ticket, a known tool in its usual place)."
                .into(),
        );
    }
    evidence.push(format!(
        "the rule's known false positives: {}",
        known.join("; ")
    ));
    (
        format!(
            "The rule's authors name benign causes: {}.",
            known.join("; ")
        ),
        "One of them applies to this entity at that time: the contributing events show the \
         process, command line or account it names."
            .into(),
    )
}

/// Alerts of the built-in detectors other than behaviour analytics.
fn other_story(alert: &Alert, evidence: &mut Vec<String>) -> (String, String) {
    match alert.detector.as_str() {
        "risk" => {
            evidence.push(format!(
                "{} signals added up (see related_alerts)",
                alert.related_alerts.len()
            ));
            (
                "Many small signals on one entity: a misconfigured client, a monitoring probe \
                 or a scanner fails often without ever getting in."
                    .into(),
                "No success among the contributing events (no accepted logon, no new process), \
                 and the address is a known scanner or one of your own clients."
                    .into(),
            )
        }
        "persistence" => (
            "Failed logons spread over hours: a script or a device with an old password fails \
             on its schedule."
                .into(),
            "The address is one of yours (an internal host, a partner), the account is the \
             script's, and its password changed recently."
                .into(),
        ),
        "killchain" => (
            "Alerts of several tactics on one entity: an administrator's ordinary work can line \
             up across tactics."
                .into(),
            "Each joined alert closes as benign on its own.".into(),
        ),
        "ensemble" => pattern_story(),
        d if d.starts_with("ioc:") => (
            "Indicators age and some name shared infrastructure: a hosting address or a \
             content network may carry unrelated sites."
                .into(),
            "The indicator is recent in its feed and the connection's host name or content \
             matches the threat it names."
                .into(),
        ),
        _ => (
            "No benign story is known for this detector.".into(),
            "The contributing events show an owner and a purpose for the activity.".into(),
        ),
    }
}

/// The address acting in the alert: its entity when that is an address, else the first
/// address among its related entities.
fn acting_address(alert: &Alert) -> Option<&str> {
    alert
        .entity
        .iter()
        .chain(&alert.related_entities)
        .find(|e| e.kind == EntityKind::Ip)
        .map(|e| e.value.as_str())
}

/// The usual hour nearest to `hour` other than itself, and how many hours away.
fn nearest_hour(hour: u8, active: &[u8]) -> Option<(u8, u8)> {
    active
        .iter()
        .filter(|&&h| h != hour)
        .map(|&h| {
            let d = (i16::from(h) - i16::from(hour)).rem_euclid(24) as u8;
            (h, d.min(24 - d))
        })
        .min_by_key(|&(h, d)| (d, h))
}

/// Hours as ranges: `[13, 14, 15, 20]` as `13:00-15:59, 20:00-20:59`.
fn hour_ranges(hours: &[u8]) -> String {
    let mut sorted = hours.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(format!("{start:02}:00-{end:02}:59"));
        i += 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use watchpost_proto::{DeviationPart, EntityRef, Sustained, Uuid};

    fn ueba_alert(deviation: Deviation, address: &str) -> Alert {
        let mut a: Alert = serde_json::from_value(serde_json::json!({
            "id": "0190d7a2-0000-7000-8000-000000000001", "type": "ueba", "severity": 3,
            "title": "t", "detector": "ueba:user", "dedup_key": "k", "first_seen_ns": 0,
            "last_seen_ns": 0, "count": 1, "source": "sshd", "score": 0.3, "threshold": 0.4,
            "contributions": {}, "attack": [], "contributing_events": [],
            "related_entities": []
        }))
        .unwrap();
        a.deviation = Some(deviation);
        a.related_entities.push(EntityRef {
            kind: EntityKind::Ip,
            role: "source".into(),
            value: address.into(),
            uuid: Uuid::nil(),
        });
        a
    }

    fn office() -> History {
        History {
            hours_active: (13..=20).collect(),
            top_sources: vec!["24.25.55.8".into()],
            event_count: 317,
            volume_per_minute: 1.2,
        }
    }

    fn hour(h: f64) -> Deviation {
        Deviation {
            signal: Signal::NewHour,
            bits: 7.7,
            value: h,
            with: None,
            sustained: None,
        }
    }

    #[test]
    fn an_odd_hour_from_the_usual_address_reads_as_the_person_working_late() {
        let a = ueba_alert(
            Deviation {
                sustained: Some(Sustained {
                    events: 32,
                    seconds: 1800,
                }),
                ..hour(8.0)
            },
            "24.25.55.8",
        );
        let b = reading(&a, Some(&office()), &[]);
        assert!(b.explanation.contains("own address"), "{}", b.explanation);
        assert!(b.confirm.contains("on-call rota"), "{}", b.confirm);
        let facts = b.evidence.join(" | ");
        assert!(facts.contains("usually active 13:00-20:59 UTC"), "{facts}");
        assert!(
            facts.contains("08:00 UTC is 5 hours from its nearest usual hour (13:00)"),
            "{facts}"
        );
        assert!(facts.contains("30 minutes (32 events)"), "{facts}");
        assert!(
            facts.contains("24.25.55.8, an address it has used before"),
            "{facts}"
        );
    }

    #[test]
    fn a_first_host_says_how_many_people_use_it_when_that_is_known() {
        let host = |people: f64| Deviation {
            signal: Signal::NewHost,
            bits: 9.2,
            value: people,
            with: None,
            sustained: None,
        };
        let b = reading(&ueba_alert(host(12.0), "24.25.55.8"), Some(&office()), &[]);
        let facts = b.evidence.join(" | ");
        assert!(
            facts.contains("12 other people have used this host"),
            "{facts}"
        );
        assert!(b.confirm.contains("on-call page"), "{}", b.confirm);
        let b = reading(&ueba_alert(host(0.0), "24.25.55.8"), Some(&office()), &[]);
        assert!(
            !b.evidence.join(" | ").contains("people"),
            "{:?}",
            b.evidence
        );
    }

    #[test]
    fn an_odd_hour_from_a_new_address_reads_as_travel_and_both_parts_are_told() {
        let a = ueba_alert(
            Deviation {
                with: Some(DeviationPart {
                    signal: Signal::NewSource,
                    bits: 8.8,
                    value: 0.0,
                }),
                ..hour(3.0)
            },
            "203.0.113.50",
        );
        let b = reading(&a, Some(&office()), &[]);
        assert!(b.explanation.contains("travel"), "{}", b.explanation);
        assert!(b.explanation.contains("hotel"), "{}", b.explanation);
        assert!(b.confirm.contains("access provider"), "{}", b.confirm);
        assert!(
            b.evidence
                .iter()
                .any(|e| e.contains("not among those it uses"))
        );
    }

    #[test]
    fn without_a_baseline_the_reading_rests_on_the_alert_alone() {
        let a = ueba_alert(hour(3.0), "203.0.113.50");
        let b = reading(&a, None, &[]);
        assert!(!b.evidence.iter().any(|e| e.contains("usually active")));
        assert!(b.explanation.contains("travel"));
    }

    #[test]
    fn a_rule_alert_tells_its_authors_false_positives_or_that_there_are_none() {
        let mut a = ueba_alert(hour(3.0), "203.0.113.50");
        a.alert_type = AlertType::Sigma;
        let listed = reading(&a, None, &["Legitimate admin use of PsExec".into()]);
        assert!(
            listed
                .explanation
                .contains("Legitimate admin use of PsExec")
        );
        let unknown = reading(&a, None, &["Unknown".into()]);
        assert!(unknown.explanation.contains("know no benign cause"));
    }

    #[test]
    fn hours_read_as_ranges_and_the_nearest_hour_wraps_around_midnight() {
        assert_eq!(
            hour_ranges(&[20, 13, 14, 15, 23]),
            "13:00-15:59, 20:00-20:59, 23:00-23:59"
        );
        assert_eq!(nearest_hour(1, &[22, 23, 12]), Some((23, 2)));
        assert_eq!(nearest_hour(5, &[]), None);
    }
}
