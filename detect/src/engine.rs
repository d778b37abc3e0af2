//! The detection state of one stage B worker, driven by [`DetectRecord`]s: the content ensemble
//! of every source it owns, the UEBA baselines of every entity it owns, the alerts still inside
//! their cooldown, and the per-minute anomaly series.
//!
//! It has no threads, clocks or I/O of its own: the live stage and `watchpost analyze` drive the
//! same [`Detector`] with the same records, so a replay gives the alerts live ingestion gives.
//! Alerts leave through an [`AlertSink`]; creating one allocates (a few per ten thousand events
//! at most), scoring an event does not.

use crate::dspot::{Dspot, Verdict as DspotVerdict};
use crate::ensemble::{EventFeatures, Scored, SourceModel};
use crate::exceptions::ExceptionSet;
use crate::killchain::KillChain;
use crate::names::{IndicatorBook, RuleBook};
use crate::record::{CorrelationHit, DetectBatch, DetectRecord};
use crate::risk::{Crossing, RiskBook, RiskParams, SignalRisk};
use crate::time::{EventTime, NS_PER_HOUR, NS_PER_MINUTE};
use crate::ueba::{
    Observation, Outcome, SubScores, Ueba, UebaAlert, UebaParams, UebaType, source_text,
};
use bincode::{Decode, Encode};
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use watchpost_proto::{
    Alert, AlertType, AttackMapping, Deviation, DeviationSignal as Signal, EntityKind, EntityRef,
    MAX_CONTRIBUTING, MinutePoint, RiskPoint, RuleFires, ThresholdChange, U64Map, U64Set, Uuid,
    Verdict, builtin_detector_name, event_id, fmix64,
};
use watchpost_rules::{CorrelationKind, Correlator, Fired, Hit, IocId, IocKind, Level, RuleEntry};

/// How many events ahead [`Detector::process_all`] prefetches baselines: one per prefetch stage
/// (slot, baseline, lists), each event's work giving the previous stage's loads time to land.
pub const LOOKAHEAD: usize = 3;

/// Salt of `ml` dedup keys (so a source hash and an entity hash never share a key).
const ML_SALT: u64 = 0x6d6c_0000_0000_0001;
/// Salt of the dedup keys of new-source UEBA alerts (keyed by the address).
const NEW_SOURCE_SALT: u64 = 0x6e65_7773_7263_0003;
/// Most related entities kept on one alert.
const MAX_RELATED: usize = 100;
/// Salt of `ioc` dedup keys.
const IOC_SALT: u64 = 0x696f_6300_0000_0006;
/// Salt of `correlation` dedup keys.
const CORRELATION_SALT: u64 = 0x636f_7272_0000_0005;
/// Salt of `sigma` dedup keys.
const SIGMA_SALT: u64 = 0x7369_676d_6100_0004;
/// Salt of the alias that finds a rule's open alert by the address acting in it.
const ACTOR_SALT: u64 = 0x6163_746f_7200_0008;
/// Salt of the keys of a rule's group alerts.
const GROUP_SALT: u64 = 0x6772_6f75_7000_0007;
/// Distinct entities a group alert counts exactly; past it the count stops (the alert says so by
/// its `entity_count` being this value).
const MAX_GROUP_ENTITIES: usize = 100_000;
/// Salt of `ueba` dedup keys.
const UEBA_SALT: u64 = 0x7565_6261_0000_0002;
/// Salt of the rarity keys of UEBA signals (per entity type and kind of deviation).
const UEBA_SIGNAL_SALT: u64 = 0x7565_7369_676e_000b;
/// Keys of open signals (per rule and entity).
const SIGNAL_SALT: u64 = 0x7369_676e_616c_0009;
/// Keys of entities' risk and of their `risk` alerts.
const RISK_SALT: u64 = 0x7269_736b_0000_000a;
/// How long a signal stays open for repeats of its rule and entity: a flood of one rule on one
/// entity is one signal an hour, one addition to its risk.
pub const SIGNAL_WINDOW_NS: i64 = 3_600_000_000_000;
/// The detector name of risk alerts.
pub const RISK_DETECTOR: &str = "risk";
/// Feedback moves a risk by this factor: down on a false positive (a higher threshold), up on a
/// true positive. Eight false positives in a row reach the 1/100 floor only after ~21 steps, so
/// one operator's click cannot silence a detector.
pub const FEEDBACK_STEP: f64 = 1.25;

/// What the detector needs from the configuration.
#[derive(Clone, Debug)]
pub struct DetectorParams {
    /// Raise `ml` alerts.
    pub ml_enabled: bool,
    /// DSPOT risk of each source's threshold: past it, an anomaly (a signal).
    pub ml_risk: f64,
    /// Risk of the quantile past which an anomaly alerts (at most `ml_risk`).
    pub ml_alert_risk: f64,
    /// Cooldown of an `ml` alert, ns.
    pub ml_cooldown_ns: i64,
    /// Cooldown of a `sigma` alert (per rule and entity), ns.
    pub sigma_cooldown_ns: i64,
    /// Cooldown of a `correlation` alert (per rule and group), ns.
    pub correlation_cooldown_ns: i64,
    /// Cooldown of an `ioc` alert (per indicator, and entity unless `ioc_per_indicator`), ns.
    pub ioc_cooldown_ns: i64,
    /// One `ioc` alert per indicator naming every entity seen with it, not one per entity.
    pub ioc_per_indicator: bool,
    /// Matches of indicators the feed is less sure of than this (0 to 100) are signals.
    pub ioc_min_confidence: u8,
    /// Entities a Sigma rule alerts on one by one per source and window before the rest fold
    /// into one group alert; 0 = never group.
    pub group_after: u32,
    /// A rule's grouping window, ns.
    pub group_window_ns: i64,
    /// Correlation groups held at most.
    pub correlation_max_groups: usize,
    /// Distinct tactics of a kill-chain progression.
    pub killchain_min_tactics: usize,
    /// Window of a kill-chain progression, ns.
    pub killchain_window_ns: i64,
    /// UEBA settings.
    pub ueba: UebaParams,
    /// The least Sigma level that alerts directly (`low` at the lowest: `informational` never
    /// alerts); lower ones are signals.
    pub sigma_alert_min_level: Level,
    /// Rules that alert directly whatever their level.
    pub sigma_alert_rules: Arc<std::collections::HashSet<String>>,
    /// Rules that are only signals whatever their level.
    pub sigma_signal_rules: Arc<std::collections::HashSet<String>>,
    /// Risk-based alerting.
    pub risk: RiskParams,
}

impl DetectorParams {
    /// From the configuration.
    pub fn from_config(config: &watchpost_proto::Config) -> DetectorParams {
        DetectorParams {
            ml_enabled: config.detection.ml_enabled,
            ml_risk: config.detection.ml_risk,
            ml_alert_risk: config.detection.ml_alert_risk,
            ml_cooldown_ns: (config.detection.ml_alert_cooldown_seconds as i64)
                .saturating_mul(1_000_000_000),
            sigma_cooldown_ns: (config.detection.sigma_alert_cooldown_seconds as i64)
                .saturating_mul(1_000_000_000),
            correlation_cooldown_ns: (config.detection.correlation_alert_cooldown_seconds as i64)
                .saturating_mul(1_000_000_000),
            ioc_cooldown_ns: (config.detection.ioc_alert_cooldown_seconds as i64)
                .saturating_mul(1_000_000_000),
            ioc_per_indicator: config.detection.ioc_alert_per_indicator,
            ioc_min_confidence: config.detection.ioc_alert_min_confidence.min(100) as u8,
            group_after: config.detection.alert_group_after_entities,
            group_window_ns: (config.detection.alert_group_window_seconds as i64)
                .saturating_mul(1_000_000_000),
            correlation_max_groups: config.detection.correlation_max_groups as usize,
            killchain_min_tactics: config.detection.killchain_min_tactics as usize,
            killchain_window_ns: (config.detection.killchain_window_seconds as i64)
                .saturating_mul(1_000_000_000),
            ueba: UebaParams::from_config(&config.ueba),
            sigma_alert_min_level: Level::parse(&config.detection.sigma_alert_min_level)
                .unwrap_or(Level::Medium),
            sigma_alert_rules: Arc::new(
                config.detection.sigma_alert_rules.iter().cloned().collect(),
            ),
            sigma_signal_rules: Arc::new(
                config
                    .detection
                    .sigma_signal_rules
                    .iter()
                    .cloned()
                    .collect(),
            ),
            risk: RiskParams {
                threshold: config.detection.risk_threshold,
                window_ns: (config.detection.risk_window_hours * 3.6e12) as i64,
                max_entities: config.ueba.max_entities as usize,
                level_weights: config.detection.risk_level_weights.clone(),
            },
        }
    }
}

/// Where alerts go: the store and the WebSocket hub live, standard output offline.
pub trait AlertSink {
    /// A new alert, or an open one whose count, time or events changed.
    fn alert(&mut self, alert: &Alert, new: bool);

    /// A new signal (docs/risk.md), or an open one whose count or events changed. Signals are
    /// alert records kept apart: they add risk, they are not in the analysts' queue.
    fn signal(&mut self, signal: &Alert, new: bool) {
        let _ = (signal, new);
    }
}

/// Collects alerts and signals in memory (tests, `watchpost analyze`).
#[derive(Default, Debug)]
pub struct Collect {
    /// Alerts by id, latest state.
    pub alerts: BTreeMap<String, Alert>,
    /// Signals by id, latest state.
    pub signals: BTreeMap<String, Alert>,
}

impl AlertSink for Collect {
    fn alert(&mut self, alert: &Alert, _new: bool) {
        self.alerts.insert(alert.id.clone(), alert.clone());
    }

    fn signal(&mut self, signal: &Alert, _new: bool) {
        self.signals.insert(signal.id.clone(), signal.clone());
    }
}

/// A source's detectors and its open minute.
#[derive(Clone, Debug, Encode, Decode)]
pub struct SourceState {
    /// The ensemble and its threshold.
    pub model: SourceModel,
    minute: MinutePoint,
}

/// An alert inside its cooldown.
struct OpenAlert {
    alert: Alert,
    until_ns: i64,
    /// Changed since the sink last saw it.
    dirty: bool,
    /// A group alert's or signal's title before its count of entities: the title says how many
    /// it stands for, and changes as they join (see [`group_title`]).
    group_title: Option<String>,
}

impl OpenAlert {
    /// Folds a repeat in: one more, seen later, its event kept while there is room.
    fn fold(&mut self, r: &DetectRecord) {
        let a = &mut self.alert;
        a.count += 1;
        a.last_seen_ns = a.last_seen_ns.max(r.ts_ns);
        // The id is only built while there is room for it: a noisy rule's repeats cost no
        // allocation once its alert holds its share of events.
        if a.contributing_events.len() < MAX_CONTRIBUTING {
            let id = event_id(&r.block, r.pos);
            if !a.contributing_events.contains(&id) {
                a.contributing_events.push(id);
            }
        }
        self.dirty = true;
    }
}

/// A Sigma rule's grouping window in one source: how many entities it alerted on one by one.
struct GroupWindow {
    alerted: u32,
    until_ns: i64,
}

/// What differs between the alerts of single-event matches (see [`Detector::open_match`]).
struct MatchAlert {
    alert_type: AlertType,
    severity: u8,
    title: String,
    detector: String,
    detector_name: String,
    /// `dedup_key` before the subject: `sigma:<rule id>`, `ioc:<indicator>`.
    dedup: String,
    attack: Vec<AttackMapping>,
}

/// What a signal is of: a Sigma rule below the alerting level, a source's ensemble anomalies
/// below the alert quantile, or an indicator its feed is unsure of (see
/// [`Detector::raise_signal`]).
struct SignalOrigin<'a> {
    /// Counts its fires for rarity and keys its records and group: the rule's key, the
    /// source's, or the indicator's.
    key: u64,
    /// The detector: the rule's id, `ensemble`, or `ioc:<feed file>`.
    id: SignalTitle<'a>,
    /// Names it in its group signal and in a risk alert's contributions.
    title: SignalTitle<'a>,
    /// Weighs its risk (`None` counts as medium).
    level: Option<Level>,
    attack: &'a [AttackMapping],
    /// The entity it is about: the event's entity at this index (a UEBA signal's own), else the
    /// event's primary entity.
    entity: Option<usize>,
    /// Whether the address acting in the event takes risk too (a rule's match: the scanner
    /// behind a failed login), or the entity alone (a deviation of its own baseline).
    with_actor: bool,
}

