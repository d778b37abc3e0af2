//! The compiled rule set: rules grouped by the event shapes of their logsource, field names
//! resolved through the mapping once, and one pass over an event that reports every rule it
//! matches.
//!
//! Per event, each distinct logsource shape is tested once (there are a few dozen, however many
//! rules share them); only the rules of the shapes that hold are evaluated. Evaluation reads
//! fields through [`EventFields`], which the data plane implements over its in-place event
//! record, so matching allocates nothing.

use crate::condition::Expr;
use crate::mapping::{FieldSource, Mapping, Shape};
use crate::pattern::{Pattern, Place};
use crate::rule::Search;
use crate::rule::{Body, Item, Rule};
use aho_corasick::AhoCorasick;
use regex::{Regex, RegexBuilder};
use std::sync::Arc;
use watchpost_proto::EventFields;

/// A field reference resolved through the mapping.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Field(Box<[FieldSource]>);

impl Field {
    #[inline]
    pub(crate) fn get<'e, E: EventFields>(&self, e: &'e E) -> Option<&'e str> {
        self.0.iter().find_map(|p| match p {
            FieldSource::Attr(name) => e.attribute(name),
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
    /// `contains` list): one automaton over all of them, so a value is read once rather than
    /// once per literal; `patterns` then holds only the others.
    literals: Option<AhoCorasick>,
    /// For an "any of" item with several regexes (wildcards, `re`, non-ASCII text): their
    /// alternation, one pass per value; `patterns` then holds only the others.
    regexes: Option<Regex>,
}

/// Shortest literal the rule prefilter takes.
const MIN_PREFILTER_LITERAL: usize = 3;

/// Literals from which an item gets an automaton: below this, direct searches are as fast.
const AUTOMATON_MIN_LITERALS: usize = 3;

/// Prefilter literals up to which the automaton is a DFA (see [`RuleSet::compile`]).
const DFA_MAX_LITERALS: usize = 4_000;

#[derive(Clone, Debug)]
struct CRule {
    /// It has necessary literals: it is evaluated only when the prefilter saw one of them.
    gated: bool,
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
            allowed,
        }
    }
}

/// FNV-1a of the ASCII lower case of `s`.
fn folded_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b.to_ascii_lowercase())).wrapping_mul(0x100_0000_01b3)
    })
}

/// Fields whose values are kept per event (the rest are read at each use).
const FIELDS_CACHED: usize = 48;

/// One event's field values, each read on first use: dozens of shapes test `@source` or
/// `Channel`, and many rules read `CommandLine` or `Image`.
struct FieldValues<'e, 'f, E> {
    event: &'e E,
    fields: &'f [Field],
    cache: [Option<Option<&'e str>>; FIELDS_CACHED],
    /// Folded hashes of cached values, for shape tests.
    hashes: [Option<u64>; FIELDS_CACHED],
}

impl<'e, E: EventFields> FieldValues<'e, '_, E> {
    #[inline]
    fn get(&mut self, i: usize) -> Option<&'e str> {
        match self.cache.get(i) {
            Some(Some(v)) => *v,
            Some(None) => {
                let v = self.fields[i].get(self.event);
                self.cache[i] = Some(v);
                v
            }
            None => self.fields[i].get(self.event),
        }
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
    /// Rules by shape index.
    by_shape: Vec<Vec<u32>>,
    /// Rules whose logsource covers every event.
    everywhere: Vec<u32>,
    /// Rules whose logsource is not mapped (they match nothing), by index.
    unmapped: Vec<u32>,
    /// One automaton over the necessary literals of every gated rule (see [`necessary`]).
    prefilter: Option<AhoCorasick>,
    /// The rules of each prefilter literal, by pattern id.
    literal_rules: Vec<Vec<u32>>,
}

