//! Normalise, second half: the event's entities. Each is canonicalised once per event, and what
//! is derived from its name (UUID, service account, address key) once per worker, the first time
//! the worker sees it: that first sighting is what the block records as a new entity.

use super::{MAX_ENTITIES, Normalizer, SEEN_CAPACITY};
use crate::parse::extract;
use std::ops::Range;
use watchpost_detect::{ip_key, is_service_account};
use watchpost_proto::{EntityKind, Role, U64Map, canonicalize_into, entity_uuid, hash64_seeded};
use watchpost_store::{EncodedBlock, EntitySlot, NewEntity};

/// The name-derived facts of an entity the worker has recorded.
#[derive(Clone, Copy, Default)]
pub(super) struct Known {
    pub(super) uuid: [u8; 16],
    /// A user that is a service account (see `is_service_account`).
    pub(super) service_account: bool,
    /// An IP's address key (see `ip_key`); 0 for other kinds.
    pub(super) ip: u128,
    /// The indicator it matched (number + 1, 0: none) in IOC set `ioc_version`: entities recur,
    /// so each is looked up in a large set once per set, not once per event.
    pub(super) ioc: u32,
    /// See `ioc`; 0: not looked up yet.
    pub(super) ioc_version: u32,
}

impl Normalizer {
    /// What the worker knows of each of the event's entities, into `known` (parallel to
    /// `entities`). An entity the worker has not seen is recorded in `out` as new, first seen at
    /// `received_ns`.
    pub(super) fn know_entities(&mut self, received_ns: i64, out: &mut EncodedBlock) {
        self.known.clear();
        for slot in &self.entities {
            let known = match EntityKind::from_u8(slot.kind) {
                Some(kind) => {
                    let name = self
                        .arena
                        .get(slot.name.start as usize..slot.name.end as usize)
                        .unwrap_or("");
                    remember(&mut self.seen, seen_key(slot), kind, name, received_ns, out)
                }
                None => Known::default(),
            };
            self.known.push(known);
        }
    }

    pub(super) fn entity(&mut self, kind: EntityKind, role: Role, raw: &str) {
        if canonicalize_into(kind, raw, &mut self.canon) {
            self.push_canonical_entity(kind, role);
        }
    }

    /// Like [`Normalizer::entity`] for a value already in the arena: canonicalised straight into
    /// `canon` (a separate buffer), so the arena can grow afterwards without a copy.
    pub(super) fn entity_in_arena(&mut self, kind: EntityKind, role: Role, r: Range<usize>) {
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

    pub(super) fn text_entities_of(&mut self, msg: Range<u32>) {
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
}

/// The key of an entity of the event in the worker's table of known entities (its name hash,
/// told apart by kind).
#[inline]
pub(super) fn seen_key(slot: &EntitySlot) -> u64 {
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

pub(super) fn map_role(r: extract::Role) -> Role {
    match r {
        extract::Role::Source => Role::Source,
        extract::Role::Destination => Role::Destination,
        extract::Role::Subject => Role::Subject,
        extract::Role::Target => Role::Target,
        extract::Role::Other => Role::Other,
    }
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

/// The text of `range` in `arena` (empty if it is not there, which would be a bug upstream).
#[inline]
pub(super) fn text<'a>(arena: &'a str, range: &Range<u32>) -> &'a str {
    arena
        .get(range.start as usize..range.end as usize)
        .unwrap_or("")
}