/// A signal origin's name, put together only where it is shown: a source's anomalies fold into
/// their open signal on every repeat, and naming them each time would allocate per event.
#[derive(Clone, Copy)]
enum SignalTitle<'a> {
    /// A rule's title or id, as it is.
    Rule(&'a str),
    /// A name after a fixed prefix (`ioc:<feed file>`).
    Prefixed { prefix: &'static str, name: &'a str },
    /// "Anomaly in <source>: <finding>".
    Anomaly {
        source: &'a str,
        finding: &'static str,
    },
    /// A UEBA signal of one kind on entities of one type ([`signal_title`]).
    Deviation {
        kind: UebaType,
        deviation: Deviation,
    },
    /// "IOC match: <kind> <value> (<label>)".
    Indicator {
        kind: &'static str,
        value: &'a str,
        label: Option<&'a str>,
    },
}

impl<'a> SignalTitle<'a> {
    /// The text; a rule's title is borrowed, not copied (a full group adds risk on every match).
    fn text(self) -> std::borrow::Cow<'a, str> {
        match self {
            SignalTitle::Rule(title) => title.into(),
            SignalTitle::Prefixed { prefix, name } => format!("{prefix}{name}").into(),
            SignalTitle::Deviation { kind, deviation } => {
                signal_title(kind, &deviation, false).into()
            }
            SignalTitle::Anomaly { source, finding } => {
                format!("Anomaly in {source}: {finding}").into()
            }
            SignalTitle::Indicator {
                kind,
                value,
                label: Some(label),
            } => format!("IOC match: {kind} {value} ({label})").into(),
            SignalTitle::Indicator { kind, value, .. } => {
                format!("IOC match: {kind} {value}").into()
            }
        }
    }
}

/// The state of one stage B worker.
pub struct Detector {
    params: DetectorParams,
    sources: U64Map<SourceState>,
    ueba: Ueba,
    open: U64Map<OpenAlert>,
    /// Grouping windows of Sigma rules, by rule and source.
    groups: U64Map<GroupWindow>,
    /// The distinct entities of each open alert that stands for several (group alerts, IOC
    /// alerts per indicator), by alert key.
    members: U64Map<U64Set>,
    /// Entity key -> key of the open alert it joined (new-source alerts are keyed by address).
    alias: U64Map<u64>,
    /// Acting address -> the open account alert raised from it (see `incident_of`).
    actors: HashMap<u128, u64>,
    minutes: Vec<MinutePoint>,
    /// Per source, the open minute's (start, events) as last handed out by
    /// [`Detector::take_minutes`]: a minute still open is handed out again only once it changed.
    open_minutes_out: U64Map<(i64, u32)>,
    seq: u64,
    now_ns: i64,
    /// The Sigma catalogue, to name the rules stage A reports by number.
    catalog: Option<Arc<dyn RuleBook>>,
    /// Rule entries already looked up, by catalogue number (the catalogue only appends).
    rule_cache: Vec<Option<Arc<RuleEntry>>>,
    /// The catalogue version `rule_cache` was read at: a reload replaces rules in place.
    rule_cache_version: u64,
    /// Rule fires since the last [`Detector::take_rule_fires`], by (rule key, hour).
    fires: HashMap<(u64, i64), u32>,
    /// Windows of the correlation groups this worker owns, and the plan version they follow.
    correlator: Option<(u64, Correlator<EventKey>)>,
    /// Catalogue entries of the plan's correlations, by number (cleared with the plan).
    corr_cache: Vec<Option<Arc<RuleEntry>>>,
    /// Correlations completed by the current hit (reused).
    fired: Vec<Fired<EventKey>>,
    /// The latest hit of each group of a correlation judged when its window closes: the alert
    /// names its group and entity from it.
    tumbling: HashMap<(u32, u64), CorrelationHit>,
    /// Kill-chain trails, shared by the stage B workers.
    killchain: Arc<Mutex<KillChain>>,
    /// The indicator sets, to name the indicators stage A reports by number.
    iocs: Option<Arc<dyn IndicatorBook>>,
    /// The operators' exceptions in force, checked where an alert would be raised or joined.
    exceptions: Arc<ExceptionSet>,
    /// Open signals (one per rule and entity and signal window), by key.
    signals: U64Map<OpenAlert>,
    /// Every entity's risk.
    risk: RiskBook,
}

/// An event as correlation windows name it: block key and position.
type EventKey = ([u8; 16], u16);

impl Detector {
    /// Empty state.
    pub fn new(params: DetectorParams) -> Detector {
        Detector {
            ueba: Ueba::new(params.ueba.clone()),
            sources: U64Map::with_capacity_and_hasher(256, Default::default()),
            open: U64Map::with_capacity_and_hasher(256, Default::default()),
            alias: U64Map::with_capacity_and_hasher(256, Default::default()),
            actors: HashMap::new(),
            groups: U64Map::default(),
            members: U64Map::default(),
            minutes: Vec::with_capacity(1024),
            open_minutes_out: U64Map::with_capacity_and_hasher(256, Default::default()),
            seq: 0,
            now_ns: i64::MIN,
            catalog: None,
            rule_cache: Vec::new(),
            rule_cache_version: 0,
            fires: HashMap::new(),
            correlator: None,
            corr_cache: Vec::new(),
            fired: Vec::new(),
            tumbling: HashMap::new(),
            killchain: Arc::new(Mutex::new(KillChain::new(
                params.killchain_min_tactics,
                params.killchain_window_ns,
                params.correlation_max_groups,
            ))),
            iocs: None,
            exceptions: Arc::new(ExceptionSet::default()),
            signals: U64Map::default(),
            risk: RiskBook::new(params.risk.clone()),
            params,
        }
    }

    /// Applies `exceptions` from the next event on.
    pub fn set_exceptions(&mut self, exceptions: Arc<ExceptionSet>) {
        self.exceptions = exceptions;
    }

    /// Whether an exception keeps `detector`'s alert about `record` from being raised or
    /// joined (counting the hit). One branch while there are none.
    #[inline]
    fn excepted(&self, detector: &str, record: Option<&DetectRecord>, ts_ns: i64) -> bool {
        !self.exceptions.is_empty() && self.exceptions.suppresses(detector, record, ts_ns)
    }

    /// Raises `ioc` alerts for the indicators stage A reports, named through `feed`.
    pub fn set_iocs(&mut self, feed: Option<Arc<dyn IndicatorBook>>) {
        self.iocs = feed;
    }

    /// Raises `sigma` alerts for the rules of `catalog` that stage A reports, and evaluates its
    /// correlations.
    pub fn set_catalog(&mut self, catalog: Option<Arc<dyn RuleBook>>) {
        self.correlator = catalog.as_ref().map(|c| {
            let (version, plan) = c.plan();
            (
                version,
                Correlator::new(plan, self.params.correlation_max_groups),
            )
        });
        self.catalog = catalog;
        self.rule_cache.clear();
        self.corr_cache.clear();
        self.tumbling.clear();
    }

    /// Shares `killchain` (one tracker for every stage B worker: an entity's alerts come from several).
    pub fn set_killchain(&mut self, killchain: Arc<Mutex<KillChain>>) {
        self.killchain = killchain;
    }

    /// Correlation hits dropped because the group table was full.
    pub fn correlation_dropped(&self) -> u64 {
        self.correlator.as_ref().map_or(0, |(_, c)| c.dropped())
    }

    /// Entities whose risk was dropped at the bound (`ueba.max_entities`).
    pub fn risk_evicted(&self) -> u64 {
        self.risk.evicted()
    }

    /// Correlation groups held.
    pub fn correlation_groups(&self) -> usize {
        self.correlator.as_ref().map_or(0, |(_, c)| c.len())
    }

    /// Moves the rule fires counted since the last call into `out`.
    pub fn take_rule_fires(&mut self, out: &mut Vec<RuleFires>) {
        out.extend(
            self.fires
                .drain()
                .map(|((rule, hour_ns), count)| RuleFires {
                    rule,
                    hour_ns,
                    count,
                }),
        );
    }

    /// The UEBA engine.
    pub fn ueba(&self) -> &Ueba {
        &self.ueba
    }

    /// The UEBA engine, to save or restore baselines.
    pub fn ueba_mut(&mut self) -> &mut Ueba {
        &mut self.ueba
    }

    /// The sources, to save their models.
    pub fn sources(&self) -> impl Iterator<Item = (u64, &SourceState)> {
        self.sources.iter().map(|(k, v)| (*k, v))
    }

    /// Puts back a saved source (at start).
    pub fn restore_source(&mut self, source: u64, state: SourceState) {
        self.sources.insert(source, state);
    }

    /// Latest event time seen (the detector's clock).
    pub fn now_ns(&self) -> i64 {
        self.now_ns
    }

    /// Turns UEBA alerting on or off (baselines keep learning).
    pub fn set_ueba_enabled(&mut self, on: bool) {
        self.ueba.set_enabled(on);
    }

    /// Scores and learns a batch of events in order; alerts go to `sink`.
    ///
    /// While one event is scored, the baselines of the next [`LOOKAHEAD`] events are loading in
    /// stages (see [`Ueba::prefetch`]), so the memory latency of a large entity population
    /// overlaps with work instead of stalling each observation in turn.
    pub fn process_all(&mut self, batch: &DetectBatch, sink: &mut impl AlertSink) {
        let records = &batch.records;
        for (i, r) in records.iter().enumerate() {
            for ahead in 1..=LOOKAHEAD {
                if let Some(next) = records.get(i + ahead) {
                    self.prefetch(next, ahead);
                }
            }
            self.process_matched(r, batch.sigma_of(r), sink);
        }
    }

    /// Runs the prefetch stage for the owned entities of `record`, an event `ahead` places on (see
    /// [`Ueba::prefetch`]). Always inlined: in [`Detector::process_all`]'s unrolled loop `ahead`
    /// is then a constant and each call is its one stage, where a call of its own chose the
    /// stage at run time for every entity.
    #[inline(always)]
    pub fn prefetch(&self, record: &DetectRecord, ahead: usize) {
        for (i, e) in record.entities().iter().enumerate() {
            if record.owned & (2 << i) != 0 {
                self.ueba.prefetch(e.hash, ahead);
            }
        }
    }

    /// Scores and learns one event that matched no Sigma rule; alerts go to `sink`.
    pub fn process(&mut self, record: &DetectRecord, sink: &mut impl AlertSink) {
        self.process_matched(record, &[], sink);
    }

    /// Scores and learns one event that matched the Sigma rules `matches` (catalogue numbers);
    /// alerts go to `sink`.
    #[inline]
    pub fn process_matched(
        &mut self,
        record: &DetectRecord,
        matches: &[u32],
        sink: &mut impl AlertSink,
    ) {
        self.now_ns = self.now_ns.max(record.ts_ns);
        let time = EventTime::new(record.ts_ns);
        if record.owned & 1 != 0 {
            self.ensemble(record, &time, sink);
            for &rule in matches {
                self.raise_sigma(record, rule, sink);
            }
            if record.ioc != 0 {
                self.raise_ioc(record, sink);
            }
        }
        let account_named = record.entities().iter().any(|e| {
            matches!(
                e.ueba_type(),
                Some(UebaType::User | UebaType::ServiceAccount)
            )
        });
        // Accounts first: when one event alarms an account and the server it is on, the
        // account's alert is the incident's and the server's joins it (see `incident_of`).
        for hosts in [false, true] {
            for (i, e) in record.entities().iter().enumerate() {
                if record.owned & (2 << i) != 0
                    && let Some(kind) = e.ueba_type()
                    && (kind == UebaType::Host) == hosts
                {
                    self.judge_entity(record, i, kind, time, account_named, sink);
                }
            }
        }
    }

    /// Scores entity `i` of `record` (of UEBA type `kind`) against its baseline and raises
    /// what the outcome calls for.
    #[inline]
    fn judge_entity(
        &mut self,
        record: &DetectRecord,
        i: usize,
        kind: UebaType,
        time: EventTime,
        account_named: bool,
        sink: &mut impl AlertSink,
    ) {
        let e = &record.entities[i];
        let counterpart = if kind == UebaType::Ip {
            // An address's counterpart is the host it reached: a new pair is a new path.
            // The hash sits in the high bits, so each host is its own "network" (see
            // `network_of`), with the top bit marking a host rather than an address.
            (record.reporter != 0).then_some((u128::from(record.reporter) << 64) | (1u128 << 127))
        } else {
            (record.client_ip != 0).then_some(record.client_ip)
        };
        let o = Observation {
            time,
            entity: e.hash,
            kind,
            source: counterpart,
            template: record.template,
            host: match kind {
                UebaType::User | UebaType::ServiceAccount => record.reporter,
                UebaType::Host | UebaType::Ip => 0,
            },
            account_named,
        };
        match self.ueba.observe(&o) {
            Outcome::Alert(_)
            | Outcome::Signal(_)
            | Outcome::Scored {
                suppressed: true, ..
            } if self.excepted(ueba_detector(kind), Some(record), record.ts_ns) => {}
            Outcome::Alert(a) => self.raise_ueba(record, i, &a, sink),
            Outcome::Signal(a) => self.raise_ueba_signal(record, i, &a, sink),
            Outcome::Scored {
                suppressed: true,
                score,
            } => {
                let own = e.hash ^ UEBA_SALT;
                let key = self.alias.get(&own).copied().unwrap_or(own);
                self.repeat(key, record, score, None);
            }
            _ => {}
        }
    }

