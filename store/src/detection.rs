//! What detection keeps in the store: alerts, feedback, saved models and baselines, and the
//! anomaly and risk series.
//!
//! | family      | key                                              | value                          |
//! |-------------|--------------------------------------------------|--------------------------------|
//! | `alerts`    | alert id (UUIDv7, 16): time order                | the alert, JSON                |
//! | `alert_idx` | entity UUID (16) + alert id (16)                 | empty                          |
//! | `feedback`  | alert id (16) + received ns (8)                  | the feedback entry, JSON       |
//! | `models`    | `s` + source hash (8), or `t` for UEBA thresholds | bincode                        |
//! | `baselines` | entity hash (8)                                  | bincode                        |
//! | `series`    | `a` + minute ns (8) + source hash (8)            | events, sum, max, alarms       |
//! |             | `r` + entity hash (8) + hour ns (8)              | highest risk score (f32)       |
//! |             | `f` + hour ns (8) + rule key (8) + worker (1)    | Sigma fires in the hour (u32)  |
//! | `rules`     | `enabled:` + rule id                             | `1` or `0`                     |
//! | `triage`    | alert id (16)                                    | the triage record, JSON        |
//! | `exceptions`| exception id (16)                                | the exception, JSON            |
//! | `signals`   | signal id (16, UUIDv7): time order               | the signal (an alert record), JSON |
//! | `signal_idx`| entity UUID (16) + signal id (16)                | empty                          |
//! | `alert_recent` | last seen ns (8) + alert id (16): activity order | empty                        |
//! | `signal_recent`| last seen ns (8) + signal id (16)              | empty                          |
//!
//! Alerts are few (the detectors aim at a handful per ten thousand events), so they are JSON
//! documents and a listing scans the requested time range, by first event (the ids) or by latest
//! activity (`*_recent`, moved at each write of a record); only the entity filter, which the
//! dashboard's entity pages use, has an index. Triage lives apart from the alert because the data
//! plane rewrites an alert whenever repeats fold into it: the two writers never touch one key.

use crate::{Store, StoreError};
use rocksdb::{Direction, IteratorMode, WriteBatch};
use watchpost_proto::{
    Alert, AlertType, CloseReason, Exception, Feedback, MAX_TRIAGE_HISTORY, MinutePoint, RiskPoint,
    RuleFires, TOTAL_EXACT_UP_TO, Triage, TriageChange, TriageStatus, Uuid,
};

pub(crate) const CF_ALERTS: &str = "alerts";
pub(crate) const CF_ALERT_IDX: &str = "alert_idx";
pub(crate) const CF_FEEDBACK: &str = "feedback";
pub(crate) const CF_MODELS: &str = "models";
pub(crate) const CF_BASELINES: &str = "baselines";
pub(crate) const CF_SERIES: &str = "series";
pub(crate) const CF_RULES: &str = "rules";
pub(crate) const CF_TRIAGE: &str = "triage";
pub(crate) const CF_EXCEPTIONS: &str = "exceptions";
pub(crate) const CF_SIGNALS: &str = "signals";
pub(crate) const CF_SIGNAL_IDX: &str = "signal_idx";
/// Alert keys by latest activity: `last_seen_ns` (8 bytes big-endian) + the alert's key. An
/// alert's id orders it by its first event; a feed sorted by that buries an alert that keeps
/// repeating under newer, quieter ones.
pub(crate) const CF_ALERT_RECENT: &str = "alert_recent";
/// Signal keys by latest activity, as [`CF_ALERT_RECENT`].
pub(crate) const CF_SIGNAL_RECENT: &str = "signal_recent";

/// Where a kind of alert record lives: its records and its entity index. Signals (docs/risk.md)
/// are alert records in tables of their own, so listing them is the alert listing over other
/// families, and an alert query never reads them.
#[derive(Clone, Copy)]
pub(crate) struct Table {
    records: &'static str,
    index: &'static str,
    recent: &'static str,
    what: &'static str,
}

pub(crate) const ALERTS: Table = Table {
    records: CF_ALERTS,
    index: CF_ALERT_IDX,
    recent: CF_ALERT_RECENT,
    what: "alert",
};

const SIGNALS: Table = Table {
    records: CF_SIGNALS,
    index: CF_SIGNAL_IDX,
    recent: CF_SIGNAL_RECENT,
    what: "signal",
};

/// The order of an alert or signal listing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AlertOrder {
    /// Newest first by first event (the id's order).
    #[default]
    FirstSeen,
    /// Latest activity first: an alert that repeated a minute ago comes before one raised an
    /// hour ago and quiet since, whenever it was raised.
    LastSeen,
}

impl AlertOrder {
    /// The name in the API (`sort=`).
    pub fn name(self) -> &'static str {
        match self {
            AlertOrder::FirstSeen => "first_seen",
            AlertOrder::LastSeen => "last_seen",
        }
    }

    /// Parses an API name.
    pub fn parse(text: &str) -> Option<AlertOrder> {
        [AlertOrder::FirstSeen, AlertOrder::LastSeen]
            .into_iter()
            .find(|o| o.name() == text)
    }
}

/// The key of an alert in its table's recent index.
fn recent_key(last_seen_ns: i64, key: &[u8; 16]) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..8].copy_from_slice(&(last_seen_ns.max(0) as u64).to_be_bytes());
    k[8..].copy_from_slice(key);
    k
}

/// The time of an alert record's latest activity, read without the rest of the record.
#[derive(serde::Deserialize)]
struct LastSeen {
    last_seen_ns: i64,
}

/// Why a triage change did not land.
#[derive(Debug, thiserror::Error)]
pub enum TriageError {
    /// The change breaks a rule of the lifecycle: the body field at fault, and which rule.
    #[error("{1}")]
    Refused(&'static str, &'static str),
    /// The store failed reading the alert.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store refused to write the change, after retries (a full disk): nothing changed.
    #[error("the change was not saved: {0}")]
    Unsaved(StoreError),
}

/// Tries a user's write a few times over about a third of a second before giving up: a store
/// that is briefly busy or short of room gets a chance, and the user waits little for an answer
/// that says to retry.
fn retried_write(mut write: impl FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
    let mut wait = std::time::Duration::from_millis(50);
    for _ in 0..2 {
        if write().is_ok() {
            return Ok(());
        }
        std::thread::sleep(wait);
        wait *= 4;
    }
    write()
}

/// A triage change as asked for: each part left `None` stays as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriageUpdate {
    /// New status.
    pub status: Option<TriageStatus>,
    /// Close reason (kept only when the alert ends up closed).
    pub reason: Option<CloseReason>,
    /// New assignee; `Some(None)` unassigns.
    pub assignee: Option<Option<String>>,
    /// Free text recorded with the change.
    pub note: String,
}

