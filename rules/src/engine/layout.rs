//! Per-thread layouts of the events a sensor sees: for each set of attribute names, where each
//! field of the rule set sits, so that the next event of that layout is read without name lookups.

use crate::field::Field;
use crate::mapping::FieldSource;
use std::collections::BTreeMap;
use watchpost_proto::EventFields;

/// Slots of a thread's [`Layouts`] (a Windows collector's events come in a hundred or so
/// layouts: the EVTX-ATTACK-SAMPLES corpus has 134).
pub(super) const LAYOUT_SLOTS: usize = 256;

/// Most attributes of a layout kept, so that a thread's [`Layouts`] stay bounded (a Sysmon
/// process record has 39): an event with more is read name by name.
pub(super) const LAYOUT_NAMES_MAX: usize = 64;

/// Most fields a kept layout fills.
pub(super) const LAYOUT_FIELDS_MAX: usize = 256;

/// Most bytes of names past sixteen bytes a kept layout holds (a Windows record's System
/// fields have one, `TimeCreated_SystemTime`).
pub(super) const LAYOUT_LONG_BYTES_MAX: usize = 512;

/// The attribute layouts (names, in order) a thread has met, each with where the set's fields
/// sit in it. Looking each attribute name up in the set's [`NameTable`] took a tenth of
/// matching with the whole SigmaHQ set (callgrind): a probe per name into a table of a few
/// thousand slots, mostly out of the first-level cache. A Windows event of a kind always has
/// the same names in the same order: an event's names are now read into keys (a name of up
/// to sixteen bytes is its key), and when the keys, and the longer names whole, are those of
/// a layout kept, the fields are filled from it. The slots' room is kept: no allocation once
/// they have grown. At most [`LAYOUT_SLOTS`] times (64 keys, 256 fields, 512 bytes, and
/// [`LAYOUT_PLANS_MAX`] plans of 4 bytes a gate of their group) a thread.
#[derive(Default)]
pub(super) struct Layouts {
    /// The set the slots belong to ([`RuleSet::id`](super::RuleSet::id)): the fields are the set's.
    pub(super) set: u64,
    pub(super) slots: Vec<Layout>,
    /// The current event's name keys, read by [`Layouts::find`].
    pub(super) keys: Vec<NameKey>,
    /// Their hash with its lowest bit set: the key [`Layouts::keep`] gives the layout.
    pub(super) key: u64,
    /// The fields a look by names filled, for [`Layouts::keep`].
    pub(super) touched: Vec<u32>,
}

/// One layout of attribute names and where the set's fields sit in it.
#[derive(Default)]
pub(super) struct Layout {
    /// The hash of the names' keys with its lowest bit set; 0: the slot is empty.
    pub(super) key: u64,
    pub(super) names: Vec<NameKey>,
    /// (position, end in `long_text`) of each name past sixteen bytes, compared whole.
    pub(super) long: Vec<(u32, u32)>,
    pub(super) long_text: Vec<u8>,
    /// (field, position, rank) of each field the names fill.
    pub(super) targets: Vec<(u32, u32, u8)>,
    /// The fields under 64 filled, as bits.
    pub(super) present: u64,
    /// The [`ShapeMemo`](super::shape::ShapeMemo) slot and key of the shape-field values its last event had.
    pub(super) choice: Option<(u32, u64)>,
    /// The gates its events can reach, for each group they reached (a few).
    pub(super) plans: Vec<GatePlan>,
}

/// Most groups a [`Layout`] keeps a [`GatePlan`] for (a Sysmon process record's layout is in
/// two or three): past them, its events step through every gate of a further group.
pub(super) const LAYOUT_PLANS_MAX: usize = 4;

/// The gates of one group that an event of one layout can reach, by number, in the group's
/// order: every gate but those whose field only the attribute pass fills ([`Fill::Whole`])
/// and the layout lacks, which would read nothing. A Security record's group has 64 gates with
/// the whole SigmaHQ set, whose fields a record mostly lacks: stepping over them was a sixth
/// of a Security 5145 record's instructions (11.3 k to 9.6 k a record, callgrind).
#[derive(Debug)]
pub(super) struct GatePlan {
    /// [`GatePlan::STALE`]: made for the layout the slot held before, its room to reuse.
    pub(super) group: u32,
    /// The group's gates when the plan was made: a plan for other gates is never read.
    pub(super) count: usize,
    pub(super) gates: Vec<u32>,
}

impl GatePlan {
    /// The group of a plan no event may read.
    pub(super) const STALE: u32 = u32::MAX;
}

