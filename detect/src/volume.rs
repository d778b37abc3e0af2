//! Volume detectors on a per-minute event count: Holt-Winters forecasting with an hour-of-day
//! season, and a two-sided CUSUM on the standardised count.
//!
//! Both see one number per minute (of event time), so their cost per event is an increment. The
//! running minute is judged as it fills: a burst is seen while it happens, not a minute later.
//! Silence is judged when the minute closes (a source that stops logging can mean tampering).

use crate::fastmath::logistic4;
use crate::time::EventTime;
use bincode::de::Decoder;
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{Decode, Encode};

/// Maps a standardised deviation to [0, 1]: about 0.02 at z = 0, 0.5 at z = 4, 0.98 at z = 8.
#[inline]
pub fn z_to_score(z_score: f64) -> f64 {
    logistic4(z_score as f32)
}

/// Additive Holt-Winters with 24 hourly seasonal slots, fed per-minute counts.
#[derive(Clone, Debug, Encode, Decode)]
pub struct HoltWinters {
    level: f64,
    trend: f64,
    season: [f64; 24],
    /// Smoothed absolute forecast error: the scale of a "normal" miss.
    mad: f64,
    alpha: f64,
    beta: f64,
    gamma: f64,
    minutes: u64,
}

impl Default for HoltWinters {
    fn default() -> Self {
        HoltWinters {
            level: 0.0,
            trend: 0.0,
            season: [0.0; 24],
            mad: 0.0,
            alpha: 0.1,
            beta: 0.01,
            gamma: 0.05,
            minutes: 0,
        }
    }
}

impl HoltWinters {
    /// Expected count of a minute in `hour` (UTC).
    #[inline]
    pub fn forecast(&self, hour: usize) -> f64 {
        (self.level + self.trend + self.season[hour % 24]).max(0.0)
    }

    /// Enough minutes seen to judge (a quarter of an hour).
    pub fn is_ready(&self) -> bool {
        self.minutes >= 15
    }

    /// Standardised deviation of `count` in `hour` from the forecast.
    #[inline]
    pub fn z(&self, hour: usize, count: f64) -> f64 {
        if !self.is_ready() {
            return 0.0;
        }
        let (forecast, scale) = self.forecast_and_scale(hour);
        (count - forecast) / scale
    }

    /// The forecast of a minute in `hour` and the scale of a normal miss, at least 1.
    #[inline]
    fn forecast_and_scale(&self, hour: usize) -> (f64, f64) {
        let forecast = self.forecast(hour);
        // A floor on the scale: a source that always logs exactly 60 a minute must not alarm at 62.
        let scale = (1.25 * self.mad).max(1.0 + 0.1 * forecast.sqrt());
        (forecast, scale)
    }

    /// Learns a closed minute.
    pub fn learn(&mut self, hour: usize, count: f64) {
        let h = hour % 24;
        if self.minutes == 0 {
            self.level = count;
        }
        let err = count - self.forecast(h);
        if self.minutes > 0 {
            self.mad = if self.minutes == 1 {
                err.abs()
            } else {
                0.9 * self.mad + 0.1 * err.abs()
            };
        }
        let prev_level = self.level;
        self.level =
            self.alpha * (count - self.season[h]) + (1.0 - self.alpha) * (prev_level + self.trend);
        self.trend = self.beta * (self.level - prev_level) + (1.0 - self.beta) * self.trend;
        self.season[h] = self.gamma * (count - self.level) + (1.0 - self.gamma) * self.season[h];
        self.minutes += 1;
    }
}

/// Two-sided CUSUM (Page 1954) on per-minute counts standardised by their running mean and
/// variance: catches a sustained shift that no single minute shows.
#[derive(Clone, Debug, Default, Encode, Decode)]
pub struct Cusum {
    mean: f64,
    var: f64,
    up: f64,
    down: f64,
    minutes: u64,
}

impl Cusum {
    /// Allowance per minute, in standard deviations.
    const K: f64 = 0.5;
    /// Decision level, in standard deviations: with K = 0.5, about 10,000 in-control minutes
    /// between false trips on Gaussian counts, and a 1.5-sigma shift found in about 9 minutes.
    const H: f64 = 8.0;

