//! A first-order Markov chain over a source's template sequence: how surprising is it that this
//! template follows the previous one?
//!
//! Counts live in fixed-size hashed tables (a two-row count-min sketch for transitions, one row for
//! the per-template totals), so the memory per source is fixed, nothing allocates per event, and a
//! source with a million templates degrades gracefully instead of growing without bound. Counts
//! are halved every `AGE_EVERY` transitions so that the chain follows a changing system.

use crate::fastmath::log2;
use bincode::{Decode, Encode};
use watchpost_proto::fmix64;

const ROW: usize = 8192;
const TOTALS: usize = 4096;
const AGE_EVERY: u64 = 1 << 20;
/// Additive smoothing and the notional number of successors it is spread over.
const ALPHA: f64 = 0.5;
const SPREAD: f64 = 64.0;

/// Transition counts of one source.
#[derive(Clone, Debug, Encode, Decode)]
pub struct Markov {
    rows: Vec<u32>,
    totals: Vec<u32>,
    prev: u64,
    has_prev: bool,
    seen: u64,
}

impl Default for Markov {
    fn default() -> Self {
        Markov {
            rows: vec![0; 2 * ROW],
            totals: vec![0; TOTALS],
            prev: 0,
            has_prev: false,
            seen: 0,
        }
    }
}

#[inline]
fn mix(a: u64, b: u64, seed: u64) -> u64 {
    fmix64(a ^ b.rotate_left(29) ^ seed)
}

impl Markov {
    /// Transitions learned (since the last restore).
    pub fn transitions(&self) -> u64 {
        self.seen
    }

    /// How rare `template` is in this source, in [0, 1]: `-log2(share) / 16` of the template's
    /// share of all steps (its count as a predecessor, from the totals table).
    #[inline]
    pub fn rarity(&self, template: u64) -> f64 {
        let t = (mix(template, 0, 0x5555) as usize) % TOTALS;
        let share = (f64::from(self.totals[t]) + 0.5) / (self.seen as f64 + 1.0);
        (-f64::from(log2(share as f32)) / 16.0).clamp(0.0, 1.0)
    }

    /// Scores the step from the previous template to `template` and learns it. The score is in
    /// [0, 1]: `-log2(p) / 16`, so a step seen half the time scores about 0.06 and a step never
    /// seen after a template seen 60,000 times scores 1.
    #[inline]
    pub fn score_and_learn(&mut self, template: u64) -> f64 {
        if !self.has_prev {
            self.prev = template;
            self.has_prev = true;
            return 0.0;
        }
        let prev = self.prev;
        self.prev = template;
        let a = (mix(prev, template, 0x1234) as usize) % ROW;
        let b = ROW + (mix(prev, template, 0x9876) as usize) % ROW;
        let t = (mix(prev, 0, 0x5555) as usize) % TOTALS;
        let pair = f64::from(self.rows[a].min(self.rows[b]));
        let total = f64::from(self.totals[t]);
        let p = (pair + ALPHA) / (total + ALPHA * SPREAD);
        self.rows[a] = self.rows[a].saturating_add(1);
        self.rows[b] = self.rows[b].saturating_add(1);
        self.totals[t] = self.totals[t].saturating_add(1);
        self.seen += 1;
        if self.seen.is_multiple_of(AGE_EVERY) {
            self.rows.iter_mut().for_each(|c| *c /= 2);
            self.totals.iter_mut().for_each(|c| *c /= 2);
        }
        (-f64::from(log2(p as f32)) / 16.0).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usual_cycle_is_unsurprising_and_a_new_step_is() {
        let mut m = Markov::default();
        for i in 0..10_000u64 {
            m.score_and_learn(i % 4);
        }
        let usual = m.score_and_learn(0);
        assert!(usual < 0.05, "usual {usual}");
        // 0 was followed by 1 ten thousand times; 0 followed by 99 never.
        let odd = m.score_and_learn(99);
        assert!(odd > 0.5, "odd {odd}");
    }
}
