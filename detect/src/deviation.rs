//! One strong deviation, judged beside the blend: the signals that let an extreme value on a
//! single dimension alert on its own.
//!
//! The blended score weighs four sub-scores, so one of them alone reaches at most its weight
//! (0.30), below the per-type DSPOT thresholds (about 0.45): a login at an hour the account has
//! never used, however extreme, could not alert. Each signal here is instead a calibrated rarity:
//! the surprisal, in bits, of what was just seen under the entity's own history, so that "never
//! in two thousand events" weighs more than "never in fifty", and an entity that is often new
//! (a roaming laptop, an internet-facing host) is not news when it is new again. A signal alerts
//! when its surprisal reaches `ueba.strong_deviation_bits`; a trace of several weak deviations
//! has no such path and still needs the blend.
//!
//! The estimates, each O(1) with fixed-size state:
//! - hour: `(c + 0.5) / (n + 1)`, `c` the entity's events in the hour and the three either side
//!   (a DST change, an early start or a late evening moves activity by a few hours, not into a
//!   new part of the day), `n` all its events.
//! - new source, new host: Good-Turing, the chance that the next item is unseen is the share of
//!   items seen exactly once, `(singletons + 0.5) / (n + 1)`. Three addresses seen hundreds of
//!   times each make a fourth rare news; a laptop that shows a new address every day does not.
//!   A person's source counts by network (IPv4 /24, IPv6 /48: a new DHCP lease is not news, a
//!   new network is); a host's and an address's by exact counterpart (servers keep their
//!   addresses, and a new neighbour in the same subnet is the lateral step to see). On an event
//!   that names an account, an address's or a host's new counterpart is no signal: the account
//!   is who acted, and its own new source or new host says whether the step is new to it. A
//!   desk address that DHCP handed to someone else reaches that person's servers, all new to
//!   the address and none to the person.
//! - rate: Cantelli's one-sided bound, `P(X - mean >= z sd) <= 1 / (1 + z^2)`, over the
//!   running minute's count against the entity's EMA and variance: distribution-free, so bursty
//!   entities are not punished for not being Gaussian. An address's rate on an event that names
//!   an account is that account's burst: the account's signal says it, once.
//! - dormancy: a silence of at least `ueba.dormancy_days` that is also at least twice the
//!   longest gap the entity showed before. Among `n + 1` exchangeable gaps the newest is the
//!   longest with chance `1 / (n + 1)`: that bound is its surprisal.

use bincode::{Decode, Encode};
pub use watchpost_proto::{Deviation as StrongDeviation, DeviationPart, DeviationSignal as Signal};

/// Which items (sources, hosts) an entity has seen once and more than once, for the Good-Turing
/// estimate of how likely the next one is new: two 128-bit Bloom filters with two bits per item,
/// and the count of items in the first but not the second. 40 bytes whatever the entity does
/// (the baseline is prefetched whole for every event, so each byte here costs on the hot path).
/// Past [`MAX_DISTINCT`] items the filters fill up and the estimate would drift; an entity with
/// that many (a roaming laptop, a server many clients reach) is one for whom a new item is no
/// news, so the signal stays off for it.
#[derive(Clone, Debug, Default, Encode, Decode)]
pub struct Novelty {
    seen: [u64; 2],
    again: [u64; 2],
    singletons: u16,
    distinct: u16,
    events: u32,
}

/// Distinct items past which a new one is no news (and the 128-bit filters, at two bits per
/// item, would start to read unseen items as seen: 24 items fill about 30% of the bits).
pub const MAX_DISTINCT: u16 = 24;

/// Where an item's two bits lie in a filter: worked out once per observation and used both to
/// judge it and to learn it.
#[derive(Clone, Copy, Debug)]
pub struct Slots([(usize, u64); 2]);

impl Slots {
    /// The slots of `key` (already a hash or an address: mixed again so that nearby addresses
    /// spread).
    #[inline]
    pub fn of(key: u64) -> Slots {
        let mixed = watchpost_proto::fmix64(key);
        let a = (mixed & 127) as usize;
        let b = ((mixed >> 7) & 127) as usize;
        Slots([(a >> 6, 1 << (a & 63)), (b >> 6, 1 << (b & 63))])
    }
}

#[inline]
fn holds(filter: &[u64; 2], at: Slots) -> bool {
    at.0.iter().all(|&(word, bit)| filter[word] & bit != 0)
}

impl Novelty {
    /// Whether the item at `at` has been seen.
    #[inline]
    pub fn contains(&self, at: Slots) -> bool {
        holds(&self.seen, at)
    }