    fn ensemble(&mut self, r: &DetectRecord, time: &EventTime, sink: &mut impl AlertSink) {
        let risk = self.params.ml_risk;
        let st = self.sources.entry(r.source).or_insert_with(|| SourceState {
            model: SourceModel::new(risk),
            minute: MinutePoint {
                source: r.source,
                minute_ns: i64::MIN,
                ..MinutePoint::default()
            },
        });
        let s = st.model.observe(&EventFeatures {
            time: *time,
            template: r.template,
            severity: r.severity,
            message_len: r.message_len,
            entities: r.entity_count,
        });
        let minute = i64::from(time.minute) * NS_PER_MINUTE;
        if minute > st.minute.minute_ns {
            if st.minute.events > 0 {
                self.minutes.push(st.minute);
            }
            st.minute = MinutePoint {
                source: r.source,
                minute_ns: minute,
                ..MinutePoint::default()
            };
        }
        st.minute.events += 1;
        st.minute.sum += s.score as f32;
        st.minute.max = st.minute.max.max(s.score as f32);
        if s.verdict != DspotVerdict::Alarm {
            return;
        }
        st.minute.alarms += 1;
        let alert_bar = st.model.threshold().threshold_at(self.params.ml_alert_risk);
        if !self.params.ml_enabled || self.excepted("ensemble", Some(r), r.ts_ns) {
            return;
        }
        let key = fmix64(r.source ^ ML_SALT);
        if self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns) {
            self.repeat(key, r, s.score, None);
            return;
        }
        // Past the source's threshold but not its alert quantile: an anomaly of the kind a busy
        // source shows several times a day (docs/risk.md), which adds risk to its entity.
        let volume_led = matches!(ml_finding(&s), "unusual volume");
        if volume_led && s.score < alert_bar {
            let origin = SignalOrigin {
                key,
                id: SignalTitle::Rule("ensemble"),
                title: SignalTitle::Anomaly {
                    source: r.source_name(),
                    finding: ml_finding(&s),
                },
                level: Some(Level::Low),
                attack: &[],
                entity: None,
                with_actor: true,
            };
            self.raise_signal(
                r,
                &origin,
                |d, signal_key, _| {
                    let mut signal = d.ml_alert(r, signal_key, &s);
                    signal.dedup_key = match &signal.entity {
                        Some(e) => format!("signal:ml:{}:{}", signal.source, e.uuid),
                        None => format!("signal:ml:{}", signal.source),
                    };
                    signal
                },
                sink,
            );
            return;
        }
        let alert = self.ml_alert(r, key, &s);
        let until_ns = r.ts_ns.saturating_add(self.params.ml_cooldown_ns);
        self.open_alert(key, alert, until_ns, sink);
    }

    /// The catalogue entry of detection rule number `i`, cached.
    fn rule_entry(&mut self, i: u32) -> Option<Arc<RuleEntry>> {
        let at = i as usize;
        // An atomic load per match: a reload or an upload may have replaced the rule.
        let version = self.catalog.as_ref()?.version();
        if version != self.rule_cache_version {
            self.rule_cache.clear();
            self.rule_cache_version = version;
        }
        if let Some(Some(e)) = self.rule_cache.get(at) {
            return Some(e.clone());
        }
        let e = self.catalog.as_ref()?.detection(i)?;
        if self.rule_cache.len() <= at {
            self.rule_cache.resize(at + 1, None);
        }
        self.rule_cache[at] = Some(e.clone());
        Some(e)
    }

    /// A Sigma match: a new alert per rule and entity (the event's first scored entity, or its
    /// source when it has none), repeats inside the cooldown folded into it. Every match counts
    /// as a fire of the rule in its hour.
    fn raise_sigma(&mut self, r: &DetectRecord, rule: u32, sink: &mut impl AlertSink) {
        let Some(entry) = self.rule_entry(rule) else {
            return;
        };
        self.count_fire(entry.key, r.ts_ns);
        // A building block of a correlation without `generate: true` feeds it and nothing else.
        if self
            .correlator
            .as_ref()
            .is_some_and(|(_, c)| c.plan().is_suppressed(rule))
        {
            return;
        }
        if self.excepted(&entry.rule.id, Some(r), r.ts_ns) {
            return;
        }
        // Below the alerting level (the Sigma specification's `informational`: "no case or
        // alerting should be triggered by such rules"; `low` by default too), or named a
        // signal rule: a signal that adds risk, not an alert.
        if self.is_signal(&entry) {
            self.raise_rule_signal(r, &entry, sink);
            return;
        }
        let primary = primary_entity(r);
        let subject = primary.map_or(r.source, |i| r.entities[i].hash);
        let key = fmix64(entry.key ^ SIGMA_SALT ^ subject.rotate_left(29));
        if self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns) {
            self.repeat(key, r, 1.0, None);
            return;
        }
        // A new entity acted on by an address the rule already has an open alert for (a password
        // spray, one address guessing forty accounts) joins that alert: one attacker, one alert.
        let actor = actor_address(r, primary)
            .filter(|_| self.params.group_after > 0)
            .map(|i| fmix64(entry.key ^ ACTOR_SALT ^ r.entities[i].hash.rotate_left(7)));
        if let Some(actor_key) = actor
            && let Some(&key) = self.alias.get(&actor_key)
            && self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns)
        {
            let entity = primary.map(|i| entity_ref(&r.entities[i]));
            self.repeat(key, r, 1.0, entity);
            self.note_member(key, subject);
            return;
        }
        // A new entity for the rule: alerted on alone while the rule's window has room,
        // folded into the rule's group alert after.
        if let Some((group_key, until_ns)) = self.group_full(entry.key, r) {
            if self
                .open
                .get(&group_key)
                .is_some_and(|o| r.ts_ns < o.until_ns)
            {
                let entity = primary.map(|i| entity_ref(&r.entities[i]));
                self.repeat(group_key, r, 1.0, entity);
                self.note_member(group_key, subject);
                return;
            }
            let m = MatchAlert {
                alert_type: AlertType::Sigma,
                severity: entry.severity,
                title: group_title(&entry.rule.title, 1),
                detector: entry.rule.id.clone(),
                detector_name: entry.rule.title.clone(),
                dedup: format!("sigma:{}:group", entry.rule.id),
                attack: entry.attack.clone(),
            };
            let base = entry.rule.title.clone();
            self.open_group(r, group_key, primary, m, base, until_ns, sink);
            self.note_member(group_key, subject);
            return;
        }
        let m = rule_match_alert(&entry, "sigma");
        let until_ns = r.ts_ns.saturating_add(self.params.sigma_cooldown_ns);
        self.open_match(r, key, primary, m, until_ns, sink);
        if let Some(actor_key) = actor {
            self.alias.insert(actor_key, key);
            self.note_member(key, subject);
        }
    }

    /// Whether a match of `entry` is a signal rather than an alert (docs/risk.md). The Sigma
    /// specification's `informational` ("no case or alerting should be triggered by such
    /// rules") is always a signal, whatever else is configured; a rule without a level is
    /// `medium`, as its alert severity is.
    fn is_signal(&self, entry: &RuleEntry) -> bool {
        let p = &self.params;
        let level = entry.rule.level.unwrap_or(Level::Medium);
        if level == Level::Informational {
            return true;
        }
        if p.sigma_alert_rules.contains(&entry.rule.id) {
            return false;
        }
        p.sigma_signal_rules.contains(&entry.rule.id) || level < p.sigma_alert_min_level
    }

    /// A signal of a rule (a Sigma match or a correlation below the alerting level).
    fn raise_rule_signal(
        &mut self,
        r: &DetectRecord,
        entry: &Arc<RuleEntry>,
        sink: &mut impl AlertSink,
    ) {
        let origin = SignalOrigin {
            key: entry.key,
            id: SignalTitle::Rule(&entry.rule.id),
            title: SignalTitle::Rule(&entry.rule.title),
            level: entry.rule.level,
            attack: &entry.attack,
            entity: None,
            with_actor: true,
        };
        // Built only for a new signal: repeats fold in without allocating.
        let build = |d: &mut Detector, key, primary| {
            d.match_alert(r, key, primary, rule_match_alert(entry, "signal"))
        };
        self.raise_signal(r, &origin, build, sink);
    }

    /// A signal: one open record per origin (rule, or source's anomalies) and entity and signal
    /// window, repeats folded in; a new one adds risk to its entity and to the acting address,
    /// and an entity whose risk crosses the threshold raises (or joins) its `risk` alert.
    /// `build` makes a new signal's record for its key and subject entity (`None` for a group
    /// signal, which names its entities among the related ones).
    fn raise_signal(
        &mut self,
        r: &DetectRecord,
        origin: &SignalOrigin,
        build: impl FnOnce(&mut Self, u64, Option<usize>) -> Alert,
        sink: &mut impl AlertSink,
    ) {
        let primary = origin.entity.or_else(|| primary_entity(r));
        let subject = primary.map_or(r.source, |i| r.entities[i].hash);
        let own_key = fmix64(origin.key ^ SIGNAL_SALT ^ subject.rotate_left(29));
        self.risk.fire(origin.key, r.ts_ns);
        if let Some(o) = self.signals.get_mut(&own_key)
            && r.ts_ns < o.until_ns
        {
            o.fold(r);
            return;
        }
        // A new entity for the rule: a signal of its own while the rule's window has room, the
        // rule's group signal after, as alerts group (an internet-facing sensor meets a new
        // address every few events, and a stored record for each would cost a write each). The
        // risk is still the entity's own.
        let (key, until_ns) = match self.group_full(origin.key ^ SIGNAL_SALT, r) {
            Some((group_key, until_ns)) => (group_key, until_ns),
            None => (own_key, r.ts_ns.saturating_add(SIGNAL_WINDOW_NS)),
        };
        let grouped = key != own_key;
        let open = self.signals.get(&key).is_some_and(|o| r.ts_ns < o.until_ns);
        // Whether this match is the entity's first for the rule in the window: only then does it
        // add risk (a flood of one rule on one entity is one signal's worth).
        let mut fresh = true;
        if grouped && open {
            let members = self.members.entry(key).or_default();
            let full = members.len() >= MAX_GROUP_ENTITIES;
            let counted = !full && members.insert(subject);
            fresh = counted || full;
            let count = members.len() as u64;
            if let Some(o) = self.signals.get_mut(&key) {
                o.fold(r);
                if counted {
                    o.alert.entity_count = count;
                    if let Some(base) = &o.group_title {
                        o.alert.title = group_title(base, count);
                    }
                }
                // The entity and the address acting on it, so that a search by either finds
                // the group (up to MAX_RELATED of them).
                for i in primary.into_iter().chain(actor_address(r, primary)) {
                    let e = r.entities[i];
                    relate(&mut o.alert, Uuid::from_bytes(e.uuid), || entity_ref(&e));
                }
            }
        } else {
            let mut signal = build(self, key, if grouped { None } else { primary });
            let group_base = grouped.then(|| origin.title.text().into_owned());
            if let Some(base) = &group_base {
                // About its first entity, as a group alert is, its count in the title.
                signal.title = group_title(base, 1);
                signal.dedup_key = format!("signal:{}:group:{}", origin.id.text(), signal.source);
                signal.entity = primary.map(|i| entity_ref(&r.entities[i]));
                signal.related_entities = actor_address(r, primary)
                    .map(|i| entity_ref(&r.entities[i]))
                    .into_iter()
                    .collect();
                signal.entity_count = 1;
                self.members.insert(key, std::iter::once(subject).collect());
            }
            if let Some(old) = self.signals.get(&key)
                && old.dirty
            {
                sink.signal(&old.alert, false);
            }
            sink.signal(&signal, true);
            self.signals.insert(
                key,
                OpenAlert {
                    alert: signal,
                    until_ns,
                    dirty: false,
                    group_title: group_base,
                },
            );
        }
        // The entity, and the address acting on it (a scanner probing many accounts gathers
        // the risk of all of them). A host that only reported the event (a web server logging
        // a scanner's request) is where it happened, not who did it: with an actor, the actor
        // alone takes the risk. A deviation of an entity's own baseline is that entity's alone.
        let actor = actor_address(r, primary).filter(|_| origin.with_actor);
        let reporter_only = primary.is_some_and(|i| {
            r.entities[i].role == watchpost_proto::Role::Reporter as u8 && actor.is_some()
        });
        let subject_at = primary.filter(|_| !reporter_only && fresh);
        for i in subject_at.into_iter().chain(actor.filter(|_| fresh)) {
            let e = r.entities[i];
            let risk_key = e.hash ^ RISK_SALT;
            let Some(signal) = self.signals.get(&key).map(|o| &o.alert) else {
                continue;
            };
            let addition = SignalRisk {
                id: &signal.id,
                rule_key: origin.key,
                rule_title: &origin.title.text(),
                level: origin.level,
                attack: origin.attack,
                event: event_id(&r.block, r.pos),
                ts_ns: r.ts_ns,
            };
            if let Some(c) = self.risk.add(risk_key, &entity_ref(&e), &addition) {
                self.raise_risk(r, risk_key, c, sink);
            }
        }
    }

    /// The `risk` alert of an entity whose risk crossed the threshold, or its repeat while open.
    fn raise_risk(&mut self, r: &DetectRecord, key: u64, c: Crossing, sink: &mut impl AlertSink) {
        if self.excepted(RISK_DETECTOR, Some(r), r.ts_ns) {
            return;
        }
        let threshold = self.params.risk.threshold;
        if let Some(o) = self.open.get_mut(&key)
            && r.ts_ns < o.until_ns
        {
            let a = &mut o.alert;
            a.count += 1;
            a.last_seen_ns = a.last_seen_ns.max(r.ts_ns);
            a.score = round6(c.risk);
            a.contributions = c
                .contributions
                .into_iter()
                .map(|(title, weight)| (title, round6(weight)))
                .collect();
            a.attack = c.attack;
            a.contributing_events = c.events;
            a.related_alerts = c.signals;
            o.dirty = true;
            return;
        }
        let n = c.matches;
        let alert = Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: AlertType::Correlation,
            severity: if c.risk >= 2.0 * threshold { 4 } else { 3 },
            // The entity's name is not known here (stage B sees hashes; the API names the
            // entity field), so the title says what kind it is.
            title: format!(
                "Risk threshold crossed by {}: {n} signal{} across {} tactic{}",
                match c.entity.kind {
                    EntityKind::Ip => "an address",
                    EntityKind::User => "an account",
                    EntityKind::Host => "a host",
                    EntityKind::Domain => "a domain",
                },
                if n == 1 { "" } else { "s" },
                c.tactics,
                if c.tactics == 1 { "" } else { "s" },
            ),
            detector: RISK_DETECTOR.to_string(),
            detector_name: builtin_detector_name(RISK_DETECTOR).unwrap_or_default(),
            dedup_key: format!("risk:{}", c.entity.uuid),
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source: r.source_name().to_string(),
            entity: Some(c.entity),
            score: round6(c.risk),
            threshold,
            contributions: c
                .contributions
                .into_iter()
                .map(|(title, weight)| (title, round6(weight)))
                .collect(),
            attack: c.attack,
            contributing_events: c.events,
            related_entities: Vec::new(),
            related_alerts: c.signals,
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
        };
        let until_ns = r.ts_ns.saturating_add(self.params.risk.window_ns);
        self.open_alert(key, alert, until_ns, sink);
    }

    /// Counts a new entity in rule `rule_key`'s grouping window for the record's source. `None`
    /// while the window has room for an alert of its own (or grouping is off); else the key of
    /// the rule's group alert and when the window ends.
    fn group_full(&mut self, rule_key: u64, r: &DetectRecord) -> Option<(u64, i64)> {
        if self.params.group_after == 0 {
            return None;
        }
        let group_key = fmix64(rule_key ^ GROUP_SALT ^ r.source.rotate_left(13));
        let window = self.groups.entry(group_key).or_insert(GroupWindow {
            alerted: 0,
            until_ns: i64::MIN,
        });
        if r.ts_ns >= window.until_ns {
            window.alerted = 0;
            window.until_ns = r.ts_ns.saturating_add(self.params.group_window_ns);
        }
        if window.alerted < self.params.group_after {
            window.alerted += 1;
            return None;
        }
        Some((group_key, window.until_ns))
    }

    /// Counts `subject` among the distinct entities of open alert `key`; the alert says how many
    /// once there are several.
    fn note_member(&mut self, key: u64, subject: u64) {
        let members = self.members.entry(key).or_default();
        if members.len() < MAX_GROUP_ENTITIES && members.insert(subject) && members.len() > 1 {
            let count = members.len() as u64;
            if let Some(o) = self.open.get_mut(&key) {
                o.alert.entity_count = count;
                if let Some(base) = &o.group_title {
                    o.alert.title = group_title(base, count);
                }
                o.dirty = true;
            }
        }
    }

    /// Counts and lists every entity of `r` with open alert `key` (an indicator's alert names
    /// every entity seen with it).
    fn note_entities(&mut self, key: u64, r: &DetectRecord) {
        for e in r.entities() {
            self.note_member(key, e.hash);
            if let Some(o) = self.open.get_mut(&key)
                && relate(&mut o.alert, Uuid::from_bytes(e.uuid), || entity_ref(e))
            {
                o.dirty = true;
            }
        }
    }

    /// Counts a fire of rule `key` in the (event-time) hour of `ts_ns`.
    fn count_fire(&mut self, key: u64, ts_ns: i64) {
        let hour_ns = ts_ns.div_euclid(NS_PER_HOUR) * NS_PER_HOUR;
        *self.fires.entry((key, hour_ns)).or_insert(0) += 1;
    }

    /// Opens the alert of a single-event match (a Sigma rule, an indicator) about the event's
    /// primary entity, with the event's other entities as related ones.
    fn open_match(
        &mut self,
        r: &DetectRecord,
        key: u64,
        primary: Option<usize>,
        m: MatchAlert,
        until_ns: i64,
        sink: &mut impl AlertSink,
    ) {
        let alert = self.match_alert(r, key, primary, m);
        self.open_alert(key, alert, until_ns, sink);
    }

    /// Opens a group alert: about its first entity (so that a feed, a search and a stream frame
    /// all name one), the entities that join it listed among the related and counted in
    /// `entity_count` and in the title (`base`, see [`group_title`]). Its dedup key is the
    /// rule's and source's, not the first entity's: the group stands for all of them.
    #[allow(clippy::too_many_arguments)]
    fn open_group(
        &mut self,
        r: &DetectRecord,
        key: u64,
        primary: Option<usize>,
        m: MatchAlert,
        base: String,
        until_ns: i64,
        sink: &mut impl AlertSink,
    ) {
        let mut alert = self.match_alert(r, key, None, m);
        alert.entity = primary.map(|i| entity_ref(&r.entities[i]));
        alert.related_entities = others(r, primary);
        alert.entity_count = 1;
        self.open_alert(key, alert, until_ns, sink);
        if let Some(o) = self.open.get_mut(&key) {
            o.group_title = Some(base);
        }
    }

    /// The new alert of a single-event match about `primary` (the source when `None`).
    fn match_alert(
        &mut self,
        r: &DetectRecord,
        key: u64,
        primary: Option<usize>,
        m: MatchAlert,
    ) -> Alert {
        let source = r.source_name().to_string();
        let entity = primary.map(|i| entity_ref(&r.entities[i]));
        Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: m.alert_type,
            severity: m.severity,
            title: m.title,
            detector: m.detector,
            detector_name: m.detector_name,
            dedup_key: match &entity {
                Some(e) => format!("{}:{}", m.dedup, e.uuid),
                None => format!("{}:{source}", m.dedup),
            },
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source,
            entity,
            score: 1.0,
            threshold: 0.0,
            contributions: BTreeMap::new(),
            attack: m.attack,
            contributing_events: vec![event_id(&r.block, r.pos)],
            related_entities: others(r, primary),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
        }
    }

    /// An indicator match: a new alert per indicator (naming every entity seen with it), or per
    /// indicator and subject without `detection.ioc_alert_per_indicator`; repeats inside
    /// `detection.ioc_alert_cooldown_seconds` fold into it.
    fn raise_ioc(&mut self, r: &DetectRecord, sink: &mut impl AlertSink) {
        let Some(set) = self
            .iocs
            .as_ref()
            .and_then(|f| f.indicators(u64::from(r.ioc_version)))
        else {
            return;
        };
        let Some(ind) = set.get(IocId::from_index(r.ioc - 1)) else {
            return;
        };
        // The detector's name is built only when there are exceptions to hold it against.
        if !self.exceptions.is_empty()
            && self
                .exceptions
                .suppresses(&format!("ioc:{}", ind.source), Some(r), r.ts_ns)
        {
            return;
        }
        // A match of an indicator its feed is unsure of (a scanner list, an aged sighting) adds
        // risk to what it touched instead of alerting: on its own it is a lead, with other
        // signals on the same entity it is an intrusion.
        if ind
            .confidence
            .is_some_and(|c| c < self.params.ioc_min_confidence)
        {
            let origin = SignalOrigin {
                key: watchpost_proto::hash64(ind.value.as_bytes()) ^ IOC_SALT,
                id: SignalTitle::Prefixed {
                    prefix: "ioc:",
                    name: &ind.source,
                },
                title: SignalTitle::Indicator {
                    kind: ind.kind.as_str(),
                    value: &ind.value,
                    label: ind.label.as_deref(),
                },
                level: Some(Level::Low),
                attack: ioc_attack_of(ind.kind),
                entity: None,
                with_actor: true,
            };
            let build = |d: &mut Detector, key, primary| {
                let m = ioc_match_alert(ind, "signal:ioc");
                d.match_alert(r, key, primary, m)
            };
            self.raise_signal(r, &origin, build, sink);
            return;
        }
        let primary = primary_entity(r);
        let subject = primary.map_or(r.source, |i| r.entities[i].hash);
        let per_indicator = self.params.ioc_per_indicator;
        // Per indicator: one alert for every entity seen with it in the source.
        let scope = if per_indicator {
            r.source.rotate_left(13)
        } else {
            subject.rotate_left(29)
        };
        let key = fmix64(watchpost_proto::hash64(ind.value.as_bytes()) ^ IOC_SALT ^ scope);
        if self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns) {
            self.repeat(key, r, 1.0, None);
            if per_indicator {
                self.note_entities(key, r);
            }
            return;
        }
        let m = ioc_match_alert(ind, "ioc");
        let until_ns = r.ts_ns.saturating_add(self.params.ioc_cooldown_ns);
        self.open_match(r, key, primary, m, until_ns, sink);
        if per_indicator {
            self.note_entities(key, r);
        }
    }

    /// Evaluates correlation hits (each routed to this worker by its group); correlations they
    /// complete raise `correlation` alerts.
    pub fn correlate(&mut self, hits: &[CorrelationHit], sink: &mut impl AlertSink) {
        for h in hits {
            self.now_ns = self.now_ns.max(h.record.ts_ns);
            if !self.follow_plan(h.version) {
                continue;
            }
            let Some((_, c)) = self.correlator.as_mut() else {
                return;
            };
            if c.plan()
                .correlation(h.corr)
                .is_some_and(|x| x.is_tumbling())
            {
                self.tumbling.insert((h.corr, h.group), *h);
            }
            let mut fired = std::mem::take(&mut self.fired);
            fired.clear();
            c.observe(
                Hit {
                    corr: h.corr,
                    slot: h.slot,
                    group: h.group,
                    value: h.value,
                    ts_ns: h.record.ts_ns,
                    event: (h.record.block, h.record.pos),
                },
                &mut fired,
            );
            for f in &fired {
                self.raise_correlation(f, Some(h), sink);
            }
            self.fired = fired;
        }
    }

    /// Makes sure the windows follow the plan that numbered a hit of plan `version`; false when
    /// the hit comes from a plan already replaced (it is dropped: the numbers mean other rules).
    fn follow_plan(&mut self, version: u64) -> bool {
        match &self.correlator {
            None => return false,
            Some((v, _)) if *v == version => return true,
            Some(_) => {}
        }
        let Some(catalog) = &self.catalog else {
            return false;
        };
        let (v, plan) = catalog.plan();
        if v != version {
            return false;
        }
        self.correlator = Some((v, Correlator::new(plan, self.params.correlation_max_groups)));
        self.corr_cache.clear();
        self.tumbling.clear();
        true
    }

    /// Judges the correlation windows that closed by the detector's clock.
    fn sweep_correlations(&mut self, sink: &mut impl AlertSink) {
        let now = self.now_ns;
        let Some((_, c)) = self.correlator.as_mut() else {
            return;
        };
        let mut fired = std::mem::take(&mut self.fired);
        fired.clear();
        c.sweep(now, &mut fired);
        for f in &fired {
            let hit = self.tumbling.remove(&(f.corr, f.group));
            self.raise_correlation(f, hit.as_ref(), sink);
        }
        self.fired = fired;
        if let Some((_, c)) = &self.correlator
            && !self.tumbling.is_empty()
        {
            self.tumbling
                .retain(|&(corr, group), _| c.contains(corr, group));
        }
    }

    /// The catalogue entry of plan correlation `i`, cached.
    fn correlation_entry(&mut self, i: u32) -> Option<Arc<RuleEntry>> {
        let at = i as usize;
        if let Some(Some(e)) = self.corr_cache.get(at) {
            return Some(e.clone());
        }
        let (_, c) = self.correlator.as_ref()?;
        let id = c.plan().correlation(i)?.rule.id.clone();
        let e = self.catalog.as_ref()?.find(&id)?;
        if self.corr_cache.len() <= at {
            self.corr_cache.resize(at + 1, None);
        }
        self.corr_cache[at] = Some(e.clone());
        Some(e)
    }

    /// A correlation held for a group: one alert per rule and group, repeats inside the
    /// cooldown folded into it. `hit` is the event that completed it (for the group's text and
    /// entities); a window judged at its close has its group's latest hit, if still known.
    fn raise_correlation(
        &mut self,
        f: &Fired<EventKey>,
        hit: Option<&CorrelationHit>,
        sink: &mut impl AlertSink,
    ) {
        let Some(entry) = self.correlation_entry(f.corr) else {
            return;
        };
        let suppressed = self
            .correlator
            .as_ref()
            .and_then(|(_, c)| c.plan().correlation(f.corr))
            .is_none_or(|c| c.suppressed);
        self.count_fire(entry.key, f.last_ns);
        if suppressed || entry.rule.level == Some(Level::Informational) {
            return;
        }
        if self.excepted(&entry.rule.id, hit.map(|h| &h.record), f.last_ns) {
            return;
        }
        // Below the alerting level, a correlation is a signal about its completing event's
        // entities, like a single-event rule (docs/risk.md).
        if self.is_signal(&entry) {
            if let Some(h) = hit {
                let record = h.record;
                self.raise_rule_signal(&record, &entry, sink);
            }
            return;
        }
        let joined = f.events.as_slice();
        let joined = &joined[joined.len().saturating_sub(MAX_CONTRIBUTING)..];
        let key = fmix64(entry.key ^ CORRELATION_SALT ^ f.group.rotate_left(29));
        if let Some(o) = self.open.get_mut(&key)
            && f.last_ns < o.until_ns
        {
            let a = &mut o.alert;
            a.count += 1;
            a.last_seen_ns = a.last_seen_ns.max(f.last_ns);
            a.score = a.score.max(f.measure as f64);
            // Ids are built only while there is room: a busy group's repeats allocate nothing
            // once its alert holds its share of events.
            for (b, p) in joined {
                if a.contributing_events.len() >= MAX_CONTRIBUTING {
                    break;
                }
                let id = event_id(b, *p);
                if !a.contributing_events.contains(&id) {
                    a.contributing_events.push(id);
                }
            }
            o.dirty = true;
            return;
        }
        let events: Vec<String> = joined.iter().map(|(b, p)| event_id(b, *p)).collect();
        let r = hit.map(|h| h.record);
        // The alert is about what the correlation counted by (the address spraying, the host
        // a local address belongs to), not about whichever entity its last event named first;
        // a group by a value that is no entity (a command line) is about no entity.
        let entity = hit.and_then(|h| h.entity);
        let text = hit.map_or("", |h| h.text());
        let rule = &entry.rule;
        let measure = match self
            .correlator
            .as_ref()
            .and_then(|(_, c)| c.plan().correlation(f.corr))
            .map(|c| c.kind)
        {
            Some(CorrelationKind::EventCount) => "events",
            Some(CorrelationKind::ValueCount) => "distinct_values",
            _ => "rules",
        };
        let alert = Alert {
            id: self.next_id(f.last_ns, key),
            alert_type: AlertType::Correlation,
            severity: entry.severity,
            title: if text.is_empty() {
                rule.title.clone()
            } else {
                format!("{} ({text})", rule.title)
            },
            detector: rule.id.clone(),
            detector_name: rule.title.clone(),
            dedup_key: format!("correlation:{}:{:016x}", rule.id, f.group),
            first_seen_ns: f.first_ns,
            last_seen_ns: f.last_ns,
            count: 1,
            source: r
                .as_ref()
                .map_or_else(String::new, |r| r.source_name().to_string()),
            entity: entity.as_ref().map(entity_ref),
            score: f.measure as f64,
            threshold: 0.0,
            contributions: BTreeMap::from([(measure.to_string(), f.measure as f64)]),
            attack: entry.attack.clone(),
            contributing_events: events,
            related_entities: r.as_ref().map_or_else(Vec::new, |r| {
                r.entities()
                    .iter()
                    .filter(|e| entity.is_none_or(|g| g.uuid != e.uuid))
                    .map(entity_ref)
                    .collect()
            }),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
        };
        let until_ns = f
            .last_ns
            .saturating_add(self.params.correlation_cooldown_ns);
        self.open_alert(key, alert, until_ns, sink);
    }

    /// Hands a new alert to the sink and keeps it open (repeats fold into it) until `until_ns`.
    fn open_alert(&mut self, key: u64, alert: Alert, until_ns: i64, sink: &mut impl AlertSink) {
        // An alert of the same key whose time is over may still hold changes the sink has not
        // heard (offline, flushes come only at the end): they go out before it is replaced.
        if let Some(old) = self.open.get(&key)
            && old.dirty
        {
            sink.alert(&old.alert, false);
        }
        self.members.remove(&key);
        sink.alert(&alert, true);
        let step = self
            .killchain
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(&alert);
        if let Some((chain, new)) = step {
            sink.alert(&chain, new);
        }
        self.open.insert(
            key,
            OpenAlert {
                alert,
                until_ns,
                dirty: false,
                group_title: None,
            },
        );
    }

    fn ml_alert(&mut self, r: &DetectRecord, key: u64, s: &Scored) -> Alert {
        let (_, contributions) = breakdown(&ml_parts(&s.contributions));
        let what = ml_finding(s);
        let source = r.source_name().to_string();
        let entity = r
            .entities()
            .iter()
            .find(|e| e.ueba != crate::record::NOT_SCORED)
            .map(entity_ref);
        Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: AlertType::Ml,
            severity: if s.score >= 0.8 { 4 } else { 3 },
            title: format!("Anomaly in {source}: {what}"),
            detector: "ensemble".into(),
            detector_name: builtin_detector_name("ensemble").unwrap_or_default(),
            dedup_key: format!("ml:{source}"),
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source,
            entity,
            score: round6(s.score),
            threshold: round6(s.threshold),
            contributions,
            attack: Vec::new(),
            contributing_events: vec![event_id(&r.block, r.pos)],
            related_entities: r.entities().iter().map(entity_ref).collect(),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
        }
    }

    /// A deviation of entity `i` short of an alert: a `low` signal about that entity alone, its
    /// rarity counted per entity type and kind of deviation.
    fn raise_ueba_signal(
        &mut self,
        r: &DetectRecord,
        i: usize,
        a: &UebaAlert,
        sink: &mut impl AlertSink,
    ) {
        let Some(d) = a.deviation else {
            return;
        };
        let kind = a.kind;
        let origin = SignalOrigin {
            key: fmix64(UEBA_SIGNAL_SALT ^ ((kind as u64) << 8) ^ d.signal as u64),
            id: SignalTitle::Rule(ueba_detector(kind)),
            title: SignalTitle::Deviation { kind, deviation: d },
            level: Some(Level::Low),
            attack: ueba_attack_of(kind, d.signal),
            entity: Some(i),
            with_actor: false,
        };
        let build = |det: &mut Detector, key, primary| {
            let m = MatchAlert {
                alert_type: AlertType::Ueba,
                severity: 2,
                title: signal_title(kind, &d, true),
                detector: ueba_detector(kind).to_string(),
                detector_name: builtin_detector_name(ueba_detector(kind)).unwrap_or_default(),
                dedup: format!("signal:{}", ueba_detector(kind)),
                attack: ueba_attack_of(kind, d.signal).to_vec(),
            };
            let mut signal = det.match_alert(r, key, primary, m);
            signal.score = round6(a.score);
            signal.threshold = round6(a.threshold);
            signal.deviation = Some(d);
            signal
        };
        self.raise_signal(r, &origin, build, sink);
    }

    fn raise_ueba(&mut self, r: &DetectRecord, i: usize, a: &UebaAlert, sink: &mut impl AlertSink) {
        let e = r.entities[i];
        let key = e.hash ^ UEBA_SALT;
        let w = &self.params.ueba.weights;
        let sub = a.sub_scores;
        let parts = [
            ("time_of_day", w[0] * sub.time_of_day),
            ("source_novelty", w[1] * sub.source_novelty),
            ("volume", w[2] * sub.volume),
            ("pattern_novelty", w[3] * sub.pattern_novelty),
        ];
        let (blend_top, contributions) = breakdown(&parts);
        // A single strong deviation names the alert: it is what made it an alert.
        let top = match a.deviation.map(|d| d.signal) {
            Some(Signal::NewHour | Signal::Dormancy) => "time_of_day",
            Some(Signal::NewSource | Signal::NewHost) => "source_novelty",
            Some(Signal::Rate) => "volume",
            None => blend_top,
        };
        let entity = entity_ref(&e);
        let kind = a.kind;
        // Entities of one type seen from one new address within the cooldown are one incident
        // (password spraying, a compromised jump host): they fold into one alert keyed by the
        // address and type, each entity joining its related entities.
        // A first host reached from a new address folds the same way: one address trying many
        // accounts on a server none of them used is the spray, seen from the accounts' side.
        let new_host = a.deviation.is_some_and(|d| d.signal == Signal::NewHost);
        let by_source = top == "source_novelty"
            && (!new_host || sub.source_novelty > 0.0)
            && kind != UebaType::Ip
            && r.client_ip != 0;
        let key = if by_source {
            fmix64(
                (r.client_ip as u64)
                    ^ ((r.client_ip >> 64) as u64)
                    ^ NEW_SOURCE_SALT
                    ^ (kind as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            )
        } else {
            key
        };
        if by_source {
            self.alias.insert(e.hash ^ UEBA_SALT, key);
            if self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns) {
                self.repeat(key, r, a.score, Some(entity));
                return;
            }
        }
        if let Some(joined) = self.incident_of(r, kind) {
            self.alias.insert(e.hash ^ UEBA_SALT, joined);
            self.repeat(joined, r, a.score, Some(entity));
            return;
        }
        let who = ueba_who(kind);
        let title = match a.deviation {
            Some(d) => deviation_title(who, kind, &d),
            None => match top {
                "time_of_day" => format!("{who} active at an unusual hour"),
                "source_novelty" if kind == UebaType::Ip => {
                    "IP address reached a host it never reached before".to_string()
                }
                "source_novelty" => format!("{who} seen from a new network"),
                "volume" => format!("{who} with far more events than usual"),
                _ => format!("{who} showing a log pattern it and its peers rarely show"),
            },
        };
        let attack = if new_host {
            ueba_attack(UebaType::Host, "source_novelty")
        } else {
            ueba_attack(kind, top)
        };
        let alert = Alert {
            id: self.next_id(r.ts_ns, key),
            alert_type: AlertType::Ueba,
            severity: ueba_severity(&sub, a.score, a.deviation.as_ref()),
            title,
            detector: ueba_detector(kind).to_string(),
            detector_name: builtin_detector_name(ueba_detector(kind)).unwrap_or_default(),
            dedup_key: if by_source {
                format!(
                    "ueba:new_source:{}:{}",
                    kind.name(),
                    source_text(r.client_ip)
                )
            } else {
                format!("ueba:{}:{}", kind.name(), Uuid::from_bytes(e.uuid))
            },
            first_seen_ns: r.ts_ns,
            last_seen_ns: r.ts_ns,
            count: 1,
            source: r.source_name().to_string(),
            entity: Some(entity),
            score: round6(a.score),
            threshold: round6(a.threshold),
            contributions,
            attack,
            contributing_events: vec![event_id(&r.block, r.pos)],
            related_entities: r
                .entities()
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, e)| entity_ref(e))
                .collect(),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: a.deviation,
            triage: Default::default(),
        };
        let until_ns = r.ts_ns.saturating_add(self.params.ueba.cooldown_ns);
        self.open_alert(key, alert, until_ns, sink);
        if matches!(kind, UebaType::User | UebaType::ServiceAccount) && r.client_ip != 0 {
            self.actors.insert(r.client_ip, key);
        }
    }

    /// The open UEBA alert that a server's alert joins: an account's, raised from the same
    /// acting address within its cooldown. A user doing something new on a server is one
    /// incident, and the account is its actor, so the account's alert leads (accounts are
    /// judged before hosts on one event); an account's alert never joins a server's. Two
    /// accounts from one address stay apart (an office NAT) unless the address itself is new to
    /// both (the by-source fold).
    fn incident_of(&self, r: &DetectRecord, kind: UebaType) -> Option<u64> {
        if kind != UebaType::Host || r.client_ip == 0 {
            return None;
        }
        let &key = self.actors.get(&r.client_ip)?;
        self.open
            .get(&key)
            .is_some_and(|o| r.ts_ns < o.until_ns)
            .then_some(key)
    }

    /// A repeat inside an open alert's cooldown: bump its count, keep the event. The sink hears
    /// of it at the next [`Detector::flush`], not per repeat: a burst is one update.
    /// With `entity`, that entity joins the alert's related entities when it is new there.
    fn repeat(&mut self, key: u64, r: &DetectRecord, score: f64, entity: Option<EntityRef>) {
        if let Some(o) = self.open.get_mut(&key) {
            if let Some(e) = entity {
                relate(&mut o.alert, e.uuid, || e);
            }
            o.alert.score = o.alert.score.max(round6(score));
            o.fold(r);
        }
    }

    /// Hands the sink every alert that changed since the last call, and forgets alerts whose
    /// cooldown is over. Called once per batch live, at the end offline.
    pub fn flush(&mut self, sink: &mut impl AlertSink) {
        self.sweep_correlations(sink);
        let now = self.now_ns;
        self.signals.retain(|_, o| {
            if o.dirty {
                o.dirty = false;
                sink.signal(&o.alert, false);
            }
            now < o.until_ns
        });
        self.open.retain(|_, o| {
            if o.dirty {
                o.dirty = false;
                sink.alert(&o.alert, false);
            }
            now < o.until_ns
        });
        if !self.alias.is_empty() {
            let open = &self.open;
            self.alias.retain(|_, k| open.contains_key(k));
        }
        if !self.actors.is_empty() {
            let open = &self.open;
            self.actors.retain(|_, k| open.contains_key(k));
        }
        if !self.members.is_empty() {
            // Group alerts and group signals both count their entities here.
            let (open, signals) = (&self.open, &self.signals);
            self.members
                .retain(|k, _| open.contains_key(k) || signals.contains_key(k));
        }
        if !self.groups.is_empty() {
            self.groups.retain(|_, g| now < g.until_ns);
        }
    }

    /// Alerts an analyst has closed (their ids): each stops taking repeats, so the next firing
    /// of its rule, source or entity opens a new alert instead of vanishing into a closed one.
    /// An alert stays open for its whole cooldown (a day for correlations, an hour for indicators),
    /// often longer than an analyst takes to close it; without this an attacker's next step
    /// inside that time would only bump the count of an alert nobody looks at any more. Changes it held but the
    /// sink has not heard go out first; a UEBA entity's cooldown ends with its alert.
    pub fn forget_closed(&mut self, ids: &[String], sink: &mut impl AlertSink) {
        if ids.is_empty() || self.open.is_empty() {
            return;
        }
        let closed: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, o)| ids.contains(&o.alert.id))
            .map(|(&key, _)| key)
            .collect();
        for key in closed {
            let Some(o) = self.open.remove(&key) else {
                continue;
            };
            if o.dirty {
                sink.alert(&o.alert, false);
            }
            if o.alert.alert_type == AlertType::Ueba {
                // The alert's own entity (its key, unless it is keyed by address) and every
                // entity that joined it.
                self.ueba.end_cooldown(key ^ UEBA_SALT);
                for (&entity_key, _) in self.alias.iter().filter(|&(_, &k)| k == key) {
                    self.ueba.end_cooldown(entity_key ^ UEBA_SALT);
                }
            }
            self.members.remove(&key);
            self.alias.retain(|_, k| *k != key);
            self.actors.retain(|_, k| *k != key);
        }
    }

    /// Moves the closed anomaly minutes into `out`, then a copy of each source's open minute
    /// that changed since the last call. A minute closes only when its source's next event falls
    /// in a later one; without the copies, the last minute before traffic goes quiet would stay
    /// out of the series (and the dashboard's timeline) until the source spoke again, or the
    /// service restarted. A copy and the closed minute share the series key, so the closed one
    /// (written later, with every event) replaces it.
    pub fn take_minutes(&mut self, out: &mut Vec<MinutePoint>) {
        out.append(&mut self.minutes);
        for (&source, st) in &self.sources {
            let m = st.minute;
            if m.events == 0 {
                continue;
            }
            let mark = (m.minute_ns, m.events);
            if self.open_minutes_out.get(&source) != Some(&mark) {
                self.open_minutes_out.insert(source, mark);
                out.push(m);
            }
        }
        if self.open_minutes_out.len() > self.sources.len() {
            let sources = &self.sources;
            self.open_minutes_out.retain(|s, _| sources.contains_key(s));
        }
    }

    /// Moves the closed risk-history hours into `out`.
    pub fn take_risk_points(&mut self, out: &mut Vec<RiskPoint>) {
        self.ueba.take_risk_points(out);
    }

    /// Applies an operator's verdict on an alert this worker raised: a false positive lowers the
    /// risk of the threshold that fired (raising it), a true positive raises it. Returns the
    /// change, or `None` when this worker does not own that threshold.
    pub fn feedback(&mut self, alert: &Alert, verdict: Verdict) -> Option<ThresholdChange> {
        let factor = match verdict {
            Verdict::Fp => 1.0 / FEEDBACK_STEP,
            Verdict::Tp => FEEDBACK_STEP,
        };
        let (name, dspot): (String, &mut Dspot) = match alert.alert_type {
            AlertType::Ml => {
                let source = watchpost_proto::hash64(alert.source.as_bytes());
                let st = self.sources.get_mut(&source)?;
                (
                    format!("ensemble:{}", alert.source),
                    st.model.threshold_mut(),
                )
            }
            AlertType::Ueba => {
                let kind = alert.detector.strip_prefix("ueba:")?;
                let t = UebaType::ALL.into_iter().find(|t| t.name() == kind)?;
                (alert.detector.clone(), self.ueba.threshold_mut(t))
            }
            _ => return None,
        };
        let old_risk = dspot.risk();
        // Brings the threshold up to date with the events since its last refresh, so the change
        // recorded is the feedback's alone.
        dspot.set_risk(old_risk);
        let old_threshold = dspot.threshold();
        let new_risk = dspot.set_risk(old_risk * factor);
        Some(ThresholdChange {
            detector: name,
            old_risk,
            new_risk,
            old_threshold: round6(old_threshold),
            new_threshold: round6(dspot.threshold()),
        })
    }

    /// A UUIDv7 from the event time, with the rest derived from the dedup key and a counter, so
    /// that a replay of the same input gives the same ids.
    fn next_id(&mut self, ts_ns: i64, key: u64) -> String {
        self.seq += 1;
        let ms = (ts_ns.max(0) / 1_000_000) as u64 & ((1 << 48) - 1);
        let r1 = fmix64(key ^ self.seq.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let r2 = fmix64(r1 ^ key.rotate_left(17));
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        b[6..14].copy_from_slice(&r1.to_be_bytes());
        b[14..].copy_from_slice(&r2.to_be_bytes()[..2]);
        b[6] = 0x70 | (b[6] & 0x0f);
        b[8] = 0x80 | (b[8] & 0x3f);
        Uuid::from_bytes(b).to_string()
    }
}

