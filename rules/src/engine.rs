//! The compiled rule set: rules grouped by the event shapes of their logsource, field names
//! resolved through the mapping once, and one pass over an event that reports every rule it
//! matches.
//!
//! Per event, only the shapes its `Channel` or `@source` can belong to are tested, and each
//! group of rules whose shapes hold is visited once: its per-field literal index
//! ([`crate::gate`]) picks the rules the event can match, and only those (and the rules with no
//! literal to index) are evaluated. Evaluation reads fields through [`EventFields`], which the
//! data plane implements over its in-place event record, so matching allocates nothing once
//! the per-thread scratch has grown.

use crate::condition::Expr;
use crate::dual_regex::DualRegex;
use crate::gate::{self, Gate, Key, folded_hash};
use crate::joint::Joint;
use crate::mapping::{FieldSource, Mapping, Shape};
use crate::pattern::{Pattern, Place};
use crate::rule::{Body, Item, Rule};
use aho_corasick::AhoCorasick;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use watchpost_proto::EventFields;

/// A field reference resolved through the mapping.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Field(pub(crate) Box<[FieldSource]>);

impl Field {
    #[inline]
    pub(crate) fn get<'e, E: EventFields>(&self, e: &'e E) -> Option<&'e str> {
        self.0.iter().find_map(|p| match p {
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
        })
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
    literals: Option<Joint<AhoCorasick>>,
    /// For an "any of" item with several regexes (wildcards, `re`, non-ASCII text): their
    /// alternation; `patterns` then holds only the others.
    regexes: Option<Joint<DualRegex>>,
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

/// One (field, allowed values) of a shape. Values are compared by the hash of their ASCII
/// lower case, computed once per event and field, then confirmed on the text.
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

/// Fields whose values are kept per event (the rest are read at each use).
const FIELDS_CACHED: usize = 48;

/// One event's field values, each read on first use: dozens of shapes test `@source` or
/// `Channel`, and many rules read `CommandLine` or `Image`.
struct FieldValues<'e, 'f, E> {
    event: &'e E,
    fields: &'f [Field],
    /// Per field: the names its attributes can have, when it has nothing but attributes.
    names: &'f [Option<NameSet>],
    /// The names of the event's attributes, read at the first lookup that needs them.
    present: Option<NameSet>,
    cache: [Option<Option<&'e str>>; FIELDS_CACHED],
    /// Folded hashes of cached values, for shape tests.
    hashes: [Option<u64>; FIELDS_CACHED],
}

impl<'e, 'f, E: EventFields> FieldValues<'e, 'f, E> {
    fn new(event: &'e E, set: &'f RuleSet) -> FieldValues<'e, 'f, E> {
        FieldValues {
            event,
            fields: &set.fields,
            names: &set.field_names,
            present: None,
            cache: [None; FIELDS_CACHED],
            hashes: [None; FIELDS_CACHED],
        }
    }

    #[inline]
    fn get(&mut self, i: usize) -> Option<&'e str> {
        match self.cache.get(i) {
            Some(Some(v)) => *v,
            Some(None) => {
                let v = self.look_up(i);
                self.cache[i] = Some(v);
                v
            }
            None => self.look_up(i),
        }
    }

    /// Field `i`'s value. A field of attributes none of whose names the event has is absent
    /// without a look: an event has a few dozen attributes and a lookup compares names one by
    /// one, while shapes and gates ask for dozens of fields most events lack (the cloud
    /// logsources' on every Windows record).
    #[inline]
    fn look_up(&mut self, i: usize) -> Option<&'e str> {
        if let Some(Some(wanted)) = self.names.get(i) {
            let event = self.event;
            let present = self.present.get_or_insert_with(|| {
                let mut names = NameSet::default();
                event.any_attribute_name(&mut |n| {
                    names.insert(n);
                    false
                });
                names
            });
            if !present.meets(wanted) {
                return None;
            }
        }
        self.fields[i].get(self.event)
    }

    /// `get(i)` with the value's folded hash.
    #[inline]
    fn get_hashed(&mut self, i: usize) -> Option<(&'e str, u64)> {
        let v = self.get(i)?;
        let h = match self.hashes.get_mut(i) {
            Some(Some(h)) => *h,
            Some(slot) => *slot.insert(folded_hash(v)),
            None => folded_hash(v),
        };
        Some((v, h))
    }
}

