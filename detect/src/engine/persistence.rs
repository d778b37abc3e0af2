//! Persistent password guessing: an address whose failed logons fall in many ten-minute periods
//! of one day raises one alert, however slowly it goes.
//!
//! An internet-facing login service meets scanners all day: each tries a few accounts once and
//! leaves, and no single one is worth an analyst's time (docs/risk.md: their matches are signals
//! whose weight falls as the rule fires for everyone). A patient attacker stays under every
//! burst threshold (one guess every ten minutes never makes ten in five) and hides in that
//! background. What separates him is persistence: he comes back period after period. A trail
//! per acting address marks the ten-minute periods of the last 24 hours in which it failed a
//! logon; at `detection.persistence_min_periods` of them (12 by default: two hours of one guess
//! every ten minutes, or twelve separate visits) the address raises a `correlation` alert
//! (detector `persistence`) that stays open while it keeps coming (a day after its last
//! failure), so a brute-forcer that returns for weeks is one alert, not one a day.
//!
//! A failed logon is a match of a rule mapped to ATT&CK T1110 (Brute Force, any
//! sub-technique) whose event names an account and an acting address: the rules that say a
//! credential was tried, whatever their level, including a correlation's building blocks. A TCP
//! health check that connects and leaves (`Connection closed by <addr> [preauth]`) names no
//! account and is not one.

use super::Detector;
use super::book::{actor_address, entity_ref, relate, round6};
use super::sink::AlertSink;
use crate::record::DetectRecord;
use std::collections::BTreeMap;
use watchpost_proto::{
    Alert, AlertType, EntityKind, U64Map, Uuid, builtin_detector_name, event_id, fmix64,
};
use watchpost_rules::RuleEntry;

/// The detector name of persistence alerts.
pub(super) const PERSISTENCE_DETECTOR: &str = "persistence";

/// Salt of the keys of persistence alerts (by acting address).
const PERSISTENCE_SALT: u64 = 0x7065_7273_6973_000b;

/// One period of a trail: ten minutes.
pub(super) const PERIOD_NS: i64 = 600_000_000_000;

/// Periods a trail remembers: one day.
pub(super) const PERIODS: i64 = 144;

/// The ten-minute periods of the last day in which one address failed a logon.
#[derive(Clone, Debug, Default)]
pub(super) struct Trail {
    /// The latest period marked (time / [`PERIOD_NS`]).
    last: i64,
    /// Bit `p % PERIODS` for each period `p` of the day up to `last` that holds a failure.
    bits: [u64; 3],
}

impl Trail {
    fn new(period: i64) -> Trail {
        Trail {
            last: period,
            bits: [0; 3],
        }
    }

    fn set(&mut self, period: i64, on: bool) {
        let at = period.rem_euclid(PERIODS) as usize;
        let (word, bit) = (at / 64, 1u64 << (at % 64));
        if on {
            self.bits[word] |= bit;
        } else {
            self.bits[word] &= !bit;
        }
    }

    /// Marks `period`; the periods of the last day that hold a failure. A period more than a day
    /// before the latest is too old to count (events arrive nearly in order; a late one older
    /// than the day is left out).
    pub(super) fn mark(&mut self, period: i64) -> u32 {
        if period > self.last {
            if period - self.last >= PERIODS {
                self.bits = [0; 3];
            } else {
                for p in self.last + 1..period {
                    self.set(p, false);
                }
            }
            self.last = period;
            self.set(period, true);
        } else if self.last - period < PERIODS {
            self.set(period, true);
        }
        self.periods()
    }

    /// Periods marked within the day up to the latest.
    pub(super) fn periods(&self) -> u32 {
        self.bits.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether the trail still holds a period of the day ending at `period`.
    fn live_at(&self, period: i64) -> bool {
        period - self.last < PERIODS
    }
}

/// Every acting address's trail, bounded.
pub(super) struct Trails {
    by_actor: U64Map<Trail>,
    max: usize,
    /// Trails dropped at the bound (the least persistent first).
    dropped: u64,
    /// Reused by [`Trails::make_room`]: (periods, latest period, address) of every trail.
    scratch: Vec<(u32, i64, u64)>,
    /// The event last counted (block, position): an event several failed-logon rules match
    /// (the generic rule and a building block) is one guess.
    last_event: Option<([u8; 16], u16)>,
}

impl Trails {
    pub(super) fn new(max: usize) -> Trails {
        Trails {
            by_actor: U64Map::default(),
            max: max.max(1),
            dropped: 0,
            scratch: Vec::new(),
            last_event: None,
        }
    }

