//! The compiled rule set: rules grouped by the event shapes of their logsource, field names
//! resolved through the mapping once, and one pass over an event that reports every rule it
//! matches.
//!
//! Per event, the groups of its combination of shape-field values (`Channel`, `EventID`,
//! `@source`, ...) are looked up in a per-thread memo, worked out the first time a combination
//! is seen by testing the shapes its `Channel` or `@source` can belong to; each group of rules
//! whose shapes hold is visited once: its per-field literal index
//! ([`crate::gate`]) picks the rules the event can match (a field's index over many literals
//! first looks in the thread's slots of recent values and the literals each held), and only
//! those (and the rules with no literal to index) are evaluated. Evaluation reads fields
//! through [`EventFields`], which the data plane implements over its in-place event record, so
//! matching allocates nothing once the per-thread scratch has grown.

use crate::condition::Expr;
use crate::dual_regex::DualRegex;
use crate::gate::{self, Gate, GateMemo, Key, folded_hash, folded_hash_bytes, push_lower_case};
use crate::joint::{Affixes, Joint, is_affix};
use crate::mapping::{FieldSource, Mapping, Shape};
use crate::pattern::{Pattern, Place};
use crate::rule::{Body, Item, Rule};
use crate::substrings::Substrings;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use watchpost_proto::EventFields;

/// A field reference resolved through the mapping.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Field(pub(crate) Box<[FieldSource]>);

impl Field {
    /// The value of the first of its places the event has.
    #[inline]
    pub(crate) fn get<'e, E: EventFields>(&self, e: &'e E) -> Option<&'e str> {
        self.0.iter().find_map(|p| place_value(p, e))
    }
}

/// The value one place of a field reads from `e`.
#[inline]
fn place_value<'e, E: EventFields>(place: &FieldSource, e: &'e E) -> Option<&'e str> {
    match place {
        FieldSource::Attr(name) => e.attribute(name),
        FieldSource::Translated { name, values } => e.attribute(name).map(|v| {
            values
                .iter()
                .find(|(from, _)| from.eq_ignore_ascii_case(v))
                .map_or(v, |(_, to)| *to)
        }),
        FieldSource::Source => Some(e.source()).filter(|s| !s.is_empty()),
        FieldSource::Host => Some(e.host()).filter(|s| !s.is_empty()),
        FieldSource::Message => Some(e.message()).filter(|s| !s.is_empty()),
        FieldSource::Entity { kind, role } => e.entity(kind, role.as_deref()),
    }
}

#[derive(Clone, Debug)]
struct CItem {
    /// The field's number in the set's table; `None`: a keyword search over every value.
    field: Option<usize>,
    patterns: Vec<Pattern>,
    /// Fields of `fieldref` patterns, by pattern index.
    refs: Vec<Option<usize>>,
    all: bool,
    /// For an "any of" item with several case-insensitive substrings (a keyword list, a
    /// `contains` list): one automaton over all of them; `patterns` then holds only the others.
    literals: Option<Joint<Substrings>>,
    /// For an "any of" item with several regexes (wildcards, `re`, non-ASCII text): their
    /// alternation; `patterns` then holds only the others.
    regexes: Option<Joint<DualRegex>>,
    /// For an "any of" item with several whole values, prefixes or suffixes: their index;
    /// `patterns` then holds only the others.
    affixes: Option<Joint<Affixes>>,
}

/// Rules from which a set is compiled on all cores (see [`RuleSet::compile`]).
const PARALLEL_MIN_RULES: usize = 1_000;

/// Literals from which an item gets an automaton: below this, direct searches are as fast.
const AUTOMATON_MIN_LITERALS: usize = 3;

#[derive(Clone, Debug)]
struct CRule {
    rule: Arc<Rule>,
    /// Per search: alternatives of conjunctions.
    searches: Vec<Vec<Vec<CItem>>>,
    condition: Expr,
    enabled: bool,
}

/// A logsource shape compiled: every (field, allowed values) must hold. Fields are numbers in
/// the set's table of shape fields, so that each is read once per event however many shapes
/// test it (dozens of shapes test `@source` or `Channel`).
#[derive(Clone, Debug)]
struct CShape(Vec<ShapeTest>);

/// One (field, allowed values) of a shape. Values are compared by their [`folded_hash`]
/// (which a few other texts share), computed once per event and field, then confirmed on the
/// text.
#[derive(Clone, Debug)]
struct ShapeTest {
    field: usize,
    /// `*` is allowed: any present value holds.
    any: bool,
    /// No value is listed: the field must be absent (or empty).
    absent: bool,
    /// (hash, value) sorted by hash.
    allowed: Vec<(u64, String)>,
}

impl ShapeTest {
    fn new(field: usize, values: &[String]) -> ShapeTest {
        let mut allowed: Vec<(u64, String)> =
            values.iter().map(|v| (folded_hash(v), v.clone())).collect();
        allowed.sort();
        ShapeTest {
            field,
            any: values.iter().any(|v| v == "*"),
            absent: values.is_empty(),
            allowed,
        }
    }
}

/// One event's field values. Attribute fields (all but a few) are filled in at the first lookup,
/// from the thread's remembered [`Layouts`] or by one pass over the event's attributes, each
/// name found in the set's [`NameTable`]: an
/// event has a few dozen attributes, a set asks for hundreds of fields (most absent: the cloud
/// logsources' on every Windows record), and looking each up by name went through the
/// attributes one by one. Other places (`@source`, entities, translated values) are read at each
/// use, after the attributes before them (see [`Fill`]).
struct FieldValues<'e, 'f, E> {
    event: &'e E,
    fields: &'f [Field],
    names: &'f NameTable,
    /// Per field, where its value sits in the event, once `resolved` (see [`FieldSlots`]).
    slots: &'f mut [Slot],
    /// The layouts the thread has met, with where their fields sit; `None` in the reference
    /// ([`RuleSet::without_prefilter`]), which looks every name up.
    layouts: Option<(&'f mut Layouts, u64)>,
    /// The slot of the event's layout in `layouts`, once resolved and kept.
    layout: Option<usize>,
    /// This event's mark in `slots`.
    epoch: u32,
    resolved: bool,
    /// Bit `f` set: resolved field `f` (under 64) has a value.
    present: u64,
}

/// A thread's table of where each field's value sits in the event being matched, kept from
/// event to event: a slot filled for another event carries an older epoch and reads as empty,
/// so nothing is cleared per event. Holding the values themselves, the table lived on the
/// stack and was cleared, then copied into place, for every event: 17 KB, 6% of matching
/// (callgrind).
#[derive(Default)]
struct FieldSlots {
    /// The current event's mark; never 0, the mark of a slot never filled.
    epoch: u32,
    slots: Vec<Slot>,
    layouts: Layouts,
}

/// One field's slot in [`FieldSlots`].
#[derive(Clone, Copy, Default)]
struct Slot {
    /// The epoch `index` and `rank` were filled in.
    filled: u32,
    /// The attribute's position in the event (see `EventFields::attribute_value_at`).
    index: u32,
    /// The rank of the place its value came from (the first present place wins).
    rank: u8,
    /// The epoch `hash` was computed in.
    hashed: u32,
    /// The value's [`folded_hash`], for shape tests and whole-value gates.
    hash: u64,
}

impl FieldSlots {
    /// The slots of a new event of a set of `fields` fields, with its epoch.
    fn next_event(&mut self, fields: usize) -> (&mut [Slot], u32, &mut Layouts) {
        if self.slots.len() < fields {
            self.slots.resize(fields, Slot::default());
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Once in four billion events: old marks could be taken for new ones.
            self.slots.fill(Slot::default());
            self.epoch = 1;
        }
        (&mut self.slots, self.epoch, &mut self.layouts)
    }
}

impl<'e, 'f, E: EventFields> FieldValues<'e, 'f, E> {
    #[inline]
    fn new(event: &'e E, set: &'f RuleSet, slots: &'f mut FieldSlots) -> FieldValues<'e, 'f, E> {
        let (slots, epoch, layouts) = slots.next_event(set.fields.len());
        FieldValues {
            event,
            fields: &set.fields,
            names: &set.names,
            slots,
            layouts: set.memo.then_some((layouts, set.id)),
            layout: None,
            epoch,
            resolved: false,
            present: 0,
        }
    }

    /// Field `i`'s value. The usual case, an attribute field once the pass is done, is
    /// inlined into each caller: as one call, saving and restoring the registers the rare
    /// cases need took a third of its own instructions (callgrind).
    #[inline(always)]
    fn get(&mut self, i: usize) -> Option<&'e str> {
        if self.resolved && self.names.fill.get(i) == Some(&Fill::Whole) {
            return self.attribute_of(i);
        }
        self.get_otherwise(i)
    }