/// A set of attribute names as 256 bits, one per name (a Bloom filter with one hash): if none
/// of a field's names is in an event's set, the event has none of them.
#[derive(Clone, Copy, Debug, Default)]
struct NameSet([u64; 4]);

impl NameSet {
    /// The bit of `name`: from its length and three of its bytes, cheap enough to take for
    /// every attribute of every event.
    #[inline]
    fn bit(name: &str) -> usize {
        let b = name.as_bytes();
        let at = |i: usize| u32::from(b.get(i).copied().unwrap_or(0));
        let h = (b.len() as u32).wrapping_mul(0x9e37_79b9)
            ^ (at(0) << 16)
            ^ (at(b.len() / 2) << 8)
            ^ at(b.len().wrapping_sub(1));
        (h.wrapping_mul(0x85eb_ca6b) >> 24) as usize
    }

    #[inline]
    fn insert(&mut self, name: &str) {
        let bit = NameSet::bit(name);
        self.0[bit / 64] |= 1 << (bit % 64);
    }

    /// They share a bit.
    #[inline]
    fn meets(&self, other: &NameSet) -> bool {
        self.0.iter().zip(&other.0).any(|(a, b)| a & b != 0)
    }

    /// The names of `field`, when it has only attributes (a record field or an entity is
    /// looked up as it is).
    fn of(field: &Field) -> Option<NameSet> {
        let mut set = NameSet::default();
        for place in field.0.iter() {
            match place {
                FieldSource::Attr(name) | FieldSource::Translated { name, .. } => set.insert(name),
                _ => return None,
            }
        }
        Some(set)
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
                        .any(|(_, w)| v.eq_ignore_ascii_case(w))
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
    /// Every field the shapes and rules read, each once, the most read first: an event's
    /// values of the first [`FIELDS_CACHED`] are looked up once per event.
    fields: Vec<Field>,
    /// Per field, its attribute names ([`NameSet::of`]).
    field_names: Vec<Option<NameSet>>,
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
    /// Per rule: the clauses of literals it is gated by (0: ungated; see [`gate::necessary`]).
    clauses: Vec<u8>,
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
    /// One automaton per field over the literals the other rules need there: only the rules
    /// whose literal an event holds are evaluated (see [`crate::gate`]).
    gates: Vec<Gate>,
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
            };
            for (field, literals) in pending {
                match Gate::build(field, &literals) {
                    Some(gate) => built.gates.push(gate),
                    // Without the automaton its rules are evaluated on every event: slower,
                    // never wrong.
                    None => built
                        .ungated
                        .extend(literals.iter().flat_map(|(_, r)| r.iter().map(|t| t >> 1))),
                }
            }
            // A rule gated in one place and not in another (no automaton) is ungated.
            built.ungated.sort_unstable();
            built.ungated.dedup();
            let ungated = &built.ungated;
            built
                .gates
                .retain(|g| !g.rules().all(|r| ungated.binary_search(&r).is_ok()));
            built
        })
    }
}

std::thread_local! {
    /// One event's matching state, reused so that matching allocates nothing once grown.
    static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch { seen: Vec::new(), found: Vec::new(), groups: Vec::new() })
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
    /// One bit per rule: already among `found` (always all clear between events).
    seen: Vec<u64>,
    /// The rules of the current group to evaluate.
    found: Vec<u32>,
    /// The groups whose shapes hold.
    groups: Vec<u32>,
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
    literals: Option<Joint<AhoCorasick>>,
    regexes: Option<Joint<DualRegex>>,
}

fn join_item(item: &Item) -> Joined {
    let is_literal = |p: &Pattern| {
        matches!(
            p,
            Pattern::Text {
                place: Place::Contains,
                cased: false,
                ..
            }
        )
    };
    let is_regex = |p: &Pattern| matches!(p, Pattern::Regex(_));
    let mut patterns = item.patterns.clone();
    let mut literals = None;
    let mut regexes = None;
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
    }
    Joined {
        patterns,
        literals,
        regexes,
    }
}

