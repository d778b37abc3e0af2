//! Risk-based alerting: matches too weak to alert on their own (informational and low Sigma
//! rules by default) are signals that add risk to their entities; an entity whose risk crosses
//! `detection.risk_threshold` raises one `correlation` alert (detector `risk`) naming its
//! signals and tactics. As the best SOCs run Splunk RBA and Elastic building blocks: a scanner's
//! single probe is a signal, a probe then a login then a privilege change on one account is an
//! alert.
//!
//! A signal's risk is its level's base weight (`detection.risk_level_weights`: informational 5,
//! low 15, medium 30, high 50, critical 80) times the rarity of its rule across the fleet, `1 / sqrt(1 + n / 10)` with `n`
//! the rule's signals in the window (a rule that signals for everyone says little about anyone),
//! and decays to a tenth over `detection.risk_window_hours`. An entity's risk is the sum, times
//! `1 + 0.25 (t - 1)` for the `t` distinct ATT&CK tactics its signals showed: breadth across the
//! kill chain is what separates an intrusion from a noisy neighbour. A (rule, entity) pair adds
//! risk once per signal window (an hour), so a flood of one rule is one signal; and over the
//! risk window one rule's signals about one subject add at most [`RULE_REPEAT_CAP`] times one
//! signal's risk to an entity, so a rule that fires every hour about the same entity (every
//! burst of one brute-forcer) is one behaviour, not a climb past the threshold by repetition.
//! Signals about different subjects still add in full, except failed logons: an address's
//! guesses, whatever rule names them and whatever account they try, are one behaviour held to
//! the same cap, so a scanner's visit through a dictionary of forty names is one guess
//! repeated, not forty victims. A patient guesser is what `persistence` counts, and a spray
//! over real accounts is the spraying correlation's.

use crate::table::EntityTable;
use watchpost_proto::{AttackMapping, EntityRef, RiskLevelWeights, U64Map};
use watchpost_rules::Level;

/// Contributions an entity keeps for its risk alert: the highest-weighted ones.
const MAX_CONTRIBUTIONS: usize = 20;

/// The most one rule's signals on one entity hold at a time, in multiples of one signal's risk:
/// a second signal of the rule adds as much as the first, later ones only what the decay freed
/// (read from the contributions kept, so a flood past [`MAX_CONTRIBUTIONS`] may pass it by a
/// few percent).
pub const RULE_REPEAT_CAP: f64 = 2.0;

/// Stands for the rule in the repeat key of guessing signals: all of an entity's failed
/// logons are one behaviour, whichever rule named them.
const GUESSING_BEHAVIOUR: u64 = 0x6775_6573_7369_6e67;

/// Risk settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RiskParams {
    /// Risk that raises the alert; 0 = never.
    pub threshold: f64,
    /// Time over which risk decays to a tenth, ns.
    pub window_ns: i64,
    /// Entities held; the least risky are dropped (and counted) beyond.
    pub max_entities: usize,
    /// Base risk of a signal by level (`detection.risk_level_weights`).
    pub level_weights: RiskLevelWeights,
}

impl RiskParams {
    /// Base risk of a signal by Sigma level.
    pub fn level_weight(&self, level: Option<Level>) -> f64 {
        let w = &self.level_weights;
        match level {
            Some(Level::Informational) => w.informational,
            Some(Level::Low) => w.low,
            // Absent, as for alert severity: medium.
            None | Some(Level::Medium) => w.medium,
            Some(Level::High) => w.high,
            Some(Level::Critical) => w.critical,
        }
    }
}

/// One signal's part in an entity's risk.
#[derive(Clone, Debug)]
struct Contribution {
    /// The rule (or origin) that raised it and the entity it was about, mixed: what its repeats
    /// share.
    repeat: u64,
    signal: String,
    title: String,
    weight: f64,
    event: Option<String>,
    attack: Vec<AttackMapping>,
}

struct EntityRisk {
    entity: EntityRef,
    /// Decayed sum of the contributions' weights, as of `at_ns`.
    score: f64,
    at_ns: i64,
    /// Bit `n` for tactic `TA00nn` (ids run to TA0043).
    tactics: u64,
    contributions: Vec<Contribution>,
}