    /// [`FieldValues::get`] before the pass and for fields not only of attributes.
    #[inline(never)]
    fn get_otherwise(&mut self, i: usize) -> Option<&'e str> {
        match self.names.fill.get(i) {
            Some(Fill::Whole) => {
                if !self.resolved {
                    self.resolve();
                }
                self.attribute_of(i)
            }
            Some(Fill::Partly) => {
                if !self.resolved {
                    self.resolve();
                }
                self.partly_filled(i)
            }
            _ => self.fields[i].get(self.event),
        }
    }

    /// The value the pass found for field `i`.
    #[inline(always)]
    fn attribute_of(&self, i: usize) -> Option<&'e str> {
        let slot = self.slots[i];
        if slot.filled == self.epoch {
            self.event.attribute_value_at(slot.index as usize)
        } else {
            None
        }
    }

    /// A field with attributes among other places (`User`: three attribute names, then the
    /// event's user entity): its first present attribute is known from the pass, and only the
    /// other places before it are read (each look at an attribute by name goes through the
    /// event's attributes: three for `User` cost a tenth of matching, callgrind).
    fn partly_filled(&self, i: usize) -> Option<&'e str> {
        let slot = self.slots[i];
        let first_attribute = if slot.filled == self.epoch {
            usize::from(slot.rank)
        } else {
            usize::MAX
        };
        for (rank, place) in self.fields[i].0.iter().enumerate() {
            if rank == first_attribute {
                return self.attribute_of(i);
            }
            if !matches!(place, FieldSource::Attr(_))
                && let Some(v) = place_value(place, self.event)
            {
                return Some(v);
            }
        }
        None
    }

    /// Fills in every attribute field: from the layout the thread last saw these names in,
    /// else from a look at each name, kept as the layout's.
    fn resolve(&mut self) {
        self.resolved = true;
        let Some((layouts, set)) = self.layouts.as_mut() else {
            self.present = fill_by_names(self.event, self.names, self.slots, self.epoch, None);
            return;
        };
        let Some((at, kept)) = layouts.find(*set, self.event) else {
            self.present = fill_by_names(self.event, self.names, self.slots, self.epoch, None);
            return;
        };
        self.layout = Some(at);
        if kept {
            for &(field, index, rank) in &layouts.slots[at].targets {
                let slot = &mut self.slots[field as usize];
                slot.filled = self.epoch;
                slot.index = index;
                slot.rank = rank;
            }
            self.present = layouts.slots[at].present;
            return;
        }
        layouts.touched.clear();
        self.present = fill_by_names(
            self.event,
            self.names,
            self.slots,
            self.epoch,
            Some(&mut layouts.touched),
        );
        if !layouts.keep(at, self.event, self.slots, self.present) {
            self.layout = None;
        }
    }

    /// The [`ShapeMemo`] slot and key of the combination of shape-field values an event of
    /// this layout had last (see [`FieldValues::remember_choice`]).
    #[inline]
    fn layout_choice(&mut self) -> Option<(u32, u64)> {
        if !self.resolved {
            self.resolve();
        }
        let (layouts, _) = self.layouts.as_ref()?;
        layouts.slots.get(self.layout?)?.choice
    }

    /// Notes that the event's combination of shape-field values sits in [`ShapeMemo`] slot
    /// `at` with `key`, for the next event of its layout.
    #[inline]
    fn remember_choice(&mut self, at: u32, key: u64) {
        if let (Some((layouts, _)), Some(layout)) = (self.layouts.as_mut(), self.layout)
            && let Some(layout) = layouts.slots.get_mut(layout)
        {
            layout.choice = Some((at, key));
        }
    }

    /// The gates of group `group` that the event's layout can reach ([`GatePlan`]), made at
    /// the group's first event of the layout, taken out of the layout until
    /// [`FieldValues::give_back_plan`]: a panic caught between the two loses the plan, and
    /// never leaves a wrong one. `None`: every gate is read (no layout kept for the event, or
    /// its plans are full).
    fn take_plan(&mut self, group: u32, gates: &Gates) -> Option<GatePlan> {
        if !self.resolved {
            self.resolve();
        }
        let (layouts, _) = self.layouts.as_mut()?;
        let layout = layouts.slots.get_mut(self.layout?)?;
        let count = gates.reads.len();
        if let Some(at) = layout
            .plans
            .iter()
            .position(|plan| plan.group == group && plan.count == count)
        {
            return Some(layout.plans.swap_remove(at));
        }
        // The room of a plan made for the layout the slot held before (or for other gates of
        // this group) is reused: two layouts that share a slot and arrive in turn re-keep it
        // at every event, which must not allocate.
        let mut plan = match layout
            .plans
            .iter()
            .position(|plan| plan.group == GatePlan::STALE || plan.group == group)
        {
            Some(at) => layout.plans.swap_remove(at),
            None if layout.plans.len() < LAYOUT_PLANS_MAX => GatePlan {
                group,
                count,
                gates: Vec::new(),
            },
            None => return None,
        };
        plan.group = group;
        plan.count = count;
        plan.gates.clear();
        let reachable = gates
            .reads
            .iter()
            .enumerate()
            .filter(|(_, read)| match read.field() {
                Some(field) if self.names.fill.get(field) == Some(&Fill::Whole) => layout
                    .targets
                    .binary_search_by_key(&(field as u32), |&(filled, ..)| filled)
                    .is_ok(),
                _ => true,
            });
        plan.gates.extend(reachable.map(|(at, _)| at as u32));
        Some(plan)
    }

    /// Puts back the plan [`FieldValues::take_plan`] gave.
    fn give_back_plan(&mut self, plan: GatePlan) {
        if let (Some((layouts, _)), Some(layout)) = (self.layouts.as_mut(), self.layout)
            && let Some(layout) = layouts.slots.get_mut(layout)
            && layout.plans.len() < LAYOUT_PLANS_MAX
        {
            layout.plans.push(plan);
        }
    }

    /// The resolved fields under 64 that have a value, as bits.
    #[inline]
    fn present(&mut self) -> u64 {
        if !self.resolved {
            self.resolve();
        }
        self.present
    }

    /// `get(i)` as bytes: an attribute's read without the check of a character's boundary
    /// that taking it out of the event's text as a `str` makes (see
    /// `EventFields::attribute_bytes_at`).
    #[inline(always)]
    fn get_bytes(&mut self, i: usize) -> Option<&'e [u8]> {
        if self.resolved && self.names.fill.get(i) == Some(&Fill::Whole) {
            let slot = self.slots[i];
            return if slot.filled == self.epoch {
                self.event.attribute_bytes_at(slot.index as usize)
            } else {
                None
            };
        }
        self.get_otherwise(i).map(str::as_bytes)
    }

    /// `get_bytes(i)` with the value's folded hash.
    #[inline(always)]
    fn get_hashed(&mut self, i: usize) -> Option<(&'e [u8], u64)> {
        let v = self.get_bytes(i)?;
        let slot = &mut self.slots[i];
        if slot.hashed != self.epoch {
            slot.hash = folded_hash_bytes(v);
            slot.hashed = self.epoch;
        }
        Some((v, slot.hash))
    }
}

/// Fills in the slot of every attribute field from a look at each of the event's attribute
/// names in `names`; gives the present bits (see [`FieldValues::present`]). `touched`, when
/// given, receives each field filled (some more than once).
fn fill_by_names<E: EventFields>(
    event: &E,
    names: &NameTable,
    slots: &mut [Slot],
    epoch: u32,
    mut touched: Option<&mut Vec<u32>>,
) -> u64 {
    let mut present = 0u64;
    let mut index = 0u32;
    event.any_attribute_name(&mut |name| {
        for &(field, rank) in names.fields_of(name) {
            let f = field as usize;
            let slot = &mut slots[f];
            // A repeated name keeps its first value, as a lookup by name does.
            if slot.filled != epoch || rank < slot.rank {
                slot.filled = epoch;
                slot.rank = rank;
                slot.index = index;
                if f < 64 {
                    present |= 1 << f;
                }
                if let Some(touched) = touched.as_deref_mut() {
                    touched.push(field);
                }
            }
        }
        index += 1;
        false
    });
    present
}

/// Slots of a thread's [`Layouts`] (a Windows collector's events come in a hundred or so
/// layouts: the EVTX-ATTACK-SAMPLES corpus has 134).
const LAYOUT_SLOTS: usize = 256;

/// Most attributes of a layout kept, so that a thread's [`Layouts`] stay bounded (a Sysmon
/// process record has 39): an event with more is read name by name.
const LAYOUT_NAMES_MAX: usize = 64;

/// Most fields a kept layout fills.
const LAYOUT_FIELDS_MAX: usize = 256;

/// Most bytes of names past sixteen bytes a kept layout holds (a Windows record's System
/// fields have one, `TimeCreated_SystemTime`).
const LAYOUT_LONG_BYTES_MAX: usize = 512;

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
struct Layouts {
    /// The set the slots belong to ([`RuleSet::id`]): the fields are the set's.
    set: u64,
    slots: Vec<Layout>,
    /// The current event's name keys, read by [`Layouts::find`].
    keys: Vec<NameKey>,
    /// Their hash with its lowest bit set: the key [`Layouts::keep`] gives the layout.
    key: u64,
    /// The fields a look by names filled, for [`Layouts::keep`].
    touched: Vec<u32>,
}

/// One layout of attribute names and where the set's fields sit in it.
#[derive(Default)]
struct Layout {
    /// The hash of the names' keys with its lowest bit set; 0: the slot is empty.
    key: u64,
    names: Vec<NameKey>,
    /// (position, end in `long_text`) of each name past sixteen bytes, compared whole.
    long: Vec<(u32, u32)>,
    long_text: Vec<u8>,
    /// (field, position, rank) of each field the names fill.
    targets: Vec<(u32, u32, u8)>,
    /// The fields under 64 filled, as bits.
    present: u64,
    /// The [`ShapeMemo`] slot and key of the shape-field values its last event had.
    choice: Option<(u32, u64)>,
    /// The gates its events can reach, for each group they reached (a few).
    plans: Vec<GatePlan>,
}

/// Most groups a [`Layout`] keeps a [`GatePlan`] for (a Sysmon process record's layout is in
/// two or three): past them, its events step through every gate of a further group.
const LAYOUT_PLANS_MAX: usize = 4;

/// The gates of one group that an event of one layout can reach, by number, in the group's
/// order: every gate but those whose field only the attribute pass fills ([`Fill::Whole`])
/// and the layout lacks, which would read nothing. A Security record's group has 64 gates with
/// the whole SigmaHQ set, whose fields a record mostly lacks: stepping over them was a sixth
/// of a Security 5145 record's instructions (11.3 k to 9.6 k a record, callgrind).
#[derive(Debug)]
struct GatePlan {
    /// [`GatePlan::STALE`]: made for the layout the slot held before, its room to reuse.
    group: u32,
    /// The group's gates when the plan was made: a plan for other gates is never read.
    count: usize,
    gates: Vec<u32>,
}

impl GatePlan {
    /// The group of a plan no event may read.
    const STALE: u32 = u32::MAX;
}