    /// Marks a failure of `actor` in `period`; its periods of the last day.
    fn mark(&mut self, actor: u64, period: i64) -> u32 {
        if let Some(t) = self.by_actor.get_mut(&actor) {
            return t.mark(period);
        }
        if self.by_actor.len() >= self.max {
            self.make_room(period);
        }
        let mut t = Trail::new(period);
        let n = t.mark(period);
        self.by_actor.insert(actor, t);
        n
    }

    /// At the bound: trails whose day is over go (they hold nothing), then, if that freed
    /// nothing, the hundredth with the fewest periods (the scanners that came once), counted.
    /// A new address is never refused: a flood of addresses (a botnet, rotating IPv6) must not
    /// keep a patient one from being followed, and the one that persists has the most periods
    /// and goes last. The scan runs once per hundredth of the table, not per address.
    fn make_room(&mut self, period: i64) {
        self.by_actor.retain(|_, t| t.live_at(period));
        if self.by_actor.len() < self.max {
            return;
        }
        let n = (self.by_actor.len() / 100).max(1);
        // A selection, not a sort, into a buffer kept between calls: under a flood of new
        // addresses this runs once per hundredth of the table, and costs a pass over it.
        let least = &mut self.scratch;
        least.clear();
        least.extend(
            self.by_actor
                .iter()
                .map(|(&actor, t)| (t.periods(), t.last, actor)),
        );
        if n < least.len() {
            least.select_nth_unstable(n);
        }
        for &(_, _, actor) in least.iter().take(n) {
            self.by_actor.remove(&actor);
        }
        self.dropped += n as u64;
    }

    /// Starts the trail of the address whose persistence alert is `alert_key` afresh (an
    /// analyst closed the alert: it takes another `persistence_min_periods` of guessing to
    /// raise the next one, not the next guess).
    pub(super) fn restart_alerted(&mut self, alert_key: u64) {
        for (&actor, t) in self.by_actor.iter_mut() {
            if fmix64(actor ^ PERSISTENCE_SALT) == alert_key {
                *t = Trail::new(t.last);
            }
        }
    }

    pub(super) fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// The title of a persistence alert whose address failed logons in `periods` periods of a day.
fn persistence_title(periods: u32) -> String {
    format!(
        "Persistent password guessing from an address: failed logons in {periods} ten-minute \
         periods of a day"
    )
}

/// Whether a match of `entry` is a failed logon: a rule mapped to T1110 (Brute Force) and to
/// nothing else. A rule also mapped elsewhere says something else as well: `sshd_disconnect_preauth`
/// (T1595 too) is any client leaving before it logged in, a monitoring probe or a job whose key
/// was revoked as much as a guesser.
pub(super) fn is_guessing(entry: &RuleEntry) -> bool {
    !entry.attack.is_empty()
        && entry
            .attack
            .iter()
            .all(|m| m.technique_id.starts_with("T1110"))
}

impl Detector {
    /// Counts a failed logon (a match of a T1110 rule, see [`is_guessing`]) on the trail of the
    /// address acting in it; raises or updates that address's `persistence` alert once the
    /// trail holds `detection.persistence_min_periods` periods.
    pub(super) fn note_guess(
        &mut self,
        r: &DetectRecord,
        entry: &RuleEntry,
        sink: &mut impl AlertSink,
    ) {
        let min = self.params.persistence_min_periods;
        if min == 0 || self.persistence.last_event == Some((r.block, r.pos)) {
            return;
        }
        self.persistence.last_event = Some((r.block, r.pos));
        // An account tried, from an address: a connection that named no account is no guess.
        // (The account need not be the event's primary entity: `root` tried by a scanner is
        // not scored as a person, and the reporting host comes first then.)
        let Some(account) = r
            .entities()
            .iter()
            .position(|e| EntityKind::from_u8(e.kind) == Some(EntityKind::User))
        else {
            return;
        };
        let Some(actor) = actor_address(r, Some(account)) else {
            return;
        };
        let address = r.entities[actor];
        let periods = self
            .persistence
            .mark(address.hash, r.ts_ns.div_euclid(PERIOD_NS));
        // An exception on the detector (an operator's own scanner, a NAT gateway that many
        // mistyped passwords come through) holds back the alert and its updates.
        if self.excepted(PERSISTENCE_DETECTOR, Some(r), r.ts_ns) {
            return;
        }
        let key = fmix64(address.hash ^ PERSISTENCE_SALT);
        let horizon = PERIOD_NS * PERIODS;
        if let Some(o) = self.open.get_mut(&key)
            && r.ts_ns < o.until_ns
        {
            // Open while the address keeps coming: a day after its latest failure.
            o.until_ns = o.until_ns.max(r.ts_ns.saturating_add(horizon));
            if f64::from(periods) > o.alert.score {
                // The most periods of one day so far: in the score and the title (built only
                // when it grows, at most once per period).
                o.alert.score = f64::from(periods);
                o.alert.title = persistence_title(periods);
                o.alert
                    .contributions
                    .insert("periods".into(), o.alert.score);
            }
            let tried = r.entities[account];
            relate(&mut o.alert, Uuid::from_bytes(tried.uuid), || {
                entity_ref(&tried)
            });
            for m in &entry.attack {
                if !o.alert.attack.contains(m) {
                    o.alert.attack.push(m.clone());
                }
            }
            o.fold(r);
            return;
        }
        if periods < min {
            return;
        }
        let alert = Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: AlertType::Correlation,
            severity: 3,
            title: persistence_title(periods),
            detector: PERSISTENCE_DETECTOR.to_string(),
            detector_name: builtin_detector_name(PERSISTENCE_DETECTOR).unwrap_or_default(),
            dedup_key: format!("persistence:{}", Uuid::from_bytes(address.uuid)),
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source: r.source_name().to_string(),
            entity: Some(entity_ref(&address)),
            score: f64::from(periods),
            threshold: f64::from(min),
            contributions: BTreeMap::from([("periods".to_string(), round6(f64::from(periods)))]),
            attack: entry.attack.clone(),
            contributing_events: vec![event_id(&r.block, r.pos)],
            related_entities: vec![entity_ref(&r.entities[account])],
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
            sensor: String::new(),
        };
        self.open_alert(key, alert, r.ts_ns.saturating_add(horizon), sink);
    }

