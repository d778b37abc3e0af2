//! The compiled rule set: rules grouped by the event shapes of their logsource, field names
//! resolved through the mapping once, and one pass over an event that reports every rule it
//! matches.
//!
//! Per event, the groups of its combination of shape-field values (`Channel`, `EventID`,
//! `@source`, ...) are looked up in a per-thread memo, worked out the first time a combination
//! is seen by testing the shapes its `Channel` or `@source` can belong to; each group of rules
//! whose shapes hold is visited once: its per-field literal index
//! ([`gate`]) picks the rules the event can match (a field's index over many literals
//! first looks in the thread's slots of recent values and the literals each held), and only
//! those (and the rules with no literal to index) are evaluated. Evaluation reads fields
//! through [`EventFields`], which the data plane implements over its in-place event record, so
//! matching allocates nothing once the per-thread scratch has grown.

mod compile;
mod gate;
mod group;
mod joint;
mod layout;
mod scratch;
mod shape;
mod values;

use crate::field::Field;
use crate::mapping::{Mapping, Shape};
use crate::rule::{Body, Rule};
use compile::{CItem, CRule, FieldTable, Prepared, compile_item};
use gate::{GateMemo, Key};
use group::{GateRead, Gates, Group, Needs};
use layout::{Fill, NameTable};
use rayon::prelude::*;
use scratch::{EventText, GroupWork, SCRATCH, Scratch};
use shape::{CShape, ShapeIndex, ShapeTest};
use std::collections::HashMap;
use std::sync::Arc;
use values::FieldValues;
use watchpost_proto::EventFields;

/// Rules from which a set is compiled on all cores (see [`RuleSet::compile`]).
const PARALLEL_MIN_RULES: usize = 1_000;

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
    /// alone (see [`ShapeMemo`](shape::ShapeMemo)).
    shape_fields: Vec<usize>,
    /// The shape fields filled in by the attribute pass, as bits (see
    /// [`RuleSet::each_shape_value`]); `None` when one is numbered past 63.
    shape_attributes: Option<u64>,
    /// The shape fields read at each use (`@source`, entities, translated values).
    shape_others: Vec<usize>,
    /// The set's identity in each thread's [`ShapeMemo`](shape::ShapeMemo) (0: `RuleSet::default()`, empty).
    id: u64,
    /// Groups are chosen through the [`ShapeMemo`](shape::ShapeMemo); off in [`RuleSet::without_prefilter`], the
    /// reference that equivalence tests compare with.
    memo: bool,
    /// The shortest keyword literal of any group: the event's text for keyword searches
    /// leaves out shorter values, which cannot hold one (see [`EventText`]).
    keyword_min_len: usize,
}

/// Identities of compiled sets, for the per-thread [`ShapeMemo`](shape::ShapeMemo).
static SET_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

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

    /// The groups whose shapes hold for the event, into `groups` (see [`ShapeMemo`](shape::ShapeMemo)).
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
mod tests;
