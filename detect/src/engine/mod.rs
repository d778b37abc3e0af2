//! The detection state of one stage B worker, driven by [`DetectRecord`]s: the content ensemble
//! of every source it owns, the UEBA baselines of every entity it owns, the alerts still inside
//! their cooldown, and the per-minute anomaly series.
//!
//! It has no threads, clocks or I/O of its own: the live stage and `watchpost analyze` drive the
//! same [`Detector`] with the same records, so a replay gives the alerts live ingestion gives.
//! Alerts leave through an [`AlertSink`]; creating one allocates (a few per ten thousand events
//! at most), scoring an event does not.

mod book;
mod carry;
pub(crate) use carry::OpenBook;
mod correlation;
mod ioc;
mod ml;
mod params;
mod persistence;
mod risk;
mod sigma;
mod signal;
mod sink;
mod sustained;
mod ueba;

pub use params::DetectorParams;
pub use sink::{AlertSink, Collect};

use crate::dspot::Dspot;
use crate::ensemble::SourceModel;
use crate::exceptions::ExceptionSet;
use crate::killchain::KillChain;
use crate::names::{IndicatorBook, RuleBook};
use crate::record::{CorrelationHit, DetectBatch, DetectRecord};
use crate::risk::RiskBook;
use crate::time::EventTime;
use crate::ueba::{Observation, Outcome, Ueba, UebaType};
use bincode::{Decode, Encode};
use book::{GroupWindow, OpenAlert, round6};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use ueba::{UEBA_SALT, ueba_detector};
use watchpost_proto::{
    Alert, AlertType, MinutePoint, RiskPoint, RuleFires, ThresholdChange, U64Map, U64Set, Verdict,
};
use watchpost_rules::{Correlator, Fired, RuleEntry};

/// How many events ahead [`Detector::process_all`] prefetches baselines: one per prefetch stage
/// (slot, baseline, lists), each event's work giving the previous stage's loads time to land.
pub const LOOKAHEAD: usize = 3;

/// How long a signal stays open for repeats of its rule and entity: a flood of one rule on one
/// entity is one signal an hour, one addition to its risk.
pub const SIGNAL_WINDOW_NS: i64 = 3_600_000_000_000;

/// The detector name of risk alerts.
pub const RISK_DETECTOR: &str = "risk";

/// Feedback moves a risk by this factor: down on a false positive (a higher threshold), up on a
/// true positive. Eight false positives in a row reach the 1/100 floor only after ~21 steps, so
/// one operator's click cannot silence a detector.
pub const FEEDBACK_STEP: f64 = 1.25;

/// What the UEBA judgement of each entity of an event knows of the whole event (see
/// `ueba::Observation`).
#[derive(Clone, Copy, Debug)]
struct EventFacts {
    /// It names an account (a user or service account).
    account_named: bool,
    /// A rule called it a failed logon.
    failed_logon: bool,
    /// The person (user account) who came to the reporting host, 0 if none.
    person: u64,
}

/// A source's detectors and its open minute.
#[derive(Clone, Debug)]
pub struct SourceState {
    /// The ensemble and its threshold.
    pub model: SourceModel,
    minute: MinutePoint,
    /// The source's last failed logon (see `ml::GUESS_WAKE_NS`), ns: a moment's state, not
    /// saved (the saved layout is the model and the minute, as before it).
    last_guess_ns: i64,
}

impl Encode for SourceState {
    fn encode<E: bincode::enc::Encoder>(
        &self,
        e: &mut E,
    ) -> Result<(), bincode::error::EncodeError> {
        self.model.encode(e)?;
        self.minute.encode(e)
    }
}

impl<C> Decode<C> for SourceState {
    fn decode<D: bincode::de::Decoder<Context = C>>(
        d: &mut D,
    ) -> Result<Self, bincode::error::DecodeError> {
        Ok(SourceState {
            model: Decode::decode(d)?,
            minute: Decode::decode(d)?,
            last_guess_ns: i64::MIN,
        })
    }
}

bincode::impl_borrow_decode!(SourceState);

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
    /// The failed logons of each acting address over the last day (see `persistence`).
    persistence: persistence::Trails,
    /// Accounts active at an hour they are rarely active in, until a pause (see `sustained`).
    hour_runs: sustained::HourRuns,
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
            persistence: persistence::Trails::new(params.risk.max_entities),
            hour_runs: sustained::HourRuns::default(),
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

    /// Hosts whose slot on the board of who uses each host another host took, since the start
    /// (the board's own count: shared by the workers that share the board).
    pub fn peer_board_displaced(&self) -> u64 {
        self.ueba.board().displaced()
    }

    /// Shares the board of who uses each host with the process's other workers (see
    /// [`crate::PeerBoard`]): a person's first visit to a host is judged by what the host's
    /// own worker knows of it.
    pub fn set_peer_board(&mut self, board: Arc<crate::PeerBoard>) {
        self.ueba.set_board(board);
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
        // A rule called it a failed logon (see `persistence::is_guessing`): someone tried an
        // account, which neither the account's silence nor the source's anomalies should read
        // as the account, or the service, acting.
        let guessing = !matches.is_empty() && self.names_failed_logon(matches);
        if record.owned & 1 != 0 {
            self.ensemble(record, &time, guessing, sink);
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
        let failed_logon = account_named && guessing;
        // The person who came to the reporting host (not one a guesser only tried), whom the
        // host counts among its people.
        let person = if account_named && !failed_logon {
            record
                .entities()
                .iter()
                .find(|e| e.ueba_type() == Some(UebaType::User))
                .map_or(0, |e| e.hash)
        } else {
            0
        };
        let event = EventFacts {
            account_named,
            failed_logon,
            person,
        };
        // Accounts first: when one event alarms an account and the server it is on, the
        // account's alert is the incident's and the server's joins it (see `incident_of`).
        for hosts in [false, true] {
            for (i, e) in record.entities().iter().enumerate() {
                if record.owned & (2 << i) != 0
                    && let Some(kind) = e.ueba_type()
                    && (kind == UebaType::Host) == hosts
                {
                    self.judge_entity(record, i, kind, time, event, sink);
                }
            }
        }
    }

    /// Scores entity `i` of `record` (of UEBA type `kind`) against its baseline and raises
    /// what the outcome calls for, with what is known of the whole event (`event`).
    #[inline]
    fn judge_entity(
        &mut self,
        record: &DetectRecord,
        i: usize,
        kind: UebaType,
        time: EventTime,
        event: EventFacts,
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
            account_named: event.account_named,
            failed_logon: event.failed_logon,
            person: if kind == UebaType::Host && e.hash == record.reporter {
                event.person
            } else {
                0
            },
        };
        let outcome = self.ueba.observe(&o);
        self.follow_hour_run(record, i, kind, &outcome, sink);
        match outcome {
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

    /// Hands the sink every alert that changed since the last call, and forgets alerts whose
    /// cooldown is over. Called once per batch live, at the end offline.
    pub fn flush(&mut self, sink: &mut impl AlertSink) {
        self.sweep_correlations(sink);
        let now = self.now_ns;
        self.hour_runs.prune(now);
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
            if o.alert.detector == persistence::PERSISTENCE_DETECTOR {
                self.persistence.restart_alerted(key);
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
}

#[cfg(test)]
mod tests;