/// Filters of an alert listing (every one optional).
#[derive(Clone, Debug, Default)]
pub struct AlertQuery {
    /// Earliest first-seen time, ns.
    pub since_ns: Option<i64>,
    /// Latest first-seen time (exclusive), ns.
    pub until_ns: Option<i64>,
    /// Alert type.
    pub alert_type: Option<AlertType>,
    /// Least severity.
    pub min_severity: Option<u8>,
    /// Exact detector: a rule id, `ensemble`, `ueba:user`, `ioc:<file>`...
    pub detector: Option<String>,
    /// Exact dedup key (one alert's repeats across cooldowns, or a rule's group alerts with a
    /// prefix match when it ends in `*`).
    pub dedup_key: Option<String>,
    /// Entity UUIDs, any of which the alert must name (as its entity or a related one).
    pub entities: Option<Vec<Uuid>>,
    /// Tactic name or id, case-insensitive.
    pub tactic: Option<String>,
    /// Technique id prefix, case-insensitive.
    pub technique: Option<String>,
    /// Triage statuses, any of which the alert must be in.
    pub status: Option<Vec<TriageStatus>>,
    /// Exact assignee.
    pub assignee: Option<String>,
    /// Exact sensor (a fleet's console: the sensor whose event raised it).
    pub sensor: Option<String>,
    /// 1-based page.
    pub page: u32,
    /// Items per page.
    pub limit: u32,
    /// Leave the items' triage at the default instead of reading it (for callers that only
    /// count, such as the anomaly timeline).
    pub without_triage: bool,
    /// The order of the items.
    pub order: AlertOrder,
}

impl AlertQuery {
    /// Whether the listing reads triage records to filter (otherwise only for the page's items).
    fn filters_triage(&self) -> bool {
        self.status.is_some() || self.assignee.is_some()
    }

    fn matches_triage(&self, t: &Triage) -> bool {
        self.status.as_ref().is_none_or(|s| s.contains(&t.status))
            && self
                .assignee
                .as_ref()
                .is_none_or(|a| t.assignee.as_ref() == Some(a))
    }

    /// The filters a summary can decide (the entity filter is the index's job).
    fn matches(&self, a: &AlertSummary) -> bool {
        if self.since_ns.is_some_and(|s| a.first_seen_ns < s)
            || self.until_ns.is_some_and(|u| a.first_seen_ns >= u)
            || self.alert_type.is_some_and(|t| a.alert_type != t)
            || self.min_severity.is_some_and(|s| a.severity < s)
            || self.detector.as_ref().is_some_and(|d| *d != a.detector)
            || self.sensor.as_ref().is_some_and(|s| *s != a.sensor)
        {
            return false;
        }
        if let Some(key) = &self.dedup_key {
            let fits = match key.strip_suffix('*') {
                Some(prefix) => a.dedup_key.starts_with(prefix),
                None => *key == a.dedup_key,
            };
            if !fits {
                return false;
            }
        }
        if let Some(t) = &self.tactic
            && !a
                .attack
                .iter()
                .any(|m| m.tactic.eq_ignore_ascii_case(t) || m.tactic_id.eq_ignore_ascii_case(t))
        {
            return false;
        }
        if let Some(t) = &self.technique {
            let t = t.to_ascii_uppercase();
            if !a.attack.iter().any(|m| m.technique_id.starts_with(&t)) {
                return false;
            }
        }
        true
    }
}

/// The fields of a stored alert that listings filter on, read without building the rest
/// (contributions, events, entities): a listing reads every alert in its window to count, and
/// this is most of what that costs.
#[derive(serde::Deserialize)]
struct AlertSummary<'a> {
    #[serde(rename = "type")]
    alert_type: AlertType,
    severity: u8,
    first_seen_ns: i64,
    #[serde(borrow)]
    detector: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    dedup_key: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    attack: Vec<AttackSummary<'a>>,
    #[serde(borrow, default)]
    sensor: std::borrow::Cow<'a, str>,
}

#[derive(serde::Deserialize)]
struct AttackSummary<'a> {
    #[serde(borrow)]
    tactic_id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    tactic: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    technique_id: std::borrow::Cow<'a, str>,
}

/// One page of an alert listing.
#[derive(Clone, Debug, Default)]
pub struct AlertPage {
    /// The page, newest first, triage filled in.
    pub items: Vec<Alert>,
    /// Matches over all pages; a lower bound when `total_exact` is false.
    pub total: u64,
    /// Whether every match was counted (see [`TOTAL_EXACT_UP_TO`]).
    pub total_exact: bool,
}

/// The 16 bytes of an alert id, or `None` when `id` is not a UUID.
pub fn alert_key(id: &str) -> Option<[u8; 16]> {
    Uuid::parse_str(id).ok().map(|u| *u.as_bytes())
}

/// Smallest alert key at or after `ns` (UUIDv7 keys start with the millisecond).
fn alert_time_key(ns: i64) -> [u8; 16] {
    let ms = (ns.max(0) / 1_000_000) as u64;
    let mut k = [0u8; 16];
    k[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    k
}

/// Decodes a stored JSON record, or says which record did not decode.
fn decode<'a, T: serde::Deserialize<'a>>(
    what: &'static str,
    bytes: &'a [u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Decode {
        what,
        reason: e.to_string(),
    })
}

/// A saved detector-state entry: its key and its bincode bytes.
pub type ModelEntry = (Vec<u8>, Vec<u8>);

/// `value` as JSON for the store; a failure is returned, never written as an empty record.
fn encode_json(what: &'static str, value: &impl serde::Serialize) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Encode {
        what,
        reason: e.to_string(),
    })
}

impl Store {
    /// Writes an alert (new, or a new state of an open one) and its entity index entries.
    pub fn put_alert(&self, alert: &Alert) -> Result<(), StoreError> {
        self.put_record(ALERTS, alert)
    }

    /// Writes a signal (new, or a new state of an open one) and its entity index entries.
    pub fn put_signal(&self, signal: &Alert) -> Result<(), StoreError> {
        self.put_record(SIGNALS, signal)
    }

    fn put_record(&self, table: Table, alert: &Alert) -> Result<(), StoreError> {
        self.put_record_with(table, alert, |_, _| {})
    }

    /// Writes a record and its index entries, and what `also` adds to the same batch.
    pub(crate) fn put_record_with(
        &self,
        table: Table,
        alert: &Alert,
        also: impl FnOnce(&mut WriteBatch, &[u8; 16]),
    ) -> Result<(), StoreError> {
        self.check_write_fault()?;
        let Some(key) = alert_key(&alert.id) else {
            return Ok(());
        };
        let mut wb = WriteBatch::default();
        // A record JSON cannot hold (an infinite number is written as null and never reads back)
        // is stored with finite numbers, whoever built it.
        let finite;
        let alert = if alert.is_finite() {
            alert
        } else {
            tracing::warn!(id = %alert.id, detector = %alert.detector, "an alert with a non-finite number; stored with finite ones");
            finite = alert.with_finite_numbers();
            &finite
        };
        let json = encode_json(table.what, alert)?;
        // The recent index follows the record's latest activity: the entry of its previous
        // state goes (each alert is written by the one stage B worker that holds it open, so
        // nothing else moves it between this read and the write).
        let before = match self.db().get_pinned_cf(self.cf(table.records), key)? {
            Some(v) => serde_json::from_slice::<LastSeen>(&v)
                .ok()
                .map(|l| l.last_seen_ns),
            None => None,
        };
        if before != Some(alert.last_seen_ns) {
            if let Some(b) = before {
                wb.delete_cf(self.cf(table.recent), recent_key(b, &key));
            }
            wb.put_cf(
                self.cf(table.recent),
                recent_key(alert.last_seen_ns, &key),
                [],
            );
        }
        wb.put_cf(self.cf(table.records), key, json);
        for e in alert.entity.iter().chain(&alert.related_entities) {
            let mut k = [0u8; 32];
            k[..16].copy_from_slice(e.uuid.as_bytes());
            k[16..].copy_from_slice(&key);
            wb.put_cf(self.cf(table.index), k, []);
        }
        also(&mut wb, &key);
        self.db().write_opt(wb, &self.write_options())?;
        Ok(())
    }

