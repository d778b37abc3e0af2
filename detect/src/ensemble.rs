//! The content ensemble of one source: Half-Space Trees over per-event features, a Markov chain
//! over the template sequence, Holt-Winters and CUSUM on per-minute volume, blended into one
//! score that a per-source DSPOT threshold judges.
//!
//! Blend weights (the spec leaves them open): HST 0.35, Markov 0.35, volume 0.30 (the larger of
//! Holt-Winters and CUSUM). Content novelty and sequence novelty weigh the same; volume a little
//! less, because a volume change is a property of a minute, shared by every event in it.

use crate::dspot::{Dspot, DspotConfig, Verdict};
use crate::fastmath::log2;
use crate::hst::{HalfSpaceTrees, HstConfig};
use crate::markov::Markov;
use crate::time::EventTime;
use crate::volume::Volume;
use bincode::{Decode, Encode};

/// Blend weights: HST, Markov, volume.
pub const WEIGHTS: [f64; 3] = [0.35, 0.35, 0.30];

/// What the ensemble needs of an event.
#[derive(Clone, Copy, Debug, Default)]
pub struct EventFeatures {
    /// Event time (worked out once per event, and shared with UEBA).
    pub time: EventTime,
    /// Template id.
    pub template: u64,
    /// Severity, 0 to 5.
    pub severity: u8,
    /// Message length in bytes.
    pub message_len: u32,
    /// Entities found in the event.
    pub entities: u8,
}

/// Each detector's part of a score (already weighted: they add up to the score).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Contributions {
    /// Half-Space Trees.
    pub hst: f64,
    /// Markov chain.
    pub markov: f64,
    /// Holt-Winters (when it was the larger volume score).
    pub holt_winters: f64,
    /// CUSUM (when it was the larger volume score).
    pub cusum: f64,
}

/// The ensemble's verdict on one event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    /// Blended score in [0, 1].
    pub score: f64,
    /// Who contributed what.
    pub contributions: Contributions,
    /// DSPOT's threshold when the event was judged.
    pub threshold: f64,
    /// DSPOT's verdict.
    pub verdict: Verdict,
}

/// The detectors of one source.
#[derive(Clone, Debug, Encode, Decode)]
pub struct SourceModel {
    hst: HalfSpaceTrees,
    markov: Markov,
    volume: Volume,
    threshold: Dspot,
    last_ts_ns: i64,
}

impl SourceModel {
    /// Fresh detectors; `risk` is the DSPOT risk of the source's threshold.
    pub fn new(risk: f64) -> SourceModel {
        SourceModel {
            hst: HalfSpaceTrees::new(HstConfig::default()),
            markov: Markov::default(),
            volume: Volume::default(),
            threshold: Dspot::new(DspotConfig {
                risk,
                bounded: true,
                ..DspotConfig::default()
            }),
            last_ts_ns: i64::MIN,
        }
    }

    /// The source's threshold.
    pub fn threshold(&self) -> &Dspot {
        &self.threshold
    }

    /// Mutable threshold (feedback moves its risk).
    pub fn threshold_mut(&mut self) -> &mut Dspot {
        &mut self.threshold
    }

    /// Scores one event and learns it.
    #[inline]
    pub fn observe(&mut self, event: &EventFeatures) -> Scored {
        let ts_ns = event.time.ts_ns;
        let rarity = self.markov.rarity(event.template);
        let gap_ms = if self.last_ts_ns == i64::MIN {
            0.0
        } else {
            (ts_ns.saturating_sub(self.last_ts_ns).max(0) / 1_000_000) as f64
        };
        self.last_ts_ns = self.last_ts_ns.max(ts_ns);
        let hour = f32::from(event.time.hour_of_day);
        let x = [
            f32::from(event.severity) / 5.0,
            (log2(1.0 + event.message_len as f32) / 12.0).min(1.0),
            f32::from(event.entities) / 8.0,
            hour / 24.0,
            (log2(1.0 + gap_ms as f32) / 20.0).min(1.0),
            rarity as f32,
        ];
        let hst = self.hst.score_and_learn(&x);
        let markov = self.markov.score_and_learn(event.template);
        let v = self.volume.observe(&event.time);
        let (hw, cu) = if v.holt_winters >= v.cusum {
            (v.holt_winters, 0.0)
        } else {
            (0.0, v.cusum)
        };
        let contributions = Contributions {
            hst: WEIGHTS[0] * hst,
            markov: WEIGHTS[1] * markov,
            holt_winters: WEIGHTS[2] * hw,
            cusum: WEIGHTS[2] * cu,
        };
        let score = contributions.hst
            + contributions.markov
            + contributions.holt_winters
            + contributions.cusum;
        let threshold = self.threshold.threshold();
        let verdict = self.threshold.update(score);
        Scored {
            score,
            contributions,
            threshold,
            verdict,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    const MINUTE: i64 = 60_000_000_000;

    #[test]
    fn steady_traffic_rarely_alarms_and_a_novel_burst_does() {
        let mut m = SourceModel::new(1e-4);
        let mut rng = SplitMix64::new(21);
        let mut alarms = 0;
        let mut judged = 0;
        let mut ts = 0i64;
        // Five usual templates at about 20 events a minute for four days.
        for _ in 0..115_000 {
            ts += (3.0e9 * (0.5 + rng.next_f64())) as i64;
            let t = rng.below(5);
            let s = m.observe(&EventFeatures {
                time: EventTime::new(ts),
                template: t,
                severity: 1,
                message_len: 60 + 10 * t as u32,
                entities: 2,
            });
            if s.verdict != Verdict::Calibrating {
                judged += 1;
                alarms += u32::from(s.verdict == Verdict::Alarm);
            }
        }
        let per_10k = f64::from(alarms) * 10_000.0 / f64::from(judged);
        assert!(per_10k <= 2.0, "{alarms} alarms over {judged} events");
        // A burst of a never-seen, long, severe template.
        let mut hit = None;
        for i in 0..200 {
            let s = m.observe(&EventFeatures {
                time: EventTime::new(ts + MINUTE + i * 10_000_000),
                template: 999,
                severity: 5,
                message_len: 2000,
                entities: 7,
            });
            if s.verdict == Verdict::Alarm {
                hit = Some(s);
                break;
            }
        }
        let s = hit.expect("the burst alarms");
        assert!(s.score > s.threshold);
        let c = s.contributions;
        assert!((c.hst + c.markov + c.holt_winters + c.cusum - s.score).abs() < 1e-9);
    }
}
