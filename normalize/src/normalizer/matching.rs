//! Match: what stage A detects in place, on the event it has just built. The Sigma rules (the
//! most severe matches go on to detection), the indicators (entities once per entity and feed
//! version, hashes and URLs in the text) and the correlation keys of matched rules.

use super::Tally;
use super::entities::{Known, seen_key, text};
use std::ops::Range;
use watchpost_detect::{CorrelationHit, DetectRecord, GROUP_TEXT_BYTES, NOT_SCORED, RecordEntity};
use watchpost_proto::{EntityKind, U64Map, canonicalize_into};
use watchpost_rules::{IocId, IocKind, IocSet, Level, Plan, RuleSet};
use watchpost_store::{EntitySlot, EventView};
/// The indicator an event matched, as the detection record carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Indicator {
    /// Its number in the set + 1; 0: none.
    pub(super) id: u32,
    /// The feed version that numbered it.
    pub(super) version: u32,
}

impl Indicator {
    /// No indicator matched.
    pub(super) const NONE: Indicator = Indicator { id: 0, version: 0 };

    /// An indicator matched.
    pub(super) fn is_some(self) -> bool {
        self.id != 0
    }
}

/// Evaluates `rules` on the event in place, into `hits`, and returns how many of them go on to
/// detection: at most `max`, the most severe first (ties by catalogue order, so the choice is
/// stable); the rest are counted as dropped.
#[inline]
pub(super) fn sigma(
    rules: Option<&RuleSet>,
    view: &EventView<'_>,
    max: usize,
    hits: &mut Vec<u32>,
    tally: &mut Tally,
) -> usize {
    hits.clear();
    let Some(rules) = rules else {
        return 0;
    };
    rules.matches(view, hits);
    let kept = hits.len().min(max);
    if kept < hits.len() {
        hits.sort_unstable_by_key(|&i| {
            let level = rules.rule(i).level.unwrap_or(Level::Medium);
            (std::cmp::Reverse(level), i)
        });
    }
    tally.sigma_matches += hits.len() as u64;
    tally.sigma_dropped += (hits.len() - kept) as u64;
    kept
}

/// The first indicator of `set` (numbered by feed `version`) the event matches: its entities in
/// order (each looked up once per entity and feed version, see `Known`), then hashes and URLs in
/// its text. `known` is parallel to `view.entities`.
#[inline]
pub(super) fn indicator(
    set: &IocSet,
    version: u64,
    view: &EventView<'_>,
    known: &[Known],
    seen: &mut U64Map<Known>,
) -> Indicator {
    let version = version as u32;
    for (slot, known) in view.entities.iter().zip(known) {
        let Some(kind) = EntityKind::from_u8(slot.kind) else {
            continue;
        };
        let name = text(view.arena, &slot.name);
        let id = entity_indicator(seen, seen_key(slot), *known, set, version, kind, name);
        if id != 0 {
            return Indicator { id, version };
        }
    }
    match first_indicator(set, view) {
        Some(id) => Indicator {
            id: id.index() as u32 + 1,
            version,
        },
        None => Indicator::NONE,
    }
}

/// The first hash or URL indicator of the event, when the set holds any: the hash-length
/// hex runs and `scheme://` URLs of its message and values. Addresses and names are matched
/// as entities (once per entity and set, see `Known`), never by scanning the text: entity
/// extraction already found them there.
fn first_indicator(set: &IocSet, view: &EventView<'_>) -> Option<IocId> {
    let text = |r: &Range<u32>| text(view.arena, r);
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

/// The correlation hits of one event: for each rule it matched, each correlation that rule
/// feeds (a tap of `plan`, numbered by catalogue `version`) whose group and value fields the
/// event has.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(super) fn correlation_hits(
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
pub(super) struct EventEntities<'a> {
    pub(super) slots: &'a [EntitySlot],
    pub(super) arena: &'a str,
    /// Parallel to `slots`.
    pub(super) known: &'a [Known],
}

impl EventEntities<'_> {
    /// The event's entity that `value` names, canonicalised for each entity's kind in turn
    /// (into `canon`): a group by `SourceIp` names the address, by `TargetUserName` the account.
    /// Only matches of correlated rules come here, never the per-event path.
    fn named(&self, value: &str, canon: &mut String) -> Option<RecordEntity> {
        let at = self.slots.iter().position(|s| {
            let Some(kind) = EntityKind::from_u8(s.kind) else {
                return false;
            };
            canonicalize_into(kind, value, canon) && text(self.arena, &s.name) == canon.as_str()
        })?;
        let slot = &self.slots[at];
        Some(RecordEntity {
            hash: slot.hash,
            uuid: self.known.get(at)?.uuid,
            kind: slot.kind,
            role: slot.role,
            ueba: NOT_SCORED,
        })
    }
}
