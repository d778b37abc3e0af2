//! Compiling a rule: its items joined into one pattern set per field, literal sets turned into
//! automata ([`super::joint`]) where there are enough of them, and the table of distinct fields the
//! set reads.

use super::gate;
use super::joint::{Affixes, Joint, is_affix};
use super::values::FieldValues;
use crate::condition::Expr;
use crate::dual_regex::DualRegex;
use crate::field::{Field, resolve};
use crate::mapping::Mapping;
use crate::pattern::{Pattern, Place};
use crate::rule::{Body, Item, Rule};
use crate::substrings::Substrings;
use std::sync::Arc;
use watchpost_proto::EventFields;

#[derive(Clone, Debug)]
pub(super) struct CItem {
    /// The field's number in the set's table; `None`: a keyword search over every value.
    pub(super) field: Option<usize>,
    pub(super) patterns: Vec<Pattern>,
    /// Fields of `fieldref` patterns, by pattern index.
    pub(super) refs: Vec<Option<usize>>,
    pub(super) all: bool,
    /// For an "any of" item with several case-insensitive substrings (a keyword list, a
    /// `contains` list): one automaton over all of them; `patterns` then holds only the others.
    pub(super) literals: Option<Joint<Substrings>>,
    /// For an "any of" item with several regexes (wildcards, `re`, non-ASCII text): their
    /// alternation; `patterns` then holds only the others.
    pub(super) regexes: Option<Joint<DualRegex>>,
    /// For an "any of" item with several whole values, prefixes or suffixes: their index;
    /// `patterns` then holds only the others.
    pub(super) affixes: Option<Joint<Affixes>>,
}

/// Literals from which an item gets an automaton: below this, direct searches are as fast.
pub(super) const AUTOMATON_MIN_LITERALS: usize = 3;

#[derive(Clone, Debug)]
pub(super) struct CRule {
    pub(super) rule: Arc<Rule>,
    /// Per search: alternatives of conjunctions.
    pub(super) searches: Vec<Vec<Vec<CItem>>>,
    pub(super) condition: Expr,
    pub(super) enabled: bool,
}

/// The fields of a set while it is compiled, each once, numbered in order of first use.
#[derive(Default)]
pub(super) struct FieldTable {
    pub(super) fields: Vec<Field>,
    /// Number by field: a scan of `fields` per item was quadratic in a rule's fields.
    pub(super) numbers: std::collections::HashMap<Field, usize>,
}

impl FieldTable {
    /// The number of `f`, added when new.
    pub(super) fn intern(&mut self, f: Field) -> usize {
        if let Some(&n) = self.numbers.get(&f) {
            return n;
        }
        self.fields.push(f.clone());
        self.numbers.insert(f, self.fields.len() - 1);
        self.fields.len() - 1
    }
}

/// An item's patterns with its alternatives joined: several case-insensitive substrings into
/// one automaton, several regexes into one alternation (the costly part of compiling a rule,
/// done on all cores; see [`RuleSet::compile`](super::RuleSet::compile)).
pub(super) struct Joined {
    /// The patterns left to test one by one.
    pub(super) patterns: Vec<Pattern>,
    pub(super) literals: Option<Joint<Substrings>>,
    pub(super) regexes: Option<Joint<DualRegex>>,
    pub(super) affixes: Option<Joint<Affixes>>,
}

pub(super) fn join_item(item: &Item) -> Joined {
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
pub(super) fn compile_item(
    mapping: &Mapping,
    fields: &mut FieldTable,
    item: &Item,
    joined: Joined,
) -> CItem {
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
pub(super) struct Prepared {
    /// Its necessary literals ([`gate::necessary`]).
    pub(super) needs: Option<Vec<gate::Clause>>,
    /// Its items joined, by search, alternative and item.
    pub(super) searches: Vec<Vec<Vec<Joined>>>,
}

impl Prepared {
    pub(super) fn of(rule: &Rule, mapping: &Mapping) -> Prepared {
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
    pub(super) fn cost(&self) -> u32 {
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
    pub(super) fn matches<E: EventFields>(&self, vals: &mut FieldValues<'_, '_, E>) -> bool {
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
    pub(super) fn matches<E: EventFields>(&self, vals: &mut FieldValues<'_, '_, E>) -> bool {
        self.condition.eval(&mut |i| {
            self.searches[i]
                .iter()
                .any(|conj| conj.iter().all(|item| item.matches(vals)))
        })
    }
}