impl Layouts {
    /// The slot of `event`'s layout for set `set`, and whether the slot holds it (else it is
    /// for [`Layouts::keep`]). `None`: more names than a layout keeps.
    pub(super) fn find<E: EventFields>(&mut self, set: u64, event: &E) -> Option<(usize, bool)> {
        if self.set != set {
            // Another set's fields: forgotten, their room kept.
            for layout in &mut self.slots {
                layout.key = 0;
            }
            self.set = set;
        }
        if self.slots.len() != LAYOUT_SLOTS {
            self.slots.resize_with(LAYOUT_SLOTS, Layout::default);
        }
        self.keys.clear();
        let (keys, mut hash) = (&mut self.keys, 0x243f_6a88_85a3_08d3u64);
        event.any_attribute_name(&mut |name| {
            let key = NameKey::of(name);
            // Mixed in as they are: the keys are compared after, the hash only picks a slot.
            hash = (hash.rotate_left(23) ^ key.first ^ key.last.rotate_left(31) ^ key.len)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
            keys.push(key);
            keys.len() > LAYOUT_NAMES_MAX
        });
        if self.keys.len() > LAYOUT_NAMES_MAX {
            return None;
        }
        self.key = hash | 1;
        let at = (self.key >> 32) as usize % LAYOUT_SLOTS;
        let layout = &self.slots[at];
        let same = layout.key == self.key
            && layout.names == self.keys
            && layout.long.iter().enumerate().all(|(i, &(position, end))| {
                let start = match i {
                    0 => 0,
                    _ => layout.long[i - 1].1 as usize,
                };
                event.attribute_name_at(position as usize)
                    == layout.long_text.get(start..end as usize)
            });
        Some((at, same))
    }

    /// Keeps the layout of the event whose keys [`Layouts::find`] read in slot `at`, with the
    /// fields a look by names filled in `slots`; false, the slot left as it was, when the
    /// layout is past the bounds (so that an event of such a layout does not evict a kept
    /// one). The key is set last: a slot left half-filled (a panic caught further up) is never
    /// taken for one.
    pub(super) fn keep<E: EventFields>(
        &mut self,
        at: usize,
        event: &E,
        slots: &[Slot],
        present: u64,
    ) -> bool {
        self.touched.sort_unstable();
        self.touched.dedup();
        let long_bytes: usize = self
            .keys
            .iter()
            .filter(|name| name.len > 16)
            .map(|name| name.len as usize)
            .sum();
        if self.touched.len() > LAYOUT_FIELDS_MAX || long_bytes > LAYOUT_LONG_BYTES_MAX {
            return false;
        }
        let layout = &mut self.slots[at];
        layout.key = 0;
        layout.choice = None;
        layout.names.clear();
        layout.names.extend_from_slice(&self.keys);
        layout.long.clear();
        layout.long_text.clear();
        for (position, name) in self.keys.iter().enumerate() {
            if name.len > 16 {
                let Some(whole) = event.attribute_name_at(position) else {
                    return false;
                };
                layout.long_text.extend_from_slice(whole);
                layout
                    .long
                    .push((position as u32, layout.long_text.len() as u32));
            }
        }
        for plan in &mut layout.plans {
            plan.group = GatePlan::STALE;
        }
        layout.targets.clear();
        layout.targets.extend(self.touched.drain(..).map(|field| {
            let slot = slots[field as usize];
            (field, slot.index, slot.rank)
        }));
        layout.present = present;
        layout.key = self.key;
        true
    }
}

/// The set's attribute names, each with the fields it fills (and the place's rank in each),
/// in an open-addressing table: [`FieldValues`](super::values::FieldValues) looks each of an event's attribute names up
/// once.
#[derive(Clone, Debug, Default)]
pub(super) struct NameTable {
    pub(super) slots: Vec<NameSlot>,
    /// (field, rank) of each name, by span.
    pub(super) targets: Vec<(u32, u8)>,
    /// Per field: what the pass fills in.
    pub(super) fill: Vec<Fill>,
}

/// What [`FieldValues`](super::values::FieldValues)' pass over an event's attributes fills in of a field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Fill {
    /// Nothing: the field is read at each use (it has no attribute place, or 255 places or
    /// more, past what a rank counts).
    #[default]
    None,
    /// Its value: every place is an attribute.
    Whole,
    /// Its first present attribute; its other places are read at each use.
    Partly,
}

/// One name of a [`NameTable`], or an empty slot.
#[derive(Clone, Debug, Default)]
pub(super) struct NameSlot {
    pub(super) key: NameKey,
    /// The whole name, compared only past sixteen bytes (the key holds shorter ones whole).
    pub(super) name: Box<[u8]>,
    /// Its targets' span; `end` is 0 in an empty slot (a name has at least one target).
    pub(super) start: u32,
    pub(super) end: u32,
}

/// A name's length with its first and last eight bytes (or its bytes, when shorter): two loads
/// for any name, and for one of up to sixteen bytes the whole name, so that the table compares
/// words rather than calling a byte comparison per attribute of every event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct NameKey {
    pub(super) first: u64,
    pub(super) last: u64,
    pub(super) len: u64,
}