    /// Builds the recent indexes of a store written before they existed: once, at open, when
    /// a table holds records and its index none. Returns how many entries were written.
    pub(crate) fn backfill_recent(&self) -> Result<u64, StoreError> {
        let mut written = 0;
        for table in [ALERTS, SIGNALS] {
            let mut recent = self.db().raw_iterator_cf(self.cf(table.recent));
            recent.seek_to_first();
            if recent.valid() {
                continue;
            }
            recent.status()?;
            let mut wb = WriteBatch::default();
            let mut it = self.db().raw_iterator_cf(self.cf(table.records));
            it.seek_to_first();
            while let (Some(k), Some(v)) = (it.key(), it.value()) {
                if let (Ok(key), Ok(last)) = (
                    <[u8; 16]>::try_from(k),
                    serde_json::from_slice::<LastSeen>(v),
                ) {
                    wb.put_cf(
                        self.cf(table.recent),
                        recent_key(last.last_seen_ns, &key),
                        [],
                    );
                    written += 1;
                }
                if wb.len() >= 10_000 {
                    self.db().write(std::mem::take(&mut wb))?;
                }
                it.next();
            }
            it.status()?;
            self.db().write(wb)?;
        }
        Ok(written)
    }

    /// Fills in what the detector leaves out of an alert (it carries entity UUIDs, not names):
    /// each entity's name from the entity table, and a built-in detector's name on an alert
    /// stored before alerts carried it. Whatever shows an alert (the API, the stream, a
    /// notification) reads it through this.
    pub fn name_alert(&self, alert: &mut Alert) -> Result<(), StoreError> {
        if alert.detector_name.is_empty()
            && let Some(name) = watchpost_proto::builtin_detector_name(&alert.detector)
        {
            alert.detector_name = name;
        }
        for e in alert
            .entity
            .iter_mut()
            .chain(alert.related_entities.iter_mut())
        {
            if e.value.is_empty()
                && let Some((_, _, name)) = self.entity(e.uuid.as_bytes())?
            {
                e.value = name;
            }
        }
        Ok(())
    }

    /// One signal; `None` when there is none. A read that fails is an error (and counted).
    pub fn signal(&self, id: &str) -> Result<Option<Alert>, StoreError> {
        let Some(key) = alert_key(id) else {
            return Ok(None);
        };
        self.counted((|| {
            let Some(v) = self.db().get_pinned_cf(self.cf(CF_SIGNALS), key)? else {
                return Ok(None);
            };
            Ok(Some(decode("signal", &v)?))
        })())
    }

    /// A page of signals, newest first, by the alert listing's filters (triage ones aside:
    /// signals are not triaged).
    pub fn search_signals(&self, query: &AlertQuery) -> Result<AlertPage, StoreError> {
        let mut q = query.clone();
        q.without_triage = true;
        q.status = None;
        q.assignee = None;
        self.counted(self.records_page(SIGNALS, &q))
    }

    /// One alert, with its triage record; `None` when there is no such alert. A read that fails
    /// is an error (and counted), never "no such alert".
    pub fn alert(&self, id: &str) -> Result<Option<Alert>, StoreError> {
        let Some(key) = alert_key(id) else {
            return Ok(None);
        };
        self.counted((|| {
            let Some(v) = self.db().get_pinned_cf(self.cf(CF_ALERTS), key)? else {
                return Ok(None);
            };
            let mut a: Alert = decode("alert", &v)?;
            a.triage = self.stored_triage(&key)?;
            Ok(Some(a))
        })())
    }

    /// Overwrites alert `id`'s record with bytes that do not decode, as a damaged disk would leave
    /// it: for tests that a failed read is reported, not taken for a missing alert. Only with the
    /// `testsuite` feature.
    #[cfg(feature = "testsuite")]
    pub fn damage_alert(&self, id: &str) -> Result<(), StoreError> {
        if let Some(key) = alert_key(id) {
            self.db().put_cf_opt(
                self.cf(CF_ALERTS),
                key,
                b"\xffdamaged",
                &self.write_options(),
            )?;
        }
        Ok(())
    }

    /// The triage record of alert `id` (the default when it has none or `id` is not one).
    pub fn alert_triage(&self, id: &str) -> Result<Triage, StoreError> {
        match alert_key(id) {
            Some(k) => self.counted(self.stored_triage(&k)),
            None => Ok(Triage::default()),
        }
    }

    /// The triage record of an alert (the default, open and unassigned, when it has none; a
    /// record that cannot be read is an error, so a closed alert never shows as open).
    fn stored_triage(&self, key: &[u8; 16]) -> Result<Triage, StoreError> {
        match self.db().get_pinned_cf(self.cf(CF_TRIAGE), key)? {
            Some(v) => decode("triage record", &v),
            None => Ok(Triage::default()),
        }
    }

    /// Applies a triage change to alert `id` and returns the alert as it now is; `None` when
    /// there is no such alert. Changes are serialised, so two at once both land in the history.
    /// A closed alert always has a reason and only a closed one has: a change that would break
    /// that is refused whole.
    pub fn update_triage(
        &self,
        id: &str,
        change: &TriageUpdate,
        at_ns: i64,
    ) -> Result<Option<Alert>, TriageError> {
        let Some(key) = alert_key(id) else {
            return Ok(None);
        };
        let _serial = self
            .triage_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(mut alert) = self.alert(id).map_err(TriageError::Store)? else {
            return Ok(None);
        };
        let t = &mut alert.triage;
        let was_closed = t.status == TriageStatus::Closed;
        let status = change.status.unwrap_or(t.status);
        if status == TriageStatus::Closed {
            if change.status == Some(TriageStatus::Closed) && change.reason.is_none() {
                return Err(TriageError::Refused(
                    "reason",
                    "closing needs a `reason`: true_positive, benign_positive, false_positive, duplicate or other",
                ));
            }
        } else if change.reason.is_some() {
            return Err(TriageError::Refused(
                "reason",
                "a `reason` is only for closing: the alert would not be closed",
            ));
        }
        t.status = status;
        // A reason belongs to a closed alert only: reopening or acknowledging clears it.
        t.reason = match status {
            TriageStatus::Closed => change.reason.or(t.reason),
            _ => None,
        };
        if let Some(assignee) = &change.assignee {
            t.assignee = assignee.clone();
        }
        t.updated_ns = Some(at_ns);
        t.history.push(TriageChange {
            at_ns,
            status: t.status,
            reason: t.reason,
            assignee: t.assignee.clone(),
            note: change.note.clone(),
        });
        if t.history.len() > MAX_TRIAGE_HISTORY {
            let excess = t.history.len() - MAX_TRIAGE_HISTORY;
            t.history.drain(..excess);
        }
        let json = encode_json("triage", t).map_err(TriageError::Store)?;
        retried_write(|| {
            self.check_write_fault()?;
            self.db()
                .put_cf_opt(self.cf(CF_TRIAGE), key, &json, &self.write_options())
                .map_err(StoreError::from)
        })
        .map_err(TriageError::Unsaved)?;
        if status == TriageStatus::Closed && !was_closed {
            self.closed.record(id);
        }
        Ok(Some(alert))
    }