/// `item`, joined, with its fields numbered in `fields`.
fn compile_item(mapping: &Mapping, fields: &mut FieldTable, item: &Item, joined: Joined) -> CItem {
    let Joined {
        patterns,
        literals,
        regexes,
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
    #[inline]
    fn matches<E: EventFields>(&self, vals: &mut FieldValues<'_, '_, E>) -> bool {
        let e = vals.event;
        if self.literals.is_some() || self.regexes.is_some() {
            let joined = |v: &str| {
                self.literals.as_ref().is_some_and(|ac| ac.matches(v))
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
                let fields = vals.fields;
                let test = |(i, p): (usize, &Pattern)| {
                    let r = self.refs.get(i).copied().flatten();
                    p.test(v, |_| r.and_then(|r| fields[r].get(e)))
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
            set.clauses.push(0);
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
                            set.clauses[idx as usize] = clauses.len() as u8;
                            for (c, clause) in clauses.into_iter().enumerate() {
                                let tagged = idx * 2 + c as u32;
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
        set.field_names = set.fields.iter().map(NameSet::of).collect();
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

    /// Renumbers the field table so that the most read fields come first (those are cached per
    /// event); gives the new number of each old one.
    fn most_read_fields_first(&mut self) -> Vec<usize> {
        let mut uses = vec![0u32; self.fields.len()];
        for t in self.shapes.iter().flat_map(|s| &s.0) {
            uses[t.field] += 1;
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

    /// Turns the literal index off: every rule of a holding shape is evaluated. The results
    /// must not change; tests compare both ways.
    pub fn without_prefilter(mut self) -> RuleSet {
        for g in &mut self.groups {
            let mut all = g.gates().clone();
            let gated: Vec<u32> = all.gates.iter().flat_map(|gate| gate.rules()).collect();
            all.ungated.extend(gated);
            all.ungated.sort_unstable();
            all.ungated.dedup();
            all.gates.clear();
            g.built = std::sync::OnceLock::from(all);
        }
        self
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
            let Scratch {
                seen,
                found,
                groups,
            } = &mut *scratch.borrow_mut();
            // Two bits per rule, one per clause.
            let words = (2 * self.rules.len()).div_ceil(64);
            if seen.len() < words {
                seen.resize(words, 0);
            }
            let mut values = FieldValues::new(event, self);
            groups.clear();
            groups.extend(self.everywhere);
            self.shape_index.candidates(&mut values, |shape, values| {
                if self.shapes[shape as usize].holds(values) {
                    for g in &self.shape_groups[shape as usize] {
                        if !groups.contains(g) {
                            groups.push(*g);
                        }
                    }
                }
            });
            let start = out.len();
            for &g in groups.iter() {
                let group = &self.groups[g as usize];
                self.match_group(group, &mut values, seen, found, out);
            }
            out[start..].sort_unstable();
        });
    }

    /// Appends the rules of `group` that the event matches: its ungated rules and those whose
    /// literal the event holds in its place.
    fn match_group<E: EventFields>(
        &self,
        group: &Group,
        values: &mut FieldValues<'_, '_, E>,
        seen: &mut [u64],
        found: &mut Vec<u32>,
        out: &mut Vec<u32>,
    ) {
        found.clear();
        let built = group.gates();
        for gate in &built.gates {
            match gate.field {
                // The value's hash only where whole values are looked up.
                Some(f) if gate.has_equals() => {
                    if let Some((v, hash)) = values.get_hashed(f) {
                        gate.mark(v, hash, seen, found);
                    }
                }
                Some(f) => {
                    if let Some(v) = values.get(f) {
                        gate.mark_substrings(v, seen, found);
                    }
                }
                None => {
                    let e = values.event;
                    gate.mark_substrings(e.source(), seen, found);
                    gate.mark_substrings(e.host(), seen, found);
                    e.any_value(&mut |v| {
                        gate.mark_substrings(v, seen, found);
                        false
                    });
                }
            }
        }
        // A rule with two clauses is evaluated only when both were marked; every bit is
        // cleared for the next group.
        found.retain(|&r| {
            let (word, at) = ((2 * r) as usize / 64, (2 * r) % 64);
            let marks = (seen[word] >> at) & 0b11;
            seen[word] &= !(0b11 << at);
            marks == 0b11 || (marks == 0b01 && self.clauses[r as usize] < 2)
        });
        found.extend_from_slice(&built.ungated);
        // In rule order, each once (a rule whose gate could not be built is among the
        // ungated and may still sit under another gate).
        found.sort_unstable();
        found.dedup();
        for &i in found.iter() {
            let r = &self.rules[i as usize];
            if r.enabled && r.matches(values) {
                out.push(i);
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
