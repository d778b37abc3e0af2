//! How stage B names what stage A reported by number.
//!
//! Stage A matches Sigma rules and indicators against compiled sets and hands stage B numbers
//! (a rule's place in the set, an indicator's place in its feed version), because numbers cost
//! nothing to carry. Stage B needs the rule or indicator behind a number to write its alert.
//! These traits are all the engine knows of the live catalogue and the IOC feed that hold them,
//! so detection depends on neither (and `watchpost analyze` can hand it any holder).

use std::sync::Arc;
use watchpost_rules::{IocSet, Plan, RuleEntry};

/// The rules stage A numbers its matches by.
pub trait RuleBook: Send + Sync {
    /// The enabled correlations and the catalogue version that numbered them.
    fn plan(&self) -> (u64, Arc<Plan>);
    /// Detection rule number `index`, as stage A's compiled set numbers it.
    fn detection(&self, index: u32) -> Option<Arc<RuleEntry>>;
    /// How many detection rules are numbered (the numbers are `0..count`).
    fn detection_count(&self) -> u32;
    /// The rule with id `rule_id`.
    fn find(&self, rule_id: &str) -> Option<Arc<RuleEntry>>;
    /// Bumped whenever a rule behind a number may have changed (an upload, a reload): what
    /// the detector caches by number is read again after it moves.
    fn version(&self) -> u64;
}

/// The indicator sets stage A numbers its matches by.
pub trait IndicatorBook: Send + Sync {
    /// The indicator set of feed version `version`, if still held.
    fn indicators(&self, version: u64) -> Option<Arc<IocSet>>;
    /// The newest indicator set and its version.
    fn latest(&self) -> (u64, Arc<IocSet>);
    /// The newest set's version alone (one atomic load, no lock).
    fn latest_version(&self) -> u64;
}