    /// The generation of the latest alert closed by an analyst: one atomic load, for the
    /// detection workers to compare per batch (see [`Store::closed_since`]).
    pub fn closed_generation(&self) -> u64 {
        self.closed.generation()
    }

    /// Appends to `out` the ids of alerts closed after generation `seen` (at most the latest
    /// 4,096) and returns the generation read to.
    pub fn closed_since(&self, seen: u64, out: &mut Vec<String>) -> u64 {
        self.closed.since(seen, out)
    }

    /// Alerts matching `query`, newest first, one page, with the total: exact up to
    /// [`TOTAL_EXACT_UP_TO`] matches (or the end of the page), a lower bound past that.
    pub fn search_alerts(&self, query: &AlertQuery) -> Result<AlertPage, StoreError> {
        self.counted(self.records_page(ALERTS, query))
    }

    fn records_page(&self, table: Table, q: &AlertQuery) -> Result<AlertPage, StoreError> {
        let skip = (u64::from(q.page.max(1)) - 1) * u64::from(q.limit);
        let count_exactly_to = TOTAL_EXACT_UP_TO.max(skip + u64::from(q.limit));
        let mut page = AlertPage {
            total_exact: true,
            ..AlertPage::default()
        };
        // False once the listing can stop: the page is full and enough is counted.
        let mut take = |bytes: &[u8], key: &[u8]| -> Result<bool, StoreError> {
            let wants = page.items.len() < q.limit as usize;
            if !wants && page.total >= count_exactly_to {
                page.total_exact = false;
                return Ok(false);
            }
            let summary: AlertSummary = decode(table.what, bytes)?;
            if !q.matches(&summary) {
                return Ok(true);
            }
            let key = <[u8; 16]>::try_from(key).map_err(|_| StoreError::Decode {
                what: "alert key",
                reason: format!("{} bytes, not 16", key.len()),
            })?;
            let in_page = page.total >= skip && wants;
            let mut triage = None;
            if q.filters_triage() {
                let t = self.stored_triage(&key)?;
                if !q.matches_triage(&t) {
                    return Ok(true);
                }
                triage = Some(t);
            }
            if in_page {
                let mut a: Alert = decode(table.what, bytes)?;
                a.triage = match triage {
                    Some(t) => t,
                    None if q.without_triage => Triage::default(),
                    None => self.stored_triage(&key)?,
                };
                page.items.push(a);
            }
            page.total += 1;
            Ok(true)
        };
        if let Some(ents) = &q.entities {
            // Through the index: every alert naming one of the entities.
            let mut keys: Vec<[u8; 16]> = Vec::new();
            for e in ents {
                let mut it = self.db().raw_iterator_cf(self.cf(table.index));
                it.seek(e.as_bytes());
                while let Some(k) = it.key() {
                    if !k.starts_with(e.as_bytes()) {
                        break;
                    }
                    if let Ok(id) = <[u8; 16]>::try_from(&k[16..]) {
                        keys.push(id);
                    }
                    it.next();
                }
                it.status()?;
            }
            keys.sort_unstable_by(|a, b| b.cmp(a));
            keys.dedup();
            if q.order == AlertOrder::LastSeen {
                // An entity's alerts are few next to the table: read each one's last activity
                // and sort (ties newest first, as the ids order them).
                let mut by_last = Vec::with_capacity(keys.len());
                for k in keys.drain(..) {
                    if let Some(v) = self.db().get_pinned_cf(self.cf(table.records), k)? {
                        let last: LastSeen = decode(table.what, &v)?;
                        by_last.push((last.last_seen_ns, k));
                    }
                }
                by_last.sort_unstable_by(|a, b| b.cmp(a));
                keys.extend(by_last.into_iter().map(|(_, k)| k));
            }
            for k in keys {
                // An index entry whose alert retention removed is skipped; a failed read is not.
                if let Some(v) = self.db().get_pinned_cf(self.cf(table.records), k)?
                    && !take(&v, &k)?
                {
                    break;
                }
            }
            return Ok(page);
        }
        if q.order == AlertOrder::LastSeen {
            // Through the recent index, latest activity first. `since` bounds first activity,
            // and so last activity too: once the last is before it, nothing further matches.
            let mut it = self.db().raw_iterator_cf(self.cf(table.recent));
            it.seek_to_last();
            while let Some(k) = it.key() {
                let (Ok(last), Ok(id)) = (
                    <[u8; 8]>::try_from(&k[..8.min(k.len())]),
                    <[u8; 16]>::try_from(&k[8.min(k.len())..]),
                ) else {
                    it.prev();
                    continue;
                };
                if q.since_ns
                    .is_some_and(|s| (u64::from_be_bytes(last) as i64) < s)
                {
                    break;
                }
                // An entry whose alert retention removed (first seen before the cutoff, active
                // after it) is skipped until retention reaches its last activity too.
                if let Some(v) = self.db().get_pinned_cf(self.cf(table.records), id)?
                    && !take(&v, &id)?
                {
                    break;
                }
                it.prev();
            }
            it.status()?;
            return Ok(page);
        }
        let upper = q.until_ns.map(alert_time_key);
        let lower = q.since_ns.map(alert_time_key);
        let start = upper.unwrap_or([0xff; 16]);
        let it = self.db().iterator_cf(
            self.cf(table.records),
            IteratorMode::From(&start, Direction::Reverse),
        );
        for item in it {
            let (k, v) = item?;
            if upper.is_some_and(|u| *k >= u[..]) {
                continue;
            }
            if lower.is_some_and(|l| *k < l[..]) {
                break;
            }
            if !take(&v, &k)? {
                break;
            }
        }
        Ok(page)
    }

    /// Records a feedback entry.
    pub fn put_feedback(&self, feedback: &Feedback) -> Result<(), StoreError> {
        let Some(id) = alert_key(&feedback.alert_id) else {
            return Ok(());
        };
        let mut k = [0u8; 24];
        k[..16].copy_from_slice(&id);
        k[16..].copy_from_slice(&(feedback.created_ns.max(0) as u64).to_be_bytes());
        let v = encode_json("feedback", feedback)?;
        retried_write(|| {
            self.check_write_fault()?;
            self.db()
                .put_cf_opt(self.cf(CF_FEEDBACK), k, &v, &self.write_options())
                .map_err(StoreError::from)
        })
    }