/// The ATT&CK reading of an indicator hit: a known-bad address, name or URL is contact with
/// attacker infrastructure (Command and Control, Application Layer Protocol); a known-bad file
/// hash is a malicious file run or written (Execution, User Execution: Malicious File).
/// The record of a Sigma rule's match: an alert (`dedup` `sigma`) or a signal (`signal`).
fn rule_match_alert(entry: &RuleEntry, dedup: &str) -> MatchAlert {
    MatchAlert {
        alert_type: AlertType::Sigma,
        severity: entry.severity,
        title: entry.rule.title.clone(),
        detector: entry.rule.id.clone(),
        detector_name: entry.rule.title.clone(),
        dedup: format!("{dedup}:{}", entry.rule.id),
        attack: entry.attack.clone(),
    }
}

/// The alert (or signal) record of an indicator match; `dedup` is `ioc` or `signal:ioc`.
fn ioc_match_alert(ind: &watchpost_rules::Indicator, dedup: &str) -> MatchAlert {
    MatchAlert {
        alert_type: AlertType::Ioc,
        severity: if dedup == "ioc" { 4 } else { 2 },
        title: SignalTitle::Indicator {
            kind: ind.kind.as_str(),
            value: &ind.value,
            label: ind.label.as_deref(),
        }
        .text()
        .into_owned(),
        detector: format!("ioc:{}", ind.source),
        detector_name: format!("Threat feed {}", ind.source),
        dedup: format!("{dedup}:{}", ind.value),
        attack: ioc_attack_of(ind.kind).to_vec(),
    }
}

