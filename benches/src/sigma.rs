//! Realistic events and rule sets for the Sigma matching bench and its equivalence test.

use crate::Traffic;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use watchpost_dataplane::{evtx_lines, input_files, is_evtx};
use watchpost_normalize::{Format, LineMeta, MinerConfig, Normalizer, Tally, TemplateMiner};
use watchpost_proto::{EntityKind, InputId, Role};
use watchpost_rules::{BUNDLED, Body, PlainEvent, Rule, load_file, parse_rule, rule_files};
use watchpost_store::{BlockReader, EncodedBlock, EntitySlot, EventView};

const NOW_S: i64 = 1_795_000_000;

/// `n` events of seeded traffic (alternating syslog and JSON lines) as Sigma rules read them:
/// normalised by the real normaliser, stored in a block, read back.
pub fn plain_events(seed: u64, n: usize) -> Vec<PlainEvent> {
    let mut t = Traffic::new(seed);
    let lines = (0..n).map(|i| {
        let mut line = Vec::new();
        let json = i % 2 == 1;
        if json {
            t.next_json(NOW_S, &mut line);
        } else {
            t.next_syslog(NOW_S, &mut line);
        }
        (line, json)
    });
    normalised(lines)
}

/// Lines (JSON when the flag says so, syslog otherwise) as Sigma rules read them: normalised by
/// the real normaliser, stored in a block, read back.
fn normalised(lines: impl Iterator<Item = (Vec<u8>, bool)>) -> Vec<PlainEvent> {
    let mut norm = Normalizer::new(TemplateMiner::new(&MinerConfig::default()).expect("miner"));
    let mut out = Vec::new();
    let mut block = EncodedBlock::with_capacity(0, 1024);
    let mut tally = Tally::default();
    let mut flush = |block: &mut EncodedBlock, norm: &mut Normalizer| {
        block.seal();
        if let Some(r) = BlockReader::new(&block.sealed) {
            out.extend(
                (0..r.len())
                    .filter_map(|j| r.get(j))
                    .map(|e| e.into_plain()),
            );
        }
        block.clear();
        norm.detect_batch().clear();
    };
    for (line, json) in lines {
        let meta = LineMeta {
            start: 0,
            len: line.len() as u32,
            received_ns: NOW_S * 1_000_000_000,
            truncated: false,
        };
        let (input, format) = if json {
            (InputId::JsonTcp, Format::Json)
        } else {
            (InputId::SyslogTcp, Format::Syslog)
        };
        norm.push_line(&line, &meta, input, format, &mut block, &mut tally);
        if block.len() == 1024 {
            flush(&mut block, &mut norm);
        }
    }
    if !block.is_empty() {
        flush(&mut block, &mut norm);
    }
    out
}

/// Every record of the `.evtx` files under `dir` (recursively, in name order), flattened as
/// `analyze` flattens them, as Sigma rules read them. Unreadable files are named on stderr and
/// passed over.
pub fn evtx_events(dir: &Path) -> Vec<PlainEvent> {
    let files = input_files(&[dir.to_path_buf()]).unwrap_or_default();
    let mut text = Vec::new();
    for f in files.iter().filter(|f| is_evtx(f)) {
        // `evtx_lines` appends; a damaged file adds what it could read, and is named so that
        // a figure is not quietly taken over fewer records.
        if let Err(e) = evtx_lines(f, &mut text) {
            eprintln!(
                "{}: not a readable Windows event log, passed over: {e}",
                f.display()
            );
        }
    }
    normalised(
        text.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| (l.to_vec(), true)),
    )
}

fn detection(rules: impl IntoIterator<Item = Rule>) -> Vec<Arc<Rule>> {
    rules
        .into_iter()
        .filter(|r| matches!(r.body, Body::Detection { .. }))
        .map(Arc::new)
        .collect()
}

/// The bundled detection rules.
pub fn bundled_rules() -> Vec<Arc<Rule>> {
    detection(BUNDLED.iter().filter_map(|(_, y)| parse_rule(y).ok()))
}