    /// Records `feedback` made by `make` (which may move a threshold) unless the newest entry of
    /// the same sender (see [`Feedback::same_sender`]) on the alert already gives the same
    /// verdict: a double click, or a SOAR's retry, is one verdict and one move of a threshold.
    /// A changed verdict is recorded (and moves the threshold back). Returns the entry recorded,
    /// `None` for a repeat. One at a time, so two equal verdicts sent at once record one.
    pub fn record_feedback(
        &self,
        probe: &Feedback,
        make: impl FnOnce() -> Feedback,
    ) -> Result<Option<Feedback>, StoreError> {
        let _one_at_a_time = self.triage_lock.lock().unwrap_or_else(|p| p.into_inner());
        let latest = self
            .feedback_for(&probe.alert_id)?
            .into_iter()
            .find(|f| f.same_sender(probe));
        if latest.is_some_and(|f| f.feedback == probe.feedback) {
            return Ok(None);
        }
        let entry = make();
        self.put_feedback(&entry)?;
        Ok(Some(entry))
    }

    /// Feedback on one alert, newest first.
    pub fn feedback_for(&self, alert_id: &str) -> Result<Vec<Feedback>, StoreError> {
        let Some(id) = alert_key(alert_id) else {
            return Ok(Vec::new());
        };
        self.counted((|| {
            let mut out = Vec::new();
            let mut it = self.db().raw_iterator_cf(self.cf(CF_FEEDBACK));
            it.seek(id);
            while let (Some(k), Some(v)) = (it.key(), it.value()) {
                if !k.starts_with(&id) {
                    break;
                }
                out.push(decode("feedback entry", v)?);
                it.next();
            }
            it.status()?;
            out.reverse();
            Ok(out)
        })())
    }

    /// Every feedback entry with the alert it is about (for the false-positive rates; `None`
    /// for an alert retention has removed).
    pub fn all_feedback(&self) -> Result<Vec<(Feedback, Option<Alert>)>, StoreError> {
        let mut out = Vec::new();
        let it = self
            .db()
            .iterator_cf(self.cf(CF_FEEDBACK), IteratorMode::Start);
        for item in it {
            let (_, v) = self.counted(item.map_err(StoreError::from))?;
            let f: Feedback = self.counted(decode("feedback entry", &v))?;
            let a = self.alert(&f.alert_id)?;
            out.push((f, a));
        }
        Ok(out)
    }

    /// Saves detector state: `models` entries and `baselines` entries in one write.
    pub fn save_detection(
        &self,
        models: &[(Vec<u8>, Vec<u8>)],
        baselines: &[(u64, Vec<u8>)],
    ) -> Result<(), StoreError> {
        let mut wb = WriteBatch::default();
        for (k, v) in models {
            wb.put_cf(self.cf(CF_MODELS), k, v);
        }
        for (k, v) in baselines {
            wb.put_cf(self.cf(CF_BASELINES), k.to_be_bytes(), v);
        }
        self.db().write_opt(wb, &self.write_options())?;
        Ok(())
    }

    /// Every saved model entry.
    pub fn models(&self) -> Result<Vec<ModelEntry>, StoreError> {
        self.counted(
            self.db()
                .iterator_cf(self.cf(CF_MODELS), IteratorMode::Start)
                .map(|item| {
                    item.map(|(k, v)| (k.to_vec(), v.to_vec()))
                        .map_err(StoreError::from)
                })
                .collect(),
        )
    }

