//! Stage A's per-line work, in three steps a line takes in order: **normalise** (parse the line
//! into the event's fields, header, template and entities), **match** (Sigma rules in place,
//! indicators, correlation keys) and **encode** (the stored record into the worker's block, the
//! detection record into the batch for stage B). [`Normalizer::push_line`] parses;
//! `Normalizer::finish` runs the three steps, one module each.
//!
//! Everything here writes into buffers the [`Normalizer`] owns and reuses: field values are copied
//! into one arena string and referred to by ranges, so a steady stream of events allocates
//! nothing (`tests/zero_alloc.rs` proves it). Field mappings (which JSON keys are the timestamp,
//! the host, a user...) are documented in `docs/event.md`.

mod encode;
mod entities;
mod fields;
mod header;
mod matching;
#[cfg(test)]
mod tests;

use crate::line::{Format, LineMeta};
use crate::parse::extract::TextEntity;
use crate::parse::json::JsonScratch;
use crate::template::TemplateMiner;
use entities::Known;
use fields::{Fields, Rank};
use header::SeverityScales;
use matching::Indicator;
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Arc;
use watchpost_detect::DetectBatch;
use watchpost_proto::config::SeverityConfig;
use watchpost_proto::{InputId, U64Map, hash64};
use watchpost_rules::{IocSet, Plan, RuleSet};
use watchpost_store::{
    EncodedBlock, EntitySlot, EventView, FLAG_INVALID_UTF8, FLAG_MALFORMED, FLAG_TRUNCATED,
};

/// Most entities kept per event.
const MAX_ENTITIES: usize = 32;
/// Most attributes kept per event; more are counted in `watchpost.fields_dropped`.
const MAX_ATTRIBUTES: usize = 256;
/// Longest attribute name kept; longer ones are dropped and counted in `watchpost.fields_dropped`.
/// A JSON field's name is its whole dotted path, copied for every value under it: 256 values
/// under one 48 KiB key made a 50 KB line into 12 MB of event. Real names are a few dozen bytes
/// (RFC 5424 caps structured-data names at 32).
const MAX_KEY_BYTES: usize = 256;
/// Entities remembered as already recorded before the set is reset.
const SEEN_CAPACITY: usize = 1 << 18;

/// Per-batch tallies a worker adds to the shared counters once per batch.
#[derive(Default, Debug, Clone, Copy)]
pub struct Tally {
    /// Lines parsed per their format.
    pub parsed: u64,
    /// Lines kept as free text because they did not parse.
    pub malformed: u64,
    /// Lines with invalid UTF-8.
    pub invalid_utf8: u64,
    /// Lines that had been truncated.
    pub truncated: u64,
    /// Sigma matches.
    pub sigma_matches: u64,
    /// Sigma matches beyond what a detection record carries.
    pub sigma_dropped: u64,
    /// Events that matched an indicator.
    pub ioc_matches: u64,
}

/// Stage A state of one worker.
pub struct Normalizer {
    arena: String,
    entities: Vec<EntitySlot>,
    /// What the worker knows of each entity of the event being built (parallel to `entities`).
    known: Vec<Known>,
    attributes: Vec<(Range<u32>, Range<u32>)>,
    fields_dropped: u32,
    text_entities: Vec<TextEntity>,
    /// Taken out while a line is scanned (the visitor borrows the rest of `self`).
    json: Option<JsonScratch>,
    sd_value: Vec<u8>,
    canon: String,
    lossy: String,
    miner: TemplateMiner,
    /// What is derived from an entity's name once, when it is first recorded, not per event.
    seen: U64Map<Known>,
    /// Sigma rules evaluated on each event as it is built; its matches go to `hits`.
    rules: Option<Arc<RuleSet>>,
    /// Matches of the current event (reused).
    hits: Vec<u32>,
    /// Matches of one event that go on to detection (see [`Normalizer::set_max_matches`]).
    max_matches: usize,
    /// What detection needs of the lines pushed since the worker last took it: the records and
    /// correlation hits of the block being filled. They part from the block at the worker (the
    /// block goes to the writer, these to stage B), so the store never sees detection types.
    detect: DetectBatch,
    /// Correlations fed by the rules, and the catalogue version that numbered them.
    plan: Option<(u64, Arc<Plan>)>,
    /// Indicators matched against every event, and the feed version that numbered them.
    iocs: Option<(u64, Arc<IocSet>)>,
    /// The scale of each source's numeric severities (`[severity]`).
    scales: SeverityScales,
}