/// ATT&CK of an indicator match, worked out once per kind of indicator: an address, name or URL
/// is contact with attacker infrastructure, a file hash a malicious file.
fn ioc_attack_of(kind: IocKind) -> &'static [AttackMapping] {
    static BY_KIND: std::sync::LazyLock<[Vec<AttackMapping>; 2]> = std::sync::LazyLock::new(|| {
        [
            ["attack.command-and-control", "attack.t1071"],
            ["attack.execution", "attack.t1204.002"],
        ]
        .map(|tags| watchpost_rules::Attack::get().mappings(&tags.map(String::from)))
    });
    let file = matches!(kind, IocKind::Md5 | IocKind::Sha1 | IocKind::Sha256);
    &BY_KIND[usize::from(file)]
}

/// The title of a group alert or signal standing for `entities` entities: the rule's title and
/// the count, so that a feed never calls one entity "many".
fn group_title(base: &str, entities: u64) -> String {
    if entities == 1 {
        format!("{base} (1 entity)")
    } else {
        format!("{base} ({entities} entities)")
    }
}

/// The entity a rule alert is about: the event's first scored entity (user, reporting host,
/// client address), else its first entity.
fn primary_entity(r: &DetectRecord) -> Option<usize> {
    r.entities()
        .iter()
        .position(|e| e.ueba != crate::record::NOT_SCORED)
        .or((r.n_entities > 0).then_some(0))
}