std::thread_local! {
    /// Gated rules whose literals the current event holds, one bit per rule (reused: matching
    /// allocates nothing once it has grown to the rule count).
    static CANDIDATES: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The longest ASCII literal run a wildcard regex requires, when the regex is a plain wildcard
/// pattern: optional flags, `^`, escaped literal characters, `.*` and `.` gaps, `$` (what
/// `pattern` makes of `*` and `?` values). Anything else (a class, a group, a repetition) gives
/// `None`: its literals are not simply required. Only ASCII is taken, so that ASCII case folding
/// finds the literal wherever the regex's own case folding would match.
fn wildcard_literal(re: &str) -> Option<String> {
    let folded = re.starts_with("(?is)");
    let body = re
        .strip_prefix("(?is)")
        .or_else(|| re.strip_prefix("(?s)"))
        .unwrap_or(re);
    let body = body.strip_prefix('^').unwrap_or(body);
    let mut best = String::new();
    let mut run = String::new();
    let mut chars = body.chars().peekable();
    let flush = |run: &mut String, best: &mut String| {
        if run.len() > best.len() {
            *best = std::mem::take(run);
        }
        run.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let lit = chars.next()?;
                if !lit.is_ascii_punctuation() && lit != ' ' {
                    // `\d`, `\w`... are classes, not literals.
                    return None;
                }
                run.push(lit);
            }
            // Unicode case folding matches `k` with the Kelvin sign and `s` with the long s,
            // which ASCII folding would not find: such letters end a run.
            'k' | 'K' | 's' | 'S' if folded => flush(&mut run, &mut best),
            '.' => {
                if chars.peek() == Some(&'*') {
                    chars.next();
                }
                flush(&mut run, &mut best);
            }
            '$' if chars.peek().is_none() => {}
            c if c.is_ascii() && !"[](){}|+*?^$".contains(c) => run.push(c),
            c if !c.is_ascii() => flush(&mut run, &mut best),
            _ => return None,
        }
    }
    flush(&mut run, &mut best);
    (best.len() >= MIN_PREFILTER_LITERAL).then_some(best)
}

/// Most literals one rule is gated by. A rule with more is not gated (it is tried on every
/// event of its logsource): the bound keeps `x or x or x ...` over a long list from copying the
/// list once per reference.
const MAX_PREFILTER_LITERALS: usize = 4096;

/// Literals a rule cannot match without: when it matches, one of them occurs (ASCII case
/// folded) in one of the event's values (message, source, host, attributes). `None` when no
/// such set is known: a negation, a regex, a numeric or CIDR test, an entity field, or more than
/// [`MAX_PREFILTER_LITERALS`].
fn necessary(searches: &[Search], cond: &Expr, mapping: &Mapping) -> Option<Vec<String>> {
    fn item(i: &Item, mapping: &Mapping) -> Option<Vec<String>> {
        if let Some(f) = &i.field
            && mapping
                .places(f)
                .iter()
                .any(|p| matches!(p, FieldSource::Entity { .. }))
        {
            return None;
        }
        if i.patterns.len() > MAX_PREFILTER_LITERALS {
            return None;
        }
        let mut texts = Vec::with_capacity(i.patterns.len());
        for p in &i.patterns {
            match p {
                // A lenient number (`0x17` matching `23`) need not appear as written.
                Pattern::Text {
                    text, number: None, ..
                } if text.len() >= 2 => texts.push(text.clone()),
                Pattern::Regex(re) => texts.push(wildcard_literal(re.as_str())?),
                _ => return None,
            }
        }
        if texts.is_empty() {
            return None;
        }
        if i.all {
            // Every one must appear: the longest is the most selective.
            let longest = texts.iter().max_by_key(|t| t.len())?.clone();
            return Some(vec![longest]);
        }
        Some(texts)
    }
    fn search(s: &Search, mapping: &Mapping) -> Option<Vec<String>> {
        let mut all = Vec::new();
        for conj in &s.any_of {
            // Every item holds: any one item's set will do; the smallest is the sharpest.
            let best = conj
                .iter()
                .filter_map(|i| item(i, mapping))
                .min_by_key(Vec::len)?;
            all.extend(best);
            if all.len() > MAX_PREFILTER_LITERALS {
                return None;
            }
        }
        (!all.is_empty()).then_some(all)
    }
    /// Over the condition, borrowing each search's literals (worked out once per search: a
    /// condition may name one search thousands of times).
    fn over<'s>(cond: &Expr, per_search: &'s [Option<Vec<String>>]) -> Option<Vec<&'s str>> {
        match cond {
            Expr::Search(i) => Some(
                per_search
                    .get(*i)?
                    .as_ref()?
                    .iter()
                    .map(String::as_str)
                    .collect(),
            ),
            Expr::And(parts) => parts
                .iter()
                .filter_map(|p| over(p, per_search))
                .min_by_key(Vec::len),
            Expr::Or(parts) => {
                let mut all = Vec::new();
                for p in parts {
                    all.extend(over(p, per_search)?);
                    if all.len() > MAX_PREFILTER_LITERALS {
                        return None;
                    }
                }
                (!all.is_empty()).then_some(all)
            }
            Expr::Not(_) => None,
        }
    }
    let per_search: Vec<Option<Vec<String>>> =
        searches.iter().map(|s| search(s, mapping)).collect();
    Some(
        over(cond, &per_search)?
            .into_iter()
            .map(str::to_string)
            .collect(),
    )
}

pub(crate) fn resolve(mapping: &Mapping, name: &str) -> Field {
    Field(mapping.places(name).into_boxed_slice())
}

