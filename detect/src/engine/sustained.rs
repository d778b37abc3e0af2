//! Time of day alone, sustained: an account active at an hour it is rarely active in, for long
//! enough that it is not one stray event.
//!
//! A first-ever hour alerts on its own only with enough history behind it (`new_hour` past
//! `ueba.strong_deviation_bits`: some 256 events for an hour with nothing near it). An office
//! worker with a few hundred events, a little activity two or three hours from the odd one, is
//! short of that: the first event at 04:00 is a signal, and the account learns the hour from its
//! second event on, so its later events are not even signals. Yet half an hour of work at 04:00
//! from a day worker's account is what an analyst wants to see ("a day-only worker browsing and
//! exporting before dawn"). So the signal opens a run: the account's events that follow with
//! gaps of at most [`RUN_GAP_NS`] extend it, and once it holds [`RUN_MIN_EVENTS`] events over
//! at least [`RUN_MIN_NS`] it alerts once, at medium severity, the run's length on the alert's
//! deviation (`sustained`). Its later events fold into that alert. A page at night (a VPN
//! login, an SSH login, one sudo) stays a signal.
//!
//! The runs are few (an account's run lives from a `new_hour` signal until a gap of
//! [`RUN_GAP_NS`]), bounded by the UEBA entity cap, and not saved: a restart forgets a run, and
//! the next `new_hour` signal starts another.

use super::Detector;
use super::sink::AlertSink;
use super::ueba::{UEBA_SALT, ueba_detector};
use crate::record::DetectRecord;
use crate::ueba::{Outcome, UebaAlert, UebaType};
use std::collections::HashMap;
use watchpost_proto::{DeviationSignal as Signal, Sustained};

/// The longest silence that still continues a run.
pub const RUN_GAP_NS: i64 = 15 * 60 * 1_000_000_000;

/// Events a run needs, the first included, before it alerts.
pub const RUN_MIN_EVENTS: u32 = 10;

/// Time a run needs, from its first event, before it alerts.
pub const RUN_MIN_NS: i64 = 10 * 60 * 1_000_000_000;

/// One account's run of activity at an hour it is rarely active in.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// The signal that opened it.
    opened: UebaAlert,
    last_ns: i64,
    events: u32,
    alerted: bool,
}

/// What one event did to its account's run.
#[derive(Debug, PartialEq)]
enum Step {
    /// No run, or a run short of an alert.
    Quiet,
    /// The run became an alert: this one.
    Alert(UebaAlert),
    /// The run had alerted: this event belongs to that alert.
    Repeat,
}

/// Every account's open run, by entity key.
#[derive(Debug, Default)]
pub(super) struct HourRuns {
    runs: HashMap<u64, Run>,
}

impl HourRuns {
    /// Follows `entity`'s event at `ts_ns`, which ended in `outcome`.
    fn step(&mut self, entity: u64, ts_ns: i64, outcome: &Outcome) -> Step {
        if let Some(run) = self.runs.get_mut(&entity)
            && ts_ns.saturating_sub(run.last_ns) <= RUN_GAP_NS
        {
            run.last_ns = run.last_ns.max(ts_ns);
            run.events = run.events.saturating_add(1);
            if run.alerted {
                return Step::Repeat;
            }
            let lasted = run.last_ns.saturating_sub(run.opened.ts_ns);
            if run.events < RUN_MIN_EVENTS || lasted < RUN_MIN_NS {
                return Step::Quiet;
            }
            run.alerted = true;
            let mut alert = run.opened;
            alert.ts_ns = ts_ns;
            if let Some(d) = alert.deviation.as_mut() {
                d.sustained = Some(Sustained {
                    events: run.events,
                    seconds: (lasted / 1_000_000_000).clamp(0, i64::from(u32::MAX)) as u32,
                });
            }
            return Step::Alert(alert);
        }
        // No run, or one whose gap has passed: a new hour's signal opens one.
        if let Outcome::Signal(a) = outcome
            && a.deviation.is_some_and(|d| d.signal == Signal::NewHour)
        {
            self.runs.insert(
                entity,
                Run {
                    opened: *a,
                    last_ns: ts_ns,
                    events: 1,
                    alerted: false,
                },
            );
        } else {
            self.runs.remove(&entity);
        }
        Step::Quiet
    }

