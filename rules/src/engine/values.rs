//! An event's field values as one rule group reads them: each distinct field looked up once per
//! event into slots, by name through the thread's layout of the event's attributes.

use super::RuleSet;
use super::gate::folded_hash_bytes;
use super::group::Gates;
use super::layout::{Fill, GatePlan, LAYOUT_PLANS_MAX, Layouts, NameTable, Slot};
use crate::field::{Field, place_value};
use crate::mapping::FieldSource;
use watchpost_proto::EventFields;

/// One event's field values. Attribute fields (all but a few) are filled in at the first lookup,
/// from the thread's remembered [`Layouts`] or by one pass over the event's attributes, each
/// name found in the set's [`NameTable`]: an
/// event has a few dozen attributes, a set asks for hundreds of fields (most absent: the cloud
/// logsources' on every Windows record), and looking each up by name went through the
/// attributes one by one. Other places (`@source`, entities, translated values) are read at each
/// use, after the attributes before them (see [`Fill`]).
pub(super) struct FieldValues<'e, 'f, E> {
    pub(super) event: &'e E,
    pub(super) fields: &'f [Field],
    pub(super) names: &'f NameTable,
    /// Per field, where its value sits in the event, once `resolved` (see [`FieldSlots`]).
    pub(super) slots: &'f mut [Slot],
    /// The layouts the thread has met, with where their fields sit; `None` in the reference
    /// ([`RuleSet::without_prefilter`]), which looks every name up.
    pub(super) layouts: Option<(&'f mut Layouts, u64)>,
    /// The slot of the event's layout in `layouts`, once resolved and kept.
    pub(super) layout: Option<usize>,
    /// This event's mark in `slots`.
    pub(super) epoch: u32,
    pub(super) resolved: bool,
    /// Bit `f` set: resolved field `f` (under 64) has a value.
    pub(super) present: u64,
}

/// A thread's table of where each field's value sits in the event being matched, kept from
/// event to event: a slot filled for another event carries an older epoch and reads as empty,
/// so nothing is cleared per event. Holding the values themselves, the table lived on the
/// stack and was cleared, then copied into place, for every event: 17 KB, 6% of matching
/// (callgrind).
#[derive(Default)]
pub(super) struct FieldSlots {
    /// The current event's mark; never 0, the mark of a slot never filled.
    pub(super) epoch: u32,
    pub(super) slots: Vec<Slot>,
    pub(super) layouts: Layouts,
}

impl FieldSlots {
    /// The slots of a new event of a set of `fields` fields, with its epoch.
    pub(super) fn next_event(&mut self, fields: usize) -> (&mut [Slot], u32, &mut Layouts) {
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
    pub(super) fn new(
        event: &'e E,
        set: &'f RuleSet,
        slots: &'f mut FieldSlots,
    ) -> FieldValues<'e, 'f, E> {
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
    pub(super) fn get(&mut self, i: usize) -> Option<&'e str> {
        if self.resolved && self.names.fill.get(i) == Some(&Fill::Whole) {
            return self.attribute_of(i);
        }
        self.get_otherwise(i)
    }

    /// [`FieldValues::get`] before the pass and for fields not only of attributes.
    #[inline(never)]
    pub(super) fn get_otherwise(&mut self, i: usize) -> Option<&'e str> {
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
    pub(super) fn attribute_of(&self, i: usize) -> Option<&'e str> {
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
    pub(super) fn partly_filled(&self, i: usize) -> Option<&'e str> {
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
    pub(super) fn resolve(&mut self) {
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

    /// The [`ShapeMemo`](super::shape::ShapeMemo) slot and key of the combination of shape-field values an event of
    /// this layout had last (see [`FieldValues::remember_choice`]).
    #[inline]
    pub(super) fn layout_choice(&mut self) -> Option<(u32, u64)> {
        if !self.resolved {
            self.resolve();
        }
        let (layouts, _) = self.layouts.as_ref()?;
        layouts.slots.get(self.layout?)?.choice
    }

    /// Notes that the event's combination of shape-field values sits in [`ShapeMemo`](super::shape::ShapeMemo) slot
    /// `at` with `key`, for the next event of its layout.
    #[inline]
    pub(super) fn remember_choice(&mut self, at: u32, key: u64) {
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
    pub(super) fn take_plan(&mut self, group: u32, gates: &Gates) -> Option<GatePlan> {
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
    pub(super) fn give_back_plan(&mut self, plan: GatePlan) {
        if let (Some((layouts, _)), Some(layout)) = (self.layouts.as_mut(), self.layout)
            && let Some(layout) = layouts.slots.get_mut(layout)
            && layout.plans.len() < LAYOUT_PLANS_MAX
        {
            layout.plans.push(plan);
        }
    }

    /// The resolved fields under 64 that have a value, as bits.
    #[inline]
    pub(super) fn present(&mut self) -> u64 {
        if !self.resolved {
            self.resolve();
        }
        self.present
    }

    /// `get(i)` as bytes: an attribute's read without the check of a character's boundary
    /// that taking it out of the event's text as a `str` makes (see
    /// `EventFields::attribute_bytes_at`).
    #[inline(always)]
    pub(super) fn get_bytes(&mut self, i: usize) -> Option<&'e [u8]> {
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
    pub(super) fn get_hashed(&mut self, i: usize) -> Option<(&'e [u8], u64)> {
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
pub(super) fn fill_by_names<E: EventFields>(
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