fn compile_item(mapping: &Mapping, fields: &mut FieldTable, item: &Item) -> CItem {
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
    let literal_count = item.patterns.iter().filter(|p| is_literal(p)).count();
    let mut patterns = item.patterns.clone();
    let mut literals = None;
    if !item.all && literal_count >= AUTOMATON_MIN_LITERALS {
        let needles: Vec<&str> = item
            .patterns
            .iter()
            .filter_map(|p| match p {
                Pattern::Text { text, .. } if is_literal(p) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        // Literals are ASCII (others compile to regexes), so ASCII case folding is the rule's
        // own comparison.
        if let Ok(ac) = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&needles)
        {
            literals = Some(ac);
            patterns.retain(|p| !is_literal(p));
        }
    }
    let mut regexes = None;
    let regex_count = patterns
        .iter()
        .filter(|p| matches!(p, Pattern::Regex(_)))
        .count();
    if !item.all && regex_count >= 2 {
        let joined: Vec<String> = patterns
            .iter()
            .filter_map(|p| match p {
                Pattern::Regex(re) => Some(format!("(?:{})", re.as_str())),
                _ => None,
            })
            .collect();
        // Each regex carries its flags inline (see `pattern`), so the alternation means what
        // the separate regexes meant. Too large an automaton keeps them separate.
        if let Ok(re) = RegexBuilder::new(&joined.join("|"))
            .size_limit(1 << 24)
            .build()
        {
            regexes = Some(re);
            patterns.retain(|p| !matches!(p, Pattern::Regex(_)));
        }
    }
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

impl CItem {
    #[inline]
    fn matches<E: EventFields>(&self, vals: &mut FieldValues<'_, '_, E>) -> bool {
        let e = vals.event;
        if self.literals.is_some() || self.regexes.is_some() {
            let joined = |v: &str| {
                self.literals.as_ref().is_some_and(|ac| ac.is_match(v))
                    || self.regexes.as_ref().is_some_and(|re| re.is_match(v))
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
        let mut literals: Vec<String> = Vec::new();
        let mut literal_ids: std::collections::HashMap<String, usize> =
            std::collections::HashMap::new();
        let mut shape_index: Vec<Shape> = Vec::new();
        let mut table = FieldTable::default();
        for rule in rules {
            let Body::Detection {
                searches,
                condition,
            } = &rule.body
            else {
                continue;
            };
            let idx = set.rules.len() as u32;
            match mapping.shapes(&rule.logsource) {
                None => set.unmapped.push(idx),
                Some(shapes) if shapes.is_empty() => set.everywhere.push(idx),
                Some(shapes) => {
                    for shape in shapes {
                        let at = match shape_index.iter().position(|s| *s == shape) {
                            Some(at) => at,
                            None => {
                                set.shapes.push(CShape(
                                    shape
                                        .0
                                        .iter()
                                        .map(|(places, values)| {
                                            let f = Field(places.clone().into_boxed_slice());
                                            ShapeTest::new(table.intern(f), values)
                                        })
                                        .collect(),
                                ));
                                set.by_shape.push(Vec::new());
                                shape_index.push(shape);
                                shape_index.len() - 1
                            }
                        };
                        if !set.by_shape[at].contains(&idx) {
                            set.by_shape[at].push(idx);
                        }
                    }
                }
            }
            // A literal of one or two letters is in nearly every event: such a rule gains
            // nothing from the prefilter, and its literal would slow the scan for all.
            let gate = necessary(searches, condition, mapping)
                .filter(|lits| lits.iter().all(|l| l.len() >= MIN_PREFILTER_LITERAL));
            if let Some(lits) = &gate {
                for l in lits {
                    let folded = l.to_ascii_lowercase();
                    let id = *literal_ids.entry(folded).or_insert_with(|| {
                        literals.push(l.clone());
                        set.literal_rules.push(Vec::new());
                        literals.len() - 1
                    });
                    // Rules are numbered in order: a repeat of this rule is the last entry.
                    if set.literal_rules[id].last() != Some(&idx) {
                        set.literal_rules[id].push(idx);
                    }
                }
            }
            let fields = &mut table;
            let compiled = searches
                .iter()
                .map(|s| {
                    s.any_of
                        .iter()
                        .map(|conj| {
                            conj.iter()
                                .map(|i| compile_item(mapping, fields, i))
                                .collect()
                        })
                        .collect()
                })
                .collect();
            set.rules.push(CRule {
                gated: gate.is_some(),
                searches: compiled,
                condition: condition.clone(),
                enabled: true,
                rule,
            });
        }
        set.fields = table.fields;
        set.most_read_fields_first();
        if !literals.is_empty() {
            // A DFA while it stays small: the prefilter reads every value of every event, so
            // bytes per nanosecond matter (the bundled set's 708 literals: 0.99 M events/s with a
            // DFA, 0.77 M with the contiguous NFA). Past a few thousand literals the DFA no
            // longer fits the caches and scans no faster than the NFA (2,000 SigmaHQ rules: 170-
            // 215 k/s against 190 k/s), while the whole SigmaHQ set's 9,950 literals took most
            // of its load time (0.6-1.0 s against 0.45 s) and 75 MB more to build.
            let kind = if literals.len() <= DFA_MAX_LITERALS {
                aho_corasick::AhoCorasickKind::DFA
            } else {
                aho_corasick::AhoCorasickKind::ContiguousNFA
            };
            match AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .kind(Some(kind))
                .build(&literals)
            {
                Ok(ac) => set.prefilter = Some(ac),
                // Without the automaton every rule is evaluated: slower, never wrong.
                Err(_) => set.rules.iter_mut().for_each(|r| r.gated = false),
            }
        }
        set
    }

    /// Renumbers the field table so that the most read fields come first (those are cached per
    /// event).
    fn most_read_fields_first(&mut self) {
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
    }

    /// Turns the rule prefilter off: every rule of a holding shape is evaluated. The results
    /// must not change; tests compare both ways.
    pub fn without_prefilter(mut self) -> RuleSet {
        self.prefilter = None;
        self.rules.iter_mut().for_each(|r| r.gated = false);
        self
    }

    /// Marks in `bits` the gated rules whose literals `e` holds.
    fn scan<E: EventFields>(&self, e: &E, bits: &mut [u64]) {
        let Some(ac) = &self.prefilter else {
            return;
        };
        let mut mark = |v: &str| {
            for m in ac.find_overlapping_iter(v) {
                for &r in &self.literal_rules[m.pattern().as_usize()] {
                    bits[r as usize / 64] |= 1 << (r % 64);
                }
            }
            false
        };
        mark(e.source());
        mark(e.host());
        e.any_value(&mut mark);
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

    /// Appends the index of every enabled rule that `event` matches to `out` (each once).
    pub fn matches<E: EventFields>(&self, event: &E, out: &mut Vec<u32>) {
        CANDIDATES.with(|c| {
            let mut bits = c.borrow_mut();
            bits.clear();
            bits.resize(self.rules.len().div_ceil(64), 0);
            // The prefilter runs once, when the first gated rule is reached: events whose
            // shapes hold no gated rule never pay for it.
            let mut scanned = false;
            let mut wanted = |i: u32, bits: &mut Vec<u64>| {
                let r = &self.rules[i as usize];
                if !r.enabled {
                    return None;
                }
                if r.gated {
                    if !scanned {
                        scanned = true;
                        self.scan(event, bits);
                    }
                    if bits[i as usize / 64] & (1 << (i % 64)) == 0 {
                        return None;
                    }
                }
                Some(r)
            };
            let start = out.len();
            let mut values = FieldValues {
                event,
                fields: &self.fields,
                cache: [None; FIELDS_CACHED],
                hashes: [None; FIELDS_CACHED],
            };
            for &i in &self.everywhere {
                if wanted(i, &mut bits).is_some_and(|r| r.matches(&mut values)) {
                    out.push(i);
                }
            }
            for (shape, rules) in self.shapes.iter().zip(&self.by_shape) {
                if !shape.holds(&mut values) {
                    continue;
                }
                for &i in rules {
                    // A rule can sit under several shapes of which more than one hold.
                    if !out[start..].contains(&i)
                        && wanted(i, &mut bits).is_some_and(|r| r.matches(&mut values))
                    {
                        out.push(i);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod wildcard_tests {
    use super::wildcard_literal;

    #[test]
    fn wildcard_regexes_give_their_longest_required_literal() {
        assert_eq!(
            wildcard_literal(r"(?is).*wget .* \- http.*\| perl").as_deref(),
            Some(" - http")
        );
        assert_eq!(
            wildcard_literal(r"(?is)^cmd\.exe /c .*whoami$").as_deref(),
            Some("cmd.exe /c ")
        );
        assert_eq!(
            wildcard_literal(r"(?s)^cmd\.exe /s .*$").as_deref(),
            Some("cmd.exe /s "),
            "case-sensitive: no Unicode folding"
        );
        assert_eq!(wildcard_literal(r"(?is)a.b").as_deref(), None, "too short");
        assert_eq!(wildcard_literal(r"(?i:foo[0-9]+bar)"), None, "a class");
        assert_eq!(wildcard_literal(r"\d{3}-abcdef"), None, "a class escape");
        assert_eq!(wildcard_literal(r"(?is)abc|defgh"), None, "an alternation");
        assert_eq!(
            wildcard_literal("(?is).*🦆.*longer part").as_deref(),
            Some("longer part")
        );
        assert_eq!(
            wildcard_literal("(?is).*chmod 777.*").as_deref(),
            Some("chmod 777")
        );
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
        PlainEvent {
            source: source.into(),
            attributes: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..PlainEvent::default()
        }
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