/// The address acting in the event (an IP entity in the `source` role) when it is not the
/// primary entity itself: the attacker's address behind a failed login for an account.
fn actor_address(r: &DetectRecord, primary: Option<usize>) -> Option<usize> {
    r.entities().iter().enumerate().position(|(i, e)| {
        Some(i) != primary
            && e.kind == EntityKind::Ip as u8
            && e.role == watchpost_proto::Role::Source as u8
    })
}

/// Lists the entity `uuid` (built by `make`, only when it is listed) among the alert's related
/// entities, unless the alert names it already or lists [`MAX_RELATED`]; true when it was added.
fn relate(alert: &mut Alert, uuid: Uuid, make: impl FnOnce() -> EntityRef) -> bool {
    let known = alert.entity.as_ref().is_some_and(|x| x.uuid == uuid)
        || alert.related_entities.iter().any(|x| x.uuid == uuid);
    let added = !known && alert.related_entities.len() < MAX_RELATED;
    if added {
        alert.related_entities.push(make());
    }
    added
}

/// The event's entities other than `primary`, as related entities.
fn others(r: &DetectRecord, primary: Option<usize>) -> Vec<EntityRef> {
    r.entities()
        .iter()
        .enumerate()
        .filter(|(j, _)| Some(*j) != primary)
        .map(|(_, e)| entity_ref(e))
        .collect()
}

fn entity_ref(e: &crate::record::RecordEntity) -> EntityRef {
    EntityRef {
        kind: EntityKind::from_u8(e.kind).unwrap_or(EntityKind::Host),
        role: watchpost_proto::Role::from_u8(e.role).name().to_string(),
        // Names are resolved from the entity table when the alert is read; the record carries
        // only the UUID.
        value: String::new(),
        uuid: Uuid::from_bytes(e.uuid),
    }
}

