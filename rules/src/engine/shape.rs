//! Event shapes: the logsource tests (`Channel`, `EventID`, `@source`, ...) that put a rule in a
//! group, and the per-thread memo of which groups a combination of shape-field values belongs to.

use super::RuleSet;
use super::gate::folded_hash;
use super::values::FieldValues;
use std::collections::{BTreeMap, HashMap};
use watchpost_proto::EventFields;

/// A logsource shape compiled: every (field, allowed values) must hold. Fields are numbers in
/// the set's table of shape fields, so that each is read once per event however many shapes
/// test it (dozens of shapes test `@source` or `Channel`).
#[derive(Clone, Debug)]
pub(super) struct CShape(pub(super) Vec<ShapeTest>);

/// One (field, allowed values) of a shape. Values are compared by their [`folded_hash`]
/// (which a few other texts share), computed once per event and field, then confirmed on the
/// text.
#[derive(Clone, Debug)]
pub(super) struct ShapeTest {
    pub(super) field: usize,
    /// `*` is allowed: any present value holds.
    pub(super) any: bool,
    /// No value is listed: the field must be absent (or empty).
    pub(super) absent: bool,
    /// (hash, value) sorted by hash.
    pub(super) allowed: Vec<(u64, String)>,
}

impl ShapeTest {
    pub(super) fn new(field: usize, values: &[String]) -> ShapeTest {
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

impl CShape {
    pub(super) fn holds<E: EventFields>(&self, values: &mut FieldValues<'_, '_, E>) -> bool {
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

/// Slots of the per-thread memo of group choices: a sensor's events come in a few dozen
/// combinations of channel, event id and source.
pub(super) const MEMO_SLOTS: usize = 512;

/// The groups chosen for each combination of shape-field values a thread has seen. Which
/// groups an event goes to depends only on the values its set's shapes test (`Channel`,
/// `EventID`, `@source`, ...), yet testing the shapes took a third of matching with the whole
/// SigmaHQ set: 26 candidate shapes per Windows record, 1.3 holding. An event now reads those
/// fields, hashes them into a key and finds its groups in one look (or, first, compares them
/// with the combination its attribute layout had last, unhashed: see [`Layout::choice`](super::layout::Layout::choice)); a
/// new combination is worked
/// out as before and kept in its slot, in the room the slot's last one leaves (so that a stream
/// of ever new combinations costs what testing the shapes did, and allocates nothing once the
/// slots have grown). Values are kept and compared, so a colliding key cannot give another
/// combination's groups.
pub(super) struct ShapeMemo {
    /// The set the slots belong to ([`RuleSet::id`]).
    pub(super) set: u64,
    pub(super) slots: Vec<Choice>,
    /// The groups of an event whose combination is not kept (values past
    /// [`MEMO_VALUES_MAX_BYTES`], or a set without the memo).
    pub(super) unkept: Vec<u32>,
}

/// Most bytes of shape-field values a kept combination holds (a Sysmon record's channel, event
/// id and source: 76), so that the memo stays near a third of a MiB a thread (512 slots, each
/// at most 256 bytes of values and, with the whole SigmaHQ set, 39 value ends) however long
/// the values a sender makes up.
pub(super) const MEMO_VALUES_MAX_BYTES: usize = 256;

/// One combination of shape-field values and its groups.
#[derive(Default)]
pub(super) struct Choice {
    /// 0: the slot is empty (a key is never 0).
    pub(super) key: u64,
    /// The shape fields the combination holds, in the order [`RuleSet::each_shape_value`]
    /// gives them: (field, end of its value in `text`).
    pub(super) ends: Vec<(usize, u32)>,
    /// The present values as the event that made the slot had them, one after the other
    /// (compared without regard to ASCII case), as bytes: a value's end in a `str` was checked
    /// for a character boundary at every comparison (0.8% of matching, callgrind).
    pub(super) text: Vec<u8>,
    pub(super) groups: Vec<u32>,
}

impl ShapeMemo {
    /// The groups of the event behind `values`.
    pub(super) fn groups<'m, E: EventFields>(
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
    pub(super) fn is_for<E: EventFields>(
        &self,
        set: &RuleSet,
        values: &mut FieldValues<'_, '_, E>,
    ) -> bool {
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
    pub(super) fn keep<E: EventFields>(
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
pub(super) struct ShapeIndex {
    /// Per field (a number in the set's table): (folded hash of an allowed value, shape),
    /// sorted. Each shape is under one field, the one most shapes test.
    pub(super) by_value: Vec<(usize, Vec<(u64, u32)>)>,
    /// Shapes with no test of listed values (`*`, absent fields): tested on every event.
    pub(super) always: Vec<u32>,
}

impl ShapeIndex {
    pub(super) fn build(shapes: &[CShape]) -> ShapeIndex {
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
    pub(super) fn candidates<E: EventFields>(
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
