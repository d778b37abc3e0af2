//! Content named by key between hosts: what the detection batch's encoding carries in place of
//! the numbers stage A gives its matches (`crate::wire`, format 2).
//!
//! Inside one process stage A names a Sigma match by the rule's number in the compiled set, a
//! correlation hit by its number in a plan, an indicator by its number in a feed version:
//! numbers cost nothing, and both stages read the same catalogue and feed. Two hosts number
//! their content each for itself (bundled rules, rule folders, uploads in the order they
//! arrived, feed reloads), so the same number can mean two rules on a sensor and a detector.
//! On the wire every number is therefore replaced by a key of what it names (a hash of the
//! rule's id; of the indicator's kind and value), and the receiver looks the key up in its own
//! content. A key the receiver does not hold (content not arrived yet, a rule folder one host
//! lacks) drops that one match and is counted, instead of naming another rule.
//!
//! Both sides cache their tables per content version, so a key costs an array read on the
//! sensor and a hash lookup on the detector; a table is rebuilt only when the content changes.

use crate::{IndicatorBook, RuleBook};
use std::collections::HashMap;
use std::sync::Arc;
use watchpost_proto::hash64_seeded;
use watchpost_rules::{IocId, IocKind, IocSet};

/// Seeds of the two kinds of key, so that a rule and an indicator never share one.
const RULE_SEED: u64 = 0x7275_6c65_6b65_7931;
const INDICATOR_SEED: u64 = 0x696f_636b_6579_3031;

/// The key of the rule (detection or correlation) with id `rule_id`. Never 0 (0 means "none"
/// on the wire).
pub fn rule_key(rule_id: &str) -> u64 {
    hash64_seeded(rule_id.as_bytes(), RULE_SEED) | 1
}

/// The key of an indicator. Never 0.
pub fn indicator_key(kind: IocKind, value: &str) -> u64 {
    hash64_seeded(value.as_bytes(), INDICATOR_SEED ^ kind as u64) | 1
}

/// Names a sender's numbers by key (see the module's documentation).
pub trait NameContent {
    /// The key of detection rule `number`; 0 when the sender holds no such rule.
    fn rule(&mut self, number: u32) -> u64;
    /// The key of correlation `corr` of plan `version`; 0 when that plan is no longer current.
    fn correlation(&mut self, version: u64, corr: u32) -> u64;
    /// The key of indicator `number` (its place + 1) of feed `version`; 0 when not held.
    fn indicator(&mut self, version: u32, number: u32) -> u64;
}

/// Finds a receiver's numbers for keys.
pub trait NumberContent {
    /// This host's number of the detection rule keyed `key`.
    fn rule(&mut self, key: u64) -> Option<u32>;
    /// This host's current plan version and number of the correlation keyed `key`.
    fn correlation(&mut self, key: u64) -> Option<(u64, u32)>;
    /// This host's current feed version and number (place + 1) of the indicator keyed `key`.
    fn indicator(&mut self, key: u64) -> Option<(u32, u32)>;
}

/// A sensor's [`NameContent`]: keys of its live catalogue and feed.
pub struct ContentKeys {
    rules: Arc<dyn RuleBook>,
    iocs: Arc<dyn IndicatorBook>,
    /// Catalogue version of `by_number`.
    version: u64,
    /// Keys by rule number; 0 where not looked up yet.
    by_number: Vec<u64>,
    /// Plan version of `by_corr`, and keys by correlation number.
    plan: (u64, Vec<u64>),
    /// The feed version last named and its set, so that a match of the same version takes
    /// no lock.
    feed: Option<(u32, Arc<IocSet>)>,
}

impl ContentKeys {
    /// Keys of `rules` and `iocs` as they change.
    pub fn new(rules: Arc<dyn RuleBook>, iocs: Arc<dyn IndicatorBook>) -> ContentKeys {
        ContentKeys {
            rules,
            iocs,
            version: 0,
            by_number: Vec::new(),
            plan: (0, Vec::new()),
            feed: None,
        }
    }
}

impl NameContent for ContentKeys {
    fn rule(&mut self, number: u32) -> u64 {
        let version = self.rules.version();
        if version != self.version {
            self.version = version;
            self.by_number.clear();
        }
        let at = number as usize;
        if let Some(&key) = self.by_number.get(at)
            && key != 0
        {
            return key;
        }
        let Some(entry) = self.rules.detection(number) else {
            return 0;
        };
        if self.by_number.len() <= at {
            self.by_number.resize(at + 1, 0);
        }
        self.by_number[at] = rule_key(&entry.rule.id);
        self.by_number[at]
    }

    fn correlation(&mut self, version: u64, corr: u32) -> u64 {
        if self.plan.0 != version {
            let (current, plan) = self.rules.plan();
            if current != version {
                return 0;
            }
            self.plan = (
                current,
                plan.correlations()
                    .iter()
                    .map(|c| rule_key(&c.rule.id))
                    .collect(),
            );
        }
        self.plan.1.get(corr as usize).copied().unwrap_or(0)
    }