impl Normalizer {
    /// A normaliser that mines with `miner`.
    pub fn new(miner: TemplateMiner) -> Normalizer {
        let seen = U64Map::with_capacity_and_hasher(SEEN_CAPACITY, Default::default());
        Normalizer {
            arena: String::with_capacity(64 << 10),
            entities: Vec::with_capacity(MAX_ENTITIES),
            known: Vec::with_capacity(MAX_ENTITIES),
            attributes: Vec::with_capacity(MAX_ATTRIBUTES),
            fields_dropped: 0,
            text_entities: Vec::with_capacity(MAX_ENTITIES),
            json: Some(JsonScratch::new()),
            sd_value: Vec::with_capacity(1024),
            canon: String::with_capacity(256),
            lossy: String::with_capacity(64 << 10),
            miner,
            seen,
            rules: None,
            hits: Vec::with_capacity(16),
            max_matches: 64,
            detect: DetectBatch::default(),
            plan: None,
            iocs: None,
            scales: SeverityScales::default(),
        }
    }

    /// Reads numeric severities on the scales of `config` from now on (by default a number is
    /// on no scale and sets nothing; docs/event.md, "Severity").
    pub fn set_severity_scales(&mut self, config: &SeverityConfig) {
        self.scales = SeverityScales {
            default: config.default_scale,
            by_source: config
                .sources
                .iter()
                .map(|(source, &scale)| (hash64(source.as_bytes()), scale))
                .collect(),
        };
    }

    /// Hands at most `max` Sigma matches of an event to detection, the most severe first
    /// (`detection.sigma_max_matches_per_event`); the rest are counted as dropped.
    pub fn set_max_matches(&mut self, max: usize) {
        self.max_matches = max.max(1);
    }

    /// Evaluates `rules` on every event from now on (`None`: no Sigma matching).
    pub fn set_rules(&mut self, rules: Option<Arc<RuleSet>>) {
        self.rules = rules;
    }

    /// Matches the indicators of `set` (numbered by feed `version`) against every event from now
    /// on; an empty set costs one branch per event.
    pub fn set_iocs(&mut self, version: u64, set: Option<Arc<IocSet>>) {
        self.iocs = set.filter(|s| !s.is_empty()).map(|s| (version, s));
    }

    /// Reads the correlation groups of `plan` (numbered by catalogue `version`) off every event
    /// a correlated rule matches; the hits go to [`Normalizer::detect_batch`].
    pub fn set_plan(&mut self, version: u64, plan: Option<Arc<Plan>>) {
        self.plan = plan.filter(|p| !p.is_empty()).map(|p| (version, p));
    }

    /// The detection records and correlation hits of the lines pushed since this was last
    /// emptied: the worker names them by block key and sends them to stage B (which empties it).
    pub fn detect_batch(&mut self) -> &mut DetectBatch {
        &mut self.detect
    }

    /// The Sigma rules (numbers in the current set) the last line pushed matched.
    pub fn last_matches(&self) -> &[u32] {
        &self.hits
    }

    /// The worker's template miner.
    pub fn miner(&self) -> &TemplateMiner {
        &self.miner
    }