    /// Forgets the runs silent for longer than [`RUN_GAP_NS`] at `now_ns`.
    pub(super) fn prune(&mut self, now_ns: i64) {
        self.runs
            .retain(|_, r| now_ns.saturating_sub(r.last_ns) <= RUN_GAP_NS);
    }

    /// Whether no run is open (one branch per event then).
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

impl Detector {
    /// Follows account `i` of `r` (of type `kind`) through its run at rare hours, after its own
    /// judgement ended in `outcome`: raises the run's alert, or folds the event into it.
    pub(super) fn follow_hour_run(
        &mut self,
        r: &DetectRecord,
        i: usize,
        kind: UebaType,
        outcome: &Outcome,
        sink: &mut impl AlertSink,
    ) {
        let opens = matches!(outcome, Outcome::Signal(_));
        if !matches!(kind, UebaType::User | UebaType::ServiceAccount)
            || (!opens && self.hour_runs.is_empty())
        {
            return;
        }
        let entity = r.entities[i].hash;
        match self.hour_runs.step(entity, r.ts_ns, outcome) {
            Step::Quiet => {}
            Step::Alert(_) if self.excepted(ueba_detector(kind), Some(r), r.ts_ns) => {}
            Step::Alert(a) => self.raise_ueba(r, i, &a, sink),
            Step::Repeat => {
                let own = entity ^ UEBA_SALT;
                let key = self.alias.get(&own).copied().unwrap_or(own);
                let score = match outcome {
                    Outcome::Alert(a) | Outcome::Signal(a) => a.score,
                    Outcome::Scored { score, .. } => *score,
                    Outcome::Learned => 0.0,
                };
                self.repeat(key, r, score, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ueba::SubScores;
    use watchpost_proto::Deviation;

    const MIN: i64 = 60 * 1_000_000_000;

    fn signal(ts_ns: i64, signal: Signal) -> Outcome {
        Outcome::Signal(UebaAlert {
            entity: 7,
            kind: UebaType::User,
            ts_ns,
            score: 0.2,
            threshold: 0.3,
            sub_scores: SubScores::default(),
            deviation: Some(Deviation {
                signal,
                bits: 7.7,
                value: 4.0,
                with: None,
                sustained: None,
            }),
        })
    }

    fn scored() -> Outcome {
        Outcome::Scored {
            score: 0.1,
            suppressed: false,
        }
    }

    #[test]
    fn half_an_hour_at_a_rare_hour_alerts_once_then_folds_in() {
        let mut runs = HourRuns::default();
        assert_eq!(runs.step(7, 0, &signal(0, Signal::NewHour)), Step::Quiet);
        let steps: Vec<Step> = (1..=30).map(|k| runs.step(7, k * MIN, &scored())).collect();
        // Ten events by the ninth minute: it waits for the tenth minute.
        let at = steps.iter().position(|s| matches!(s, Step::Alert(_)));
        assert_eq!(at, Some(9), "{steps:?}");
        let Step::Alert(a) = &steps[9] else {
            unreachable!()
        };
        let sustained = a.deviation.and_then(|d| d.sustained);
        assert_eq!(
            sustained,
            Some(Sustained {
                events: 11,
                seconds: 600
            })
        );
        assert!(steps[10..].iter().all(|s| *s == Step::Repeat));
    }

    #[test]
    fn a_night_page_a_pause_or_another_signal_stay_quiet() {
        let mut runs = HourRuns::default();
        // A page: three events in three minutes.
        runs.step(7, 0, &signal(0, Signal::NewHour));
        for k in 1..3 {
            assert_eq!(runs.step(7, k * MIN, &scored()), Step::Quiet);
        }
        // Back twenty minutes later for ten more minutes: the gap ended the run.
        for k in 23..40 {
            assert_eq!(runs.step(7, k * MIN, &scored()), Step::Quiet);
        }
        // A rate signal opens nothing.
        runs.step(8, 0, &signal(0, Signal::Rate));
        for k in 1..30 {
            assert_eq!(runs.step(8, k * MIN, &scored()), Step::Quiet);
        }
        runs.prune(60 * MIN);
        assert!(runs.is_empty());
    }
}
