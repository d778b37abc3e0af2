//! Stage A's per-line work: parse, normalise into the Event record, mine the template, find the
//! entities, and encode the record into the worker's block.
//!
//! Everything here writes into buffers the [`Normalizer`] owns and reuses: field values are copied
//! into one arena string and referred to by ranges, so a steady stream of events allocates
//! nothing (`tests/zero_alloc.rs` proves it). Field mappings (which JSON keys are the timestamp,
//! the host, a user...) are documented in `docs/event.md`.

use crate::batch::{Format, LineMeta};
use crate::parse::extract::{self, TextEntity};
use crate::parse::json::{JsonScalar, JsonScratch, scan_object};
use crate::parse::syslog::{SyslogFormat, for_each_sd_param, parse_syslog, unescape_sd_value};
use crate::parse::time::parse_timestamp;
use crate::template::{Change, TemplateMiner};
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Arc;
use watchpost_detect::{
    CorrelationHit, DetectBatch, DetectRecord, GROUP_TEXT_BYTES, NOT_SCORED, RECORD_ENTITIES,
    RecordEntity, UebaType, ip_key, is_service_account,
};
use watchpost_proto::config::SeverityConfig;
use watchpost_proto::{
    EntityKind, InputId, Role, Severity, SeverityScale, U64Map, bincode_config, canonicalize_into,
    entity_uuid, hash64, hash64_seeded,
};
use watchpost_rules::{IocId, IocKind, IocSet, Level, Plan, RuleSet};
use watchpost_store::{
    EncodedBlock, EntitySlot, EventView, FLAG_INVALID_UTF8, FLAG_MALFORMED, FLAG_TRUNCATED,
    NewEntity, Posting, PostingKind,
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

/// Which field gave a value, so a better-named field can override a weaker one.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
struct Rank(u8);

/// The fields of the event being built, as ranges into the arena.
#[derive(Default)]
struct Fields {
    timestamp_ns: Option<(i64, Rank)>,
    severity: Option<(Severity, Rank)>,
    /// A numeric severity on the source's own scale (`event.severity`, `severity`, `level`):
    /// read at [`Normalizer::resolve`], once the source is known, and only when no field above
    /// gave the severity.
    severity_number: Option<(f64, Rank)>,
    source: Option<(Range<u32>, Rank)>,
    host: Option<(Range<u32>, Rank)>,
    message: Option<(Range<u32>, Rank)>,
}

/// Stage A state of one worker.
pub struct Normalizer {
    arena: String,
    entities: Vec<EntitySlot>,
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

/// `[severity]` as the normaliser looks it up: by the hash of the event's source, so that an
/// event pays one hash and one probe, and only when its severity is a bare number.
#[derive(Default)]
struct SeverityScales {
    default: SeverityScale,
    by_source: U64Map<SeverityScale>,
}

impl SeverityScales {
    fn of(&self, source: &str) -> SeverityScale {
        if self.by_source.is_empty() {
            return self.default;
        }
        self.by_source
            .get(&hash64(source.as_bytes()))
            .copied()
            .unwrap_or(self.default)
    }
}

/// The name-derived facts of an entity the worker has recorded.
#[derive(Clone, Copy)]
struct Known {
    uuid: [u8; 16],
    /// A user that is a service account (see `is_service_account`).
    service_account: bool,
    /// An IP's address key (see `ip_key`); 0 for other kinds.
    ip: u128,
    /// The indicator it matched (number + 1, 0: none) in IOC set `ioc_version`: entities recur,
    /// so each is looked up in a large set once per set, not once per event.
    ioc: u32,
    /// See `ioc`; 0: not looked up yet.
    ioc_version: u32,
}

impl Normalizer {
    /// A normaliser that mines with `miner`.
    pub fn new(miner: TemplateMiner) -> Normalizer {
        let seen = U64Map::with_capacity_and_hasher(SEEN_CAPACITY, Default::default());
        Normalizer {
            arena: String::with_capacity(64 << 10),
            entities: Vec::with_capacity(MAX_ENTITIES),
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

    /// The first hash or URL indicator of the event, when the set holds any: the hash-length
    /// hex runs and `scheme://` URLs of its message and values. Addresses and names are matched
    /// as entities (once per entity and set, see `Known`), never by scanning the text: entity
    /// extraction already found them there.
    fn first_indicator(&self, set: &IocSet, view: &EventView<'_>) -> Option<IocId> {
        let text = |r: &Range<u32>| {
            self.arena
                .get(r.start as usize..r.end as usize)
                .unwrap_or("")
        };
        let hashes =
            set.count(IocKind::Md5) + set.count(IocKind::Sha1) + set.count(IocKind::Sha256) > 0;
        let urls = set.count(IocKind::Url) > 0;
        if !hashes && !urls {
            return None;
        }
        if let Some(id) = set.find_hash_or_url(text(&view.message), hashes, urls) {
            return Some(id);
        }
        // In structured events, hashes are looked for in fields named for them (`Hashes`,
        // `sha256`, `file.hash.md5`...): other long hex values (trace and session ids) are not
        // hashes, and each would cost a lookup in a large set.
        // The value's length rules out most fields before their name is read: a hash is 32
        // characters at least, a URL more than `a://b`.
        view.attributes.iter().find_map(|(k, v)| {
            let v = text(v);
            let hashes = hashes && v.len() >= 32 && watchpost_rules::names_a_hash(text(k));
            let urls = urls && v.len() > 5;
            (hashes || urls).then(|| set.find_hash_or_url(v, hashes, urls))?
        })
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

    /// Copies `s` into the arena.
    #[inline]
    fn put(&mut self, s: &str) -> Range<u32> {
        let start = self.arena.len() as u32;
        self.arena.push_str(s);
        start..self.arena.len() as u32
    }

    fn attr(&mut self, k: &str, v: &str) {
        if self.attributes.len() >= MAX_ATTRIBUTES || k.len() > MAX_KEY_BYTES {
            self.fields_dropped += 1;
            return;
        }
        let k = self.put(k);
        let v = self.put(v);
        self.attributes.push((k, v));
    }

    fn entity(&mut self, kind: EntityKind, role: Role, raw: &str) {
        if canonicalize_into(kind, raw, &mut self.canon) {
            self.push_canonical_entity(kind, role);
        }
    }

    /// Like [`Normalizer::entity`] for a value already in the arena: canonicalised straight into
    /// `canon` (a separate buffer), so the arena can grow afterwards without a copy.
    fn entity_in_arena(&mut self, kind: EntityKind, role: Role, r: Range<usize>) {
        let ok = match self.arena.get(r) {
            Some(raw) => canonicalize_into(kind, raw, &mut self.canon),
            None => false,
        };
        if ok {
            self.push_canonical_entity(kind, role);
        }
    }

    /// Records the entity whose canonical name is in `canon`, once per event. A local address
    /// (loopback, unspecified) is no entity: every host has its own.
    fn push_canonical_entity(&mut self, kind: EntityKind, role: Role) {
        if self.entities.len() >= MAX_ENTITIES
            || (kind == EntityKind::Ip && is_local_canonical_ip(&self.canon))
        {
            return;
        }
        let hash = hash64_seeded(self.canon.as_bytes(), kind as u64);
        if self
            .entities
            .iter()
            .any(|e| e.hash == hash && e.kind == kind as u8)
        {
            return;
        }
        let start = self.arena.len() as u32;
        self.arena.push_str(&self.canon);
        self.entities.push(EntitySlot {
            kind: kind as u8,
            role: role as u8,
            name: start..self.arena.len() as u32,
            hash,
        });
    }

    fn syslog_fields(
        &mut self,
        line: &str,
        received_ns: i64,
        input: InputId,
        f: &mut Fields,
    ) -> Result<(), Option<String>> {
        let b = line.as_bytes();
        let rec = parse_syslog(b, received_ns);
        let s = |r: &Range<usize>| line.get(r.clone()).unwrap_or("");
        if let Some(ts) = rec.timestamp_ns {
            f.timestamp_ns = Some((ts, Rank(1)));
        }
        if let Some(sev) = rec.severity {
            f.severity = Some((Severity::from_syslog(sev), Rank(1)));
        }
        if let Some(h) = &rec.host {
            let r = self.put(s(h));
            f.host = Some((r, Rank(1)));
        }
        if let Some(a) = &rec.app {
            let r = self.put(s(a));
            f.source = Some((r, Rank(1)));
        }
        let msg = self.put(s(&rec.msg));
        f.message = Some((msg.clone(), Rank(1)));
        if let Some(fac) = rec.facility {
            let mut buf = [0u8; 3];
            self.attr("syslog.facility", fmt_u8(fac, &mut buf));
        }
        if let Some(p) = &rec.procid {
            self.attr("syslog.procid", s(p));
        }
        if let Some(m) = &rec.msgid {
            self.attr("syslog.msgid", s(m));
        }
        if let Some(sd) = &rec.structured_data {
            let sd_bytes = &b[sd.clone()];
            let mut pairs: [(Range<usize>, Range<usize>, Range<usize>); 32] = Default::default();
            let mut n = 0;
            let base = sd_bytes.as_ptr() as usize;
            let ok = for_each_sd_param(sd_bytes, &mut |id, name, value| {
                if n < pairs.len() {
                    let at = |x: &[u8]| {
                        let st = x.as_ptr() as usize - base;
                        st..st + x.len()
                    };
                    pairs[n] = (at(id), at(name), at(value));
                    n += 1;
                }
            });
            if ok {
                for (id, name, value) in pairs.iter().take(n) {
                    if id.len() + name.len() + 4 > MAX_KEY_BYTES
                        || self.attributes.len() >= MAX_ATTRIBUTES
                    {
                        self.fields_dropped += 1;
                        continue;
                    }
                    unescape_sd_value(&sd_bytes[value.clone()], &mut self.sd_value);
                    let key_start = self.arena.len() as u32;
                    self.arena.push_str("sd.");
                    self.arena
                        .push_str(std::str::from_utf8(&sd_bytes[id.clone()]).unwrap_or("?"));
                    self.arena.push('.');
                    self.arena
                        .push_str(std::str::from_utf8(&sd_bytes[name.clone()]).unwrap_or("?"));
                    let key = key_start..self.arena.len() as u32;
                    let start = self.arena.len() as u32;
                    self.arena
                        .push_str(&String::from_utf8_lossy(&self.sd_value));
                    let v = start..self.arena.len() as u32;
                    self.attributes.push((key, v));
                }
            }
        }
        self.text_entities_of(msg);
        let strict_input = matches!(input, InputId::SyslogTcp | InputId::SyslogUdp);
        if strict_input && rec.format == SyslogFormat::Unstructured {
            // Not syslog at all: kept whole as the message, counted as malformed.
            return Err(None);
        }
        Ok(())
    }

    fn text_entities_of(&mut self, msg: Range<u32>) {
        self.text_entities.clear();
        let arena = std::mem::take(&mut self.arena);
        let m = arena
            .get(msg.start as usize..msg.end as usize)
            .unwrap_or("");
        extract::extract_entities(m, &mut self.text_entities);
        self.arena = arena;
        for i in 0..self.text_entities.len() {
            let te = &self.text_entities[i];
            let (kind, role) = (te.kind, map_role(te.role));
            let r = msg.start as usize + te.range.start..msg.start as usize + te.range.end;
            self.entity_in_arena(kind, role, r);
        }
    }

    fn json_fields(&mut self, line: &str, f: &mut Fields) -> Result<(), Option<String>> {
        let mut json = self.json.take().unwrap_or_default();
        let res = scan_object(line.as_bytes(), &mut json, &mut |key, value| {
            let v: &str = match value {
                JsonScalar::Str(s) | JsonScalar::Num(s) | JsonScalar::Array(s) => s,
                JsonScalar::Bool(true) => "true",
                JsonScalar::Bool(false) => "false",
                JsonScalar::Null => return,
            };
            self.json_field(key, v, matches!(value, JsonScalar::Num(_)), f);
        });
        self.json = Some(json);
        match res {
            Ok(()) => {
                if let Some((m, _)) = &f.message {
                    let m = m.clone();
                    self.text_entities_of(m);
                }
                Ok(())
            }
            Err(e) => Err(Some(format!("invalid JSON: {e}"))),
        }
    }

    fn json_field(&mut self, key: &str, v: &str, numeric: bool, f: &mut Fields) {
        match key {
            "@timestamp" | "timestamp" | "TimeCreated" | "time" | "ts" | "event.created"
            | "eventTime" => {
                let rank = Rank(match key {
                    "@timestamp" => 5,
                    "TimeCreated" => 4,
                    "timestamp" => 3,
                    _ => 2,
                });
                if f.timestamp_ns.as_ref().is_none_or(|(_, r)| *r < rank)
                    && let Some(ts) = parse_timestamp(v.as_bytes())
                {
                    f.timestamp_ns = Some((ts, rank));
                    return;
                }
            }
            "message" | "msg" | "Message" | "log" | "text" => {
                let rank = Rank(if key == "message" { 3 } else { 2 });
                if f.message.as_ref().is_none_or(|(_, r)| *r < rank) {
                    let r = self.put(v);
                    f.message = Some((r, rank));
                    return;
                }
            }
            "host.name" | "host.hostname" | "hostname" | "Computer" | "host" => {
                let rank = Rank(match key {
                    "host.name" => 4,
                    "Computer" => 3,
                    "host.hostname" => 2,
                    _ => 1,
                });
                if f.host.as_ref().is_none_or(|(_, r)| *r < rank) {
                    let r = self.put(v);
                    f.host = Some((r, rank));
                }
                self.entity(EntityKind::Host, Role::Reporter, v);
                return;
            }
            "event.dataset" | "service.name" | "Channel" | "Provider_Name" | "source" | "app"
            | "program" | "log.logger" | "logger" | "event.module" => {
                let rank = Rank(match key {
                    "event.dataset" => 9,
                    "Channel" => 8,
                    "service.name" => 7,
                    "event.module" => 6,
                    "source" => 5,
                    "Provider_Name" => 4,
                    "app" | "program" => 3,
                    _ => 2,
                });
                if f.source.as_ref().is_none_or(|(_, r)| *r < rank) {
                    let r = self.put(v);
                    f.source = Some((r, rank));
                }
            }
            "event.severity"
            | "log.level"
            | "level"
            | "severity"
            | "Level"
            | "log.syslog.severity.code"
            | "watchpost.severity" => {
                // Which field wins (docs/event.md, "Severity"): a number on Watchpost's own
                // scale, syslog's severity, a level word, Windows' numeric `Level`; a bare
                // number elsewhere only on the scale configured for its source, at `resolve`.
                let (sev, rank) = match key {
                    "watchpost.severity" if numeric => (
                        v.parse::<f64>()
                            .ok()
                            .and_then(|n| SeverityScale::Watchpost.read(n)),
                        Rank(6),
                    ),
                    "log.syslog.severity.code" => (
                        v.parse::<f64>()
                            .ok()
                            .and_then(|n| SeverityScale::Syslog.read(n)),
                        Rank(5),
                    ),
                    "Level" if numeric => (
                        v.parse::<f64>()
                            .ok()
                            .and_then(|n| SeverityScale::Windows.read(n)),
                        Rank(3),
                    ),
                    "watchpost.severity" => (None, Rank(0)),
                    _ if numeric => {
                        let rank = Rank(match key {
                            "event.severity" => 3,
                            "severity" => 2,
                            _ => 1,
                        });
                        if let Ok(n) = v.parse::<f64>()
                            && f.severity_number.as_ref().is_none_or(|(_, r)| *r < rank)
                        {
                            f.severity_number = Some((n, rank));
                        }
                        (None, rank)
                    }
                    _ => (Severity::from_word(v), Rank(4)),
                };
                if let Some(sev) = sev
                    && f.severity.as_ref().is_none_or(|(_, r)| *r < rank)
                {
                    f.severity = Some((sev, rank));
                }
            }
            _ => {}
        }
        if let Some((kind, role)) = json_entity(key) {
            self.entity(kind, role, v);
        }
        self.attr(key, v);
    }

    /// Completes one event: resolves its header fields and template, evaluates the rules on it
    /// in place, appends its record and index entries to `out`, and keeps what detection needs.
    fn finish(
        &mut self,
        f: Fields,
        flags: u8,
        received_ns: i64,
        input: InputId,
        out: &mut EncodedBlock,
        tally: &mut Tally,
    ) {
        let head = self.resolve(f, received_ns, input, out);
        let pos = out.offsets.len() as u16;
        let view = EventView {
            timestamp_ns: head.timestamp_ns,
            received_ns,
            input: input as u8,
            severity: head.severity,
            flags,
            template_id: head.template_id,
            arena: &self.arena,
            source: head.source.clone(),
            host: head.host,
            message: head.message.clone(),
            entities: &self.entities,
            attributes: &self.attributes,
        };
        self.hits.clear();
        if let Some(rules) = &self.rules {
            rules.matches(&view, &mut self.hits);
        }
        let src = self
            .arena
            .get(head.source.start as usize..head.source.end as usize)
            .unwrap_or("");
        append_event(&view, pos, hash64(src.as_bytes()), out);

        let mut rec = DetectRecord {
            pos,
            ts_ns: head.timestamp_ns,
            source: hash64(src.as_bytes()),
            template: head.template_id,
            message_len: head.message.end - head.message.start,
            severity: head.severity,
            entity_count: self.entities.len().min(255) as u8,
            ..DetectRecord::default()
        };
        rec.set_source_name(src);
        let kept = self.hits.len().min(self.max_matches);
        if kept < self.hits.len()
            && let Some(rules) = &self.rules
        {
            // The most severe go on; ties by catalogue order, so the choice is stable.
            self.hits.sort_unstable_by_key(|&i| {
                let level = rules.rule(i).level.unwrap_or(Level::Medium);
                (std::cmp::Reverse(level), i)
            });
        }
        tally.sigma_matches += self.hits.len() as u64;
        tally.sigma_dropped += (self.hits.len() - kept) as u64;
        for slot in &self.entities {
            out.postings.push(Posting {
                kind: PostingKind::Entity,
                tag: slot.kind,
                hash: slot.hash,
                pos,
            });
            let Some(kind) = EntityKind::from_u8(slot.kind) else {
                continue;
            };
            let name = self
                .arena
                .get(slot.name.start as usize..slot.name.end as usize)
                .unwrap_or("");
            let seen_key = seen_key(slot);
            let known = remember(&mut self.seen, seen_key, kind, name, received_ns, out);
            if let Some((version, set)) = &self.iocs
                && rec.ioc == 0
            {
                let version = *version as u32;
                let ioc =
                    entity_indicator(&mut self.seen, seen_key, known, set, version, kind, name);
                if ioc != 0 {
                    rec.ioc = ioc;
                    rec.ioc_version = version;
                }
            }
            add_record_entity(&mut rec, slot, kind, known);
        }
        leave_targets_to_their_actor(&mut rec);
        if let Some((version, set)) = &self.iocs
            && rec.ioc == 0
            && let Some(id) = self.first_indicator(set, &view)
        {
            rec.ioc = id.index() as u32 + 1;
            rec.ioc_version = *version as u32;
        }
        if rec.ioc != 0 {
            tally.ioc_matches += 1;
        }
        if let Some((version, plan)) = &self.plan {
            let entities = EventEntities {
                slots: &self.entities,
                arena: &self.arena,
                seen: &self.seen,
            };
            correlation_hits(
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

    /// The event's header: its source (the input's name when it has none), host (recorded as
    /// the reporting entity), message and its template (new or changed templates go to `out`),
    /// severity and time.
    fn resolve(
        &mut self,
        f: Fields,
        received_ns: i64,
        input: InputId,
        out: &mut EncodedBlock,
    ) -> Head {
        let source = match f.source {
            Some((r, _)) if r.start != r.end => r,
            _ => self.put(input.event_input()),
        };
        let host = f.host.map(|(r, _)| r).unwrap_or(0..0);
        if host.start != host.end {
            let r = host.start as usize..host.end as usize;
            let is_ip = self
                .arena
                .get(r.clone())
                .is_some_and(|h| h.parse::<std::net::IpAddr>().is_ok());
            let kind = if is_ip {
                EntityKind::Ip
            } else {
                EntityKind::Host
            };
            self.entity_in_arena(kind, Role::Reporter, r);
        }
        let message = f.message.map(|(r, _)| r).unwrap_or(0..0);
        let msg_text = self
            .arena
            .get(message.start as usize..message.end as usize)
            .unwrap_or("");
        let template_id = if msg_text.trim().is_empty() {
            0
        } else {
            let outcome = self.miner.mine(msg_text);
            if !matches!(outcome.change, Change::None)
                && let Some(t) = self.miner.template(outcome.id)
            {
                let start = out.template_text.len() as u32;
                out.template_text.push_str(t);
                out.templates
                    .push((outcome.id, start..out.template_text.len() as u32));
            }
            outcome.id
        };
        let severity = self.severity_of(f.severity, f.severity_number, &source) as u8;
        Head {
            source,
            host,
            message,
            template_id,
            severity,
            timestamp_ns: f.timestamp_ns.map_or(received_ns, |(t, _)| t),
        }
    }
}

impl Normalizer {
    /// The event's severity: the best-ranked field that named one, else its bare number on its
    /// source's scale, else informational (what a producer that says nothing means).
    fn severity_of(
        &self,
        named: Option<(Severity, Rank)>,
        number: Option<(f64, Rank)>,
        source: &Range<u32>,
    ) -> Severity {
        if let Some((s, _)) = named {
            return s;
        }
        number
            .and_then(|(n, _)| {
                let source = self
                    .arena
                    .get(source.start as usize..source.end as usize)
                    .unwrap_or("");
                self.scales.of(source).read(n)
            })
            .unwrap_or(Severity::Info)
    }
}

/// An event's resolved header fields (ranges in the worker's arena).
struct Head {
    source: Range<u32>,
    host: Range<u32>,
    message: Range<u32>,
    template_id: u64,
    severity: u8,
    timestamp_ns: i64,
}

/// Appends the encoded event at `pos` to the block, with its summary and its source and
/// template index entries.
#[inline]
fn append_event(view: &EventView<'_>, pos: u16, source_hash: u64, out: &mut EncodedBlock) {
    if out.offsets.is_empty() {
        out.first_received_ns = view.received_ns;
        out.meta.min_ts = view.timestamp_ns;
        out.meta.max_ts = view.timestamp_ns;
    }
    out.offsets.push(out.records.len() as u32);
    // Encoding into a Vec cannot fail for lack of space; any error would be a bug in the view.
    let _ = bincode::encode_into_std_write(view, &mut out.records, bincode_config());
    out.meta.count += 1;
    out.meta.min_ts = out.meta.min_ts.min(view.timestamp_ns);
    out.meta.max_ts = out.meta.max_ts.max(view.timestamp_ns);
    out.meta.severity_counts[view.severity as usize] += 1;
    out.postings.push(Posting {
        kind: PostingKind::Source,
        tag: 0,
        hash: source_hash,
        pos,
    });
    if view.template_id != 0 {
        out.postings.push(Posting {
            kind: PostingKind::Template,
            tag: 0,
            hash: view.template_id,
            pos,
        });
    }
}

/// The key of an entity of the event in the worker's table of known entities (its name hash,
/// told apart by kind).
#[inline]
fn seen_key(slot: &EntitySlot) -> u64 {
    slot.hash ^ u64::from(slot.kind).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What the worker knows of an entity, computed from its name the first time the worker sees
/// it (which is also when the block records it as new, with `first_seen_ns`).
#[inline]
fn remember(
    seen: &mut U64Map<Known>,
    seen_key: u64,
    kind: EntityKind,
    name: &str,
    first_seen_ns: i64,
    out: &mut EncodedBlock,
) -> Known {
    if seen.len() >= SEEN_CAPACITY {
        seen.clear();
    }
    if let Some(known) = seen.get(&seen_key) {
        return *known;
    }
    first_sight(seen, seen_key, kind, name, first_seen_ns, out)
}

/// An entity the worker has not seen (or has forgotten): its UUID and name facts, recorded as
/// new in the block. Out of line: in steady state nearly every entity is known.
#[cold]
#[inline(never)]
fn first_sight(
    seen: &mut U64Map<Known>,
    seen_key: u64,
    kind: EntityKind,
    name: &str,
    first_seen_ns: i64,
    out: &mut EncodedBlock,
) -> Known {
    let known = Known {
        uuid: *entity_uuid(kind, name).as_bytes(),
        service_account: kind == EntityKind::User && is_service_account(name),
        ip: if kind == EntityKind::Ip {
            name.parse().map(ip_key).unwrap_or(0)
        } else {
            0
        },
        ioc: 0,
        ioc_version: 0,
    };
    seen.insert(seen_key, known);
    let start = out.names.len() as u32;
    out.names.push_str(name);
    out.new_entities.push(NewEntity {
        uuid: known.uuid,
        kind: kind as u8,
        first_seen_ns,
        name: start..out.names.len() as u32,
    });
    known
}

/// The indicator (number + 1, 0: none) of IOC set `version` the entity matches, looked up once
/// per entity and set version and remembered with the entity.
#[inline]
fn entity_indicator(
    seen: &mut U64Map<Known>,
    seen_key: u64,
    known: Known,
    set: &IocSet,
    version: u32,
    kind: EntityKind,
    name: &str,
) -> u32 {
    if known.ioc_version == version {
        return known.ioc;
    }
    let hit = match kind {
        EntityKind::Ip => set.match_ip(std::net::IpAddr::V6(known.ip.into())),
        EntityKind::Host | EntityKind::Domain => set.match_domain(name),
        EntityKind::User => None,
    };
    let ioc = hit.map_or(0, |id| id.index() as u32 + 1);
    if let Some(k) = seen.get_mut(&seen_key) {
        k.ioc = ioc;
        k.ioc_version = version;
    }
    ioc
}

/// Adds an entity to the detect record: its UEBA type (by kind and role), the client address
/// and reporter the record keys on, and a slot of the record's entity list while one is free.
#[inline]
fn add_record_entity(rec: &mut DetectRecord, slot: &EntitySlot, kind: EntityKind, known: Known) {
    let role = Role::from_u8(slot.role);
    let ueba = match (kind, role) {
        (EntityKind::User, _) if known.service_account => UebaType::ServiceAccount as u8,
        (EntityKind::User, _) => UebaType::User as u8,
        (EntityKind::Host, Role::Reporter) => UebaType::Host as u8,
        (EntityKind::Ip, Role::Source) => UebaType::Ip as u8,
        _ => NOT_SCORED,
    };
    if kind == EntityKind::Ip && role == Role::Source && rec.client_ip == 0 {
        rec.client_ip = known.ip;
    }
    if role == Role::Reporter && rec.reporter == 0 {
        rec.reporter = slot.hash;
    }
    if (rec.n_entities as usize) < RECORD_ENTITIES {
        rec.entities[rec.n_entities as usize] = RecordEntity {
            hash: slot.hash,
            uuid: known.uuid,
            kind: slot.kind,
            role: slot.role,
            ueba,
        };
        rec.n_entities += 1;
    }
}

/// An account acted upon by a person (sudo's `USER=root`, su's target, explicit credentials) is
/// not the one behaving: the person is. Scoring the target would give `root` a baseline that is
/// every administrator's sudo use at once, noisy by construction, and would judge it again for
/// what the person's own baseline already judges. A target stays scored when no person acts
/// (a Windows logon, whose subject is the machine account), since it is then the actor.
fn leave_targets_to_their_actor(rec: &mut DetectRecord) {
    let entities = &mut rec.entities[..rec.n_entities as usize];
    let person_acts = entities
        .iter()
        .any(|e| e.role == Role::Subject as u8 && e.ueba == UebaType::User as u8);
    if person_acts {
        for e in entities.iter_mut() {
            if e.role == Role::Target as u8 && e.kind == EntityKind::User as u8 {
                e.ueba = NOT_SCORED;
            }
        }
    }
}

/// The correlation hits of one event: for each rule it matched, each correlation that rule
/// feeds (a tap of `plan`, numbered by catalogue `version`) whose group and value fields the
/// event has.
#[inline]
#[allow(clippy::too_many_arguments)]
fn correlation_hits(
    version: u64,
    plan: &Plan,
    matched: &[u32],
    view: &EventView<'_>,
    rec: &DetectRecord,
    entities: &EventEntities<'_>,
    canon: &mut String,
    hits: &mut Vec<CorrelationHit>,
) {
    for &rule in matched {
        for tap in plan.taps(rule) {
            let Some((group, value)) = tap.keys(view) else {
                continue;
            };
            let mut hit = CorrelationHit {
                record: *rec,
                version,
                corr: tap.corr,
                slot: tap.slot,
                group,
                value,
                text: [0; GROUP_TEXT_BYTES],
                text_len: 0,
                entity: None,
            };
            hit.text_len = tap.group_text(view, &mut hit.text) as u8;
            tap.group_values(view, &mut |_, v| {
                hit.entity = entities.named(v, canon);
                hit.entity.is_some()
            });
            hits.push(hit);
        }
    }
}

/// The entities of the event being finished, to find the one a correlation's group value names.
struct EventEntities<'a> {
    slots: &'a [EntitySlot],
    arena: &'a str,
    seen: &'a U64Map<Known>,
}

impl EventEntities<'_> {
    /// The event's entity that `value` names, canonicalised for each entity's kind in turn
    /// (into `canon`): a group by `SourceIp` names the address, by `TargetUserName` the account.
    /// Only matches of correlated rules come here, never the per-event path.
    fn named(&self, value: &str, canon: &mut String) -> Option<RecordEntity> {
        let slot = self.slots.iter().find(|s| {
            let Some(kind) = EntityKind::from_u8(s.kind) else {
                return false;
            };
            canonicalize_into(kind, value, canon)
                && self.arena.get(s.name.start as usize..s.name.end as usize)
                    == Some(canon.as_str())
        })?;
        let kind = EntityKind::from_u8(slot.kind)?;
        let name = self
            .arena
            .get(slot.name.start as usize..slot.name.end as usize)?;
        // Every entity of the event was remembered just before; a full table may have been
        // reset since, then the id is computed again.
        let uuid = self
            .seen
            .get(&seen_key(slot))
            .map_or_else(|| *entity_uuid(kind, name).as_bytes(), |k| k.uuid);
        Some(RecordEntity {
            hash: slot.hash,
            uuid,
            kind: slot.kind,
            role: slot.role,
            ueba: NOT_SCORED,
        })
    }
}

fn map_role(r: extract::Role) -> Role {
    match r {
        extract::Role::Source => Role::Source,
        extract::Role::Destination => Role::Destination,
        extract::Role::Subject => Role::Subject,
        extract::Role::Target => Role::Target,
        extract::Role::Other => Role::Other,
    }
}

/// JSON fields that name an entity (ECS, Windows event data, common producers).
fn json_entity(key: &str) -> Option<(EntityKind, Role)> {
    use EntityKind::*;
    Some(match key {
        "source.ip" | "client.ip" | "IpAddress" | "SourceAddress" | "SourceIp" | "src_ip"
        | "srcip" | "src" | "ClientIP" | "remote_addr" | "clientip" => (Ip, Role::Source),
        "destination.ip" | "server.ip" | "DestAddress" | "DestinationIp" | "dst_ip" | "dstip"
        | "dst" => (Ip, Role::Destination),
        "host.ip" | "ip" => (Ip, Role::Other),
        "user.name" | "SubjectUserName" | "User" | "user" | "username" | "source.user.name"
        | "AccountName" => (User, Role::Subject),
        "user.target.name" | "TargetUserName" | "destination.user.name" | "TargetUser" => {
            (User, Role::Target)
        }
        "source.domain" | "WorkstationName" | "SourceHostname" | "client.domain" => {
            (Host, Role::Source)
        }
        "destination.domain" | "DestinationHostname" | "server.domain" => (Host, Role::Destination),
        "dns.question.name" | "url.domain" | "QueryName" | "domain" | "url.registered_domain" => {
            (Domain, Role::Other)
        }
        _ => return None,
    })
}

/// [`watchpost_proto::addr::is_local_address`] for an address already canonical (IPv4 dotted,
/// IPv4-mapped IPv6 as IPv4, other IPv6 fully expanded): string compares, no parse, as this runs
/// for every address of every event.
#[inline]
fn is_local_canonical_ip(canonical: &str) -> bool {
    const V6_LOOPBACK: &str = "0000:0000:0000:0000:0000:0000:0000:0001";
    const V6_UNSPECIFIED: &str = "0000:0000:0000:0000:0000:0000:0000:0000";
    let local = canonical.starts_with("127.")
        || canonical == "0.0.0.0"
        || canonical == V6_LOOPBACK
        || canonical == V6_UNSPECIFIED;
    debug_assert_eq!(
        local,
        watchpost_proto::addr::is_local_address(canonical),
        "{canonical}"
    );
    local
}

/// Writes `v` in decimal into `buf`, returning the text.
fn fmt_u8(v: u8, buf: &mut [u8; 3]) -> &str {
    let mut n = 0;
    if v >= 100 {
        buf[n] = b'0' + v / 100;
        n += 1;
    }
    if v >= 10 {
        buf[n] = b'0' + (v / 10) % 10;
        n += 1;
    }
    buf[n] = b'0' + v % 10;
    n += 1;
    std::str::from_utf8(&buf[..n]).unwrap_or("0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LineMeta, MinerConfig};

    /// Normalises `line` as one taken in by `input` at a fixed time.
    fn push(n: &mut Normalizer, line: &str, input: InputId, format: Format) {
        let mut block = EncodedBlock::with_capacity(0, 16);
        let meta = LineMeta {
            start: 0,
            len: line.len() as u32,
            received_ns: 1_795_255_200_000_000_000,
            truncated: false,
        };
        n.push_line(
            line.as_bytes(),
            &meta,
            input,
            format,
            &mut block,
            &mut Tally::default(),
        );
    }

    /// The UEBA types of the users of one normalised line, by role name.
    fn scored_users(line: &str, format: Format) -> Vec<(&'static str, Option<UebaType>)> {
        let mut n = Normalizer::new(TemplateMiner::new(&MinerConfig::default()).unwrap());
        push(&mut n, line, InputId::SyslogTcp, format);
        let rec = n.detect_batch().records[0];
        rec.entities()
            .iter()
            .filter(|e| e.kind == EntityKind::User as u8)
            .map(|e| (Role::from_u8(e.role).name(), e.ueba_type()))
            .collect()
    }

    /// The severity each line is stored with, normalised by one normaliser on `scales`.
    fn severities(lines: &[&str], scales: &SeverityConfig) -> Vec<Severity> {
        let mut n = Normalizer::new(TemplateMiner::new(&MinerConfig::default()).unwrap());
        n.set_severity_scales(scales);
        for line in lines {
            push(&mut n, line, InputId::JsonTcp, Format::Auto);
        }
        n.detect_batch()
            .records
            .iter()
            .map(|r| Severity::try_from(r.severity).unwrap())
            .collect()
    }

    /// Issue 50, item 1: the load generator (like many shippers) writes syslog's 6 for
    /// informational in `event.severity` beside `log.level`; read on Watchpost's 0-5 it was
    /// critical, and 58% of a realistic day was stored as critical.
    #[test]
    fn a_number_on_an_unknown_scale_never_outranks_the_level_word_or_makes_an_event_critical() {
        let lines = [
            // The load generator's shape: the word wins.
            r#"{"message":"User alice logged in","log":{"level":"info"},"event":{"dataset":"app.auth","severity":6}}"#,
            r#"{"message":"GET /api/v1/search 200","event":{"severity":6,"dataset":"nginx.access"},"log.level":"info"}"#,
            r#"{"message":"db timeout","event":{"severity":3,"dataset":"app.db"},"log.level":"error"}"#,
            // A bare number on no configured scale sets nothing, however large.
            r#"{"message":"no word","event":{"severity":2,"dataset":"app.auth"}}"#,
            r#"{"message":"pino","level":60,"service.name":"checkout"}"#,
            r#"{"message":"huge","severity":99}"#,
            // Syslog's own code and Windows' Level are on known scales.
            r#"{"message":"code","log.syslog.severity.code":2}"#,
            r#"{"message":"win","Channel":"Security","Level":2}"#,
            // Watchpost's own scale, as the OTLP input writes it, wins over everything.
            r#"{"message":"otlp","watchpost.severity":4,"log.level":"INFO","event.severity":1}"#,
        ];
        let defaults = SeverityConfig::default();
        assert_eq!(
            severities(&lines, &defaults),
            [
                Severity::Info,
                Severity::Info,
                Severity::High,
                Severity::Info,
                Severity::Info,
                Severity::Info,
                Severity::Critical,
                Severity::High,
                Severity::High,
            ]
        );
        // Declared per source, a bare number is read on that source's scale (and only there);
        // a word still wins over it.
        let mut declared = SeverityConfig::default();
        declared
            .sources
            .insert("app.auth".into(), SeverityScale::Syslog);
        declared
            .sources
            .insert("checkout".into(), SeverityScale::Bunyan);
        let got = severities(&lines[..6], &declared);
        assert_eq!(
            got,
            [
                Severity::Info,
                Severity::Info,
                Severity::High,
                Severity::Critical,
                Severity::Critical,
                Severity::Info,
            ]
        );
        // The default scale covers every source not listed; a value off the scale stays unread.
        let all_syslog = SeverityConfig {
            default_scale: SeverityScale::Syslog,
            ..SeverityConfig::default()
        };
        assert_eq!(
            severities(&[lines[3], lines[5]], &all_syslog),
            [Severity::Critical, Severity::Info]
        );
    }

    #[test]
    fn an_account_a_person_acts_on_is_left_to_the_person() {
        let sudo = "<86>Nov  3 12:00:50 srv-05 sudo[47235]: marco.evans : TTY=pts/5 ; \
                    PWD=/home/marco.evans ; USER=root ; COMMAND=/usr/bin/journalctl -u app";
        assert_eq!(
            scored_users(sudo, Format::Syslog),
            [("subject", Some(UebaType::User)), ("target", None)]
        );
        // A logon whose subject is the machine account: the target is the one logging on.
        let logon = r#"{"@timestamp":"2026-11-03T12:00:00Z","host":{"name":"dc-01"},"EventID":4624,"SubjectUserName":"DC-01$","TargetUserName":"alice"}"#;
        assert_eq!(
            scored_users(logon, Format::Json),
            [
                ("subject", Some(UebaType::ServiceAccount)),
                ("target", Some(UebaType::User))
            ]
        );
    }
}