    /// Normalises one line and appends it to `out`.
    pub fn push_line(
        &mut self,
        raw: &[u8],
        meta: &LineMeta,
        input: InputId,
        format: Format,
        out: &mut EncodedBlock,
        tally: &mut Tally,
    ) {
        self.arena.clear();
        self.entities.clear();
        self.attributes.clear();
        self.fields_dropped = 0;
        let mut f = Fields::default();
        let mut flags = 0u8;
        if meta.truncated {
            flags |= FLAG_TRUNCATED;
            tally.truncated += 1;
        }
        // Invalid UTF-8 is kept, with the bad bytes replaced, in a buffer taken out of `self`
        // for the duration of the line (the parsers below borrow `self` mutably).
        let mut lossy = std::mem::take(&mut self.lossy);
        let line: &str = match std::str::from_utf8(raw) {
            Ok(s) => s,
            Err(_) => {
                flags |= FLAG_INVALID_UTF8;
                tally.invalid_utf8 += 1;
                lossy.clear();
                lossy.push_str(&String::from_utf8_lossy(raw));
                &lossy
            }
        };
        let is_json = match format {
            Format::Json => true,
            Format::Syslog => false,
            Format::Auto => line.trim_start().starts_with('{'),
        };
        let parsed = if is_json {
            self.json_fields(line, &mut f)
        } else {
            self.syslog_fields(line, meta.received_ns, input, &mut f)
        };
        match parsed {
            Ok(()) => tally.parsed += 1,
            Err(reason) => {
                tally.malformed += 1;
                flags |= FLAG_MALFORMED;
                if let Some(reason) = reason {
                    // Keep the whole line as free text, with why it did not parse.
                    self.arena.clear();
                    self.entities.clear();
                    self.attributes.clear();
                    f = Fields::default();
                    let msg = self.put(line);
                    f.message = Some((msg, Rank(0)));
                    let k = self.put("watchpost.parse_error");
                    let start = self.arena.len() as u32;
                    let _ = write!(self.arena, "{reason}");
                    self.attributes.push((k, start..self.arena.len() as u32));
                }
            }
        }
        self.lossy = lossy;
        if flags & FLAG_TRUNCATED != 0 {
            self.attr("watchpost.truncated", "true");
        }
        if self.fields_dropped > 0 {
            let k = self.put("watchpost.fields_dropped");
            let start = self.arena.len() as u32;
            let _ = write!(self.arena, "{}", self.fields_dropped);
            self.attributes.push((k, start..self.arena.len() as u32));
        }
        self.finish(f, flags, meta.received_ns, input, out, tally);
    }

    /// Completes one event in the order a reader of stage A should follow:
    ///
    /// 1. **normalise**: the header fields and the template ([`header`]), then what the worker
    ///    knows of each entity ([`entities`]; a first sighting is recorded in the block);
    /// 2. **match**: the Sigma rules in place on the event, then the indicators ([`matching`]);
    /// 3. **encode**: the stored record with its summary and postings into `out`, and the
    ///    detection record, with its matches and correlation hits, for stage B ([`encode`]).
    fn finish(
        &mut self,
        f: Fields,
        flags: u8,
        received_ns: i64,
        input: InputId,
        out: &mut EncodedBlock,
        tally: &mut Tally,
    ) {
        // 1. Normalise.
        let head = self.resolve(f, received_ns, input, out);
        self.know_entities(received_ns, out);
        let view = EventView {
            timestamp_ns: head.timestamp_ns,
            received_ns,
            input: input as u8,
            severity: head.severity,
            flags,
            template_id: head.template_id,
            arena: &self.arena,
            source: head.source.clone(),
            host: head.host.clone(),
            message: head.message.clone(),
            entities: &self.entities,
            attributes: &self.attributes,
        };

        // 2. Match.
        let kept = matching::sigma(
            self.rules.as_deref(),
            &view,
            self.max_matches,
            &mut self.hits,
            tally,
        );
        let indicator = match &self.iocs {
            Some((version, set)) => {
                matching::indicator(set, *version, &view, &self.known, &mut self.seen)
            }
            None => Indicator::NONE,
        };
        if indicator.is_some() {
            tally.ioc_matches += 1;
        }

        // 3. Encode.
        let pos = out.offsets.len() as u16;
        let source_hash = hash64(entities::text(&self.arena, &head.source).as_bytes());
        encode::stored_event(&view, pos, source_hash, out);
        let rec = encode::detect_record(&head, &view, pos, source_hash, &self.known, indicator);
        if let Some((version, plan)) = &self.plan {
            let entities = matching::EventEntities {
                slots: &self.entities,
                arena: &self.arena,
                known: &self.known,
            };
            matching::correlation_hits(
                *version,
                plan,
                &self.hits,
                &view,
                &rec,
                &entities,
                &mut self.canon,
                &mut self.detect.hits,
            );
        }
        self.detect.push(rec, &self.hits[..kept]);
    }
}