/// One signal's addition to an entity's risk.
#[derive(Clone, Debug)]
pub struct SignalRisk<'a> {
    /// The signal (its own, or its rule's group signal).
    pub id: &'a str,
    /// The rule's key (its rarity across the fleet).
    pub rule_key: u64,
    /// The entity the signal is about (its hash): the rule's repeats about one subject are one
    /// behaviour (`RULE_REPEAT_CAP`), while an address gathering signals about different
    /// entities gathers each.
    pub subject: u64,
    /// The signal says that the entity taking the risk (the acting address) tried an account
    /// and failed: every such signal on it, whatever rule and subject, is one behaviour,
    /// guessing, held to `RULE_REPEAT_CAP` signals' worth ("Failed logons are one behaviour",
    /// docs/risk.md).
    pub guessing: bool,
    /// The rule's title: contributions sum by it.
    pub rule_title: &'a str,
    /// The rule's level (the base weight).
    pub level: Option<Level>,
    /// The rule's ATT&CK mappings (the entity's tactic breadth).
    pub attack: &'a [AttackMapping],
    /// The event that made it, and its time.
    pub event: String,
    /// See `event`.
    pub ts_ns: i64,
}

/// What crossed the threshold: everything the risk alert says.
#[derive(Clone, Debug)]
pub struct Crossing {
    /// The entity.
    pub entity: EntityRef,
    /// Its risk, tactic breadth included.
    pub risk: f64,
    /// Distinct tactics.
    pub tactics: usize,
    /// Signal matches behind the risk (a group signal may stand for several).
    pub matches: usize,
    /// Risk by rule: each title (with `(×n)` for several signals of it) and the decayed sum of
    /// its signals' weights, heaviest first.
    pub contributions: Vec<(String, f64)>,
    /// Ids of the signals.
    pub signals: Vec<String>,
    /// Their triggering events.
    pub events: Vec<String>,
    /// The union of their ATT&CK mappings.
    pub attack: Vec<AttackMapping>,
}

/// Every entity's risk, and each rule's recent signal count.
pub struct RiskBook {
    params: RiskParams,
    entities: EntityTable<EntityRisk>,
    rules: U64Map<(f64, i64)>,
    evicted: u64,
}

impl RiskBook {
    /// Empty.
    pub fn new(params: RiskParams) -> RiskBook {
        RiskBook {
            entities: EntityTable::with_capacity(params.max_entities.min(1 << 12)),
            rules: U64Map::default(),
            evicted: 0,
            params,
        }
    }