    /// Learns a closed minute and returns its score in [0, 1] (1 at the decision level).
    pub fn learn(&mut self, count: f64) -> f64 {
        self.minutes += 1;
        if self.minutes == 1 {
            self.mean = count;
            return 0.0;
        }
        let sd = self.var.sqrt().max(1.0);
        let z = (count - self.mean) / sd;
        let d = count - self.mean;
        self.mean += 0.02 * d;
        self.var = 0.98 * (self.var + 0.02 * d * d);
        if self.minutes < 15 {
            return 0.0;
        }
        self.up = (self.up + z - Self::K).max(0.0);
        self.down = (self.down - z - Self::K).max(0.0);
        let s = self.up.max(self.down) / Self::H;
        if s >= 1.0 {
            // Reported once; start accumulating afresh.
            self.up = 0.0;
            self.down = 0.0;
        }
        s.min(1.0)
    }
}

/// The volume state of one source: the running minute, its detectors and the last verdicts.
#[derive(Clone, Debug, Default)]
pub struct Volume {
    /// A first event has set `minute`.
    started: bool,
    minute: i64,
    count: u64,
    hw: HoltWinters,
    cusum: Cusum,
    /// CUSUM score of the last closed minute, carried into the running one.
    shift: f64,
    /// Holt-Winters score of the last closed minute when it was a drop (silence).
    drop: f64,
    /// The running minute's forecast and the reciprocal of its scale (0 while Holt-Winters is
    /// not ready): they change only when a minute closes, so an event's z-score is a
    /// subtraction and a multiplication instead of a square root and a division. Not saved;
    /// worked out again on decode.
    forecast: f32,
    inv_scale: f32,
}

impl Encode for Volume {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        self.started.encode(e)?;
        self.minute.encode(e)?;
        self.count.encode(e)?;
        self.hw.encode(e)?;
        self.cusum.encode(e)?;
        self.shift.encode(e)?;
        self.drop.encode(e)
    }
}

impl<C> Decode<C> for Volume {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        let mut v = Volume {
            started: Decode::decode(d)?,
            minute: Decode::decode(d)?,
            count: Decode::decode(d)?,
            hw: Decode::decode(d)?,
            cusum: Decode::decode(d)?,
            shift: Decode::decode(d)?,
            drop: Decode::decode(d)?,
            forecast: 0.0,
            inv_scale: 0.0,
        };
        v.rescale();
        Ok(v)
    }
}

bincode::impl_borrow_decode!(Volume);

/// Scores of one event's minute.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VolumeScores {
    /// Holt-Winters: the running minute against its forecast (bursts now, drops at the close).
    pub holt_winters: f64,
    /// CUSUM: a sustained shift ending at the last closed minute.
    pub cusum: f64,
}

impl Volume {
    /// Counts one event at `time` and scores its minute. Events from before the running minute
    /// (late arrivals) count towards it; time never runs backwards here.
    #[inline]
    pub fn observe(&mut self, time: &EventTime) -> VolumeScores {
        let minute = i64::from(time.minute);
        if !self.started {
            self.started = true;
            self.minute = minute;
            self.rescale();
        }
        if minute > self.minute {
            self.close_until(minute);
        }
        self.count += 1;
        let burst = logistic4((self.count as f32 - self.forecast) * self.inv_scale);
        VolumeScores {
            holt_winters: burst.max(self.drop),
            cusum: self.shift,
        }
    }

    /// Closes the running minute and every empty one up to `minute` (at most a day of them: a
    /// longer gap is a restart of the rhythm, not 10,000 silent minutes).
    fn close_until(&mut self, minute: i64) {
        let gap = (minute - self.minute).min(1440);
        let first = self.minute;
        self.drop = 0.0;
        self.shift = 0.0;
        for m in 0..gap {
            let count = if m == 0 { self.count as f64 } else { 0.0 };
            let hour = hour_of_minute(first + m);
            let z = self.hw.z(hour, count);
            // The deepest drop and the strongest shift over the gap: by the end of a long silence
            // the forecast has adapted, but its start was the news.
            if z < 0.0 {
                self.drop = self.drop.max(z_to_score(-z));
            }
            self.hw.learn(hour, count);
            self.shift = self.shift.max(self.cusum.learn(count));
        }
        self.minute = minute;
        self.count = 0;
        self.rescale();
    }