/// The detection rules of the SigmaHQ subset (`WATCHPOST_SIGMAHQ`, else
/// `../shared/data/sigmahq-subset` beside the checkout); empty when it is not there.
pub fn sigmahq_rules() -> Vec<Arc<Rule>> {
    let dir = std::env::var_os("WATCHPOST_SIGMAHQ").map_or_else(
        || {
            PathBuf::from(
                std::env::var("CARGO_MANIFEST_DIR")
                    .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
            )
            .join("../../shared/data/sigmahq-subset")
        },
        PathBuf::from,
    );
    let Ok(files) = rule_files(&[dir]) else {
        return Vec::new();
    };
    detection(files.iter().filter_map(|f| load_file(f).rule.ok()))
}

/// The detection rules of a whole SigmaHQ checkout (`rules`, `rules-emerging-threats` and
/// `rules-threat-hunting` under `root`), as users load it.
pub fn sigmahq_full_rules(root: &Path) -> Vec<Arc<Rule>> {
    let dirs: Vec<PathBuf> = ["rules", "rules-emerging-threats", "rules-threat-hunting"]
        .iter()
        .map(|d| root.join(d))
        .filter(|d| d.is_dir())
        .collect();
    let Ok(files) = rule_files(&dirs) else {
        return Vec::new();
    };
    detection(files.iter().filter_map(|f| load_file(f).rule.ok()))
}

/// Events laid out as a worker holds them while Sigma rules read them: every text of every
/// event in one arena, each event a set of ranges into it (the store's [`EventView`], the type
/// the pipeline matches). Thousands of [`PlainEvent`]s, each string its own allocation, measure
/// memory latency as much as matching (the engine's whole-set rate was 17% higher over the same
/// records laid out so): the pipeline matches an event as it builds it, and reads a batch's
/// arena in order.
pub struct ArenaEvents {
    text: String,
    events: Vec<ArenaEvent>,
    attributes: Vec<(Range<u32>, Range<u32>)>,
    entities: Vec<EntitySlot>,
}

/// One event of [`ArenaEvents`]: its texts' ranges, and its spans of attributes and entities.
struct ArenaEvent {
    source: Range<u32>,
    host: Range<u32>,
    message: Range<u32>,
    attributes: Range<usize>,
    entities: Range<usize>,
}

impl ArenaEvents {
    /// `events`, in order, in one arena.
    pub fn of(events: &[PlainEvent]) -> ArenaEvents {
        let mut arena = ArenaEvents {
            text: String::new(),
            events: Vec::with_capacity(events.len()),
            attributes: Vec::new(),
            entities: Vec::new(),
        };
        for e in events {
            let source = arena.put(&e.source);
            let host = arena.put(&e.host);
            let message = arena.put(&e.message);
            let first_attribute = arena.attributes.len();
            for (name, value) in &e.attributes {
                let pair = (arena.put(name), arena.put(value));
                arena.attributes.push(pair);
            }
            let first_entity = arena.entities.len();
            for (kind, role, name) in &e.entities {
                // The names come from the store's own kinds and roles (`into_plain`).
                let slot = EntitySlot {
                    kind: (0..=u8::MAX)
                        .find(|&k| EntityKind::from_u8(k).is_some_and(|x| x.name() == kind))
                        .unwrap_or_else(|| panic!("entity kind {kind:?}")),
                    role: (0..=u8::MAX)
                        .find(|&r| Role::from_u8(r).name() == role)
                        .unwrap_or_else(|| panic!("entity role {role:?}")),
                    name: arena.put(name),
                    // The index key: rules do not read it.
                    hash: 0,
                };
                arena.entities.push(slot);
            }
            arena.events.push(ArenaEvent {
                source,
                host,
                message,
                attributes: first_attribute..arena.attributes.len(),
                entities: first_entity..arena.entities.len(),
            });
        }
        arena
    }

    fn put(&mut self, text: &str) -> Range<u32> {
        let offset = |at: usize| u32::try_from(at).expect("an arena under 4 GiB");
        let start = offset(self.text.len());
        self.text.push_str(text);
        start..offset(self.text.len())
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// No events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Event number `index` as the pipeline's rules read it.
    pub fn view(&self, index: usize) -> EventView<'_> {
        let e = &self.events[index];
        EventView {
            timestamp_ns: 0,
            received_ns: 0,
            input: 0,
            severity: 0,
            flags: 0,
            template_id: 0,
            arena: &self.text,
            source: e.source.clone(),
            host: e.host.clone(),
            message: e.message.clone(),
            entities: &self.entities[e.entities.clone()],
            attributes: &self.attributes[e.attributes.clone()],
        }
    }
}