    /// Entities dropped at the bound so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Entities holding risk.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// None.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    fn decay(&self, value: f64, from_ns: i64, to_ns: i64) -> f64 {
        let elapsed = (to_ns - from_ns).max(0) as f64 / self.params.window_ns.max(1) as f64;
        value * 0.1f64.powf(elapsed)
    }

    /// Adds the risk of `signal` to `entity` (keyed `key`); the entity's standing when it is at
    /// or above the threshold.
    pub fn add(
        &mut self,
        key: u64,
        entity: &EntityRef,
        signal: &SignalRisk<'_>,
    ) -> Option<Crossing> {
        let (rule_key, level, ts) = (signal.rule_key, signal.level, signal.ts_ns);
        // The rule's matches in the window, this one included (see `fire`).
        let rate = self
            .rules
            .get(&rule_key)
            .map_or(1.0, |&(rate, at)| self.decay(rate, at, ts));
        let weight = self.params.level_weight(level) / (1.0 + (rate - 1.0).max(0.0) / 10.0).sqrt();
        if self.entities.get(key).is_none() && self.entities.len() >= self.params.max_entities {
            self.evict(ts);
        }
        let at = match self.entities.position(key) {
            Some(at) => at,
            None => self.entities.insert(
                key,
                EntityRisk {
                    entity: entity.clone(),
                    score: 0.0,
                    at_ns: ts,
                    tactics: 0,
                    contributions: Vec::new(),
                },
            ),
        };
        let window = self.params.window_ns.max(1) as f64;
        let decay = |value: f64, from: i64| value * 0.1f64.powf((ts - from).max(0) as f64 / window);
        let e = self.entities.at_mut(at)?;
        for c in &mut e.contributions {
            c.weight = decay(c.weight, e.at_ns);
        }
        // What the rule already holds on the entity about the same subject, decayed: a repeat
        // adds only up to the cap.
        let repeat = if signal.guessing {
            watchpost_proto::fmix64(GUESSING_BEHAVIOUR ^ key)
        } else {
            watchpost_proto::fmix64(rule_key ^ signal.subject.rotate_left(17))
        };
        let held: f64 = e
            .contributions
            .iter()
            .filter(|c| c.repeat == repeat)
            .map(|c| c.weight)
            .sum();
        let weight = weight.min((RULE_REPEAT_CAP * weight - held).max(0.0));
        e.score = decay(e.score, e.at_ns) + weight;
        e.at_ns = e.at_ns.max(ts);
        for m in signal.attack {
            if let Some(n) = m
                .tactic_id
                .strip_prefix("TA")
                .and_then(|n| n.parse::<u32>().ok())
            {
                e.tactics |= 1u64 << (n % 64);
            }
        }
        e.contributions.push(Contribution {
            repeat,
            signal: signal.id.to_string(),
            title: signal.rule_title.to_string(),
            weight,
            event: Some(signal.event.clone()),
            attack: signal.attack.to_vec(),
        });
        e.contributions
            .sort_by(|a, b| b.weight.total_cmp(&a.weight));
        e.contributions.truncate(MAX_CONTRIBUTIONS);
        let tactics = e.tactics.count_ones() as usize;
        let risk = e.score * (1.0 + 0.25 * tactics.saturating_sub(1) as f64);
        if self.params.threshold <= 0.0 || risk < self.params.threshold {
            return None;
        }
        let mut attack: Vec<AttackMapping> = Vec::new();
        for m in e.contributions.iter().flat_map(|c| &c.attack) {
            if !attack.contains(m) {
                attack.push(m.clone());
            }
        }
        Some(Crossing {
            entity: e.entity.clone(),
            risk,
            tactics,
            matches: e.contributions.len(),
            contributions: by_title(&e.contributions),
            // A group signal stands for several contributions: listed once.
            signals: e.contributions.iter().fold(Vec::new(), |mut ids, c| {
                if !ids.contains(&c.signal) {
                    ids.push(c.signal.clone());
                }
                ids
            }),
            events: e
                .contributions
                .iter()
                .filter_map(|c| c.event.clone())
                .collect(),
            attack,
        })
    }

    /// Counts a match of rule `rule_key` at `ts_ns` (every match, repeats folded into an open
    /// signal included): the rule's rate across the fleet, which its signals' weight falls with.
    pub fn fire(&mut self, rule_key: u64, ts_ns: i64) {
        let (rate, at) = self.rules.get(&rule_key).copied().unwrap_or((0.0, ts_ns));
        let rate = self.decay(rate, at, ts_ns) + 1.0;
        self.rules.insert(rule_key, (rate, ts_ns.max(at)));
    }

    /// Drops the hundredth of the entities with the least risk left at `now_ns` (at least one).
    fn evict(&mut self, now_ns: i64) {
        let n = (self.entities.len() / 100).max(1);
        let mut left: Vec<(f64, u64)> = self
            .entities
            .iter()
            .map(|(k, e)| (self.decay(e.score, e.at_ns, now_ns), k))
            .collect();
        left.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, k) in left.into_iter().take(n) {
            if self.entities.remove(k).is_some() {
                self.evicted += 1;
            }
        }
        // Rules whose count has decayed to nothing go too.
        let window = self.params.window_ns;
        self.rules.retain(|_, (_, at)| now_ns - *at < 4 * window);
    }
}