/// The named parts of a score, rounded for output, and the name of the largest.
fn breakdown(parts: &[(&'static str, f64)]) -> (&'static str, BTreeMap<String, f64>) {
    let top = parts
        .iter()
        .copied()
        .fold(("", f64::MIN), |a, b| if b.1 > a.1 { b } else { a })
        .0;
    let map = parts
        .iter()
        .map(|(k, v)| (k.to_string(), round6(*v)))
        .collect();
    (top, map)
}

/// Six decimals, and finite: a UEBA type's threshold is infinite until it calibrates, and JSON
/// cannot hold an infinity (see [`watchpost_proto::finite`]).
fn round6(x: f64) -> f64 {
    if !x.is_finite() {
        return watchpost_proto::finite(x);
    }
    (x * 1e6).round() / 1e6
}

/// The ensemble's parts of a score, named as alerts name them.
fn ml_parts(c: &crate::ensemble::Contributions) -> [(&'static str, f64); 4] {
    [
        ("hst", c.hst),
        ("markov", c.markov),
        ("holt_winters", c.holt_winters),
        ("cusum", c.cusum),
    ]
}

/// What an ensemble score found, by its largest part.
fn ml_finding(s: &Scored) -> &'static str {
    let top = ml_parts(&s.contributions)
        .iter()
        .fold(("", f64::MIN), |a, b| if b.1 > a.1 { *b } else { a })
        .0;
    match top {
        "hst" => "unusual event content",
        "markov" => "unusual sequence of messages",
        _ => "unusual volume",
    }
}

/// 4 (high) when two or more sub-scores are fully novel, the score is near its maximum, or a
/// single deviation has odds beyond one in a million (20 bits); 3 otherwise.
fn ueba_severity(s: &SubScores, score: f64, deviation: Option<&Deviation>) -> u8 {
    let strong = [s.time_of_day, s.source_novelty, s.volume, s.pattern_novelty]
        .iter()
        .filter(|&&x| x >= 0.9)
        .count();
    let extreme = deviation.is_some_and(|d| d.bits >= 20.0);
    if strong >= 2 || score >= 0.8 || extreme {
        4
    } else {
        3
    }
}

/// The detector name of a UEBA type's alerts.
/// How a UEBA title names an entity of `kind`.
fn ueba_who(kind: UebaType) -> &'static str {
    match kind {
        UebaType::User => "User",
        UebaType::Host => "Host",
        UebaType::Ip => "IP address",
        UebaType::ServiceAccount => "Service account",
    }
}

/// The title of a UEBA signal: a deviation short of an alert, so "rarely" where an alert says
/// "never"; with the measure (`specific`) on the record, without it where signals of one kind
/// add up (a risk alert's contributions, a group signal).
fn signal_title(kind: UebaType, d: &Deviation, specific: bool) -> String {
    let who = ueba_who(kind);
    match d.signal {
        Signal::NewHour if specific => format!(
            "{who} active at {:02}:00 UTC, an hour it is rarely active in",
            d.value as u32
        ),
        Signal::NewHour => format!("{who} active at an hour it is rarely active in"),
        Signal::Rate if specific => format!(
            "{who} with {:.0} times its usual rate of events",
            d.value.max(1.0)
        ),
        Signal::Rate => format!("{who} with more events than usual"),
        Signal::NewSource if kind == UebaType::Ip => {
            "IP address reached a host new to it".to_string()
        }
        Signal::NewSource => format!("{who} seen from a new address"),
        Signal::NewHost => format!("{who} on a host new to it"),
        Signal::Dormancy => format!("{who} active again after a long silence"),
    }
}

/// ATT&CK of a UEBA deviation, worked out once per entity type and signal (as [`ueba_attack`]
/// maps an alert: a first host is a lateral step whoever takes it).
fn ueba_attack_of(kind: UebaType, signal: Signal) -> &'static [AttackMapping] {
    const KINDS: [UebaType; 4] = [
        UebaType::User,
        UebaType::Host,
        UebaType::Ip,
        UebaType::ServiceAccount,
    ];
    const SIGNALS: [Signal; 5] = [
        Signal::NewHour,
        Signal::Rate,
        Signal::NewSource,
        Signal::NewHost,
        Signal::Dormancy,
    ];
    static TABLE: std::sync::LazyLock<Vec<Vec<AttackMapping>>> = std::sync::LazyLock::new(|| {
        KINDS
            .iter()
            .flat_map(|&kind| {
                SIGNALS.iter().map(move |&signal| match signal {
                    Signal::NewHost => ueba_attack(UebaType::Host, "source_novelty"),
                    Signal::NewSource => ueba_attack(kind, "source_novelty"),
                    Signal::Rate => ueba_attack(kind, "volume"),
                    Signal::NewHour | Signal::Dormancy => ueba_attack(kind, "time_of_day"),
                })
            })
            .collect()
    });
    let k = KINDS.iter().position(|&x| x == kind).unwrap_or(0);
    let s = SIGNALS.iter().position(|&x| x == signal).unwrap_or(0);
    &TABLE[k * SIGNALS.len() + s]
}

fn ueba_detector(kind: UebaType) -> &'static str {
    match kind {
        UebaType::User => "ueba:user",
        UebaType::Host => "ueba:host",
        UebaType::Ip => "ueba:ip",
        UebaType::ServiceAccount => "ueba:service_account",
    }
}

/// The title of an alert raised by one strong deviation: what was extreme, in the analyst's
/// words, with the measure where there is one.
fn deviation_title(who: &str, kind: UebaType, d: &Deviation) -> String {
    match d.signal {
        Signal::NewHour => format!(
            "{who} active at {:02}:00 UTC, an hour it has never been active in",
            d.value as u32
        ),
        Signal::Rate => format!(
            "{who} with {:.0} times its usual rate of events",
            d.value.max(1.0)
        ),
        Signal::NewSource if kind == UebaType::Ip => {
            "IP address reached a host it never reached before".to_string()
        }
        Signal::NewSource => format!("{who} seen from an address it has never used"),
        Signal::NewHost => format!("{who} on a host it has never been on"),
        Signal::Dormancy => format!(
            "{who} active again after {:.0} days of silence",
            d.value.floor()
        ),
    }
}