    /// The chance that the next item is unseen, `(singletons + 0.5) / (n + 1)`, or 1 for an
    /// entity past [`MAX_DISTINCT`] items (for which new ones are routine).
    pub fn new_item_chance(&self) -> f64 {
        if self.is_crowd() {
            return 1.0;
        }
        ((f64::from(self.singletons) + 0.5) / (f64::from(self.events) + 1.0)).min(1.0)
    }

    /// Whether no item was ever learned.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// Distinct items met (saturating; past [`MAX_DISTINCT`] the filters fill up and it
    /// undercounts, see [`Novelty::is_crowd`]).
    #[inline]
    pub fn distinct(&self) -> u16 {
        self.distinct
    }

    /// Whether the entity has met more than [`MAX_DISTINCT`] items: a crowd (a server many
    /// clients reach), for which a new one is routine.
    #[inline]
    pub fn is_crowd(&self) -> bool {
        self.distinct > MAX_DISTINCT
    }

    /// Surprisal of an unseen item next, bits: `log2((n + 1) / (singletons + 0.5))`.
    pub fn new_item_bits(&self) -> f64 {
        ((f64::from(self.events) + 1.0) / (f64::from(self.singletons) + 0.5)).log2()
    }

    /// Whether an unseen item next is at least `odds` to one against (`2^bits`), without a
    /// logarithm.
    #[inline]
    pub fn new_item_reaches(&self, odds: f64) -> bool {
        self.distinct <= MAX_DISTINCT
            && f64::from(self.events) + 1.0 >= (f64::from(self.singletons) + 0.5) * odds
    }

    /// Counts one occurrence of the item at `at`.
    #[inline]
    pub fn learn(&mut self, at: Slots) {
        self.events = self.events.saturating_add(1);
        if !holds(&self.seen, at) {
            for (word, bit) in at.0 {
                self.seen[word] |= bit;
            }
            self.singletons = self.singletons.saturating_add(1);
            self.distinct = self.distinct.saturating_add(1);
        } else if !holds(&self.again, at) {
            for (word, bit) in at.0 {
                self.again[word] |= bit;
            }
            self.singletons = self.singletons.saturating_sub(1);
        }
    }
}

/// A source key folded to the 64 bits the filters take.
#[inline]
pub fn fold_source(source: u128) -> u64 {
    (source as u64) ^ ((source >> 64) as u64).rotate_left(29)
}

/// Surprisal of an event in an hour whose neighbourhood (it and three hours either side) holds
/// `near` of the entity's `total` events, bits.
pub fn hour_bits(near: u64, total: u64) -> f64 {
    ((total as f64 + 1.0) / (near as f64 + 0.5)).log2()
}

/// Cantelli's bound on the running minute's count `z` deviations above the mean, bits.
pub fn rate_bits(z: f64) -> f64 {
    if z <= 0.0 { 0.0 } else { (1.0 + z * z).log2() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fourth_item_after_three_familiar_ones_is_news_a_laptop_address_is_not() {
        let mut office = Novelty::default();
        for i in 0..2000u64 {
            office.learn(Slots::of(i % 3));
        }
        assert!(office.contains(Slots::of(1)) && !office.contains(Slots::of(99)));
        assert!(office.new_item_bits() > 11.0, "{}", office.new_item_bits());
        let mut laptop = Novelty::default();
        for i in 0..2000u64 {
            // A new address about every tenth event, each used once.
            laptop.learn(Slots::of(if i % 10 == 0 { 1000 + i } else { 7 }));
        }
        assert!(
            !laptop.new_item_reaches(2f64.powi(6)),
            "{}",
            laptop.new_item_bits()
        );
    }

    #[test]
    fn the_threshold_test_agrees_with_the_bits() {
        let mut n = Novelty::default();
        for i in 0..700u64 {
            n.learn(Slots::of(i % 2));
        }
        let bits = n.new_item_bits();
        assert!(n.new_item_reaches(2f64.powf(bits - 0.01)));
        assert!(!n.new_item_reaches(2f64.powf(bits + 0.01)));
    }

    #[test]
    fn surprisal_grows_with_evidence_and_extremity() {
        assert!(hour_bits(0, 2000) > hour_bits(0, 50));
        assert!(hour_bits(0, 2000) > 11.0 && hour_bits(40, 2000) < 6.0);
        assert_eq!(rate_bits(-3.0), 0.0);
        assert!((rate_bits(31.984) - 10.0).abs() < 0.01);
    }
}