/// The contributions summed by rule title, heaviest first: five signals of one rule on five
/// accounts read as one line with their sum, not five lines of the same name.
fn by_title(contributions: &[Contribution]) -> Vec<(String, f64)> {
    let mut sums: Vec<(String, f64, usize)> = Vec::new();
    for c in contributions {
        match sums.iter_mut().find(|(t, _, _)| *t == c.title) {
            Some(s) => {
                s.1 += c.weight;
                s.2 += 1;
            }
            None => sums.push((c.title.clone(), c.weight, 1)),
        }
    }
    sums.sort_by(|a, b| b.1.total_cmp(&a.1));
    sums.into_iter()
        .map(|(t, w, n)| (if n > 1 { format!("{t} (×{n})") } else { t }, w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use watchpost_proto::{Alert, AlertType, EntityKind, Uuid};

    const HOUR: i64 = 3_600_000_000_000;

    fn params() -> RiskParams {
        RiskParams {
            threshold: 60.0,
            window_ns: 24 * HOUR,
            max_entities: 100,
            level_weights: RiskLevelWeights::default(),
        }
    }

    fn signal(id: &str, ts: i64, tactic: &str) -> Alert {
        serde_json::from_value(serde_json::json!({
            "id": id, "type": AlertType::Sigma, "severity": 2, "title": format!("rule {id}"),
            "detector": id, "dedup_key": id, "first_seen_ns": ts, "last_seen_ns": ts, "count": 1,
            "source": "sshd", "entity": null, "score": 1.0, "threshold": 0.0, "contributions": {},
            "attack": [{"tactic_id": tactic, "tactic": "t", "technique_id": "T1", "technique": "x"}],
            "contributing_events": [format!("event-{id}")], "related_entities": []
        }))
        .unwrap()
    }

    fn risk_of(rule_key: u64, level: Option<Level>, s: &Alert) -> SignalRisk<'_> {
        SignalRisk {
            id: &s.id,
            rule_key,
            subject: 7,
            guessing: false,
            rule_title: &s.title,
            level,
            attack: &s.attack,
            event: s.contributing_events[0].clone(),
            ts_ns: s.first_seen_ns,
        }
    }

    fn alice() -> EntityRef {
        EntityRef {
            uuid: Uuid::nil(),
            kind: EntityKind::User,
            value: "alice".into(),
            role: "subject".into(),
        }
    }

    #[test]
    fn an_operator_can_weigh_a_level_more() {
        let weighed = |low: f64| {
            let mut book = RiskBook::new(RiskParams {
                level_weights: RiskLevelWeights {
                    low,
                    ..RiskLevelWeights::default()
                },
                ..params()
            });
            (1u64..=2)
                .map(|rule| {
                    let s = signal(&format!("s{rule}"), 0, "TA0006");
                    book.add(7, &alice(), &risk_of(rule, Some(Level::Low), &s))
                })
                .collect::<Vec<_>>()
        };
        // Two low signals: 30 by default, 60 (the threshold) when low weighs 30.
        assert!(weighed(15.0).iter().all(Option::is_none));
        let crossed = weighed(30.0);
        assert!(crossed[0].is_none());
        let c = crossed[1].as_ref().expect("two low signals at 30 cross 60");
        assert!((c.risk - 60.0).abs() < 1e-6, "{}", c.risk);
    }

    #[test]
    fn low_signals_across_tactics_cross_where_one_tactic_does_not() {
        let mut book = RiskBook::new(params());
        // Three low signals of one tactic: 45, below 60.
        for (i, rule) in [1u64, 2, 3].iter().enumerate() {
            let s = signal(&format!("s{i}"), i as i64 * HOUR / 10, "TA0006");
            assert!(
                book.add(7, &alice(), &risk_of(*rule, Some(Level::Low), &s))
                    .is_none()
            );
        }
        // A fourth low signal of another tactic: (45 + 15, decayed a little) x 1.25 > 60.
        let s = signal("s3", HOUR / 2, "TA0004");
        let c = book
            .add(7, &alice(), &risk_of(4, Some(Level::Low), &s))
            .expect("breadth crosses the threshold");
        assert_eq!((c.tactics, c.signals.len()), (2, 4));
        assert!(c.risk > 60.0 && c.risk < 80.0, "{}", c.risk);
        assert_eq!(c.attack.len(), 2);
        assert_eq!(c.events.len(), 4);
    }

    #[test]
    fn a_rule_that_signals_for_everyone_weighs_less_and_risk_decays() {
        let mut book = RiskBook::new(params());
        // A rule matching 91 times across the fleet; its next signal weighs 30 / sqrt(1 + 9).
        for _ in 0..91 {
            book.fire(9, 0);
        }
        let mut fresh = RiskBook::new(params());
        fresh.fire(8, 0);
        fresh.add(
            1,
            &alice(),
            &risk_of(8, Some(Level::Medium), &signal("r", 0, "TA0043")),
        );
        let rare = fresh.entities.get(1).unwrap().score;
        book.add(
            1,
            &alice(),
            &risk_of(9, Some(Level::Medium), &signal("c", 0, "TA0043")),
        );
        let common = book.entities.get(1).unwrap().score;
        assert!(
            (rare - 30.0).abs() < 1e-9 && common < 10.0,
            "{rare} {common}"
        );
        // A day later a tenth is left.
        book.add(
            1,
            &alice(),
            &risk_of(
                10,
                Some(Level::Informational),
                &signal("d", 24 * HOUR, "TA0043"),
            ),
        );
        let later = book.entities.get(1).unwrap().score;
        assert!((later - (common / 10.0 + 5.0)).abs() < 0.5, "{later}");
    }

    #[test]
    fn one_rule_repeated_every_hour_never_crosses_alone() {
        let mut book = RiskBook::new(params());
        // A low rule on one address every hour of a day: about two signals' worth at most, 30
        // (the cap reads the contributions kept, the top twenty: a tiny excess past them).
        for h in 0..24 {
            let s = signal(&format!("r{h}"), h * HOUR, "TA0008");
            assert!(
                book.add(7, &alice(), &risk_of(1, Some(Level::Low), &s))
                    .is_none(),
                "hour {h}"
            );
        }
        let held = book.entities.get(7).unwrap().score;
        assert!(held <= 33.0 && held > 15.0, "{held}");
        // Another rule still adds in full: a medium signal of another tactic crosses.
        let s = signal("m1", 24 * HOUR, "TA0006");
        let c = book
            .add(7, &alice(), &risk_of(2, Some(Level::Medium), &s))
            .expect("breadth crosses");
        assert!(c.risk > 60.0, "{}", c.risk);
    }

    #[test]
    fn an_address_guessing_forty_names_through_two_rules_holds_two_guesses_worth() {
        let mut book = RiskBook::new(params());
        // A scanner's visit: forty names, each line matched by two guessing rules.
        for name in 0..40u64 {
            for rule in [1u64, 2] {
                let s = signal(
                    &format!("g{name}-{rule}"),
                    name as i64 * 1_000_000_000,
                    "TA0006",
                );
                let guess = SignalRisk {
                    subject: 100 + name,
                    guessing: true,
                    ..risk_of(rule, Some(Level::Low), &s)
                };
                assert!(book.add(7, &alice(), &guess).is_none(), "{name}");
            }
        }
        let held = book.entities.get(7).unwrap().score;
        assert!(held <= 31.0 && held > 15.0, "{held}");
        // The same signals about forty other entities, not guesses, add each.
        let mut other = RiskBook::new(params());
        let crossed = (0..40u64).any(|name| {
            let s = signal(&format!("n{name}"), name as i64 * 1_000_000_000, "TA0006");
            let not_a_guess = SignalRisk {
                subject: 100 + name,
                ..risk_of(1, Some(Level::Low), &s)
            };
            other.add(7, &alice(), &not_a_guess).is_some()
        });
        assert!(crossed);
    }

    #[test]
    fn the_entity_table_is_bounded_and_counts_what_it_drops() {
        let mut book = RiskBook::new(RiskParams {
            max_entities: 10,
            level_weights: RiskLevelWeights::default(),
            ..params()
        });
        for e in 1..=25u64 {
            book.add(
                e,
                &alice(),
                &risk_of(e, Some(Level::Low), &signal("x", e as i64, "TA0001")),
            );
        }
        assert!(book.len() <= 10);
        assert_eq!(book.evicted() as usize + book.len(), 25);
    }
}