impl Layouts {
    /// The slot of `event`'s layout for set `set`, and whether the slot holds it (else it is
    /// for [`Layouts::keep`]). `None`: more names than a layout keeps.
    fn find<E: EventFields>(&mut self, set: u64, event: &E) -> Option<(usize, bool)> {
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
    fn keep<E: EventFields>(&mut self, at: usize, event: &E, slots: &[Slot], present: u64) -> bool {
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
/// in an open-addressing table: [`FieldValues`] looks each of an event's attribute names up
/// once.
#[derive(Clone, Debug, Default)]
struct NameTable {
    slots: Vec<NameSlot>,
    /// (field, rank) of each name, by span.
    targets: Vec<(u32, u8)>,
    /// Per field: what the pass fills in.
    fill: Vec<Fill>,
}

/// What [`FieldValues`]' pass over an event's attributes fills in of a field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Fill {
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
struct NameSlot {
    key: NameKey,
    /// The whole name, compared only past sixteen bytes (the key holds shorter ones whole).
    name: Box<[u8]>,
    /// Its targets' span; `end` is 0 in an empty slot (a name has at least one target).
    start: u32,
    end: u32,
}

/// A name's length with its first and last eight bytes (or its bytes, when shorter): two loads
/// for any name, and for one of up to sixteen bytes the whole name, so that the table compares
/// words rather than calling a byte comparison per attribute of every event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct NameKey {
    first: u64,
    last: u64,
    len: u64,
}

impl NameKey {
    #[inline]
    fn of(name: &[u8]) -> NameKey {
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
    fn hash(&self) -> u64 {
        let h = (self.first ^ self.len.rotate_left(56)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ self.last.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
        h ^ (h >> 29)
    }
}

impl NameTable {
    /// The table of the attribute places of `fields`.
    fn build(fields: &[Field]) -> NameTable {
        let mut by_name: BTreeMap<&str, Vec<(u32, u8)>> = BTreeMap::new();
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
                    by_name
                        .entry(name)
                        .or_default()
                        .push((f as u32, rank as u8));
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
    fn fields_of(&self, name: &[u8]) -> &[(u32, u8)] {
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

/// The fields of a set while it is compiled, each once, numbered in order of first use.
#[derive(Default)]
struct FieldTable {
    fields: Vec<Field>,
    /// Number by field: a scan of `fields` per item was quadratic in a rule's fields.
    numbers: std::collections::HashMap<Field, usize>,
}

impl FieldTable {
    /// The number of `f`, added when new.
    fn intern(&mut self, f: Field) -> usize {
        if let Some(&n) = self.numbers.get(&f) {
            return n;
        }
        self.fields.push(f.clone());
        self.numbers.insert(f, self.fields.len() - 1);
        self.fields.len() - 1
    }
}

impl CShape {
    fn holds<E: EventFields>(&self, values: &mut FieldValues<'_, '_, E>) -> bool {
        self.0.iter().all(|t| {
            if t.absent {
                return values.get(t.field).is_none_or(str::is_empty);
            }
            values.get_hashed(t.field).is_some_and(|(v, h)| {
                t.any || {
                    let at = t.allowed.partition_point(|(x, _)| *x < h);
                    t.allowed[at..]
                        .iter()
                        .take_while(|(x, _)| *x == h)
                        .any(|(_, w)| v.eq_ignore_ascii_case(w.as_bytes()))
                }
            })
        })
    }
}

/// Compiled rules, ready to match events.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    rules: Vec<CRule>,
    shapes: Vec<CShape>,
    /// Every field the shapes and rules read, each once, the most read first (the shape
    /// fields, whose presence the attribute pass notes in 64 bits).
    fields: Vec<Field>,
    /// The attribute names the fields read ([`FieldValues`]).
    names: NameTable,
    /// Rules grouped by their logsource's shapes: each rule is in one group.
    groups: Vec<Group>,
    /// The groups each shape's events go to, by shape index.
    shape_groups: Vec<Vec<u32>>,
    /// The shapes to test on an event, found by its values (see [`ShapeIndex`]).
    shape_index: ShapeIndex,
    /// The group of rules whose logsource covers every event.
    everywhere: Option<u32>,
    /// Rules whose logsource is not mapped (they match nothing), by index.
    unmapped: Vec<u32>,
    /// Every field a shape tests, each once: the groups an event goes to depend on their values
    /// alone (see [`ShapeMemo`]).
    shape_fields: Vec<usize>,
    /// The shape fields filled in by the attribute pass, as bits (see
    /// [`RuleSet::each_shape_value`]); `None` when one is numbered past 63.
    shape_attributes: Option<u64>,
    /// The shape fields read at each use (`@source`, entities, translated values).
    shape_others: Vec<usize>,
    /// The set's identity in each thread's [`ShapeMemo`] (0: `RuleSet::default()`, empty).
    id: u64,
    /// Groups are chosen through the [`ShapeMemo`]; off in [`RuleSet::without_prefilter`], the
    /// reference that equivalence tests compare with.
    memo: bool,
    /// The shortest keyword literal of any group: the event's text for keyword searches
    /// leaves out shorter values, which cannot hold one (see [`EventText`]).
    keyword_min_len: usize,
}

/// Identities of compiled sets, for the per-thread [`ShapeMemo`].
static SET_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Slots of the per-thread memo of group choices: a sensor's events come in a few dozen
/// combinations of channel, event id and source.
const MEMO_SLOTS: usize = 512;

/// The groups chosen for each combination of shape-field values a thread has seen. Which
/// groups an event goes to depends only on the values its set's shapes test (`Channel`,
/// `EventID`, `@source`, ...), yet testing the shapes took a third of matching with the whole
/// SigmaHQ set: 26 candidate shapes per Windows record, 1.3 holding. An event now reads those
/// fields, hashes them into a key and finds its groups in one look (or, first, compares them
/// with the combination its attribute layout had last, unhashed: see [`Layout::choice`]); a
/// new combination is worked
/// out as before and kept in its slot, in the room the slot's last one leaves (so that a stream
/// of ever new combinations costs what testing the shapes did, and allocates nothing once the
/// slots have grown). Values are kept and compared, so a colliding key cannot give another
/// combination's groups.
struct ShapeMemo {
    /// The set the slots belong to ([`RuleSet::id`]).
    set: u64,
    slots: Vec<Choice>,
    /// The groups of an event whose combination is not kept (values past
    /// [`MEMO_VALUES_MAX_BYTES`], or a set without the memo).
    unkept: Vec<u32>,
}

/// Most bytes of shape-field values a kept combination holds (a Sysmon record's channel, event
/// id and source: 76), so that the memo stays near a third of a MiB a thread (512 slots, each
/// at most 256 bytes of values and, with the whole SigmaHQ set, 39 value ends) however long
/// the values a sender makes up.
const MEMO_VALUES_MAX_BYTES: usize = 256;

/// One combination of shape-field values and its groups.
#[derive(Default)]
struct Choice {
    /// 0: the slot is empty (a key is never 0).
    key: u64,
    /// The shape fields the combination holds, in the order [`RuleSet::each_shape_value`]
    /// gives them: (field, end of its value in `text`).
    ends: Vec<(usize, u32)>,
    /// The present values as the event that made the slot had them, one after the other
    /// (compared without regard to ASCII case), as bytes: a value's end in a `str` was checked
    /// for a character boundary at every comparison (0.8% of matching, callgrind).
    text: Vec<u8>,
    groups: Vec<u32>,
}

impl ShapeMemo {
    /// The groups of the event behind `values`.
    fn groups<'m, E: EventFields>(
        &'m mut self,
        set: &RuleSet,
        values: &mut FieldValues<'_, '_, E>,
    ) -> &'m [u32] {
        if self.slots.len() != MEMO_SLOTS {
            self.slots.resize_with(MEMO_SLOTS, Choice::default);
        }
        if self.set != set.id {
            // Another set's choices: forgotten, their room kept.
            for choice in &mut self.slots {
                choice.key = 0;
            }
            self.set = set.id;
        }
        // The combination this event's layout had last: most often its own again, found
        // without hashing its values.
        if let Some((at, key)) = values.layout_choice()
            && let Some(choice) = self.slots.get(at as usize)
            && choice.key == key
            && choice.is_for(set, values)
        {
            return &self.slots[at as usize].groups;
        }
        let mut key = 0x9e37_79b9_7f4a_7c15u64;
        let mut bytes = 0;
        set.each_shape_value::<true, E>(values, |f, v, h| {
            bytes += v.len();
            // The field is in the key: the same value in another field is another combination.
            let field = (f as u64 + 1).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
            key = (key ^ h ^ field)
                .wrapping_mul(0x0100_0000_01b3)
                .rotate_left(29);
        });
        if !set.memo || bytes > MEMO_VALUES_MAX_BYTES {
            set.choose_groups(values, &mut self.unkept);
            return &self.unkept;
        }
        let key = key.max(1);
        let at = (key >> 32) as usize % MEMO_SLOTS;
        let choice = &mut self.slots[at];
        if choice.key != key || !choice.is_for(set, values) {
            choice.keep(key, set, values);
        }
        values.remember_choice(at as u32, key);
        &choice.groups
    }
}

impl Choice {
    /// The event's shape fields hold these values.
    fn is_for<E: EventFields>(&self, set: &RuleSet, values: &mut FieldValues<'_, '_, E>) -> bool {
        let (mut start, mut at, mut same) = (0, 0, true);
        set.each_shape_value::<false, E>(values, |f, v, _| {
            same = same
                && self.ends.get(at).is_some_and(|&(kept_field, end)| {
                    let kept = self.text.get(start..end as usize);
                    start = end as usize;
                    // Mostly in the case it was kept in: compared whole first.
                    kept_field == f && kept.is_some_and(|k| v == k || v.eq_ignore_ascii_case(k))
                });
            at += 1;
        });
        same && at == self.ends.len()
    }

    /// Replaces the slot's combination with the event's, and works out its groups. The key is
    /// set last: a slot left half-filled (a panic caught further up) is never taken for one.
    fn keep<E: EventFields>(
        &mut self,
        key: u64,
        set: &RuleSet,
        values: &mut FieldValues<'_, '_, E>,
    ) {
        self.key = 0;
        self.ends.clear();
        self.text.clear();
        let (ends, text) = (&mut self.ends, &mut self.text);
        set.each_shape_value::<false, E>(values, |f, v, _| {
            text.extend_from_slice(v);
            ends.push((f, text.len() as u32));
        });
        set.choose_groups(values, &mut self.groups);
        self.key = key;
    }
}

/// Shapes by the value one of their tests requires: an event is tested against the shapes
/// whose value it holds (a Sysmon process event: the two or three shapes of the Sysmon
/// channel), not against the hundred of the whole SigmaHQ set.
#[derive(Clone, Debug, Default)]
struct ShapeIndex {
    /// Per field (a number in the set's table): (folded hash of an allowed value, shape),
    /// sorted. Each shape is under one field, the one most shapes test.
    by_value: Vec<(usize, Vec<(u64, u32)>)>,
    /// Shapes with no test of listed values (`*`, absent fields): tested on every event.
    always: Vec<u32>,
}

impl ShapeIndex {
    fn build(shapes: &[CShape]) -> ShapeIndex {
        let listed = |t: &&ShapeTest| !t.any && !t.absent;
        let mut uses: HashMap<usize, usize> = HashMap::new();
        for t in shapes.iter().flat_map(|s| s.0.iter().filter(listed)) {
            *uses.entry(t.field).or_default() += 1;
        }
        let mut index = ShapeIndex::default();
        let mut tables: BTreeMap<usize, Vec<(u64, u32)>> = BTreeMap::new();
        for (i, shape) in shapes.iter().enumerate() {
            match shape
                .0
                .iter()
                .filter(listed)
                .max_by_key(|t| (uses[&t.field], t.field))
            {
                Some(t) => tables
                    .entry(t.field)
                    .or_default()
                    .extend(t.allowed.iter().map(|(h, _)| (*h, i as u32))),
                None => index.always.push(i as u32),
            }
        }
        for (field, mut table) in tables {
            table.sort_unstable();
            table.dedup();
            index.by_value.push((field, table));
        }
        index
    }

    /// Calls `on` with each shape that may hold for the event, each once.
    #[inline]
    fn candidates<E: EventFields>(
        &self,
        values: &mut FieldValues<'_, '_, E>,
        mut on: impl FnMut(u32, &mut FieldValues<'_, '_, E>),
    ) {
        for &shape in &self.always {
            on(shape, values);
        }
        for (field, table) in &self.by_value {
            let Some((_, hash)) = values.get_hashed(*field) else {
                continue;
            };
            let at = table.partition_point(|(h, _)| *h < hash);
            let mut last = None;
            for &(_, shape) in table[at..].iter().take_while(|(h, _)| *h == hash) {
                // One shape can list two values of one hash.
                if last != Some(shape) {
                    on(shape, values);
                    last = Some(shape);
                }
            }
        }
    }
}

/// The rules whose logsources give one set of shapes: an event of any of those shapes is
/// tested against them, once however many of the shapes hold.
#[derive(Debug, Default)]
struct Group {
    /// Rules with no necessary literal, ascending: evaluated on every such event.
    always: Vec<u32>,
    /// Each place's literals with the rules that need them, from which the gates are built at
    /// the group's first event and then dropped. Building every automaton at load was most of
    /// the compile time with the whole SigmaHQ set, for groups a sensor may never see (cloud
    /// logs on a Windows collector).
    pending: std::sync::Mutex<Vec<(Option<usize>, Literals)>>,
    /// The gates, once built.
    built: std::sync::OnceLock<Gates>,
}

/// A group's automata and the rules evaluated on every event, once its gates are built.
#[derive(Clone, Debug, Default)]
struct Gates {
    /// Rules evaluated on every such event, ascending: those with no necessary literal, and
    /// those whose automaton could not be built.
    ungated: Vec<u32>,
    /// One index per field over the literals the other rules need there: only the rules
    /// whose literal an event holds are evaluated (see [`crate::gate`]).
    gates: Vec<Gate>,
    /// How each gate reads the event, by gate.
    reads: Vec<GateRead>,
    /// A rule is both ungated and under a gate (its automaton elsewhere could not be built):
    /// an event's rules to evaluate must then be put in order and each kept once. Otherwise
    /// the gates admit each rule once and none is ungated, and the sort is saved (a Sysmon
    /// process record's dozen rules: 0.3% of matching's instructions, callgrind).
    overlap: bool,
}

/// How a gate reads an event, kept apart from the gate: a group's loop learns from these
/// alone whether the event holds a gate's field, and reaches the gate (hundreds of bytes, its
/// automaton inline) only when it does. A Security record's group has 64 gates with the whole
/// SigmaHQ set, most of whose fields the record lacks: reading each gate's field from the gate
/// took a first-level cache miss per gate (two passes over the 958 Security 5145 records of
/// the benchmark's corpus: 300 k read misses, 56 k once apart; callgrind).
#[derive(Clone, Copy, Debug)]
enum GateRead {
    /// A field's value and hash, looked up in the gate's [`GateMemo`] first
    /// ([`Gate::worth_remembering`]).
    Remembered(usize),
    /// A field's value and hash: the gate looks whole values up ([`Gate::has_equals`]).
    Hashed(usize),
    /// A field's value, searched for substrings only.
    Bytes(usize),
    /// The event's values: a keyword gate.
    Values,
}

impl GateRead {
    /// The field read; `None` for the event's values.
    fn field(self) -> Option<usize> {
        match self {
            GateRead::Remembered(field) | GateRead::Hashed(field) | GateRead::Bytes(field) => {
                Some(field)
            }
            GateRead::Values => None,
        }
    }

    fn of(gate: &Gate) -> GateRead {
        match gate.field {
            Some(field) if gate.worth_remembering() => GateRead::Remembered(field),
            Some(field) if gate.has_equals() => GateRead::Hashed(field),
            Some(field) => GateRead::Bytes(field),
            None => GateRead::Values,
        }
    }
}

impl Clone for Group {
    fn clone(&self) -> Group {
        Group {
            always: self.always.clone(),
            pending: std::sync::Mutex::new(
                self.pending
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .clone(),
            ),
            built: self.built.clone(),
        }
    }
}

impl Group {
    /// The group's gates, built at the first call (by one thread; others wait for it).
    fn gates(&self) -> &Gates {
        self.built.get_or_init(|| {
            let pending = std::mem::take(
                &mut *self
                    .pending
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            );
            let mut built = Gates {
                ungated: self.always.clone(),
                gates: Vec::new(),
                reads: Vec::new(),
                overlap: false,
            };
            for (field, literals) in pending {
                match Gate::build(field, &literals) {
                    Some(gate) => built.gates.push(gate),
                    // Without the automaton its rules are evaluated on every event: slower,
                    // never wrong.
                    None => built.ungated.extend(
                        literals
                            .iter()
                            .flat_map(|(_, r)| r.iter().map(|&t| gate::rule_of(t))),
                    ),
                }
            }
            // A rule gated in one place and not in another (no automaton) is ungated.
            built.ungated.sort_unstable();
            built.ungated.dedup();
            let ungated = &built.ungated;
            built
                .gates
                .retain(|g| !g.rules().all(|r| ungated.binary_search(&r).is_ok()));
            built.overlap = built
                .gates
                .iter()
                .any(|g| g.rules().any(|r| ungated.binary_search(&r).is_ok()));
            // The keyword gate last: it may be skipped for what the others found (see
            // [`Gate::can_admit`]).
            built.gates.sort_by_key(|g| g.field.is_none());
            built.reads = built.gates.iter().map(GateRead::of).collect();
            built
        })
    }
}

std::thread_local! {
    /// One event's matching state, reused so that matching allocates nothing once grown.
    static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch {
            memo: ShapeMemo {
                set: 0,
                slots: Vec::new(),
                unkept: Vec::new(),
            },
            fields: FieldSlots {
                epoch: 0,
                slots: Vec::new(),
                layouts: Layouts {
                    set: 0,
                    slots: Vec::new(),
                    keys: Vec::new(),
                    key: 0,
                    touched: Vec::new(),
                },
            },
            work: GroupWork {
                seen: Vec::new(),
                found: Vec::new(),
                text: EventText {
                    bytes: Vec::new(),
                    ready: false,
                },
                recent: GateMemos { set: 0, by_group: Vec::new() },
            },
        })
    };
}

/// A group's literals while the set is compiled: by place (a field's number, `None` for any
/// value), by literal, the rules that need it (ordered maps: the
/// automata, and so the matches, come out the same on every load).
type Needs = BTreeMap<Option<usize>, BTreeMap<Key, Vec<u32>>>;

/// One place's literals of a group, each with the rules that need it.
type Literals = Vec<(Key, Vec<u32>)>;

/// Reusable state of [`RuleSet::matches`].
struct Scratch {
    /// The groups chosen per combination of shape-field values.
    memo: ShapeMemo,
    /// Where the event's fields sit.
    fields: FieldSlots,
    work: GroupWork,
}

/// Reusable state of [`RuleSet::match_group`].
struct GroupWork {
    /// Two bits per rule, one per clause (both for a rule of one clause): marked by the gates,
    /// cleared at each event (see [`RuleSet::matches`]).
    seen: Vec<u64>,
    /// The rules of the current group to evaluate.
    found: Vec<u32>,
    /// The event's values in one text, for keyword searches.
    text: EventText,
    /// The literals of values the gates read lately.
    recent: GateMemos,
}

/// A thread's [`GateMemo`]s for one set, by group and gate, made as its events reach them.
struct GateMemos {
    /// The set they belong to ([`RuleSet::id`]).
    set: u64,
    by_group: Vec<Vec<GateMemo>>,
}

impl GateMemos {
    /// The memos of group `group`'s `gates`, forgotten first when they are another set's
    /// (their room kept: a thread may match with two sets in turn).
    fn of(&mut self, set: &RuleSet, group: u32, gates: usize) -> &mut [GateMemo] {
        if self.set != set.id {
            for memo in self.by_group.iter_mut().flatten() {
                memo.forget();
            }
            self.set = set.id;
        }
        if self.by_group.len() < set.groups.len() {
            self.by_group.resize_with(set.groups.len(), Vec::new);
        }
        let memos = &mut self.by_group[group as usize];
        if memos.len() < gates {
            memos.resize_with(gates, GateMemo::default);
        }
        memos
    }
}

/// An event's values (source, host, message, attributes) in one text, ASCII lower case, each
/// ended by a NUL, made at the first keyword gate an event meets: a gate then searches one text
/// with a case-sensitive automaton over its lower-case literals, not each of a Windows record's
/// two dozen values with a case-folding one (a keyword rule of the process logsource cost 0.5
/// us per Sysmon record that way). No such literal holds a NUL (a gate whose literals do
/// searches value by value: [`Gate::spans_values`]), so none matches across two values.
/// Values shorter than the set's shortest keyword literal are left out (a Sysmon record's
/// ids, levels and flags: 1.5% of matching with the whole SigmaHQ set, callgrind). Where the
/// event lies in one text already, a gate of a few literals searches that instead
/// ([`Gate::mark_in_values_text`]).
#[derive(Default)]
struct EventText {
    bytes: Vec<u8>,
    /// `bytes` holds the current event's values.
    ready: bool,
}

impl EventText {
    /// The text of the event's values of `min_len` bytes or more (the same for every gate of
    /// a set, so that it is made once per event).
    fn of<E: EventFields>(&mut self, event: &E, min_len: usize) -> &[u8] {
        if !self.ready {
            self.bytes.clear();
            // Each value copied, then lower-cased eight bytes at a time: a byte at a time, the
            // copy and case took 8% of matching with the whole SigmaHQ set (callgrind).
            let mut push = |v: &str| {
                if v.len() < min_len {
                    return false;
                }
                push_lower_case(&mut self.bytes, v.as_bytes());
                self.bytes.push(0);
                false
            };
            push(event.source());
            push(event.host());
            event.any_value(&mut push);
            self.ready = true;
        }
        &self.bytes
    }
}

pub(crate) fn resolve(mapping: &Mapping, name: &str) -> Field {
    Field(mapping.places(name).into_boxed_slice())
}

/// An item's patterns with its alternatives joined: several case-insensitive substrings into
/// one automaton, several regexes into one alternation (the costly part of compiling a rule,
/// done on all cores; see [`RuleSet::compile`]).
struct Joined {
    /// The patterns left to test one by one.
    patterns: Vec<Pattern>,
    literals: Option<Joint<Substrings>>,
    regexes: Option<Joint<DualRegex>>,
    affixes: Option<Joint<Affixes>>,
}

fn join_item(item: &Item) -> Joined {
    // An empty text is in every value, the empty one too, which an automaton (matching only
    // after a byte) would not say: it is tested on its own.
    let is_literal = |p: &Pattern| {
        matches!(
            p,
            Pattern::Text {
                place: Place::Contains,
                cased: false,
                text,
                ..
            } if !text.is_empty()
        )
    };
    let is_regex = |p: &Pattern| matches!(p, Pattern::Regex(_));
    let mut patterns = item.patterns.clone();
    let mut literals = None;
    let mut regexes = None;
    let mut affixes = None;
    if !item.all {
        // Literals are ASCII (others compile to regexes), so the automaton's ASCII case folding
        // is the rule's own comparison.
        if patterns.iter().filter(|p| is_literal(p)).count() >= AUTOMATON_MIN_LITERALS {
            let (joint, rest) = patterns.into_iter().partition(is_literal);
            literals = Some(Joint::new(joint));
            patterns = rest;
        }
        if patterns.iter().filter(|p| is_regex(p)).count() >= 2 {
            let (joint, rest) = patterns.into_iter().partition(is_regex);
            regexes = Some(Joint::new(joint));
            patterns = rest;
        }
        // One place's texts (an item has one modifier; `windash` and the like may add others).
        let place = patterns.iter().find_map(|p| match p {
            Pattern::Text { place, .. } if *place != Place::Contains && is_affix(p, *place) => {
                Some(*place)
            }
            _ => None,
        });
        if let Some(place) = place
            && patterns.iter().filter(|p| is_affix(p, place)).count() >= AUTOMATON_MIN_LITERALS
        {
            let (joint, rest) = patterns.into_iter().partition(|p| is_affix(p, place));
            affixes = Some(Joint::new(joint));
            patterns = rest;
        }
    }
    Joined {
        patterns,
        literals,
        regexes,
        affixes,
    }
}

/// `item`, joined, with its fields numbered in `fields`.
fn compile_item(mapping: &Mapping, fields: &mut FieldTable, item: &Item, joined: Joined) -> CItem {
    let Joined {
        patterns,
        literals,
        regexes,
        affixes,
    } = joined;
    CItem {
        field: item
            .field
            .as_deref()
            .map(|f| fields.intern(resolve(mapping, f))),
        refs: patterns
            .iter()
            .map(|p| match p {
                Pattern::FieldRef { field, .. } => Some(fields.intern(resolve(mapping, field))),
                _ => None,
            })
            .collect(),
        patterns,
        all: item.all,
        literals,
        regexes,
        affixes,
    }
}

/// What compiling a rule computes without the set's shared tables, on all cores.
struct Prepared {
    /// Its necessary literals ([`gate::necessary`]).
    needs: Option<Vec<gate::Clause>>,
    /// Its items joined, by search, alternative and item.
    searches: Vec<Vec<Vec<Joined>>>,
}

impl Prepared {
    fn of(rule: &Rule, mapping: &Mapping) -> Prepared {
        let Body::Detection {
            searches,
            condition,
        } = &rule.body
        else {
            return Prepared {
                needs: None,
                searches: Vec::new(),
            };
        };
        Prepared {
            needs: gate::necessary(searches, condition, mapping),
            searches: searches
                .iter()
                .map(|s| {
                    s.any_of
                        .iter()
                        .map(|conj| conj.iter().map(join_item).collect())
                        .collect()
                })
                .collect(),
        }
    }
}

impl CItem {
    /// Roughly what testing the item costs, to order a conjunction's items (the order cannot
    /// change its result): a comparison at a value's end is cheaper than a search through it,
    /// which is cheaper than a regex or a search through every value of the event.
    fn cost(&self) -> u32 {
        let pattern = |p: &Pattern| match p {
            Pattern::Null | Pattern::Exists(_) => 0,
            Pattern::Text {
                place: Place::Contains,
                ..
            } => 8,
            Pattern::Text { .. } | Pattern::Number(..) | Pattern::Cidr { .. } => 2,
            Pattern::FieldRef { .. } | Pattern::Not(_) => 8,
            Pattern::Regex(_) => 100,
        };
        let own: u32 = self.patterns.iter().map(pattern).sum::<u32>()
            + self.affixes.as_ref().map_or(0, |_| 10)
            + self.literals.as_ref().map_or(0, |_| 30)
            + self.regexes.as_ref().map_or(0, |_| 100);
        if self.field.is_none() {
            // Every value of the event is searched.
            own.saturating_mul(20)
        } else {
            own
        }
    }

    #[inline]
    fn matches<E: EventFields>(&self, vals: &mut FieldValues<'_, '_, E>) -> bool {
        let e = vals.event;
        if self.literals.is_some() || self.regexes.is_some() || self.affixes.is_some() {
            let joined = |v: &str| {
                self.affixes.as_ref().is_some_and(|a| a.matches(v))
                    || self.literals.as_ref().is_some_and(|ac| ac.matches(v))
                    || self.regexes.as_ref().is_some_and(|re| re.matches(v))
            };
            let hit = match &self.field {
                None => e.any_value(&mut |v| joined(v)),
                Some(f) => vals.get(*f).is_some_and(joined),
            };
            if hit {
                return true;
            }
            if self.patterns.is_empty() {
                return false;
            }
        }
        match &self.field {
            None => {
                let test = |p: &Pattern| e.any_value(&mut |v| p.test(Some(v), |_| None));
                if self.all {
                    self.patterns.iter().all(test)
                } else {
                    self.patterns.iter().any(test)
                }
            }
            Some(f) => {
                let v = vals.get(*f);
                // The referenced field through the attribute pass, as any other: read by name,
                // it went through every attribute of the event (SigmaHQ's "Executable Run
                // Itself As Sacrificial Process", on every Sysmon process record: 2.5% of
                // matching them, callgrind).
                let test = |(i, p): (usize, &Pattern)| {
                    let referenced = self
                        .refs
                        .get(i)
                        .copied()
                        .flatten()
                        .and_then(|r| vals.get(r));
                    p.test(v, |_| referenced)
                };
                if self.all {
                    self.patterns.iter().enumerate().all(test)
                } else {
                    self.patterns.iter().enumerate().any(test)
                }
            }
        }
    }
}

impl CRule {
    #[inline]
    fn matches<E: EventFields>(&self, vals: &mut FieldValues<'_, '_, E>) -> bool {
        self.condition.eval(&mut |i| {
            self.searches[i]
                .iter()
                .any(|conj| conj.iter().all(|item| item.matches(vals)))
        })
    }
}

impl RuleSet {
    /// Compiles `rules` (detection rules; correlation rules are skipped here) with `mapping`.
    pub fn compile(rules: impl IntoIterator<Item = Arc<Rule>>, mapping: &Mapping) -> RuleSet {
        let mut set = RuleSet::default();
        let mut shape_index: Vec<Shape> = Vec::new();
        let mut group_of: HashMap<Vec<usize>, u32> = HashMap::new();
        // Per group: per place (field number, or any value), each folded literal with its
        // spelling and the rules that need it.
        let mut needs: Vec<Needs> = Vec::new();
        let mut table = FieldTable::default();
        let rules: Vec<Arc<Rule>> = rules
            .into_iter()
            .filter(|r| matches!(r.body, Body::Detection { .. }))
            .collect();
        // Necessary literals (regex syntax trees among them) and joint items per rule on all
        // cores for a large set; the items' matchers are built at their first test (`joint`),
        // the gates' automata below. A small set is
        // compiled on this thread: the bundled set takes milliseconds either way, and memory the
        // pool's threads allocate stays resident with them (about 6 MB for the bundled set:
        // `rules test` 80 -> 74 MB; docs/benchmarks.md).
        let parallel = rules.len() >= PARALLEL_MIN_RULES;
        let prepared: Vec<Prepared> = if parallel {
            rules.par_iter().map(|r| Prepared::of(r, mapping)).collect()
        } else {
            rules.iter().map(|r| Prepared::of(r, mapping)).collect()
        };
        for (rule, prepared) in rules.into_iter().zip(prepared) {
            let Body::Detection {
                searches,
                condition,
            } = &rule.body
            else {
                continue;
            };
            let Prepared {
                needs: rule_needs,
                searches: joined,
            } = prepared;
            let idx = set.rules.len() as u32;
            let shape_ids = mapping.shapes(&rule.logsource).map(|shapes| {
                shapes
                    .into_iter()
                    .map(|shape| set.shape_number(&mut shape_index, &mut table, shape))
                    .collect::<std::collections::BTreeSet<usize>>()
            });
            match shape_ids {
                None => set.unmapped.push(idx),
                Some(ids) => {
                    let ids: Vec<usize> = ids.into_iter().collect();
                    let g = *group_of.entry(ids.clone()).or_insert_with(|| {
                        set.groups.push(Group::default());
                        needs.push(Needs::new());
                        (set.groups.len() - 1) as u32
                    });
                    if ids.is_empty() {
                        set.everywhere = Some(g);
                    }
                    for &shape in &ids {
                        set.shape_groups[shape].push(g);
                    }
                    match rule_needs {
                        Some(clauses) => {
                            let count = clauses.len();
                            for (c, clause) in clauses.into_iter().enumerate() {
                                let tagged = gate::tag(idx, c, count);
                                for (place, literal) in clause {
                                    let field = place.map(|f| table.intern(f));
                                    let by_key = needs[g as usize].entry(field).or_default();
                                    for key in Key::of(&literal) {
                                        let rules = by_key.entry(key).or_default();
                                        // Rules are numbered in order: a repeat is the last
                                        // entry.
                                        if rules.last() != Some(&tagged) {
                                            rules.push(tagged);
                                        }
                                    }
                                }
                            }
                        }
                        None => set.groups[g as usize].always.push(idx),
                    }
                }
            }
            let fields = &mut table;
            let compiled = searches
                .iter()
                .zip(joined)
                .map(|(s, joined)| {
                    s.any_of
                        .iter()
                        .zip(joined)
                        .map(|(conj, joined)| {
                            conj.iter()
                                .zip(joined)
                                .map(|(i, j)| compile_item(mapping, fields, i, j))
                                .collect()
                        })
                        .collect()
                })
                .collect();
            let mut compiled: Vec<Vec<Vec<CItem>>> = compiled;
            // A conjunction fails at its first false item: the cheap ones are tested first.
            for conj in compiled.iter_mut().flatten() {
                conj.sort_by_key(CItem::cost);
            }
            set.rules.push(CRule {
                searches: compiled,
                condition: condition.clone(),
                enabled: true,
                rule,
            });
        }
        set.fields = table.fields;
        let new_of = set.most_read_fields_first();
        set.shape_index = ShapeIndex::build(&set.shapes);
        set.shape_fields = set
            .shapes
            .iter()
            .flat_map(|s| s.0.iter().map(|t| t.field))
            .collect();
        set.shape_fields.sort_unstable();
        set.shape_fields.dedup();
        set.id = SET_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        set.memo = true;
        set.names = NameTable::build(&set.fields);
        let mut attributes = Some(0u64);
        for &f in &set.shape_fields {
            match (set.names.fill[f] == Fill::Whole, &mut attributes) {
                (false, _) => set.shape_others.push(f),
                (true, Some(bits)) if f < 64 => *bits |= 1 << f,
                (true, _) => attributes = None,
            }
        }
        set.shape_attributes = attributes;
        set.keyword_min_len = needs
            .iter()
            .filter_map(|by_field| by_field.get(&None))
            .flat_map(|literals| literals.keys())
            .filter_map(|key| match key {
                Key::Contains(text) => Some(text.len()),
                _ => None,
            })
            .min()
            .unwrap_or(0);
        // Each group keeps its literals; its automata are built at its first event.
        for (g, by_field) in needs.into_iter().enumerate() {
            let group = &mut set.groups[g];
            group.always.sort_unstable();
            group.always.dedup();
            *group
                .pending
                .get_mut()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = by_field
                .into_iter()
                .map(|(field, literals)| (field.map(|f| new_of[f]), literals.into_iter().collect()))
                .collect();
        }
        set
    }

    /// The number of `shape`, added (with its fields) when new.
    fn shape_number(
        &mut self,
        known: &mut Vec<Shape>,
        table: &mut FieldTable,
        shape: Shape,
    ) -> usize {
        if let Some(at) = known.iter().position(|s| *s == shape) {
            return at;
        }
        self.shapes.push(CShape(
            shape
                .0
                .iter()
                .map(|(places, values)| {
                    let f = Field(places.clone().into_boxed_slice());
                    ShapeTest::new(table.intern(f), values)
                })
                .collect(),
        ));
        self.shape_groups.push(Vec::new());
        known.push(shape);
        known.len() - 1
    }

    /// Renumbers the field table so that the most read fields come first (their slots share
    /// cache lines); gives the new number of each old one.
    fn most_read_fields_first(&mut self) -> Vec<usize> {
        let mut uses = vec![0u32; self.fields.len()];
        // Every event reads every shape field (its memo key, [`ShapeMemo`]): they come first,
        // under 64, where the attribute pass marks them present
        // ([`RuleSet::each_shape_value`]).
        for t in self.shapes.iter().flat_map(|s| &s.0) {
            uses[t.field] = u32::MAX / 2;
        }
        let items = || {
            self.rules
                .iter()
                .flat_map(|r| r.searches.iter().flatten().flatten())
        };
        for it in items() {
            for f in it.field.iter().chain(it.refs.iter().flatten()) {
                uses[*f] += 1;
            }
        }
        let mut order: Vec<usize> = (0..self.fields.len()).collect();
        order.sort_by_key(|&f| std::cmp::Reverse(uses[f]));
        let mut new_of = vec![0usize; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_of[old] = new;
        }
        let old_fields = std::mem::take(&mut self.fields);
        let mut slots: Vec<Option<Field>> = old_fields.into_iter().map(Some).collect();
        self.fields = order.iter().filter_map(|&old| slots[old].take()).collect();
        for t in self.shapes.iter_mut().flat_map(|s| s.0.iter_mut()) {
            t.field = new_of[t.field];
        }
        for it in self
            .rules
            .iter_mut()
            .flat_map(|r| r.searches.iter_mut().flatten().flatten())
        {
            if let Some(f) = &mut it.field {
                *f = new_of[*f];
            }
            for f in it.refs.iter_mut().flatten() {
                *f = new_of[*f];
            }
        }
        new_of
    }

    /// Calls `on` with each shape field the event has a value in, with the value and its
    /// folded hash (0 unless `HASHED`), always in the same order for a set: the attribute fields first, ascending,
    /// then the others (or all in `shape_fields` order, when one is numbered past 63). A Windows record
    /// holds 4 of the whole SigmaHQ set's 40 shape fields (most are cloud logs' names); those
    /// come from the bits of the attribute pass rather than from a look at each of the 40,
    /// which with the memo's comparison took a fifth of matching (callgrind).
    #[inline]
    fn each_shape_value<'e, const HASHED: bool, E: EventFields>(
        &self,
        values: &mut FieldValues<'e, '_, E>,
        mut on: impl FnMut(usize, &'e [u8], u64),
    ) {
        // The value's folded hash, when asked for (0 otherwise).
        let value = |f: usize, values: &mut FieldValues<'e, '_, E>| {
            if HASHED {
                values.get_hashed(f)
            } else {
                values.get_bytes(f).map(|v| (v, 0))
            }
        };
        let Some(attributes) = self.shape_attributes else {
            for &f in &self.shape_fields {
                if let Some((v, h)) = value(f, values) {
                    on(f, v, h);
                }
            }
            return;
        };
        let mut bits = values.present() & attributes;
        while bits != 0 {
            let f = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some((v, h)) = value(f, values) {
                on(f, v, h);
            }
        }
        for &f in &self.shape_others {
            if let Some((v, h)) = value(f, values) {
                on(f, v, h);
            }
        }
    }

    /// The groups whose shapes hold for the event, into `groups` (see [`ShapeMemo`]).
    fn choose_groups<E: EventFields>(
        &self,
        values: &mut FieldValues<'_, '_, E>,
        groups: &mut Vec<u32>,
    ) {
        groups.clear();
        groups.extend(self.everywhere);
        self.shape_index.candidates(values, |shape, values| {
            if self.shapes[shape as usize].holds(values) {
                for g in &self.shape_groups[shape as usize] {
                    if !groups.contains(g) {
                        groups.push(*g);
                    }
                }
            }
        });
    }

    /// Turns the literal index and the memo of group choices off: every shape is tested on
    /// every event and every rule of a holding shape is evaluated. The results must not
    /// change; tests compare both ways.
    pub fn without_prefilter(mut self) -> RuleSet {
        self.memo = false;
        for g in &mut self.groups {
            let mut all = g.gates().clone();
            let gated: Vec<u32> = all.gates.iter().flat_map(|gate| gate.rules()).collect();
            all.ungated.extend(gated);
            all.ungated.sort_unstable();
            all.ungated.dedup();
            all.gates.clear();
            all.reads.clear();
            g.built = std::sync::OnceLock::from(all);
        }
        self
    }

    /// Forgets the values this thread's gates remember (see `gate::GateMemo`), keeping their
    /// room, so that each pass of a benchmark over the same events finds in them only what
    /// fresh traffic would. The groups chosen per combination of shape-field values are kept: fresh
    /// traffic brings the same few dozen combinations again.
    pub fn forget_recent(&self) {
        SCRATCH.with(|scratch| {
            for memo in scratch
                .borrow_mut()
                .work
                .recent
                .by_group
                .iter_mut()
                .flatten()
            {
                memo.forget();
            }
        });
    }

    /// Rules compiled.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// No rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Rule number `index`.
    pub fn rule(&self, index: u32) -> &Arc<Rule> {
        &self.rules[index as usize].rule
    }

    /// Whether rule `index`'s logsource maps onto events.
    pub fn is_mapped(&self, index: u32) -> bool {
        !self.unmapped.contains(&index)
    }

    /// Turns rule `id` on or off; false when no rule has that id.
    pub fn set_enabled(&mut self, id: &str, on: bool) -> bool {
        let mut found = false;
        for r in self.rules.iter_mut().filter(|r| r.rule.id == id) {
            r.enabled = on;
            found = true;
        }
        found
    }

    /// Appends the index of every enabled rule that `event` matches to `out` (each once, in
    /// ascending order).
    pub fn matches<E: EventFields>(&self, event: &E, out: &mut Vec<u32>) {
        SCRATCH.with(|scratch| {
            let Scratch { memo, fields, work } = &mut *scratch.borrow_mut();
            work.text.ready = false;
            // Two bits per rule (see `GroupWork::seen`).
            let words = (2 * self.rules.len()).div_ceil(64);
            if work.seen.len() < words {
                work.seen.resize(words, 0);
            }
            let mut values = FieldValues::new(event, self, fields);
            let groups = memo.groups(self, &mut values);
            if !groups.is_empty() {
                // Cleared once an event, before its groups: each rule is in one group, so
                // one group's marks are never another's to read, and a panic caught further up
                // leaves no mark to the next event. A thousand bytes with the whole SigmaHQ
                // set, cheaper than the pass over the rules the gates touched it replaced.
                work.seen[..words].fill(0);
            }
            let start = out.len();
            for &g in groups.iter() {
                self.match_group(g, &mut values, work, out);
            }
            out[start..].sort_unstable();
        });
    }

    /// Appends the rules of `group` that the event matches: its ungated rules and those whose
    /// literal the event holds in its place.
    fn match_group<E: EventFields>(
        &self,
        group: u32,
        values: &mut FieldValues<'_, '_, E>,
        work: &mut GroupWork,
        out: &mut Vec<u32>,
    ) {
        let GroupWork {
            seen,
            found,
            text,
            recent,
        } = work;
        found.clear();
        let built = self.groups[group as usize].gates();
        let memos = recent.of(self, group, built.gates.len());
        // Only the gates whose fields the event's layout can hold (see `GatePlan`).
        let plan = values.take_plan(group, built);
        let mut gate_work = (&mut **seen, &mut *found, &mut *text);
        match &plan {
            Some(plan) => {
                for &at in &plan.gates {
                    let at = at as usize;
                    self.mark_gate(built, at, &mut memos[at], values, &mut gate_work);
                }
            }
            None => {
                for (at, memo) in memos.iter_mut().enumerate().take(built.gates.len()) {
                    self.mark_gate(built, at, memo, values, &mut gate_work);
                }
            }
        }
        if let Some(plan) = plan {
            values.give_back_plan(plan);
        }
        // `found` holds the rules whose clauses were all marked (see `Gate::admit`).
        found.extend_from_slice(&built.ungated);
        // Each once (a rule whose gate could not be built is among the ungated and may still
        // sit under another gate); the caller puts the matches in order.
        if built.overlap {
            found.sort_unstable();
            found.dedup();
        }
        for &i in found.iter() {
            let r = &self.rules[i as usize];
            let m = r.enabled && r.matches(values);
            if m {
                out.push(i);
            }
        }
    }

    /// Marks the rules gate `at` of `built` admits for the event (see [`RuleSet::match_group`]).
    #[inline(always)]
    fn mark_gate<E: EventFields>(
        &self,
        built: &Gates,
        at: usize,
        memo: &mut GateMemo,
        values: &mut FieldValues<'_, '_, E>,
        (seen, found, text): &mut (&mut [u64], &mut Vec<u32>, &mut EventText),
    ) {
        let (gate, read) = (&built.gates[at], built.reads[at]);
        match read {
            GateRead::Remembered(f) if self.memo => {
                if let Some((v, hash)) = values.get_hashed(f) {
                    memo.mark(gate, v, hash, seen, found);
                }
            }
            // The value's hash only where whole values are looked up (or a set without
            // memos reads a gate it would remember: `mark` finds the same).
            GateRead::Remembered(f) | GateRead::Hashed(f) => {
                if let Some((v, hash)) = values.get_hashed(f) {
                    gate.mark(v, hash, seen, found);
                }
            }
            GateRead::Bytes(f) => {
                if let Some(v) = values.get_bytes(f) {
                    gate.mark_substrings(v, seen, found);
                }
            }
            GateRead::Values if !gate.can_admit(seen) => {}
            GateRead::Values if gate.mark_in_values_text(values.event, seen, found) => {}
            GateRead::Values if !gate.spans_values() => {
                gate.mark_substrings(text.of(values.event, self.keyword_min_len), seen, found);
            }
            GateRead::Values => {
                let e = values.event;
                gate.mark_substrings(e.source().as_bytes(), seen, found);
                gate.mark_substrings(e.host().as_bytes(), seen, found);
                e.any_value(&mut |v| {
                    gate.mark_substrings(v.as_bytes(), seen, found);
                    false
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::parse_rule;
    use watchpost_proto::PlainEvent;

    fn set(yaml: &str) -> RuleSet {
        RuleSet::compile([Arc::new(parse_rule(yaml).unwrap())], &Mapping::bundled())
    }

    fn ev(source: &str, attrs: &[(&str, &str)]) -> PlainEvent {
        PlainEvent::with_attributes(source, attrs)
    }

    /// Whether `rules` match a Security record holding `attrs` besides its channel.
    fn matches_security_record(rules: &RuleSet, attrs: &[(&str, &str)]) -> bool {
        let mut out = Vec::new();
        rules.matches(
            &ev("", &[&[("Channel", "Security")], attrs].concat()),
            &mut out,
        );
        !out.is_empty()
    }

    const PROC: &str = r#"title: t
id: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b
logsource: {product: windows, category: process_creation}
detection:
    selection:
        Image|endswith: '\vssadmin.exe'
        CommandLine|contains|all: [delete, shadows]
    filter:
        User|startswith: 'NT AUTHORITY'
    condition: selection and not filter
"#;

    #[test]
    fn logsource_field_mapping_and_condition() {
        let s = set(PROC);
        let mut out = Vec::new();
        let sysmon = ev(
            "Microsoft-Windows-Sysmon/Operational",
            &[
                ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                ("EventID", "1"),
                ("Image", r"C:\Windows\System32\VSSADMIN.EXE"),
                ("CommandLine", "vssadmin Delete Shadows /all /quiet"),
                ("User", "CORP\\bob"),
            ],
        );
        s.matches(&sysmon, &mut out);
        assert_eq!(out, vec![0]);
        // Security 4688 names the image NewProcessName: the mapping finds it.
        let sec = ev(
            "Security",
            &[
                ("Channel", "Security"),
                ("EventID", "4688"),
                ("NewProcessName", r"C:\Windows\System32\vssadmin.exe"),
                ("CommandLine", "vssadmin delete shadows"),
            ],
        );
        out.clear();
        s.matches(&sec, &mut out);
        assert_eq!(out, vec![0]);
        // The filter, another logsource, and a missing word each keep it quiet.
        for e in [
            ev(
                "Microsoft-Windows-Sysmon/Operational",
                &[
                    ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                    ("EventID", "1"),
                    ("Image", r"C:\x\vssadmin.exe"),
                    ("CommandLine", "delete shadows"),
                    ("User", "NT AUTHORITY\\SYSTEM"),
                ],
            ),
            ev(
                "Application",
                &[
                    ("Channel", "Application"),
                    ("EventID", "1"),
                    ("Image", r"C:\x\vssadmin.exe"),
                    ("CommandLine", "delete shadows"),
                ],
            ),
            ev(
                "Security",
                &[
                    ("Channel", "Security"),
                    ("EventID", "4688"),
                    ("NewProcessName", r"C:\x\vssadmin.exe"),
                    ("CommandLine", "list shadows"),
                ],
            ),
        ] {
            out.clear();
            s.matches(&e, &mut out);
            assert!(out.is_empty(), "{e:?}");
        }
    }

    #[test]
    fn keywords_search_the_message_and_values() {
        let s = set(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6c\nlogsource: {product: linux, service: sshd}\ndetection:\n  kw:\n    - 'Accepted password for root'\n  condition: kw\n",
        );
        let mut out = Vec::new();
        let mut e = ev("sshd", &[]);
        e.message = "Accepted password for ROOT from 1.2.3.4 port 22 ssh2".into();
        s.matches(&e, &mut out);
        assert_eq!(out, vec![0]);
        out.clear();
        e.source = "sudo".into();
        s.matches(&e, &mut out);
        assert!(out.is_empty());
    }

    /// An event laid out in one text, names between values, as the data plane's arena holds
    /// it: keyword gates of a few literals search that text rather than the values.
    struct InOneText {
        plain: PlainEvent,
        text: String,
    }

    impl InOneText {
        fn of(plain: PlainEvent) -> InOneText {
            let mut text = format!("{}{}", plain.source, plain.message);
            for (name, value) in &plain.attributes {
                text.push_str(name);
                text.push_str(value);
            }
            InOneText { plain, text }
        }
    }

    impl EventFields for InOneText {
        fn attribute(&self, name: &str) -> Option<&str> {
            self.plain.attribute(name)
        }
        fn source(&self) -> &str {
            self.plain.source()
        }
        fn host(&self) -> &str {
            self.plain.host()
        }
        fn message(&self) -> &str {
            self.plain.message()
        }
        fn any_value(&self, f: &mut dyn FnMut(&str) -> bool) -> bool {
            self.plain.any_value(f)
        }
        fn any_attribute<'a>(&'a self, f: &mut dyn FnMut(&'a str, &'a str) -> bool) -> bool {
            self.plain.any_attribute(f)
        }
        fn values_text(&self) -> Option<&[u8]> {
            Some(self.text.as_bytes())
        }
    }

    #[test]
    fn a_keyword_in_the_events_text_matches_as_in_its_values() {
        let s = set(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a8c\nlogsource: {product: windows, category: process_creation}\ndetection:\n  kw:\n    - '\\perfc.dat'\n  condition: kw\n",
        );
        let sysmon = |attrs: &[(&str, &str)]| {
            ev(
                "Microsoft-Windows-Sysmon/Operational",
                &[
                    &[
                        ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                        ("EventID", "1"),
                    ],
                    attrs,
                ]
                .concat(),
            )
        };
        for (attrs, hit) in [
            (
                &[("CommandLine", r"rundll32 C:\Windows\PERFC.DAT,#1")][..],
                true,
            ),
            (&[("Image", r"C:\x\Perfc.dat")][..], true),
            (&[("CommandLine", r"C:\x\perfc.da")][..], false),
            // In the text, a value ends `\perf` and the next name starts `c.dat`: the gate
            // lets the rule through, its evaluation reads the values.
            (&[("A", r"x\perf"), ("c.dat", "y")][..], false),
        ] {
            let plain = sysmon(attrs);
            let (mut by_values, mut by_text) = (Vec::new(), Vec::new());
            s.matches(&plain, &mut by_values);
            s.matches(&InOneText::of(plain), &mut by_text);
            assert_eq!(by_values, by_text, "{attrs:?}");
            assert_eq!(!by_text.is_empty(), hit, "{attrs:?}");
        }
    }

    /// The event's text for keyword searches leaves out values shorter than every keyword
    /// literal of the set, not of the first group that makes it: a short literal of another
    /// group is still found.
    #[test]
    fn a_short_keyword_of_another_group_is_found_in_a_short_value() {
        let rules = [
            "title: a\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a8d\nlogsource: {product: windows, category: process_creation}\ndetection:\n  kw:\n    - 'longer-keyword'\n  condition: kw\n",
            "title: b\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a8e\nlogsource: {product: windows, service: sysmon}\ndetection:\n  kw:\n    - 'ab1'\n  condition: kw\n",
        ];
        let s = RuleSet::compile(
            rules.map(|r| Arc::new(parse_rule(r).unwrap())),
            &Mapping::bundled(),
        );
        let e = ev(
            "Microsoft-Windows-Sysmon/Operational",
            &[
                ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                ("EventID", "1"),
                ("CommandLine", "run --longer-keyword"),
                ("Tag", "AB1"),
            ],
        );
        let mut out = Vec::new();
        s.matches(&e, &mut out);
        assert_eq!(out, [0, 1]);
    }

    #[test]
    fn a_value_of_the_same_folded_hash_is_not_taken_for_the_rules_value() {
        // `\` and `|` differ in their `0x20` bit alone: their hashes meet (see
        // `gate::folded_hash`), and the rule's own comparison must tell them apart.
        let s = set(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a71\nlogsource: {product: windows, service: security}\ndetection:\n  sel:\n    EventID: 4625\n    TargetUserName: 'corp\\adm'\n  condition: sel\n",
        );
        let mut out = Vec::new();
        for (user, hit) in [
            (r"corp\adm", true),
            (r"CORP\Adm", true),
            ("corp|adm", false),
            ("CORP|ADM", false),
        ] {
            let event = ev(
                "Security",
                &[
                    ("Channel", "Security"),
                    ("EventID", "4625"),
                    ("TargetUserName", user),
                ],
            );
            out.clear();
            s.matches(&event, &mut out);
            assert_eq!(out.len(), usize::from(hit), "{user}");
            out.clear();
            s.clone().without_prefilter().matches(&event, &mut out);
            assert_eq!(out.len(), usize::from(hit), "without the index: {user}");
        }
    }

    #[test]
    fn exact_values_are_indexed_and_still_compare_as_numbers() {
        let s = set(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a70\nlogsource: {product: windows, service: security}\ndetection:\n  sel:\n    EventID: 4625\n    LogonType: 10\n  condition: sel\n",
        );
        let login = |id: &str, logon: &str| {
            ev(
                "Security",
                &[
                    ("Channel", "Security"),
                    ("EventID", id),
                    ("LogonType", logon),
                ],
            )
        };
        let mut out = Vec::new();
        // `0x1211` is 4625 written in hex: the index finds the number, not only the text.
        for (id, logon, hit) in [
            ("4625", "10", true),
            ("0x1211", "10", true),
            ("4625", "010", true),
            ("4624", "10", false),
            ("4625", "2", false),
        ] {
            out.clear();
            s.matches(&login(id, logon), &mut out);
            assert_eq!(
                out.len(),
                usize::from(hit),
                "EventID {id}, LogonType {logon}"
            );
            out.clear();
            s.clone()
                .without_prefilter()
                .matches(&login(id, logon), &mut out);
            assert_eq!(
                out.len(),
                usize::from(hit),
                "without the index: {id} {logon}"
            );
        }
    }

    #[test]
    fn linux_keyword_rules_leave_windows_records_alone() {
        let s = set(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a71\nlogsource: {product: linux}\ndetection:\n  kw:\n    - 'chmod 777 /tmp'\n  condition: kw\n",
        );
        let mut out = Vec::new();
        let mut line = ev("bash", &[]);
        line.message = "user ran chmod 777 /tmp/x".into();
        s.matches(&line, &mut out);
        assert_eq!(out, vec![0], "a syslog line");
        out.clear();
        let windows = ev(
            "Microsoft-Windows-Sysmon/Operational",
            &[
                ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                ("CommandLine", "wsl chmod 777 /tmp/x"),
            ],
        );
        s.matches(&windows, &mut out);
        assert!(out.is_empty(), "a Windows record is not a Linux log");
        // An ETW trace's record, exported to .evtx: a provider, no channel.
        let trace = ev(
            "",
            &[
                ("Provider_Name", "Microsoft-Windows-RPC"),
                ("Endpoint", "chmod 777 /tmp/x"),
            ],
        );
        s.matches(&trace, &mut out);
        assert!(out.is_empty(), "a Windows trace record is not a Linux log");
    }

    #[test]
    fn an_antivirus_signature_is_defenders_threat_name() {
        let s = set(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a72\nlogsource: {category: antivirus}\ndetection:\n  sel:\n    Signature|contains: 'Mimikatz'\n  condition: sel\n",
        );
        let mut out = Vec::new();
        let detected = ev(
            "Microsoft-Windows-Windows Defender/Operational",
            &[
                ("Channel", "Microsoft-Windows-Windows Defender/Operational"),
                ("EventID", "1116"),
                ("ThreatName", "HackTool:Win32/Mimikatz.D"),
            ],
        );
        s.matches(&detected, &mut out);
        assert_eq!(out, vec![0]);
    }

    const NETWORK: &str = r#"title: t
id: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a73
logsource: {product: windows, category: network_connection}
detection:
    selection:
        Image|endswith: '\vssadmin.exe'
    condition: selection
"#;

    /// Groups are remembered per combination of shape values: each event of a stream that
    /// alternates event types (and spells the channel in other cases) still goes to its own
    /// logsource's rules, and two sets used in turn on one thread keep their own choices.
    #[test]
    fn each_event_type_reaches_its_own_rules_however_the_stream_alternates() {
        let both = RuleSet::compile(
            [PROC, NETWORK].map(|y| Arc::new(parse_rule(y).unwrap())),
            &Mapping::bundled(),
        );
        let network_only = set(NETWORK);
        let sysmon = |channel: &str, id: &str| {
            ev(
                channel,
                &[
                    ("Channel", channel),
                    ("EventID", id),
                    ("Image", r"C:\Windows\System32\vssadmin.exe"),
                    ("CommandLine", "vssadmin delete shadows"),
                ],
            )
        };
        let channel = "Microsoft-Windows-Sysmon/Operational";
        let upper = channel.to_uppercase();
        let mut out = Vec::new();
        for round in 0..3 {
            for (event, want, want_network_only) in [
                (sysmon(channel, "1"), vec![0], vec![]),
                (sysmon(channel, "3"), vec![1], vec![0]),
                (sysmon(&upper, "1"), vec![0], vec![]),
                (sysmon(channel, "7"), vec![], vec![]),
                (ev("", &[("EventID", "1")]), vec![], vec![]),
            ] {
                out.clear();
                both.matches(&event, &mut out);
                assert_eq!(out, want, "round {round}: {event:?}");
                out.clear();
                network_only.matches(&event, &mut out);
                assert_eq!(
                    out, want_network_only,
                    "round {round}, other set: {event:?}"
                );
            }
        }
    }

    /// Process-creation rule number `i`, needing `literal` in the command line.
    fn command_line_rule(i: usize, literal: &str) -> Arc<Rule> {
        Arc::new(
            parse_rule(&format!(
                "title: word {i}\nid: 00000000-0000-4000-8000-{i:012}\nlogsource: {{product: windows, category: process_creation}}\ndetection:\n    selection:\n        CommandLine|contains: '{literal}'\n    condition: selection\n"
            ))
            .unwrap(),
        )
    }

    /// A Sysmon process record of `command_line`.
    fn process(command_line: &str) -> PlainEvent {
        ev(
            "Microsoft-Windows-Sysmon/Operational",
            &[
                ("Channel", "Microsoft-Windows-Sysmon/Operational"),
                ("EventID", "1"),
                ("CommandLine", command_line),
            ],
        )
    }

    #[test]
    fn a_value_seen_again_reaches_the_rules_it_did_the_first_time() {
        // Forty rules, each needing its own word in the command line: past
        // `substrings::DFA_MAX_LITERALS` the gate finds them by grams and remembers recent
        // values (`gate::GateMemo`).
        let rules = (0..40).map(|i| command_line_rule(i, &format!("marker{i:02}x")));
        let set = RuleSet::compile(rules, &Mapping::bundled());
        let reference = set.clone().without_prefilter();
        let every_word: String = (0..12).map(|i| format!("marker{i:02}x ")).collect();
        let mut lines: Vec<String> = (0..200)
            .map(|i| format!("tool.exe --job {i} marker{:02}x", i % 40))
            .collect();
        lines.extend([
            // More words than a slot keeps.
            every_word.clone(),
            every_word.to_uppercase(),
            // Longer than a slot keeps, its word at the end.
            format!("{} marker39x", "a".repeat(600)),
            "no word at all".into(),
            "MARKER05X in capitals".into(),
        ]);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        // Three rounds: the first fills the slots, the others find values in them, after
        // other values (200 of them in 64 slots) took some of their slots.
        for round in 0..3 {
            for line in &lines {
                let event = process(line);
                got.clear();
                want.clear();
                set.matches(&event, &mut got);
                reference.matches(&event, &mut want);
                assert_eq!(got, want, "round {round}: {line}");
            }
        }
        got.clear();
        set.matches(&process(&every_word), &mut got);
        assert_eq!(got, (0..12).collect::<Vec<u32>>());
        got.clear();
        set.matches(&process("tool.exe --job 7 marker07x"), &mut got);
        assert_eq!(got, vec![7]);
    }

    #[test]
    fn two_sets_in_turn_on_one_thread_keep_to_their_own_rules() {
        // Two sets over the same field, their literals numbered otherwise (the second has one
        // more, first in order) and tied to other rules, matched alternately on one thread: a
        // value one set's gate remembers must not admit the other's rules.
        let mapping = Mapping::bundled();
        let straight = RuleSet::compile(
            (0..30).map(|i| command_line_rule(i, &format!("marker{i:02}x"))),
            &mapping,
        );
        let shifted = RuleSet::compile(
            (0..30)
                .map(|i| command_line_rule(i, &format!("marker{:02}x", (i + 7) % 30)))
                .chain([command_line_rule(30, "ma0")]),
            &mapping,
        );
        let mut out = Vec::new();
        for round in 0..3 {
            for word in 0..30u32 {
                let event = process(&format!("tool --job marker{word:02}x"));
                out.clear();
                straight.matches(&event, &mut out);
                assert_eq!(out, vec![word], "round {round}");
                out.clear();
                shifted.matches(&event, &mut out);
                assert_eq!(out, vec![(word + 23) % 30], "round {round}, the other set");
            }
        }
    }

    #[test]
    fn attribute_names_are_found_whole_whatever_their_length() {
        // Names of every length to 40 bytes, sharing first and last bytes, some differing only
        // in the middle (past sixteen bytes the middle is compared on its own).
        let names: Vec<String> = (1..=40)
            .flat_map(|len| {
                let base: String = "ParentCommandLineImageLoadedTargetObject"[..len].into();
                let mut middle = base.clone().into_bytes();
                middle[len / 2] ^= 0x20;
                let mut last = base.clone().into_bytes();
                last[len - 1] ^= 0x20;
                [
                    base,
                    String::from_utf8(middle).unwrap(),
                    String::from_utf8(last).unwrap(),
                ]
            })
            .collect();
        let kept: Vec<&String> = names.iter().step_by(3).collect();
        let fields: Vec<Field> = kept
            .iter()
            .map(|n| Field(vec![FieldSource::Attr(n.as_str().into())].into_boxed_slice()))
            .collect();
        let table = NameTable::build(&fields);
        for (i, name) in kept.iter().enumerate() {
            assert_eq!(table.fields_of(name.as_bytes()), &[(i as u32, 0)], "{name}");
        }
        for name in names.iter().filter(|n| !kept.contains(n)) {
            assert_eq!(
                table.fields_of(name.as_bytes()),
                &[],
                "{name} is not in the table"
            );
        }
        assert_eq!(table.fields_of(b""), &[]);
        assert_eq!(table.fields_of(b"ParentCommandLineX"), &[]);
    }

    /// A field whose places mix attributes and an entity (`User`: `User`, `SubjectUserName`,
    /// `user.name`, then the user entity) reads its first place the event has, whichever the
    /// attribute pass filled in and whichever it left to read at each use.
    #[test]
    fn a_field_of_attributes_and_an_entity_reads_its_first_present_place() {
        let rules = set(
            "title: t\nid: u1\nlogsource: {product: windows, service: security}\ndetection:\n    \
                         s:\n        User: alice\n    condition: s\n",
        );
        let test = |attrs: &[(&str, &str)], user: Option<&str>| {
            let mut e = ev("", &[&[("Channel", "Security")], attrs].concat());
            if let Some(user) = user {
                e.entities.push(("user".into(), String::new(), user.into()));
            }
            let mut out = Vec::new();
            rules.matches(&e, &mut out);
            !out.is_empty()
        };
        assert!(test(&[("User", "alice")], None));
        assert!(test(&[("SubjectUserName", "alice")], Some("bob")));
        assert!(test(&[("user.name", "ALICE"), ("Other", "x")], None));
        assert!(test(&[], Some("alice")), "the entity, with no attribute");
        // The first present place wins: a later one is never read.
        assert!(!test(
            &[("User", "bob"), ("SubjectUserName", "alice")],
            None
        ));
        assert!(!test(&[("SubjectUserName", "bob")], Some("alice")));
        assert!(!test(&[], None));
    }

    /// A field the previous event had and this one lacks reads as absent: the per-thread slots
    /// are not cleared between events, their epoch tells; when the epoch wraps they are.
    #[test]
    fn a_field_of_the_previous_event_is_never_read_for_the_next() {
        // `ShareName` is one attribute (the pass fills it whole), `User` three and an entity.
        let rules = set(
            "title: t\nid: u2\nlogsource: {product: windows, service: security}\n\
             detection:\n    s:\n        ShareName: alice\n    u:\n        User: bob\n    \
             condition: s or u\n",
        );
        let matched = |attrs: &[(&str, &str)]| matches_security_record(&rules, attrs);
        for _ in 0..3 {
            assert!(matched(&[("ShareName", "alice")]));
            assert!(!matched(&[("Other", "alice")]));
            assert!(matched(&[("User", "bob")]));
            assert!(!matched(&[("Other", "bob")]));
            assert!(!matched(&[]));
        }
        let mut slots = FieldSlots {
            epoch: u32::MAX,
            slots: vec![
                Slot {
                    filled: 7,
                    hashed: 7,
                    ..Slot::default()
                };
                4
            ],
            layouts: Layouts::default(),
        };
        let (fresh, epoch, _) = slots.next_event(4);
        assert_eq!(epoch, 1);
        assert!(fresh.iter().all(|s| s.filled == 0 && s.hashed == 0));
    }

    /// An event is read through the layout kept for its names only when it has those names:
    /// long names that share their first and last eight bytes and length but not their middle
    /// are another layout, as is another order; a repeated name keeps its first value from a
    /// kept layout too; an event with more names than a layout keeps is read name by name.
    #[test]
    fn a_kept_layout_serves_only_events_with_its_names() {
        let rules = set(
            "title: t\nid: l1\nlogsource: {product: windows, service: security}\n\
             detection:\n    s:\n        Account_Name_Of_Target: alice\n    \
             t:\n        Image: x.exe\n    condition: s or t\n",
        );
        let matched = |attrs: &[(&str, &str)]| matches_security_record(&rules, attrs);
        let crowd: Vec<(String, String)> = (0..80).map(|i| (format!("F{i}"), "v".into())).collect();
        let crowded = |last: (&str, &str)| {
            let mut attrs: Vec<(&str, &str)> = crowd
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            attrs.push(last);
            matched(&attrs)
        };
        for round in 0..3 {
            assert!(matched(&[("Account_Name_Of_Target", "alice")]), "{round}");
            // Same first and last eight bytes and length, another middle.
            assert!(!matched(&[("Account_Xame_Of_Target", "alice")]), "{round}");
            assert!(matched(&[("Account_Name_Of_Target", "alice")]), "{round}");
            assert!(
                matched(&[("Image", "x.exe"), ("Image", "y.exe")]),
                "{round}"
            );
            assert!(
                !matched(&[("Image", "y.exe"), ("Image", "x.exe")]),
                "{round}"
            );
            assert!(matched(&[("Other", "1"), ("Image", "x.exe")]), "{round}");
            assert!(!matched(&[("Image", "1"), ("Other", "x.exe")]), "{round}");
            assert!(crowded(("Image", "x.exe")), "{round}");
            assert!(!crowded(("Image", "y.exe")), "{round}");
        }
    }

    /// A layout's gates are those its names can fill: events of two layouts in turn, each
    /// holding the field of one rule's gate, each match their own rule, every round, and an
    /// event of a third layout holding both fields matches both.
    #[test]
    fn each_layout_reads_the_gates_of_the_fields_it_holds() {
        let rules = RuleSet::compile(
            [
                "title: a\nid: p1\nlogsource: {product: windows, service: security}\n\
                 detection:\n    s:\n        ShareName|contains: admin\n    condition: s\n",
                "title: b\nid: p2\nlogsource: {product: windows, service: security}\n\
                 detection:\n    s:\n        RelativeTargetName: secret.txt\n    condition: s\n",
            ]
            .map(|yaml| Arc::new(parse_rule(yaml).unwrap())),
            &Mapping::bundled(),
        );
        let matched = |attrs: &[(&str, &str)]| {
            let mut out = Vec::new();
            rules.matches(
                &ev("", &[&[("Channel", "Security")], attrs].concat()),
                &mut out,
            );
            out
        };
        for round in 0..3 {
            assert_eq!(
                matched(&[("ShareName", "\\\\h\\ADMIN$")]),
                vec![0],
                "{round}"
            );
            assert_eq!(
                matched(&[("RelativeTargetName", "Secret.txt")]),
                vec![1],
                "{round}"
            );
            assert_eq!(
                matched(&[("ShareName", "c$")]),
                Vec::<u32>::new(),
                "{round}"
            );
            assert_eq!(
                matched(&[
                    ("RelativeTargetName", "Secret.txt"),
                    ("ShareName", "admin$")
                ]),
                vec![0, 1],
                "{round}"
            );
        }
    }

    /// A keyword gate is skipped when every rule it could admit waits on another clause that
    /// no earlier gate found; a rule with both clauses among the keywords is never left out.
    #[test]
    fn a_keyword_waiting_on_another_clause_is_searched_only_when_that_clause_was_found() {
        let waits = set(
            "title: t\nid: k1\nlogsource: {product: windows, service: security}\n\
                         detection:\n    selection:\n        EventID: [4727, 4728]\n    \
                         keywords:\n        - 'ESX Admins'\n    condition: selection and keywords\n",
        );
        let both = set(
            "title: t\nid: k2\nlogsource: {product: windows, service: security}\n\
                        detection:\n    first:\n        - 'ESX Admins'\n    second:\n        \
                        - 'domain'\n    condition: first and second\n",
        );
        let matched = |rules: &RuleSet, attrs: &[(&str, &str)]| {
            let mut out = Vec::new();
            let event = ev("", &[&[("Channel", "Security")], attrs].concat());
            rules.matches(&event, &mut out);
            !out.is_empty()
        };
        for _ in 0..2 {
            let group = ("TargetUserName", "ESX Admins");
            assert!(matched(&waits, &[("EventID", "4728"), group]));
            assert!(!matched(&waits, &[("EventID", "4624"), group]));
            assert!(!matched(
                &waits,
                &[("EventID", "4728"), ("TargetUserName", "x")]
            ));
            assert!(matched(&both, &[group, ("SubjectDomainName", "DOMAIN")]));
            assert!(!matched(&both, &[group]));
        }
    }

    /// An empty text in a `contains` list is in every value, the empty one too, as it is
    /// tested alone: the list's automaton would find nothing in an empty value.
    #[test]
    fn an_empty_text_in_a_contains_list_matches_an_empty_value() {
        let rules = set(
            "title: t\nid: e1\nlogsource: {product: windows, service: security}\n\
                         detection:\n    s:\n        ShareName|contains: ['', 'abc', 'def']\n    \
                         condition: s\n",
        );
        for (value, want) in [("", true), ("x", true), ("xABCx", true)] {
            let mut out = Vec::new();
            let event = ev("", &[("Channel", "Security"), ("ShareName", value)]);
            rules.matches(&event, &mut out);
            assert_eq!(!out.is_empty(), want, "{value:?}");
        }
    }

    /// A keyword search reads the event's values as one text: a keyword must still sit
    /// inside one value, never across two, in any case.
    #[test]
    fn a_keyword_never_matches_across_two_values() {
        let s = set(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a74\nlogsource: {product: windows, service: security}\ndetection:\n  kw:\n    - 'mimikatz'\n  condition: kw\n",
        );
        let record = |values: &[(&str, &str)]| {
            let mut attrs = vec![("Channel", "Security"), ("EventID", "4688")];
            attrs.extend_from_slice(values);
            ev("Security", &attrs)
        };
        let mut out = Vec::new();
        s.matches(&record(&[("A", "run mimi"), ("B", "katz now")]), &mut out);
        assert!(out.is_empty(), "split over two values");
        let mut split_by_host = record(&[("A", "katz")]);
        split_by_host.host = "mimi".into();
        s.matches(&split_by_host, &mut out);
        assert!(out.is_empty(), "split between the host and a value");
        s.matches(
            &record(&[("A", "x"), ("B", r"C:\t\MimiKatz.exe")]),
            &mut out,
        );
        assert_eq!(out, vec![0], "inside one value, another case");
    }

    #[test]
    fn disabled_rules_do_not_match() {
        let mut s = set(PROC);
        assert!(s.set_enabled("5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b", false));
        let e = ev(
            "Security",
            &[
                ("Channel", "Security"),
                ("EventID", "4688"),
                ("NewProcessName", r"C:\x\vssadmin.exe"),
                ("CommandLine", "delete shadows"),
            ],
        );
        let mut out = Vec::new();
        s.matches(&e, &mut out);
        assert!(out.is_empty());
    }
}