    /// Calls `visit` with every saved baseline.
    pub fn for_each_baseline(&self, mut visit: impl FnMut(u64, &[u8])) -> Result<(), StoreError> {
        let mut it = self.db().raw_iterator_cf(self.cf(CF_BASELINES));
        it.seek_to_first();
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if let Ok(k) = <[u8; 8]>::try_from(k) {
                visit(u64::from_be_bytes(k), v);
            }
            it.next();
        }
        self.counted(it.status().map_err(StoreError::from))
    }

    /// Writes closed anomaly minutes and risk hours (an hour's point replaces the last one written
    /// for it: its highest score so far).
    pub fn put_series(
        &self,
        minutes: &[MinutePoint],
        risk: &[RiskPoint],
    ) -> Result<(), StoreError> {
        if minutes.is_empty() && risk.is_empty() {
            return Ok(());
        }
        let mut wb = WriteBatch::default();
        for m in minutes {
            let mut k = [0u8; 17];
            k[0] = b'a';
            k[1..9].copy_from_slice(&(m.minute_ns.max(0) as u64).to_be_bytes());
            k[9..].copy_from_slice(&m.source.to_be_bytes());
            let mut v = [0u8; 16];
            v[..4].copy_from_slice(&m.events.to_le_bytes());
            v[4..8].copy_from_slice(&m.sum.to_le_bytes());
            v[8..12].copy_from_slice(&m.max.to_le_bytes());
            v[12..].copy_from_slice(&m.alarms.to_le_bytes());
            wb.put_cf(self.cf(CF_SERIES), k, v);
        }
        for r in risk {
            let mut k = [0u8; 17];
            k[0] = b'r';
            k[1..9].copy_from_slice(&r.entity.to_be_bytes());
            k[9..].copy_from_slice(&(r.hour_ns.max(0) as u64).to_be_bytes());
            wb.put_cf(self.cf(CF_SERIES), k, r.max.to_le_bytes());
        }
        self.db().write_opt(wb, &self.write_options())?;
        Ok(())
    }

    /// Adds fires to the per-hour rule counters of stage B worker `worker`. Each worker owns
    /// its keys, so the read-add-write cannot race.
    pub fn add_rule_fires(&self, worker: u8, fires: &[RuleFires]) -> Result<(), StoreError> {
        if fires.is_empty() {
            return Ok(());
        }
        let mut wb = WriteBatch::default();
        for f in fires {
            let k = fire_key(f.hour_ns, f.rule, worker);
            let old = self
                .db()
                .get_pinned_cf(self.cf(CF_SERIES), k)?
                .and_then(|v| <[u8; 4]>::try_from(&v[..]).ok())
                .map_or(0, u32::from_le_bytes);
            wb.put_cf(
                self.cf(CF_SERIES),
                k,
                old.saturating_add(f.count).to_le_bytes(),
            );
        }
        self.db().write_opt(wb, &self.write_options())?;
        Ok(())
    }

    /// Rule fires per hour in `[since, until)`: (rule key, hour ns, count), workers summed.
    pub fn rule_fires(
        &self,
        since_ns: i64,
        until_ns: i64,
    ) -> Result<Vec<(u64, i64, u32)>, StoreError> {
        let lo = fire_key(since_ns, 0, 0);
        let mut out: Vec<(u64, i64, u32)> = Vec::new();
        let mut it = self.db().raw_iterator_cf(self.cf(CF_SERIES));
        it.seek(&lo[..9]);
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if k.len() != 18 || k[0] != b'f' {
                break;
            }
            let hour_ns = u64::from_be_bytes(k[1..9].try_into().unwrap_or([0; 8])) as i64;
            if hour_ns >= until_ns {
                break;
            }
            let rule = u64::from_be_bytes(k[9..17].try_into().unwrap_or([0; 8]));
            let n = <[u8; 4]>::try_from(v).map_or(0, u32::from_le_bytes);
            match out.last_mut() {
                Some(last) if last.0 == rule && last.1 == hour_ns => last.2 += n,
                _ => out.push((rule, hour_ns, n)),
            }
            it.next();
        }
        self.counted(it.status().map_err(StoreError::from))?;
        Ok(out)
    }

    /// Every saved exception, oldest first.
    pub fn exceptions(&self) -> Result<Vec<Exception>, StoreError> {
        self.counted((|| {
            let mut out: Vec<Exception> = Vec::new();
            let mut it = self.db().raw_iterator_cf(self.cf(CF_EXCEPTIONS));
            it.seek_to_first();
            while let Some(v) = it.value() {
                out.push(decode("exception", v)?);
                it.next();
            }
            it.status()?;
            out.sort_by_key(|e| (e.created_ns, e.id));
            Ok(out)
        })())
    }

    /// Saves an exception (synced: an operator's decision must survive a crash).
    pub fn put_exception(&self, exception: &Exception) -> Result<(), StoreError> {
        let v = encode_json("exception", exception)?;
        let mut o = rocksdb::WriteOptions::default();
        o.set_sync(true);
        self.db()
            .put_cf_opt(self.cf(CF_EXCEPTIONS), exception.id.as_bytes(), v, &o)?;
        Ok(())
    }

    /// Removes an exception (synced).
    pub fn delete_exception(&self, id: Uuid) -> Result<(), StoreError> {
        let mut o = rocksdb::WriteOptions::default();
        o.set_sync(true);
        self.db()
            .delete_cf_opt(self.cf(CF_EXCEPTIONS), id.as_bytes(), &o)?;
        Ok(())
    }

    /// A flag of the `rules` family.
    pub fn rule_flag(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.counted(
            self.db()
                .get_cf(self.cf(CF_RULES), key)
                .map_err(StoreError::from),
        )
    }

    /// Sets a flag of the `rules` family (synced: an operator's toggle must survive a crash).
    pub fn put_rule_flag(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let mut o = rocksdb::WriteOptions::default();
        o.set_sync(true);
        self.db().put_cf_opt(self.cf(CF_RULES), key, value, &o)?;
        Ok(())
    }

    /// Anomaly minutes in `[since, until)`, of one source or all.
    pub fn anomaly_minutes(
        &self,
        since_ns: i64,
        until_ns: i64,
        source: Option<u64>,
    ) -> Result<Vec<MinutePoint>, StoreError> {
        let mut lo = [0u8; 9];
        lo[0] = b'a';
        lo[1..].copy_from_slice(&(since_ns.max(0) as u64).to_be_bytes());
        let mut out = Vec::new();
        let mut it = self.db().raw_iterator_cf(self.cf(CF_SERIES));
        it.seek(lo);
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if k.len() != 17 || k[0] != b'a' {
                break;
            }
            let minute_ns = u64::from_be_bytes(k[1..9].try_into().unwrap_or([0; 8])) as i64;
            if minute_ns >= until_ns {
                break;
            }
            let src = u64::from_be_bytes(k[9..17].try_into().unwrap_or([0; 8]));
            if source.is_none_or(|s| s == src) && v.len() == 16 {
                let f = |i: usize| <[u8; 4]>::try_from(&v[i..i + 4]).unwrap_or([0; 4]);
                out.push(MinutePoint {
                    source: src,
                    minute_ns,
                    events: u32::from_le_bytes(f(0)),
                    sum: f32::from_le_bytes(f(4)),
                    max: f32::from_le_bytes(f(8)),
                    alarms: u32::from_le_bytes(f(12)),
                });
            }
            it.next();
        }
        self.counted(it.status().map_err(StoreError::from))?;
        Ok(out)
    }

    /// Risk hours of one entity in `[since, until)`: (hour start ns, highest score).
    pub fn risk_history(
        &self,
        entity: u64,
        since_ns: i64,
        until_ns: i64,
    ) -> Result<Vec<(i64, f32)>, StoreError> {
        let mut lo = [0u8; 17];
        lo[0] = b'r';
        lo[1..9].copy_from_slice(&entity.to_be_bytes());
        lo[9..].copy_from_slice(&(since_ns.max(0) as u64).to_be_bytes());
        let mut out = Vec::new();
        let mut it = self.db().raw_iterator_cf(self.cf(CF_SERIES));
        it.seek(lo);
        while let (Some(k), Some(v)) = (it.key(), it.value()) {
            if k.len() != 17 || k[..9] != lo[..9] {
                break;
            }
            let hour = u64::from_be_bytes(k[9..17].try_into().unwrap_or([0; 8])) as i64;
            if hour >= until_ns {
                break;
            }
            if let Ok(b) = <[u8; 4]>::try_from(v) {
                out.push((hour, f32::from_le_bytes(b)));
            }
            it.next();
        }
        self.counted(it.status().map_err(StoreError::from))?;
        Ok(out)
    }

    /// Deletes alerts first seen and series points older than `cutoff_ns` (retention).
    pub(crate) fn retain_detection(&self, wb: &mut WriteBatch, cutoff_ns: i64) {
        wb.delete_range_cf(self.cf(CF_ALERTS), [0u8; 16], alert_time_key(cutoff_ns));
        wb.delete_range_cf(self.cf(CF_TRIAGE), [0u8; 16], alert_time_key(cutoff_ns));
        wb.delete_range_cf(self.cf(CF_SIGNALS), [0u8; 16], alert_time_key(cutoff_ns));
        // An alert's last activity is at or after its first: entries before the cutoff belong
        // to records removed above.
        let recent_cutoff = recent_key(cutoff_ns, &[0u8; 16]);
        wb.delete_range_cf(self.cf(CF_ALERT_RECENT), [0u8; 24], recent_cutoff);
        wb.delete_range_cf(self.cf(CF_SIGNAL_RECENT), [0u8; 24], recent_cutoff);
        let mut hi = [0u8; 9];
        hi[0] = b'a';
        hi[1..].copy_from_slice(&(cutoff_ns.max(0) as u64).to_be_bytes());
        wb.delete_range_cf(self.cf(CF_SERIES), &[b'a'][..], &hi[..]);
    }
}

