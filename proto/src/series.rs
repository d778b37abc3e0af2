//! The points detection produces and the store keeps as time series: a source's anomaly minute,
//! an entity's risk hour, a rule's fires in an hour. Defined here so that detection and the
//! store agree on them without depending on each other.

use bincode::{Decode, Encode};

/// One closed minute of a source's anomaly scores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Encode, Decode)]
pub struct MinutePoint {
    /// Source hash.
    pub source: u64,
    /// Start of the minute, ns.
    pub minute_ns: i64,
    /// Events scored.
    pub events: u32,
    /// Sum of their scores.
    pub sum: f32,
    /// Highest score.
    pub max: f32,
    /// `ml` alarms (new alerts and repeats).
    pub alarms: u32,
}

/// One hour of an entity's risk history: the highest blended score it has had in that hour so
/// far (a later point of the same hour replaces it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RiskPoint {
    /// The entity's key.
    pub entity: u64,
    /// Start of the hour, ns.
    pub hour_ns: i64,
    /// Highest score in the hour.
    pub max: f32,
}

/// Fires of one rule in one hour, counted by one stage B worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleFires {
    /// `hash64(rule id)`.
    pub rule: u64,
    /// Start of the hour, ns.
    pub hour_ns: i64,
    /// Fires to add.
    pub count: u32,
}