    /// Trails of addresses dropped at the bound.
    pub fn persistence_dropped(&self) -> u64 {
        self.persistence.dropped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trail_counts_the_periods_of_the_last_day_only() {
        let mut t = Trail::new(1000);
        assert_eq!(t.mark(1000), 1);
        assert_eq!(t.mark(1000), 1, "one period counts once");
        for p in 1001..1012 {
            t.mark(p);
        }
        assert_eq!(t.periods(), 12);
        // A day later the first periods have left the window.
        assert_eq!(t.mark(1000 + PERIODS), 12);
        assert_eq!(t.mark(1005 + PERIODS), 8);
        // Two days of silence forget everything.
        assert_eq!(t.mark(1000 + 4 * PERIODS), 1);
    }

    #[test]
    fn a_late_period_within_the_day_counts_and_one_older_does_not() {
        let mut t = Trail::new(500);
        t.mark(500);
        assert_eq!(t.mark(490), 2);
        assert_eq!(t.mark(500 - PERIODS), 2);
    }

    #[test]
    fn a_full_table_drops_the_least_persistent_and_never_refuses_an_address() {
        let mut trails = Trails::new(2);
        assert_eq!(trails.mark(1, 0), 1);
        assert_eq!(trails.mark(1, 1), 2);
        assert_eq!(trails.mark(2, 1), 1);
        // Full: the new address is followed, the one with a single period made way.
        assert_eq!(trails.mark(3, 2), 1);
        assert_eq!(trails.dropped(), 1);
        assert_eq!(trails.mark(1, 3), 3, "the persistent one kept its periods");
        assert_eq!(trails.mark(2, 3), 1, "the dropped one starts again");
        // A day on, finished trails make way without counting as dropped.
        let dropped = trails.dropped();
        trails.mark(4, 10 * PERIODS);
        assert_eq!(trails.dropped(), dropped);
    }

    #[test]
    fn a_closed_alert_restarts_its_address_trail() {
        let mut trails = Trails::new(10);
        for p in 0..12 {
            trails.mark(7, p);
        }
        trails.mark(8, 3);
        trails.restart_alerted(fmix64(7 ^ PERSISTENCE_SALT));
        assert_eq!(trails.mark(7, 12), 1);
        assert_eq!(trails.mark(8, 12), 2, "another address keeps its trail");
    }
}