fn fire_key(hour_ns: i64, rule: u64, worker: u8) -> [u8; 18] {
    let mut k = [0u8; 18];
    k[0] = b'f';
    k[1..9].copy_from_slice(&(hour_ns.max(0) as u64).to_be_bytes());
    k[9..17].copy_from_slice(&rule.to_be_bytes());
    k[17] = worker;
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use watchpost_proto::EntityRef;
    use watchpost_proto::config::StorageConfig;

    fn alert(id: &str, count: u64) -> Alert {
        Alert {
            id: id.into(),
            alert_type: AlertType::Ueba,
            severity: 3,
            title: "login from a new network".into(),
            detector: "ueba:user".into(),
            detector_name: String::new(),
            dedup_key: "ueba:user:x".into(),
            first_seen_ns: 1_700_000_000_000_000_000,
            last_seen_ns: 1_700_000_000_000_000_000,
            count,
            source: "sshd".into(),
            entity: None,
            score: 0.9,
            threshold: 0.5,
            contributions: BTreeMap::new(),
            attack: Vec::new(),
            contributing_events: Vec::new(),
            related_entities: Vec::new(),
            related_alerts: Vec::new(),
            entity_count: 0,
            deviation: None,
            triage: Triage::default(),
            sensor: String::new(),
        }
    }

    const ID: &str = "018bcfe5-6800-7000-8000-000000000001";

    fn closing(reason: Option<CloseReason>) -> TriageUpdate {
        TriageUpdate {
            status: Some(TriageStatus::Closed),
            reason,
            ..TriageUpdate::default()
        }
    }

    /// A signal raised while its UEBA type's threshold still calibrates carries an infinite
    /// threshold. Written as it was, JSON made it `null`, the record never read back, and every
    /// list of signals failed with a 500. It is stored finite now, and records an earlier
    /// version wrote read back.
    #[test]
    fn an_infinite_threshold_is_stored_finite_and_a_null_one_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        let mut s = alert(ID, 1);
        s.threshold = f64::INFINITY;
        s.score = f64::NAN;
        s.deviation = Some(watchpost_proto::Deviation {
            signal: watchpost_proto::DeviationSignal::NewHour,
            bits: f64::INFINITY,
            value: 3.0,
            with: None,
            sustained: None,
        });
        store.put_signal(&s).unwrap();
        let back = store.signal(ID).unwrap().unwrap();
        assert_eq!(back.threshold, f64::MAX);
        assert_eq!(back.score, 0.0);
        assert_eq!(back.deviation.unwrap().bits, f64::MAX);
        let page = store
            .search_signals(&AlertQuery {
                page: 1,
                limit: 10,
                ..AlertQuery::default()
            })
            .unwrap();
        assert_eq!(page.items.len(), 1);
        let mut before = alert(ID, 1);
        before.contributions.insert("time_of_day".into(), 0.25);
        let written_before = serde_json::to_string(&before)
            .unwrap()
            .replace("\"threshold\":0.5", "\"threshold\":null")
            .replace("\"score\":0.9", "\"score\":null")
            .replace("\"time_of_day\":0.25", "\"time_of_day\":null");
        let read: Alert = serde_json::from_str(&written_before).unwrap();
        assert_eq!(read.threshold, f64::MAX);
        assert_eq!(read.score, 0.0, "a null score was a NaN");
        assert_eq!(read.contributions["time_of_day"], 0.0);
    }

    #[test]
    fn a_triage_record_that_cannot_be_read_is_an_error_not_an_open_alert() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        store.put_alert(&alert(ID, 1)).unwrap();
        store
            .update_triage(ID, &closing(Some(CloseReason::FalsePositive)), 5)
            .unwrap();
        let key = alert_key(ID).unwrap();
        store
            .db()
            .put_cf(store.cf(CF_TRIAGE), key, b"{\"status\":")
            .unwrap();
        let e = store.alert(ID).unwrap_err();
        assert!(
            e.to_string().contains("triage record does not decode"),
            "{e}"
        );
        assert!(store.alert_triage(ID).is_err());
        let q = AlertQuery {
            page: 1,
            limit: 10,
            ..AlertQuery::default()
        };
        assert!(store.search_alerts(&q).is_err(), "not a list without it");
        let health = store.read_health();
        assert_eq!(health.read_errors, 3);
        assert!(health.last_read_error.unwrap().contains("triage"));
        assert!(health.last_read_error_ns > 0);
        // An alert that is not there is still "none", not an error.
        assert!(
            store
                .alert("018bcfe5-6800-7000-8000-0000000000ff")
                .unwrap()
                .is_none()
        );
        assert_eq!(store.read_health().read_errors, 3);
    }

    #[test]
    fn a_triage_change_the_store_refuses_is_unsaved_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        store.put_alert(&alert(ID, 1)).unwrap();
        store.inject_write_fault(true);
        let e = store
            .update_triage(ID, &closing(Some(CloseReason::FalsePositive)), 5)
            .unwrap_err();
        assert!(matches!(e, TriageError::Unsaved(_)), "{e}");
        assert!(e.to_string().starts_with("the change was not saved"), "{e}");
        store.inject_write_fault(false);
        let a = store.alert(ID).unwrap().unwrap();
        assert_eq!(a.triage.status, TriageStatus::Open);
        assert!(a.triage.history.is_empty());
        // Sent again once the store takes writes, it lands once.
        store
            .update_triage(ID, &closing(Some(CloseReason::FalsePositive)), 6)
            .unwrap();
        assert_eq!(store.alert(ID).unwrap().unwrap().triage.history.len(), 1);
    }

    #[test]
    fn triage_survives_the_data_plane_rewriting_the_alert() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        store.put_alert(&alert(ID, 1)).unwrap();
        let closed = store
            .update_triage(ID, &closing(Some(CloseReason::FalsePositive)), 5)
            .unwrap()
            .unwrap();
        assert_eq!(closed.triage.status, TriageStatus::Closed);
        // A repeat folds in: the data plane writes its own copy, triage at the default.
        store.put_alert(&alert(ID, 2)).unwrap();
        let a = store.alert(ID).unwrap().unwrap();
        assert_eq!(a.count, 2);
        assert_eq!(a.triage.status, TriageStatus::Closed);
        assert_eq!(a.triage.reason, Some(CloseReason::FalsePositive));
        assert_eq!(a.triage.updated_ns, Some(5));
    }

    #[test]
    fn triage_keeps_reasons_on_closed_alerts_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        store.put_alert(&alert(ID, 1)).unwrap();
        assert!(matches!(
            store.update_triage(ID, &closing(None), 1),
            Err(TriageError::Refused("reason", _))
        ));
        let reason_only = TriageUpdate {
            reason: Some(CloseReason::Duplicate),
            ..TriageUpdate::default()
        };
        assert!(matches!(
            store.update_triage(ID, &reason_only, 2),
            Err(TriageError::Refused("reason", _))
        ));
        // Refusals leave no trace.
        assert_eq!(store.alert(ID).unwrap().unwrap().triage, Triage::default());
        store
            .update_triage(ID, &closing(Some(CloseReason::Other)), 3)
            .unwrap();
        // Once closed, the reason may be corrected alone, and reopening clears it.
        let a = store.update_triage(ID, &reason_only, 4).unwrap().unwrap();
        assert_eq!(a.triage.reason, Some(CloseReason::Duplicate));
        let reopen = TriageUpdate {
            status: Some(TriageStatus::Open),
            assignee: Some(Some("alice".into())),
            note: "new evidence".into(),
            ..TriageUpdate::default()
        };
        let a = store.update_triage(ID, &reopen, 5).unwrap().unwrap();
        assert_eq!(
            (
                a.triage.status,
                a.triage.reason,
                a.triage.assignee.as_deref()
            ),
            (TriageStatus::Open, None, Some("alice"))
        );
        let steps: Vec<_> = a.triage.history.iter().map(|h| h.at_ns).collect();
        assert_eq!(steps, [3, 4, 5]);
        assert_eq!(a.triage.history[2].note, "new evidence");
        assert!(
            store
                .update_triage("not-a-uuid", &reopen, 6)
                .unwrap()
                .is_none()
        );
        let absent = "018bcfe5-6800-7000-8000-0000000000ff";
        assert!(store.update_triage(absent, &reopen, 6).unwrap().is_none());
    }

    #[test]
    fn alert_totals_are_exact_up_to_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        let n = TOTAL_EXACT_UP_TO + 50;
        for i in 0..n {
            let mut a = alert(&format!("018bcfe5-6800-7000-8000-{i:012x}"), 1);
            a.severity = if i % 2 == 0 { 4 } else { 2 };
            a.attack.push(watchpost_proto::AttackMapping {
                tactic_id: "TA0001".into(),
                tactic: "Initial Access".into(),
                technique_id: "T1078.003".into(),
                technique: "Local Accounts".into(),
            });
            store.put_alert(&a).unwrap();
        }
        let list = |q: AlertQuery| store.search_alerts(&AlertQuery { limit: 10, ..q }).unwrap();
        let first = list(AlertQuery {
            page: 1,
            ..AlertQuery::default()
        });
        assert_eq!(
            (first.items.len(), first.total, first.total_exact),
            (10, TOTAL_EXACT_UP_TO, false)
        );
        assert_eq!(
            first.items[0].id,
            format!("018bcfe5-6800-7000-8000-{:012x}", n - 1)
        );
        // The last page is found, and counted to its end.
        let last = list(AlertQuery {
            page: (n / 10) as u32,
            ..AlertQuery::default()
        });
        assert_eq!(
            (last.items.len(), last.total, last.total_exact),
            (10, n, true)
        );
        // Filters read from the summary: severity, tactic, technique prefix.
        let severe = list(AlertQuery {
            page: 1,
            min_severity: Some(3),
            tactic: Some("initial access".into()),
            technique: Some("t1078".into()),
            ..AlertQuery::default()
        });
        assert!(severe.items.iter().all(|a| a.severity == 4));
        assert_eq!(severe.items.len(), 10);
        // A filter nothing matches never fills the page: every alert read, exact zero.
        let none = list(AlertQuery {
            page: 1,
            alert_type: Some(AlertType::Sigma),
            ..AlertQuery::default()
        });
        assert_eq!((none.total, none.total_exact), (0, true));
    }

    /// Issue 50, item 5: a feed sorted by creation while it shows the latest activity put an
    /// alert that repeated a minute ago below every alert raised after it.
    #[test]
    fn a_repeating_alert_rises_to_the_top_of_the_latest_activity_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        let ids: Vec<String> = (1..=3)
            .map(|n| format!("018bcfe5-6800-7000-8000-{n:012x}"))
            .collect();
        for (i, id) in ids.iter().enumerate() {
            let mut a = alert(id, 1);
            a.first_seen_ns += i as i64 * 60_000_000_000;
            a.last_seen_ns = a.first_seen_ns;
            store.put_alert(&a).unwrap();
        }
        let list = |order: AlertOrder, since_ns: Option<i64>| {
            let page = store
                .search_alerts(&AlertQuery {
                    order,
                    since_ns,
                    page: 1,
                    limit: 10,
                    ..AlertQuery::default()
                })
                .unwrap();
            assert_eq!(page.items.len() as u64, page.total);
            page.items.into_iter().map(|a| a.id).collect::<Vec<_>>()
        };
        assert_eq!(
            list(AlertOrder::FirstSeen, None),
            [ids[2].clone(), ids[1].clone(), ids[0].clone()]
        );
        assert_eq!(
            list(AlertOrder::LastSeen, None),
            [ids[2].clone(), ids[1].clone(), ids[0].clone()]
        );
        // The oldest repeats, twice (its index entry moves each time, never duplicated).
        let mut repeated = store.alert(&ids[0]).unwrap().unwrap();
        for later in [5, 10] {
            repeated.count += 1;
            repeated.last_seen_ns = repeated.first_seen_ns + later * 60_000_000_000;
            store.put_alert(&repeated).unwrap();
        }
        assert_eq!(
            list(AlertOrder::LastSeen, None),
            [ids[0].clone(), ids[2].clone(), ids[1].clone()]
        );
        assert_eq!(
            list(AlertOrder::FirstSeen, None),
            [ids[2].clone(), ids[1].clone(), ids[0].clone()]
        );
        // `since` bounds the first event in both orders.
        let since = Some(alert(ID, 1).first_seen_ns + 60_000_000_000);
        assert_eq!(
            list(AlertOrder::LastSeen, since),
            [ids[2].clone(), ids[1].clone()]
        );
        // By entity, the same order.
        let entity = EntityRef {
            kind: watchpost_proto::EntityKind::User,
            role: "subject".into(),
            value: "alice".into(),
            uuid: Uuid::from_u128(7),
        };
        for id in [&ids[0], &ids[1]] {
            let mut a = store.alert(id).unwrap().unwrap();
            a.entity = Some(entity.clone());
            store.put_alert(&a).unwrap();
        }
        let by_entity = store
            .search_alerts(&AlertQuery {
                order: AlertOrder::LastSeen,
                entities: Some(vec![entity.uuid]),
                page: 1,
                limit: 10,
                ..AlertQuery::default()
            })
            .unwrap();
        let got: Vec<_> = by_entity.items.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(got, [ids[0].as_str(), ids[1].as_str()]);
        // A store written before the index had it is indexed at open.
        drop(store);
        {
            let db = Store::open(dir.path(), &StorageConfig::default()).unwrap();
            let mut wb = WriteBatch::default();
            wb.delete_range_cf(db.cf(CF_ALERT_RECENT), [0u8; 24], [0xffu8; 24]);
            db.db().write(wb).unwrap();
        }
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        let page = store
            .search_alerts(&AlertQuery {
                order: AlertOrder::LastSeen,
                page: 1,
                limit: 10,
                ..AlertQuery::default()
            })
            .unwrap();
        let got: Vec<_> = page.items.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(got, [ids[0].as_str(), ids[2].as_str(), ids[1].as_str()]);
    }

    #[test]
    fn triage_history_is_bounded_and_listings_filter_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StorageConfig::default()).unwrap();
        let other = "018bcfe5-6800-7000-8000-000000000002";
        store.put_alert(&alert(ID, 1)).unwrap();
        store.put_alert(&alert(other, 1)).unwrap();
        for i in 0..(MAX_TRIAGE_HISTORY as i64 + 10) {
            let who = TriageUpdate {
                status: Some(TriageStatus::Acknowledged),
                assignee: Some(Some(format!("analyst{}", i % 2))),
                ..TriageUpdate::default()
            };
            store.update_triage(ID, &who, i).unwrap();
        }
        let a = store.alert(ID).unwrap().unwrap();
        assert_eq!(a.triage.history.len(), MAX_TRIAGE_HISTORY);
        assert_eq!(a.triage.history[0].at_ns, 10);
        let list = |status: Option<Vec<TriageStatus>>, assignee: Option<&str>| {
            let page = store
                .search_alerts(&AlertQuery {
                    status,
                    assignee: assignee.map(str::to_string),
                    page: 1,
                    limit: 10,
                    ..AlertQuery::default()
                })
                .unwrap();
            assert_eq!(page.items.len() as u64, page.total);
            assert!(page.total_exact);
            page.items.into_iter().map(|a| a.id).collect::<Vec<_>>()
        };
        assert_eq!(list(None, None), [other, ID]);
        assert_eq!(list(Some(vec![TriageStatus::Open]), None), [other]);
        assert_eq!(
            list(
                Some(vec![TriageStatus::Open, TriageStatus::Acknowledged]),
                None
            ),
            [other, ID]
        );
        assert_eq!(list(None, Some("analyst1")), [ID]);
        assert!(list(None, Some("analyst0")).is_empty());
        assert!(list(Some(vec![TriageStatus::Closed]), None).is_empty());
    }
}
