//! The Alert record, as stored and as the API returns it, and the feedback on it.
//!
//! The spec names an alert's attributes but not its fields; `docs/alerts.md` documents the names
//! chosen here. Alerts are rare next to events (a few per ten thousand at most), so they are kept
//! as JSON documents: readable with any tool, and free to grow fields without a format version.

use crate::entity::EntityRef;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The five alert types of the spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlertType {
    /// Content ensemble (HST, Holt-Winters, CUSUM, Markov) over a source's DSPOT threshold.
    Ml,
    /// A Sigma rule matched.
    Sigma,
    /// A correlation rule joined several alerts or events.
    Correlation,
    /// An entity left its own baseline.
    Ueba,
    /// An event named a known indicator.
    Ioc,
}

impl AlertType {
    /// Every type, in the spec's order.
    pub const ALL: [AlertType; 5] = [
        AlertType::Ml,
        AlertType::Sigma,
        AlertType::Correlation,
        AlertType::Ueba,
        AlertType::Ioc,
    ];

    /// The lower-case name used in the API.
    pub fn name(self) -> &'static str {
        match self {
            AlertType::Ml => "ml",
            AlertType::Sigma => "sigma",
            AlertType::Correlation => "correlation",
            AlertType::Ueba => "ueba",
            AlertType::Ioc => "ioc",
        }
    }

    /// Parses an API name.
    pub fn parse(text: &str) -> Option<AlertType> {
        AlertType::ALL.into_iter().find(|t| t.name() == text)
    }
}

/// One ATT&CK technique an alert maps to, with its tactic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttackMapping {
    /// Tactic id, `TA0001`.
    pub tactic_id: String,
    /// Tactic name, `Initial Access`.
    pub tactic: String,
    /// Technique id, `T1078` or `T1078.003`.
    pub technique_id: String,
    /// Technique name.
    pub technique: String,
}

/// An alert.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Alert {
    /// UUIDv7: time-ordered by the time of the event that raised it.
    pub id: String,
    /// `ml`, `sigma`, `correlation`, `ueba` or `ioc`.
    #[serde(rename = "type")]
    pub alert_type: AlertType,
    /// 0 to 5, the scale of events.
    pub severity: u8,
    /// One line for people.
    pub title: String,
    /// The threshold or rule that raised it: `ensemble`, `ueba:user`, a Sigma rule id...
    pub detector: String,
    /// The detector for people: a rule's title, or what a built-in detector is ("Risk-based
    /// alerting"); see [`builtin_detector_name`]. Empty on alerts stored before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detector_name: String,
    /// Repeats of one cause share this key; inside the cooldown they bump `count`.
    pub dedup_key: String,
    /// Time of the first event that raised it, ns.
    pub first_seen_ns: i64,
    /// Time of the latest repeat, ns.
    pub last_seen_ns: i64,
    /// Times it fired (1 + repeats inside the cooldown).
    pub count: u64,
    /// Source of the triggering event (`sshd`, `nginx.access`...).
    pub source: String,
    /// The entity the alert is about, when there is one.
    pub entity: Option<EntityRef>,
    /// Score of the triggering event (highest over the repeats).
    #[serde(deserialize_with = "number_or_null_as_zero")]
    pub score: f64,
    /// The DSPOT threshold it crossed (0 for rule alerts; the largest finite number while the
    /// threshold is still calibrating, when it is in truth infinite).
    #[serde(deserialize_with = "number_or_null")]
    pub threshold: f64,
    /// Each detector's or sub-score's weighted part of the score.
    #[serde(deserialize_with = "parts_or_nulls")]
    pub contributions: BTreeMap<String, f64>,
    /// ATT&CK mappings.
    pub attack: Vec<AttackMapping>,
    /// Ids of the events that raised it and its repeats (at most [`MAX_CONTRIBUTING`]).
    pub contributing_events: Vec<String>,
    /// The other entities of the triggering event.
    pub related_entities: Vec<EntityRef>,
    /// Ids of the alerts a correlation joins (a kill-chain progression), or of the signals a
    /// `risk` alert adds up (`GET /signals/{id}`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_alerts: Vec<String>,
    /// Distinct entities a group alert stands for (a rule firing for many entities, an indicator
    /// seen with many): the entity, if any, and `related_entities` list the first of them.
    /// Absent (0) on an alert about one entity. Counted exactly up to 100,000.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub entity_count: u64,
    /// On a `ueba` alert, the one dimension that was extreme on its own (docs/detection.md, "One
    /// strong deviation"); absent when only the blend of sub-scores alerted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<Deviation>,
    /// Where people are with it. The data plane always writes the default; the store overlays the
    /// triage record kept apart from the alert, so a repeat folded in never undoes a triage.
    #[serde(default)]
    pub triage: Triage,
    /// The fleet's sensor whose event raised it (its `cluster.node_name`), set by the detector
    /// that scored the event; empty, and absent from the JSON, on a stand-alone node.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sensor: String,
}

