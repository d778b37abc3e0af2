//! Ensemble alerts: a source's content anomaly past its alert quantile (below it, a signal).

use super::book::{breakdown, entity_ref, round6};
use super::signal::{SignalOrigin, SignalTitle};
use super::sink::AlertSink;
use super::{Detector, SourceState};
use crate::dspot::Verdict as DspotVerdict;
use crate::ensemble::{EventFeatures, Scored, SourceModel};
use crate::record::DetectRecord;
use crate::time::{EventTime, NS_PER_MINUTE};
use watchpost_proto::{Alert, AlertType, MinutePoint, builtin_detector_name, event_id, fmix64};
use watchpost_rules::Level;

/// How long after a source's failed logon an anomaly led by volume or by the order of messages
/// is that burst's wake rather than news of its own: the minute of the burst and the next.
pub(super) const GUESS_WAKE_NS: i64 = 2 * NS_PER_MINUTE;

/// Salt of `ml` dedup keys (so a source hash and an entity hash never share a key).
pub(super) const ML_SALT: u64 = 0x6d6c_0000_0000_0001;

/// The ensemble's parts of a score, named as alerts name them.
pub(super) fn ml_parts(c: &crate::ensemble::Contributions) -> [(&'static str, f64); 4] {
    [
        ("hst", c.hst),
        ("markov", c.markov),
        ("holt_winters", c.holt_winters),
        ("cusum", c.cusum),
    ]
}

/// What an ensemble score found, by its largest part.
pub(super) fn ml_finding(s: &Scored) -> &'static str {
    let top = ml_parts(&s.contributions)
        .iter()
        .fold(("", f64::MIN), |a, b| if b.1 > a.1 { *b } else { a })
        .0;
    match top {
        "hst" => "unusual event content",
        "markov" => "unusual sequence of messages",
        _ => "unusual volume",
    }
}

impl Detector {
    /// Scores `r` against its source's model; an anomaly past the alert quantile alerts, one
    /// short of it (led by volume) or on a failed logon (`guessing`) is a signal.
    pub(super) fn ensemble(
        &mut self,
        r: &DetectRecord,
        time: &EventTime,
        guessing: bool,
        sink: &mut impl AlertSink,
    ) {
        let risk = self.params.ml_risk;
        let st = self.sources.entry(r.source).or_insert_with(|| SourceState {
            model: SourceModel::new(risk),
            minute: MinutePoint {
                source: r.source,
                minute_ns: i64::MIN,
                ..MinutePoint::default()
            },
            last_guess_ns: i64::MIN,
        });
        if guessing {
            st.last_guess_ns = r.ts_ns;
        }
        let s = st.model.observe(&EventFeatures {
            time: *time,
            template: r.template,
            severity: r.severity,
            message_len: r.message_len,
            entities: r.entity_count,
        });
        let minute = i64::from(time.minute) * NS_PER_MINUTE;
        if minute > st.minute.minute_ns {
            if st.minute.events > 0 {
                self.minutes.push(st.minute);
            }
            st.minute = MinutePoint {
                source: r.source,
                minute_ns: minute,
                ..MinutePoint::default()
            };
        }
        st.minute.events += 1;
        st.minute.sum += s.score as f32;
        st.minute.max = st.minute.max.max(s.score as f32);
        if s.verdict != DspotVerdict::Alarm {
            return;
        }
        st.minute.alarms += 1;
        let since_guess = r.ts_ns.saturating_sub(st.last_guess_ns);
        let alert_bar = st.model.threshold().threshold_at(self.params.ml_alert_risk);
        if !self.params.ml_enabled || self.excepted("ensemble", Some(r), r.ts_ns) {
            return;
        }
        let key = fmix64(r.source ^ ML_SALT);
        if self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns) {
            self.repeat(key, r, s.score, None);
            return;
        }
        // Past the source's threshold but not its alert quantile: an anomaly of the kind a busy
        // source shows several times a day (docs/risk.md), which adds risk to its entity. An
        // anomaly on a failed logon is the internet's guessing seen by its volume or its order
        // (a scanner's burst on an exposed SSH host): a signal on the address at any score, so
        // that guesses add up on the address over the risk window and in `persistence`, and a
        // scanner that tries and leaves raises nothing ("Failed logons are one behaviour",
        // docs/risk.md).
        let finding = ml_finding(&s);
        let volume_led = finding == "unusual volume";
        // The events right after a guessing burst inherit its volume and its break in the
        // order of messages (the next login on the stream scores high with content it has
        // seen a thousand times): the burst's wake, not news of its own.
        let wake = finding != "unusual event content" && since_guess <= GUESS_WAKE_NS;
        if (volume_led && s.score < alert_bar) || guessing || wake {
            let origin = SignalOrigin {
                key,
                id: SignalTitle::Rule("ensemble"),
                title: SignalTitle::Anomaly {
                    source: r.source_name(),
                    finding: ml_finding(&s),
                },
                level: Some(Level::Low),
                attack: &[],
                entity: None,
                with_actor: true,
                guessing,
            };
            self.raise_signal(
                r,
                &origin,
                |d, signal_key, _| {
                    let mut signal = d.ml_alert(r, signal_key, &s);
                    signal.dedup_key = match &signal.entity {
                        Some(e) => format!("signal:ml:{}:{}", signal.source, e.uuid),
                        None => format!("signal:ml:{}", signal.source),
                    };
                    signal
                },
                sink,
            );
            return;
        }
        let alert = self.ml_alert(r, key, &s);
        let until_ns = r.ts_ns.saturating_add(self.params.ml_cooldown_ns);
        self.open_alert(key, alert, until_ns, sink);
    }

    pub(super) fn ml_alert(&mut self, r: &DetectRecord, key: u64, s: &Scored) -> Alert {
        let (_, contributions) = breakdown(&ml_parts(&s.contributions));
        let what = ml_finding(s);
        let source = r.source_name().to_string();
        let entity = r
            .entities()
            .iter()
            .find(|e| e.ueba != crate::record::NOT_SCORED)
            .map(entity_ref);
        Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: AlertType::Ml,
            severity: if s.score >= 0.8 { 4 } else { 3 },
            title: format!("Anomaly in {source}: {what}"),
            detector: "ensemble".into(),
            detector_name: builtin_detector_name("ensemble").unwrap_or_default(),
            dedup_key: format!("ml:{source}"),
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source,
            entity,
            score: round6(s.score),
            threshold: round6(s.threshold),
            contributions,
            attack: Vec::new(),
            contributing_events: vec![event_id(&r.block, r.pos)],
            related_entities: r.entities().iter().map(entity_ref).collect(),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
            sensor: String::new(),
        }
    }
}