/// The ATT&CK technique a UEBA deviation most often means, by entity type and the sub-score that
/// dominated (documented in docs/detection.md).
fn ueba_attack(kind: UebaType, top: &str) -> Vec<AttackMapping> {
    let m = |tactic_id: &str, tactic: &str, technique_id: &str, technique: &str| AttackMapping {
        tactic_id: tactic_id.into(),
        tactic: tactic.into(),
        technique_id: technique_id.into(),
        technique: technique.into(),
    };
    let one = match (kind, top) {
        (UebaType::Ip | UebaType::Host, "source_novelty") => {
            m("TA0008", "Lateral Movement", "T1021", "Remote Services")
        }
        (_, "source_novelty" | "time_of_day") => {
            m("TA0001", "Initial Access", "T1078", "Valid Accounts")
        }
        (UebaType::Host, "volume") => m(
            "TA0010",
            "Exfiltration",
            "T1048",
            "Exfiltration Over Alternative Protocol",
        ),
        (_, "volume") => m("TA0006", "Credential Access", "T1110", "Brute Force"),
        (UebaType::Ip, _) => m("TA0043", "Reconnaissance", "T1595", "Active Scanning"),
        _ => m(
            "TA0002",
            "Execution",
            "T1059",
            "Command and Scripting Interpreter",
        ),
    };
    vec![one]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordEntity;
    use watchpost_proto::Role;

    const HOUR: i64 = 3_600_000_000_000;
    const DAY: i64 = 24 * HOUR;

    fn params() -> DetectorParams {
        DetectorParams {
            ml_enabled: true,
            ml_risk: 1e-4,
            ml_alert_risk: 1e-4,
            ml_cooldown_ns: 300_000_000_000,
            sigma_cooldown_ns: 300_000_000_000,
            correlation_cooldown_ns: 300_000_000_000,
            ioc_cooldown_ns: 3_600_000_000_000,
            ioc_per_indicator: true,
            ioc_min_confidence: 50,
            group_after: 3,
            group_window_ns: HOUR,
            correlation_max_groups: 1000,
            killchain_min_tactics: 3,
            killchain_window_ns: 24 * 3_600_000_000_000,
            ueba: UebaParams {
                warmup_ns: 2 * DAY,
                warmup_min_events: 50,
                ..UebaParams::default()
            },
            sigma_alert_min_level: Level::Medium,
            sigma_alert_rules: Default::default(),
            sigma_signal_rules: Default::default(),
            risk: RiskParams {
                threshold: 60.0,
                window_ns: DAY,
                max_entities: 1000,
                level_weights: Default::default(),
            },
        }
    }

    /// Issue 50, item 6: the last minute before traffic went quiet showed 0 events on the
    /// timeline for minutes (until a restart), as a minute was handed out only once closed.
    #[test]
    fn the_open_minute_is_handed_out_as_it_changes_and_replaced_when_it_closes() {
        let mut d = Detector::new(params());
        let mut sink = Collect::default();
        let minute = 60_000_000_000;
        let base = 1_700_000_040 * 1_000_000_000 - 1_700_000_040 * 1_000_000_000 % minute;
        let mut out = Vec::new();
        for i in 0..5 {
            d.process(&login(base + i * 1_000_000_000, 1, OFFICE, 1), &mut sink);
        }
        d.take_minutes(&mut out);
        let got: Vec<(i64, u32)> = out.iter().map(|m| (m.minute_ns, m.events)).collect();
        assert_eq!(got, [(base, 5)], "the open minute, as it is now");
        // Nothing new: nothing handed out again.
        out.clear();
        d.take_minutes(&mut out);
        assert!(out.is_empty(), "{out:?}");
        // More events in it: the copy again, with them.
        d.process(&login(base + 30_000_000_000, 1, OFFICE, 1), &mut sink);
        d.take_minutes(&mut out);
        let got: Vec<(i64, u32)> = out.iter().map(|m| (m.minute_ns, m.events)).collect();
        assert_eq!(got, [(base, 6)]);
        // The next minute closes it: the closed minute (same key, every event), then the new
        // open one.
        out.clear();
        d.process(&login(base + minute + 1, 1, OFFICE, 1), &mut sink);
        d.take_minutes(&mut out);
        let got: Vec<(i64, u32)> = out.iter().map(|m| (m.minute_ns, m.events)).collect();
        assert_eq!(got, [(base, 6), (base + minute, 1)]);
    }

    fn login(ts: i64, user: u64, ip: u128, template: u64) -> DetectRecord {
        let mut r = DetectRecord {
            ts_ns: ts,
            source: 7,
            template,
            client_ip: ip,
            message_len: 60,
            severity: 1,
            entity_count: 1,
            n_entities: 1,
            owned: u8::MAX,
            ..DetectRecord::default()
        };
        r.set_source_name("sshd");
        r.entities[0] = RecordEntity {
            hash: user,
            uuid: [user as u8; 16],
            kind: EntityKind::User as u8,
            role: 2,
            ueba: UebaType::User as u8,
        };
        r
    }

    const OFFICE: u128 = 0xffff_0a01_0203;

    /// Ten office days of twelve colleagues, so the user type's threshold has calibrated
    /// (2,000 scores).
    fn office_logins(d: &mut Detector, sink: &mut Collect) {
        for day in 0..10 {
            for h in 9..17 {
                for m in 0..6 {
                    for user in 1..=12 {
                        let ts = day * DAY + h * HOUR + m * 600_000_000_000 + user as i64;
                        d.process(&login(ts, user, OFFICE, 1 + (m as u64 % 3)), sink);
                    }
                }
            }
        }
        d.flush(sink);
    }

    #[test]
    fn an_exception_keeps_the_alert_back_and_counts_every_event_it_held() {
        let t = 10 * DAY + 10 * HOUR;
        // Five logins of user 1 from networks of 203.0/16, then one of user 2 from elsewhere.
        let run = |exceptions: Option<Arc<ExceptionSet>>| {
            let mut d = Detector::new(params());
            let mut sink = Collect::default();
            office_logins(&mut d, &mut sink);
            if let Some(set) = exceptions {
                d.set_exceptions(set);
            }
            for k in 0..5u16 {
                let ip = 0xffff_cb00_7101 + (u128::from(k) << 8);
                let mut r = login(t + i64::from(k) * 1_000_000_000, 1, ip, 1);
                r.pos = k;
                d.process(&r, &mut sink);
            }
            d.process(
                &login(t + 10_000_000_000, 2, 0xffff_c633_6401, 1),
                &mut sink,
            );
            d.flush(&mut sink);
            sink.alerts.into_values().collect::<Vec<Alert>>()
        };
        let without = run(None);
        let held = without
            .iter()
            .find(|a| a.first_seen_ns < t + 10_000_000_000)
            .expect("user 1's alert without the exception");
        let draft: watchpost_proto::ExceptionDraft = serde_json::from_value(serde_json::json!({
            "detector": "ueba:*", "reason": "the partner's network", "author": "ana",
            "conditions": {"source_cidrs": ["203.0.0.0/16"]}
        }))
        .unwrap();
        let e = watchpost_proto::Exception::create(draft, Uuid::nil(), 0).unwrap();
        let hits = Arc::new(crate::ExceptionHits::default());
        let with = run(Some(Arc::new(ExceptionSet::compile(&[e], |_| {
            hits.clone()
        }))));
        // Only user 2's alert is left.
        assert_eq!(with.len(), without.len() - 1, "{with:#?}");
        assert!(with.iter().all(|a| a.first_seen_ns >= t + 10_000_000_000));
        // Every event that raised or joined the alert without the exception is a hit with it.
        assert_eq!(hits.count(), held.count);
        assert_eq!(hits.last_ns(), Some(held.last_seen_ns));
    }

    #[test]
    fn a_login_from_a_new_network_alerts_once_and_repeats_bump_the_count() {
        let mut d = Detector::new(params());
        let mut sink = Collect::default();
        office_logins(&mut d, &mut sink);
        assert!(sink.alerts.is_empty(), "{:?}", sink.alerts.values().next());
        let t = 10 * DAY + 10 * HOUR;
        let far: u128 = 0xffff_cb00_7101;
        // Five logins, each from another unknown network (one the baseline has since learned
        // is no longer news).
        for k in 0..5 {
            let ip = far + (u128::from(k as u8) << 8);
            let mut r = login(t + k * 1_000_000_000, 1, ip, 1);
            r.pos = k as u16;
            d.process(&r, &mut sink);
        }
        d.flush(&mut sink);
        let ueba: Vec<&Alert> = sink
            .alerts
            .values()
            .filter(|a| a.alert_type == AlertType::Ueba)
            .collect();
        assert_eq!(ueba.len(), 1, "one alert, repeats folded in");
        let a = ueba[0];
        // Each further unknown network is less news than the last (the account now meets new
        // networks often: `Novelty::new_item_chance`), so the last ones no longer alarm.
        assert!(a.count >= 2 && a.count <= 5, "{a:?}");
        assert_eq!(a.contributing_events.len() as u64, a.count);
        assert_eq!(a.detector, "ueba:user");
        assert!(a.contributions["source_novelty"] > 0.0);
        assert_eq!(
            a.deviation.map(|d| d.signal),
            Some(Signal::NewSource),
            "a first new network for a settled account: {a:?}"
        );
        assert_eq!(a.attack[0].technique_id, "T1078");
        assert!(a.score > a.threshold);
        // Time-ordered id of the triggering event's millisecond.
        let id = Uuid::parse_str(&a.id).unwrap();
        assert_eq!(id.get_version_num(), 7);
    }

    /// A login of `user` on server `host` (the reporter) from `ip`.
    fn login_on(ts: i64, user: u64, host: u64, ip: u128) -> DetectRecord {
        let mut r = login(ts, user, ip, 1);
        r.reporter = host;
        r.entities[1] = RecordEntity {
            hash: host,
            uuid: [host as u8; 16],
            kind: EntityKind::Host as u8,
            role: Role::Reporter as u8,
            ueba: UebaType::Host as u8,
        };
        r.n_entities = 2;
        r.entity_count = 2;
        r
    }

    /// Ten office days of twelve colleagues on server `host`, 09:00-17:00.
    fn office_logins_on(d: &mut Detector, sink: &mut Collect, host: u64) {
        for day in 0..10 {
            for h in 9..17 {
                for m in 0..6 {
                    for user in 1..=12 {
                        let ts = day * DAY + h * HOUR + m * 600_000_000_000 + user as i64;
                        d.process(&login_on(ts, user, host, OFFICE), sink);
                    }
                }
            }
        }
        d.flush(sink);
    }

    #[test]
    fn a_server_and_an_account_alarmed_from_one_address_are_one_alert_two_accounts_are_not() {
        const SERVER: u64 = 100;
        let mut d = Detector::new(params());
        let mut sink = Collect::default();
        office_logins_on(&mut d, &mut sink, SERVER);
        assert!(sink.alerts.is_empty(), "{:?}", sink.alerts.values().next());
        // 03:00: an hour neither the accounts nor the server have ever been active in.
        let t = 10 * DAY + 3 * HOUR;
        d.process(&login_on(t, 1, SERVER, OFFICE), &mut sink);
        d.process(&login_on(t + 60_000_000_000, 2, SERVER, OFFICE), &mut sink);
        d.flush(&mut sink);
        // The server alarmed too (it is in its cooldown) ...
        let server = d.ueba().baseline(SERVER).expect("the server's baseline");
        assert_eq!(
            server.lifecycle(t, d.ueba().params()),
            crate::ueba::Lifecycle::Cooldown
        );
        // ... and joined account 1's alert; account 2 has an alert of its own.
        let ueba: Vec<&Alert> = sink
            .alerts
            .values()
            .filter(|a| a.alert_type == AlertType::Ueba)
            .collect();
        assert_eq!(ueba.len(), 2, "{ueba:#?}");
        let first = ueba.iter().find(|a| a.first_seen_ns == t).unwrap();
        assert_eq!(
            first.entity.as_ref().unwrap().uuid,
            Uuid::from_bytes([1; 16])
        );
        assert!(
            first
                .related_entities
                .iter()
                .any(|e| e.uuid == Uuid::from_bytes([SERVER as u8; 16])),
            "{first:#?}"
        );
        let second = ueba.iter().find(|a| a.first_seen_ns > t).unwrap();
        assert_eq!(
            second.entity.as_ref().unwrap().uuid,
            Uuid::from_bytes([2; 16])
        );
    }

    #[test]
    fn an_alert_closed_by_an_analyst_takes_no_repeats_the_next_firing_opens_a_new_one() {
        let far: u128 = 0xffff_cb00_7101;
        let t = 10 * DAY + 10 * HOUR;
        // Logins from five unknown networks a second apart, inside the cooldown (as in
        // `a_login_from_a_new_network_alerts_once_and_repeats_bump_the_count`); with `close`,
        // the first alert is closed after the first login.
        let run = |close: bool| {
            let mut d = Detector::new(params());
            let mut sink = Collect::default();
            office_logins(&mut d, &mut sink);
            d.process(&login(t, 1, far, 1), &mut sink);
            d.flush(&mut sink);
            let first = sink.alerts.keys().next().expect("the first alert").clone();
            if close {
                d.forget_closed(std::slice::from_ref(&first), &mut sink);
            }
            for k in 1..5u16 {
                let mut r = login(
                    t + i64::from(k) * 1_000_000_000,
                    1,
                    far + (u128::from(k) << 8),
                    1,
                );
                r.pos = k;
                d.process(&r, &mut sink);
            }
            d.flush(&mut sink);
            (first, sink.alerts)
        };
        let (first, open) = run(false);
        assert_eq!(open.len(), 1);
        assert!(open[&first].count >= 2, "repeats fold into the open alert");
        let (first, closed) = run(true);
        assert_eq!(closed.len(), 2, "{closed:#?}");
        assert_eq!(closed[&first].count, 1, "the closed alert took no repeat");
        let next = closed.values().find(|a| a.id != first).unwrap();
        assert_eq!(next.count, open[&first].count - 1, "{next:#?}");
        assert_eq!(next.detector, "ueba:user");
    }

    #[test]
    fn replays_are_deterministic() {
        let run = || {
            let mut d = Detector::new(params());
            let mut sink = Collect::default();
            let mut rng = crate::rng::SplitMix64::new(3);
            for i in 0..40_000i64 {
                let user = 1 + rng.below(20);
                // The last thousand logins come from addresses all over the place.
                let ip = OFFICE + (u128::from(rng.below(if i > 39_000 { 200 } else { 3 })) << 8);
                d.process(
                    &login(i * 30_000_000_000, user, ip, rng.below(4)),
                    &mut sink,
                );
            }
            d.flush(&mut sink);
            sink.alerts
        };
        let a = run();
        assert!(!a.is_empty());
        assert_eq!(a, run());
    }

    #[test]
    fn a_rare_hour_short_of_an_alert_is_a_signal_about_the_account_alone() {
        let mut d = Detector::new(params());
        let mut sink = Collect::default();
        // Three office days of one account (144 logins), then one at 03:00: log2(145 / 0.5) =
        // 8.2 bits, past the signal's 7 and short of the alert's 9.
        for day in 0..3 {
            for h in 9..17 {
                for m in 0..6 {
                    let ts = day * DAY + h * HOUR + m * 600_000_000_000;
                    d.process(&login(ts, 1, OFFICE, 1), &mut sink);
                }
            }
        }
        d.process(&login(3 * DAY + 3 * HOUR, 1, OFFICE, 1), &mut sink);
        d.flush(&mut sink);
        assert!(
            sink.alerts
                .values()
                .all(|a| a.alert_type != AlertType::Ueba),
            "{:?}",
            sink.alerts
        );
        let signals: Vec<&Alert> = sink
            .signals
            .values()
            .filter(|s| s.detector == "ueba:user")
            .collect();
        assert_eq!(signals.len(), 1, "{signals:?}");
        let s = signals[0];
        assert_eq!(
            s.title,
            "User active at 03:00 UTC, an hour it is rarely active in"
        );
        assert_eq!(s.deviation.map(|x| x.signal), Some(Signal::NewHour));
        assert!(
            s.dedup_key.starts_with("signal:ueba:user:"),
            "{}",
            s.dedup_key
        );
        assert_eq!(s.attack[0].technique_id, "T1078");
    }

    /// Three quiet hours of one source, then a minute's burst of its usual lines, then a line
    /// of a kind it never logged; with ml alerts at `alert_risk`.
    fn burst_then_novel_line(alert_risk: f64) -> Collect {
        let mut d = Detector::new(DetectorParams {
            ml_alert_risk: alert_risk,
            ..params()
        });
        let mut sink = Collect::default();
        let mut ts = 0;
        for i in 0..10_800i64 {
            ts = i * 1_000_000_000;
            d.process(
                &login(ts, 1 + (i % 5) as u64, OFFICE, (i % 3) as u64),
                &mut sink,
            );
        }
        for i in 0..600i64 {
            ts += 100_000_000;
            d.process(
                &login(ts, 1 + (i % 5) as u64, OFFICE, (i % 3) as u64),
                &mut sink,
            );
        }
        ts += 3_600_000_000_000;
        for i in 0..1_200i64 {
            ts += 1_000_000_000;
            let mut r = login(ts, 1 + (i % 5) as u64, OFFICE, (i % 3) as u64);
            if i == 900 {
                // A long, severe line of a template the source never logged.
                r.template = 99;
                r.severity = 5;
                r.message_len = 900;
            }
            d.process(&r, &mut sink);
        }
        d.flush(&mut sink);
        sink
    }

    #[test]
    fn a_volume_anomaly_short_of_the_alert_quantile_is_a_signal_a_novel_line_still_alerts() {
        let ml = |c: &Collect| -> Vec<Alert> {
            c.alerts
                .values()
                .filter(|a| a.detector == "ensemble")
                .cloned()
                .collect()
        };
        // Every anomaly alerts when the two risks are one.
        let all = burst_then_novel_line(1e-4);
        assert!(
            ml(&all).iter().any(|a| a.title.ends_with("unusual volume")),
            "{:?}",
            ml(&all)
        );
        assert!(all.signals.values().all(|s| s.detector != "ensemble"));
        // With alerts rarer than anomalies, the burst is a signal of the source's anomalies
        // (risk for its entity), and the never-seen line still alerts.
        let split = burst_then_novel_line(1e-9);
        let signals: Vec<&Alert> = split
            .signals
            .values()
            .filter(|s| s.detector == "ensemble")
            .collect();
        assert!(
            signals
                .iter()
                .any(|s| s.title == "Anomaly in sshd: unusual volume"
                    && s.dedup_key.starts_with("signal:ml:sshd")),
            "{signals:?}"
        );
        assert!(
            ml(&split)
                .iter()
                .all(|a| !a.title.ends_with("unusual volume")),
            "{:?}",
            ml(&split)
        );
        assert!(
            ml(&split)
                .iter()
                .any(|a| a.title.ends_with("unusual event content")
                    || a.title.ends_with("unusual sequence of messages")),
            "{:?}",
            ml(&split)
        );
    }

    #[test]
    fn feedback_moves_the_threshold_that_fired_within_bounds() {
        let mut d = Detector::new(params());
        let mut sink = Collect::default();
        for i in 0..5_000i64 {
            d.process(
                &login(i * 1_000_000_000, 1, OFFICE, (i % 3) as u64),
                &mut sink,
            );
        }
        let alert = Alert {
            id: String::new(),
            alert_type: AlertType::Ml,
            severity: 3,
            title: String::new(),
            detector: "ensemble".into(),
            detector_name: String::new(),
            dedup_key: String::new(),
            first_seen_ns: 0,
            last_seen_ns: 0,
            count: 1,
            source: "sshd".into(),
            entity: None,
            score: 0.0,
            threshold: 0.0,
            contributions: BTreeMap::new(),
            attack: Vec::new(),
            contributing_events: Vec::new(),
            related_entities: Vec::new(),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Default::default(),
        };
        // "sshd" hashes to the source key only if the record's source is that hash.
        let mut r = login(5_000_000_000_000, 1, OFFICE, 1);
        r.source = watchpost_proto::hash64(b"sshd");
        for i in 0..3_000i64 {
            r.ts_ns += 1_000_000_000;
            r.template = (i % 3) as u64;
            d.process(&r, &mut sink);
        }
        let c = d.feedback(&alert, Verdict::Fp).expect("owned");
        assert!(c.new_risk < c.old_risk);
        assert!(c.new_threshold >= c.old_threshold, "{c:?}");
        for _ in 0..100 {
            d.feedback(&alert, Verdict::Fp);
        }
        let c = d.feedback(&alert, Verdict::Fp).unwrap();
        assert!((c.new_risk - 1e-6).abs() < 1e-12, "floor at risk/100");
        let mut ueba = alert.clone();
        ueba.alert_type = AlertType::Ueba;
        ueba.detector = "ueba:host".into();
        let c = d.feedback(&ueba, Verdict::Tp).unwrap();
        assert!(c.new_risk > c.old_risk);
    }
}