/// What a built-in detector is called in a feed, a detail or an explanation, by its `detector`
/// id; `None` for a rule (its title is its name). A feed of `70822c4b-a19a-...` and
/// `ueba:service_account` tells an analyst nothing.
///
/// ```
/// use watchpost_proto::builtin_detector_name;
/// assert_eq!(builtin_detector_name("risk").as_deref(), Some("Risk-based alerting"));
/// assert_eq!(builtin_detector_name("ioc:blocklist.csv").as_deref(), Some("Threat feed blocklist.csv"));
/// assert_eq!(builtin_detector_name("70822c4b-a19a-474f-a736-679fcf298072"), None);
/// ```
pub fn builtin_detector_name(detector: &str) -> Option<String> {
    Some(match detector {
        "ensemble" => "Content anomaly ensemble".into(),
        "ueba:user" => "Behaviour analytics: users".into(),
        "ueba:host" => "Behaviour analytics: hosts".into(),
        "ueba:ip" => "Behaviour analytics: addresses".into(),
        "ueba:service_account" => "Behaviour analytics: service accounts".into(),
        "risk" => "Risk-based alerting".into(),
        "killchain" => "Kill-chain progression".into(),
        "persistence" => "Persistent password guessing".into(),
        _ => match detector.strip_prefix("ioc:") {
            Some(feed) => format!("Threat feed {feed}"),
            None => return None,
        },
    })
}

/// A single dimension on which an event lay far outside its entity's own history.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Deviation {
    /// Which dimension.
    pub signal: DeviationSignal,
    /// Surprisal of the observation under the entity's history, in bits: 10 means odds of about
    /// one in a thousand.
    #[serde(deserialize_with = "number_or_null")]
    pub bits: f64,
    /// The measure behind it, by signal: `new_hour` the UTC hour; `rate` the minute's events over
    /// the usual per-minute rate; `dormancy` the days of silence; 0 for `new_source`, `new_host`.
    #[serde(deserialize_with = "number_or_null_as_zero")]
    pub value: f64,
    /// A second dimension, on the same event, past `ueba.signal_bits` where neither alone reached
    /// `ueba.strong_deviation_bits`: independent evidence adds, so `bits` above is the sum of
    /// both surprisals, and this part's own share is in its `bits` (docs/detection.md, "Two
    /// deviations at once"). Absent when one dimension alerted alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with: Option<DeviationPart>,
    /// On a `new_hour` deviation short of an alert on its first event, the activity that made
    /// it one by going on at such hours (docs/detection.md, "Time of day alone, sustained").
    /// Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained: Option<Sustained>,
}

/// How long an entity went on at an hour it is rarely active in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sustained {
    /// Its events, the first included.
    pub events: u32,
    /// From its first event to the one that raised the alert, seconds.
    pub seconds: u32,
}

/// The second dimension of a [`Deviation`] that took two to alert: which, its own surprisal and
/// its measure, read as [`Deviation`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviationPart {
    /// Which dimension.
    pub signal: DeviationSignal,
    /// Its own surprisal, bits.
    #[serde(deserialize_with = "number_or_null")]
    pub bits: f64,
    /// Its measure, as [`Deviation::value`].
    #[serde(deserialize_with = "number_or_null_as_zero")]
    pub value: f64,
}