impl NameKey {
    #[inline]
    pub(super) fn of(name: &[u8]) -> NameKey {
        // Overlapping loads cover every byte of a name of its length, with no loop per byte
        // (most attribute names are under eight: `Image`, `User`, `EventID`).
        let (first, last) = match (name.first_chunk::<8>(), name.last_chunk::<8>()) {
            (Some(first), Some(last)) => (u64::from_le_bytes(*first), u64::from_le_bytes(*last)),
            _ => match (name.first_chunk::<4>(), name.last_chunk::<4>()) {
                (Some(first), Some(last)) => (
                    u64::from(u32::from_le_bytes(*first))
                        | (u64::from(u32::from_le_bytes(*last)) << 32),
                    0,
                ),
                _ => match name {
                    [] => (0, 0),
                    _ => (
                        u64::from(name[0])
                            | (u64::from(name[name.len() / 2]) << 8)
                            | (u64::from(name[name.len() - 1]) << 16),
                        0,
                    ),
                },
            },
        };
        NameKey {
            first,
            last,
            len: name.len() as u64,
        }
    }

    #[inline]
    pub(super) fn hash(&self) -> u64 {
        let h = (self.first ^ self.len.rotate_left(56)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ self.last.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
        h ^ (h >> 29)
    }
}

/// `name` word by word, as Defender's events reach us as JSON from some forwarders (`Threat
/// Name`, `Source Name`, `Process Name` where the Sigma taxonomy reads `ThreatName`): a space
/// before each capital that follows a small letter. The `.evtx` reader drops such spaces
/// (`watchpost_dataplane::evtx`); a JSON line keeps its names as written, so the table answers
/// both spellings of a name, at the same rank, and a record and its forwarded twin match the
/// same rules. No cost per event: one more name in the table. `None` for a name of one word, or
/// of anything but ASCII letters and digits.
fn spaced(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    if !bytes.iter().all(u8::is_ascii_alphanumeric) {
        return None;
    }
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in bytes.iter().enumerate() {
        if i > 0 && c.is_ascii_uppercase() && bytes[i - 1].is_ascii_lowercase() {
            out.push(' ');
        }
        out.push(char::from(c));
    }
    (out.len() > name.len()).then_some(out)
}

impl NameTable {
    /// The table of the attribute places of `fields`.
    pub(super) fn build(fields: &[Field]) -> NameTable {
        let mut by_name: BTreeMap<String, Vec<(u32, u8)>> = BTreeMap::new();
        let mut fill = vec![Fill::None; fields.len()];
        for (f, field) in fields.iter().enumerate() {
            let is_attribute = |p: &FieldSource| matches!(p, FieldSource::Attr(_));
            if field.0.len() >= usize::from(u8::MAX) || !field.0.iter().any(is_attribute) {
                continue;
            }
            fill[f] = if field.0.iter().all(is_attribute) {
                Fill::Whole
            } else {
                Fill::Partly
            };
            for (rank, place) in field.0.iter().enumerate() {
                if let FieldSource::Attr(name) = place {
                    for spelling in std::iter::once(name.to_string()).chain(spaced(name)) {
                        by_name
                            .entry(spelling)
                            .or_default()
                            .push((f as u32, rank as u8));
                    }
                }
            }
        }
        let size = (by_name.len() * 2).next_power_of_two().max(16);
        let mut table = NameTable {
            slots: vec![NameSlot::default(); size],
            fill,
            ..NameTable::default()
        };
        for (name, targets) in by_name {
            let key = NameKey::of(name.as_bytes());
            let start = table.targets.len() as u32;
            table.targets.extend(targets);
            let mut at = key.hash() as usize & (size - 1);
            while table.slots[at].end != 0 {
                at = (at + 1) & (size - 1);
            }
            table.slots[at] = NameSlot {
                key,
                name: name.as_bytes().into(),
                start,
                end: table.targets.len() as u32,
            };
        }
        table
    }

    /// The (field, rank) pairs `name` fills; empty for a name no rule reads.
    #[inline]
    pub(super) fn fields_of(&self, name: &[u8]) -> &[(u32, u8)] {
        let key = NameKey::of(name);
        let mask = self.slots.len().wrapping_sub(1);
        let mut at = key.hash() as usize & mask;
        while let Some(slot) = self.slots.get(at) {
            if slot.end == 0 {
                break;
            }
            if slot.key == key && (key.len <= 16 || *slot.name == *name) {
                return &self.targets[slot.start as usize..slot.end as usize];
            }
            at = (at + 1) & mask;
        }
        &[]
    }
}

/// One field's slot in [`FieldSlots`](super::values::FieldSlots).
#[derive(Clone, Copy, Default)]
pub(super) struct Slot {
    /// The epoch `index` and `rank` were filled in.
    pub(super) filled: u32,
    /// The attribute's position in the event (see `EventFields::attribute_value_at`).
    pub(super) index: u32,
    /// The rank of the place its value came from (the first present place wins).
    pub(super) rank: u8,
    /// The epoch `hash` was computed in.
    pub(super) hashed: u32,
    /// The value's [`folded_hash`](super::gate::folded_hash), for shape tests and whole-value gates.
    pub(super) hash: u64,
}