    fn indicator(&mut self, version: u32, number: u32) -> u64 {
        if self.feed.as_ref().is_none_or(|(v, _)| *v != version) {
            self.feed = self
                .iocs
                .indicators(u64::from(version))
                .map(|set| (version, set));
        }
        let Some((_, set)) = &self.feed else {
            return 0;
        };
        number
            .checked_sub(1)
            .and_then(|i| set.get(IocId::from_index(i)))
            .map_or(0, |ind| indicator_key(ind.kind, &ind.value))
    }
}

/// A detector's [`NumberContent`]: numbers of its live catalogue and feed.
pub struct ContentNumbers {
    rules: Arc<dyn RuleBook>,
    iocs: Arc<dyn IndicatorBook>,
    /// Catalogue version of `by_key`, and rule numbers by key.
    catalogue: (u64, HashMap<u64, u32>),
    /// Plan version, and correlation numbers by key.
    plan: (u64, HashMap<u64, u32>),
    /// The catalogue version `plan` was read at: every change of the plan bumps it, so the
    /// plan (behind the catalogue's lock) is read again only when it moved.
    plan_read_at: u64,
    /// Feed version, and indicator numbers (place + 1) by key.
    feed: (u64, HashMap<u64, u32>),
}

impl ContentNumbers {
    /// Numbers of `rules` and `iocs` as they change.
    pub fn new(rules: Arc<dyn RuleBook>, iocs: Arc<dyn IndicatorBook>) -> ContentNumbers {
        ContentNumbers {
            rules,
            iocs,
            catalogue: (0, HashMap::new()),
            plan: (0, HashMap::new()),
            plan_read_at: 0,
            feed: (0, HashMap::new()),
        }
    }

    fn numbered_feed(set: &IocSet) -> HashMap<u64, u32> {
        set.iter()
            .map(|(id, ind)| (indicator_key(ind.kind, &ind.value), id.index() as u32 + 1))
            .collect()
    }
}

impl NumberContent for ContentNumbers {
    fn rule(&mut self, key: u64) -> Option<u32> {
        let version = self.rules.version();
        if version != self.catalogue.0 {
            let mut by_key = HashMap::new();
            for n in 0..self.rules.detection_count() {
                if let Some(e) = self.rules.detection(n) {
                    by_key.insert(rule_key(&e.rule.id), n);
                }
            }
            self.catalogue = (version, by_key);
        }
        self.catalogue.1.get(&key).copied()
    }

    fn correlation(&mut self, key: u64) -> Option<(u64, u32)> {
        let catalogue = self.rules.version();
        if catalogue != self.plan_read_at {
            let (version, plan) = self.rules.plan();
            if version != self.plan.0 {
                let by_key = plan
                    .correlations()
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (rule_key(&c.rule.id), i as u32))
                    .collect();
                self.plan = (version, by_key);
            }
            self.plan_read_at = catalogue;
        }
        let version = self.plan.0;
        self.plan.1.get(&key).map(|&n| (version, n))
    }

    fn indicator(&mut self, key: u64) -> Option<(u32, u32)> {
        if self.iocs.latest_version() != self.feed.0 {
            let (version, set) = self.iocs.latest();
            self.feed = (version, ContentNumbers::numbered_feed(&set));
        }
        let version = u32::try_from(self.feed.0).ok()?;
        self.feed.1.get(&key).map(|&n| (version, n))
    }
}

/// One host's numbers keyed as themselves, and back: for a batch encoded and decoded against
/// the same content (a batch written and read back by one process, the encoding's tests).
/// Never between two hosts, whose numbers differ: that is what [`ContentKeys`] and
/// [`ContentNumbers`] are for.
pub struct SameHost;

impl NameContent for SameHost {
    fn rule(&mut self, number: u32) -> u64 {
        u64::from(number) << 8 | 1
    }
    fn correlation(&mut self, version: u64, corr: u32) -> u64 {
        version << 40 | u64::from(corr) << 8 | 1
    }
    fn indicator(&mut self, version: u32, number: u32) -> u64 {
        u64::from(version) << 40 | u64::from(number) << 8 | 1
    }
}

impl NumberContent for SameHost {
    fn rule(&mut self, key: u64) -> Option<u32> {
        Some((key >> 8) as u32)
    }
    fn correlation(&mut self, key: u64) -> Option<(u64, u32)> {
        Some((key >> 40, (key >> 8) as u32))
    }
    fn indicator(&mut self, key: u64) -> Option<(u32, u32)> {
        Some(((key >> 40) as u32, (key >> 8) as u32))
    }
}

/// Matches a receiver dropped for want of the content their keys name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unresolved {
    /// Sigma matches of rules this host does not hold.
    pub rules: u64,
    /// Correlation hits of correlations this host does not hold.
    pub correlations: u64,
    /// Indicator matches of indicators this host does not hold.
    pub indicators: u64,
}

impl Unresolved {
    /// Every match dropped.
    pub fn total(&self) -> u64 {
        self.rules + self.correlations + self.indicators
    }
}