/// What a [`Deviation`] was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeviationSignal {
    /// An hour of the day the entity has (nearly) never been active in, two hours either side
    /// included.
    NewHour,
    /// Far more events in the running minute than the entity's usual rate.
    Rate,
    /// A source address (for an IP entity, a host it reached) the entity has not used.
    NewSource,
    /// A host a user or service account has not been on.
    NewHost,
    /// Active again after a silence far longer than any before.
    Dormancy,
}

impl DeviationSignal {
    /// Name in API output.
    pub fn name(self) -> &'static str {
        match self {
            DeviationSignal::NewHour => "new_hour",
            DeviationSignal::Rate => "rate",
            DeviationSignal::NewSource => "new_source",
            DeviationSignal::NewHost => "new_host",
            DeviationSignal::Dormancy => "dormancy",
        }
    }
}

/// `x` as JSON can hold it: infinities become the largest finite numbers of their sign, NaN 0.
/// JSON has no infinity, and serde_json writes one as `null`, which then does not read back as a
/// number: one such field made a stored record, and every list holding it, unreadable.
pub fn finite(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(f64::MIN, f64::MAX)
    }
}

impl Alert {
    /// The detector as people read it: its name, with the id where the two differ ("Password
    /// Spraying (4b7661cd-...)"); the id alone on an alert stored before names were kept.
    pub fn detector_label(&self) -> String {
        if self.detector_name.is_empty() || self.detector_name == self.detector {
            self.detector.clone()
        } else {
            format!("{} ({})", self.detector_name, self.detector)
        }
    }

    /// Every number of the alert is finite (JSON can carry it as it is).
    pub fn is_finite(&self) -> bool {
        self.score.is_finite()
            && self.threshold.is_finite()
            && self.contributions.values().all(|v| v.is_finite())
            && self
                .deviation
                .is_none_or(|d| d.bits.is_finite() && d.value.is_finite())
    }

    /// The alert with every number made [`finite`].
    pub fn with_finite_numbers(&self) -> Alert {
        let mut a = self.clone();
        a.score = finite(a.score);
        a.threshold = finite(a.threshold);
        for v in a.contributions.values_mut() {
            *v = finite(*v);
        }
        if let Some(d) = a.deviation.as_mut() {
            d.bits = finite(d.bits);
            d.value = finite(d.value);
            if let Some(w) = d.with.as_mut() {
                w.bits = finite(w.bits);
                w.value = finite(w.value);
            }
        }
        a
    }
}

/// A number, or `null` as an earlier version wrote a non-finite one. Thresholds and surprisals
/// are infinite by nature (a threshold still calibrating): read as the largest finite number.
fn number_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::MAX))
}

/// As [`number_or_null`], for scores and measures, where a `null` was a NaN: read as 0.
fn number_or_null_as_zero<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(0.0))
}

/// Contributions, each a number or an earlier version's `null` (read as 0).
fn parts_or_nulls<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, f64>, D::Error> {
    let parts = BTreeMap::<String, Option<f64>>::deserialize(d)?;
    Ok(parts
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or(0.0)))
        .collect())
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// Triage state of an alert.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TriageStatus {
    /// Nobody has looked at it yet (or it was reopened).
    #[default]
    Open,
    /// Someone is on it.
    Acknowledged,
    /// Done with, for a [`CloseReason`].
    Closed,
}

impl TriageStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [TriageStatus; 3] = [
        TriageStatus::Open,
        TriageStatus::Acknowledged,
        TriageStatus::Closed,
    ];

    /// The lower-case name used in the API.
    pub fn name(self) -> &'static str {
        match self {
            TriageStatus::Open => "open",
            TriageStatus::Acknowledged => "acknowledged",
            TriageStatus::Closed => "closed",
        }
    }

    /// Parses an API name.
    pub fn parse(text: &str) -> Option<TriageStatus> {
        TriageStatus::ALL.into_iter().find(|t| t.name() == text)
    }
}