    /// Works out the running minute's forecast and scale (see [`HoltWinters::z`]).
    fn rescale(&mut self) {
        let hour = hour_of_minute(self.minute);
        let (forecast, scale) = self.hw.forecast_and_scale(hour);
        self.forecast = forecast as f32;
        self.inv_scale = if self.hw.is_ready() {
            (1.0 / scale) as f32
        } else {
            0.0
        };
    }
}

#[inline]
fn hour_of_minute(minute: i64) -> usize {
    (minute.rem_euclid(1440) / 60) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use crate::time::NS_PER_MINUTE;

    /// Feeds `per_minute(m)` events evenly spread over each of `minutes` minutes and returns the
    /// highest Holt-Winters and CUSUM scores seen in each minute.
    fn run(
        v: &mut Volume,
        start: i64,
        minutes: i64,
        per_minute: impl Fn(i64) -> u64,
    ) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        for m in start..start + minutes {
            let n = per_minute(m);
            let mut best = (0.0f64, 0.0f64);
            for i in 0..n {
                let ts = m * NS_PER_MINUTE + (i as i64 * NS_PER_MINUTE) / n as i64;
                let s = v.observe(&EventTime::new(ts));
                best = (best.0.max(s.holt_winters), best.1.max(s.cusum));
            }
            out.push(best);
        }
        out
    }

    #[test]
    fn steady_noisy_volume_stays_quiet_and_a_burst_is_seen_while_it_happens() {
        let mut v = Volume::default();
        let mut rng = SplitMix64::new(11);
        let noise: Vec<u64> = (0..3000)
            .map(|_| (100.0 + 10.0 * rng.gaussian()) as u64)
            .collect();
        let scores = run(&mut v, 0, 3000, |m| noise[m as usize]);
        let loud = scores[60..]
            .iter()
            .filter(|s| s.0 > 0.5 || s.1 > 0.99)
            .count();
        assert!(loud <= 3, "{loud} noisy minutes scored high");
        let burst = run(&mut v, 3000, 1, |_| 600);
        assert!(burst[0].0 > 0.95, "{burst:?}");
    }

    #[test]
    fn silence_after_steady_traffic_is_scored_at_the_next_event() {
        let mut v = Volume::default();
        run(&mut v, 0, 120, |_| 50);
        // Ten silent minutes, then one event.
        let s = v.observe(&EventTime::new(130 * NS_PER_MINUTE));
        assert!(s.holt_winters > 0.9, "{s:?}");
    }

    #[test]
    fn a_restored_volume_scores_as_the_saved_one_would() {
        let mut v = Volume::default();
        run(&mut v, 0, 120, |m| 40 + (m as u64 % 7));
        let cfg = watchpost_proto::bincode_config();
        let bytes = bincode::encode_to_vec(&v, cfg).unwrap();
        let (mut back, _): (Volume, _) = bincode::decode_from_slice(&bytes, cfg).unwrap();
        for i in 0..200 {
            let t = EventTime::new(120 * NS_PER_MINUTE + i * 250_000_000);
            assert_eq!(back.observe(&t), v.observe(&t), "event {i}");
        }
    }

    #[test]
    fn a_sustained_shift_trips_cusum() {
        let mut v = Volume::default();
        let mut rng = SplitMix64::new(12);
        let noise: Vec<u64> = (0..400)
            .map(|_| (100.0 + 10.0 * rng.gaussian()) as u64)
            .collect();
        run(&mut v, 0, 300, |m| noise[m as usize]);
        let shifted = run(&mut v, 300, 30, |m| noise[m as usize] + 15);
        assert!(shifted.iter().any(|s| s.1 >= 1.0), "{shifted:?}");
    }
}