/// Why an alert was closed: the closing reasons SOC tools share, so that reports can count them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// Real malicious activity, handled.
    TruePositive,
    /// Real activity that is allowed (a pentest, an admin's script).
    BenignPositive,
    /// The detector was wrong.
    FalsePositive,
    /// Another alert covers it.
    Duplicate,
    /// Anything else; say why in the note.
    Other,
}

impl CloseReason {
    /// Every reason.
    pub const ALL: [CloseReason; 5] = [
        CloseReason::TruePositive,
        CloseReason::BenignPositive,
        CloseReason::FalsePositive,
        CloseReason::Duplicate,
        CloseReason::Other,
    ];

    /// The snake-case name used in the API.
    pub fn name(self) -> &'static str {
        match self {
            CloseReason::TruePositive => "true_positive",
            CloseReason::BenignPositive => "benign_positive",
            CloseReason::FalsePositive => "false_positive",
            CloseReason::Duplicate => "duplicate",
            CloseReason::Other => "other",
        }
    }

    /// Parses an API name.
    pub fn parse(text: &str) -> Option<CloseReason> {
        CloseReason::ALL.into_iter().find(|t| t.name() == text)
    }
}

/// The triage record of an alert: its current state and how it got there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Triage {
    /// `open`, `acknowledged` or `closed`.
    pub status: TriageStatus,
    /// Why it was closed; only while `closed`.
    pub reason: Option<CloseReason>,
    /// Who has it; `None` when unassigned.
    pub assignee: Option<String>,
    /// When it was last changed, ns; `None` while never triaged.
    pub updated_ns: Option<i64>,
    /// The changes, oldest first (at most [`MAX_TRIAGE_HISTORY`], the oldest dropped).
    #[serde(default)]
    pub history: Vec<TriageChange>,
}

/// Most triage changes kept on one alert.
pub const MAX_TRIAGE_HISTORY: usize = 50;

/// One triage change, as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TriageChange {
    /// When, ns.
    pub at_ns: i64,
    /// Status after the change.
    pub status: TriageStatus,
    /// Close reason after the change.
    pub reason: Option<CloseReason>,
    /// Assignee after the change.
    pub assignee: Option<String>,
    /// What the person said, if anything.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// Most contributing events kept on one alert.
pub const MAX_CONTRIBUTING: usize = 20;

/// What an operator said of an alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// True positive.
    Tp,
    /// False positive.
    Fp,
}

/// A feedback entry, as submitted and as listed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Feedback {
    /// The alert.
    pub alert_id: String,
    /// `tp` or `fp`.
    pub feedback: Verdict,
    /// Free text.
    pub note: String,
    /// Where it came from (`dashboard`, `api`, a SOAR's name...).
    pub origin: String,
    /// Who gave it, when the sender said (free text, as a triage assignee).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyst: Option<String>,
    /// When it was received, ns.
    pub created_ns: i64,
    /// The threshold change it caused, when it moved one.
    pub threshold_change: Option<ThresholdChange>,
}

impl Feedback {
    /// Whether `other` came from the same sender: the same analyst, or with no analyst named
    /// on either, the same origin. Feedback is idempotent per sender and alert.
    pub fn same_sender(&self, other: &Feedback) -> bool {
        match (&self.analyst, &other.analyst) {
            (Some(a), Some(b)) => a == b,
            (None, None) => self.origin == other.origin,
            _ => false,
        }
    }
}

/// One move of a DSPOT threshold by feedback.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThresholdChange {
    /// The threshold moved: `ensemble:<source>` or `ueba:<entity type>`.
    pub detector: String,
    /// Risk before.
    pub old_risk: f64,
    /// Risk after (clamped to 1/100 to 10 times the configured risk).
    pub new_risk: f64,
    /// Threshold before.
    pub old_threshold: f64,
    /// Threshold after.
    pub new_threshold: f64,
}
