//! The literal index: for each rule, the literals it cannot match without and the field each
//! must sit in; for each group of rules, one index per field over its rules' literals.
//!
//! An event is scanned field by field, each field only by the index of the literals rules
//! need in that field, and only the rules whose literal was found are evaluated. Cost follows
//! the event's fields and the rules it can match, not the rule count: with the whole SigmaHQ
//! set a Sysmon process event reaches a few dozen of the ~1,300 process rules.

use crate::caseless::CaselessPairs;
use crate::condition::Expr;
use crate::factors;
use crate::field::Field;
use crate::folded::lower_case_word;
use crate::mapping::Mapping;
use crate::pattern::{Pattern, Place as TextPlace, parse_number};
use crate::rule::{Item, Search};
use crate::substrings::Substrings;
use watchpost_proto::EventFields;

/// Shortest literal that gates: one or two letters are in nearly every value, so such a rule
/// gains nothing and its literal would slow the scan for all (shorter ones gate only when they
/// hold a byte rare in values, see [`long_enough`]).
pub(crate) const MIN_LITERAL: usize = 3;

/// Most literals one rule is gated by. A rule with more is not gated (it is tried on every
/// event of its logsource): the bound keeps `x or x or x ...` over a long list from copying the
/// list once per reference.
const MAX_LITERALS: usize = 4096;

/// Where a literal must sit: one field's value, or (keyword searches) any value of the event.
pub(crate) type Place = Option<Field>;

/// Bytes rare in log values, which a literal of one or two bytes may gate on: the escape and
/// expansion characters of cmd (`^`) and PowerShell (`` ` ``, `$`, `{`, `}`), the marks of
/// obfuscated command lines (SigmaHQ's "Potential Dosfuscation Activity" needs `^^` or a
/// longer literal; "Powershell Token Obfuscation" a backtick, `{` or `${`). Ungated, each such
/// rule was evaluated on every process record: 0.25-0.4 us each.
const RARE_BYTES: &[u8] = b"`^${}";

/// Whether `literal` is worth gating on: three bytes, two of a non-ASCII character (a Cyrillic
/// letter in a Windows command line is rare; `ab` is in nearly every value), or fewer holding
/// a byte rare in values ([`RARE_BYTES`]).
fn long_enough(literal: &[u8]) -> bool {
    literal.len() >= MIN_LITERAL
        || (literal.len() == 2 && !literal.is_ascii())
        || literal.iter().any(|b| RARE_BYTES.contains(b))
}

/// Roughly how often a value holds `literal`: halved per ASCII byte past two, a non-ASCII
/// literal rare, a short one with a rare byte as rare as five common bytes. Only used to
/// choose between sets of literals, each of which would do.
fn frequency(literal: &[u8]) -> f64 {
    if !literal.is_ascii() {
        return 0.001;
    }
    let by_length = 0.5f64.powi(literal.len() as i32 - 2);
    if literal.iter().any(|b| RARE_BYTES.contains(b)) {
        // At most as common as a short one: `^^^` holds `^`.
        return by_length.min(0.125);
    }
    by_length
}

/// How often a set of literals lets a rule through: the sum of its members' frequencies.
fn set_frequency(literals: &[Vec<u8>]) -> f64 {
    literals.iter().map(|l| frequency(l)).sum()
}

/// Most alternatives taken from one regex: past them it is not worth gating on.
const MAX_REGEX_LITERALS: usize = 64;

/// Literals of which every match of the regex `re` contains one, ASCII lower case,
/// deduplicated ([`factors::of`]); `None` when no such set is known, is large, or has a member
/// that is too short ([`long_enough`]).
fn regex_literals(re: &str) -> Option<Vec<String>> {
    let usable = |set: &[Vec<u8>]| {
        !set.is_empty() && set.len() <= MAX_REGEX_LITERALS && set.iter().all(|l| long_enough(l))
    };
    let set = factors::of(re, &usable, &set_frequency)?;
    set.into_iter().map(|l| String::from_utf8(l).ok()).collect()
}

/// What a rule needs of a value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Literal {
    /// The value contains this text (ASCII case folded).
    Contains(String),
    /// The value is this text (ASCII case folded), or a number equal to `number`: what an
    /// exact item (`EventID: 4624`, `LogonType: 10`) tests. Sharper than a substring, and it
    /// needs no minimum length.
    Equals {
        /// The text.
        text: String,
        /// The text as a number, for the lenient comparison (`0x1210` is `4624`).
        number: Option<f64>,
    },
}

impl Literal {
    /// Roughly how often a value holds it (see [`frequency`]).
    fn frequency(&self) -> f64 {
        match self {
            Literal::Contains(t) => frequency(t.as_bytes()),
            Literal::Equals { .. } => 0.02,
        }
    }
}

/// One required (place, literal) of a rule.
pub(crate) type Need = (Place, Literal);

/// How often a set of needs lets its rule through (see [`frequency`]).
fn needs_frequency<N: std::borrow::Borrow<Need>>(needs: &[N]) -> f64 {
    needs.iter().map(|n| n.borrow().1.frequency()).sum()
}

/// One clause of what a rule needs: when the rule matches, one of these holds.
pub(crate) type Clause = Vec<Need>;

/// Clauses kept per rule: a rule is evaluated only when every one holds (`Image` ends with
/// `\rundll32.exe` *and* the command line holds the rule's argument), so a common literal
/// beside a rare one does not let it through on its own.
pub(crate) const MAX_CLAUSES: usize = 2;

/// The flag of a gate's entry whose rule has a single clause: admitting it marks both of the
/// rule's bits, so that a rule is complete when both are marked, however many clauses it has,
/// and a gate adds a rule to an event's list only then (see [`Gate::admit`]).
const SOLE_CLAUSE: u32 = 1 << 31;

/// A gate's entry for clause `clause` of rule `rule`'s `clauses`: the rule's number times two
/// plus the clause, flagged [`SOLE_CLAUSE`] when it is the only one.
pub(crate) fn tag(rule: u32, clause: usize, clauses: usize) -> u32 {
    debug_assert!(clause < clauses && clauses <= 2, "two bits a rule");
    debug_assert!(
        rule < SOLE_CLAUSE / 2,
        "a rule's number leaves room for the flag"
    );
    let tagged = rule * 2 + clause as u32;
    if clauses == 1 {
        tagged | SOLE_CLAUSE
    } else {
        tagged
    }
}

/// The rule of a gate's entry ([`tag`]).
#[inline]
pub(crate) fn rule_of(tagged: u32) -> u32 {
    (tagged & !SOLE_CLAUSE) >> 1
}

/// The [`MAX_CLAUSES`] rarest of `clauses`, each once.
fn rarest(mut clauses: Vec<Clause>) -> Vec<Clause> {
    clauses.sort_by(|a, b| needs_frequency(a).total_cmp(&needs_frequency(b)));
    let mut out: Vec<Clause> = Vec::with_capacity(MAX_CLAUSES);
    for c in clauses {
        if out.len() == MAX_CLAUSES {
            break;
        }
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// What an `or` of parts needs, given what each part needs: clause `k` is the union of each
/// part's clause `k` (or its first, when it has fewer), since each part implies every one of its
/// clauses. A union past [`MAX_LITERALS`] is dropped; `None` when the first is.
fn either(parts: Vec<Vec<Clause>>) -> Option<Vec<Clause>> {
    let most = parts.iter().map(Vec::len).max()?;
    let mut out = Vec::with_capacity(most);
    for k in 0..most {
        let mut union: Clause = Vec::new();
        for p in &parts {
            union.extend(p.get(k).or_else(|| p.first())?.iter().cloned());
        }
        union.dedup();
        if union.len() > MAX_LITERALS {
            if k == 0 {
                return None;
            }
            break;
        }
        out.push(union);
    }
    Some(out)
}

/// Literals a rule cannot match without, each with the place it must sit in, as up to
/// [`MAX_CLAUSES`] clauses: when the rule matches, every clause has a member that holds in its
/// place. An item's literal sits in the value the item tests (the field as the mapping resolves
/// it, the first place present); a keyword's in any value. Where more would do (the items of a
/// conjunction, the parts of an `and`), the rarest are kept. `None` when no clause is known: a
/// negation, a regex without a literal set, a numeric or CIDR test, a literal that is too short,
/// or more than [`MAX_LITERALS`].
pub(crate) fn necessary(
    searches: &[Search],
    cond: &Expr,
    mapping: &Mapping,
) -> Option<Vec<Clause>> {
    /// The literals one pattern cannot match without.
    fn pattern(p: &Pattern) -> Option<Vec<Literal>> {
        match p {
            // A lenient number (`0x17` matching `23`) need not appear as written.
            Pattern::Text {
                text, number: None, ..
            } if long_enough(text.as_bytes()) => Some(vec![Literal::Contains(text.clone())]),
            Pattern::Regex(re) => Some(
                regex_literals(re.as_str())?
                    .into_iter()
                    .map(Literal::Contains)
                    .collect(),
            ),
            _ => None,
        }
    }
    fn item(i: &Item, mapping: &Mapping) -> Option<Vec<Need>> {
        if i.patterns.len() > MAX_LITERALS {
            return None;
        }
        let place: Place = i
            .field
            .as_deref()
            .map(|f| crate::field::resolve(mapping, f));
        let exact = |p: &Pattern| match p {
            Pattern::Text {
                text,
                place: TextPlace::Exact,
                number,
                ..
            } if !text.is_empty() => Some(Literal::Equals {
                text: text.clone(),
                number: *number,
            }),
            _ => None,
        };
        let placed = |lits: Vec<Literal>| -> Vec<Need> {
            lits.into_iter().map(|l| (place.clone(), l)).collect()
        };
        if place.is_some() {
            let equals: Vec<Literal> = i.patterns.iter().filter_map(exact).collect();
            if !equals.is_empty() && equals.len() == i.patterns.len() {
                if i.all {
                    // The value is each of them: any one is necessary.
                    return Some(placed(vec![equals.into_iter().next()?]));
                }
                return Some(placed(equals));
            }
        }
        if i.all {
            // Every pattern holds: any one's set will do; the rarest is best.
            return i
                .patterns
                .iter()
                .filter_map(pattern)
                .map(placed)
                .min_by(|a, b| needs_frequency(a).total_cmp(&needs_frequency(b)));
        }
        let mut all = Vec::new();
        for p in &i.patterns {
            all.extend(placed(pattern(p)?));
        }
        (!all.is_empty()).then_some(all)
    }
    fn search(s: &Search, mapping: &Mapping) -> Option<Vec<Clause>> {
        let mut alternatives = Vec::with_capacity(s.any_of.len());
        let mut size = 0;
        for conj in &s.any_of {
            // Every item holds: each item's set is a clause.
            let clauses: Vec<Clause> = conj.iter().filter_map(|i| item(i, mapping)).collect();
            if clauses.is_empty() {
                return None;
            }
            let clauses = rarest(clauses);
            size += clauses.first().map_or(0, Vec::len);
            if size > MAX_LITERALS {
                return None;
            }
            alternatives.push(clauses);
        }
        either(alternatives)
    }
    /// Over the condition (each search worked out once: a condition may name one search
    /// thousands of times).
    fn over(cond: &Expr, per_search: &[Option<Vec<Clause>>]) -> Option<Vec<Clause>> {
        match cond {
            Expr::Search(i) => per_search.get(*i)?.clone(),
            Expr::And(parts) => {
                let clauses: Vec<Clause> = parts
                    .iter()
                    .filter_map(|p| over(p, per_search))
                    .flatten()
                    .collect();
                (!clauses.is_empty()).then(|| rarest(clauses))
            }
            Expr::Or(parts) => {
                // Bounded as it goes: `x or x or ...` over a long list must not copy the list
                // once per reference before finding it too long.
                let mut all = Vec::with_capacity(parts.len().min(64));
                let mut size = 0;
                for p in parts {
                    let clauses = over(p, per_search)?;
                    size += clauses.first().map_or(0, Vec::len);
                    if size > MAX_LITERALS {
                        return None;
                    }
                    all.push(clauses);
                }
                either(all)
            }
            Expr::Not(_) => None,
        }
    }
    let per_search: Vec<Option<Vec<Clause>>> =
        searches.iter().map(|s| search(s, mapping)).collect();
    over(cond, &per_search).filter(|c| !c.is_empty())
}

/// A literal as a gate indexes it: the same key for the same literal in any spelling of case.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    /// A substring, ASCII lower case.
    Contains(String),
    /// A whole value, by its [`folded_hash`] (two such values may share one: a gate admits
    /// the rules of both, and evaluating them tells which holds).
    Equals(u64),
    /// A whole value read as a number, by its bits.
    Number(u64),
}

impl Key {
    /// The keys of `literal`: a number is found as written and as a number.
    pub(crate) fn of(literal: &Literal) -> Vec<Key> {
        match literal {
            Literal::Contains(t) => vec![Key::Contains(t.to_ascii_lowercase())],
            Literal::Equals { text, number } => {
                let mut keys = vec![Key::Equals(folded_hash(text))];
                keys.extend(number.map(|n| Key::Number(number_bits(n))));
                keys
            }
        }
    }
}

/// A hash under which texts equal in ASCII case folding are equal, eight bytes at a time:
/// values hashed per event include whole command lines. Each byte's `0x20` bit is set
/// first, which makes an ASCII capital its lower case with one `or` per word (lower-casing
/// only the capitals took seven instructions a word: 2.6% of matching with the whole SigmaHQ
/// set, callgrind); a few other bytes meet too (`\` and `|`, `@` and a backquote). So equal
/// hashes say only that two texts may be equal: every use confirms on the text (shapes,
/// remembered values, affixes) or takes the wider set (a gate admits the rules of every value
/// of the hash, and evaluating them decides).
pub(crate) fn folded_hash(text: &str) -> u64 {
    folded_hash_bytes(text.as_bytes())
}

/// [`folded_hash`] of bytes (a value's first or last few, which need not end on a character).
pub(crate) fn folded_hash_bytes(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h ^ fold_word(u64::from_le_bytes(word))).wrapping_mul(K);
        h ^= h >> 31;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // The last eight bytes, overlapping the word before them; under eight, the first and
        // last four: the length, mixed in first, tells the overlap. A byte at a time, the
        // remainder was a third of the hash's instructions (callgrind).
        let word = match (bytes.last_chunk::<8>(), bytes.first_chunk::<4>()) {
            (Some(last), _) => u64::from_le_bytes(*last),
            (None, Some(first)) => {
                let last = bytes.last_chunk::<4>().unwrap_or(first);
                u64::from(u32::from_le_bytes(*first)) | (u64::from(u32::from_le_bytes(*last)) << 32)
            }
            (None, None) => rest
                .iter()
                .rev()
                .fold(0u64, |w, &b| (w << 8) | u64::from(b)),
        };
        h = (h ^ fold_word(word)).wrapping_mul(K);
        h ^= h >> 31;
    }
    h
}

/// Appends `bytes` to `out` in ASCII lower case, eight at a time ([`lower_case_word`]); the
/// bytes past the last whole word are folded as the last eight bytes, overlapping the word
/// before them, rather than one at a time (most of a Windows record's values are short: the
/// remainder was half the cost of the event's text for a keyword search, callgrind).
#[inline]
pub(crate) fn push_lower_case(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.extend_from_slice(bytes);
    let added = &mut out[start..];
    let Some(&last) = added.last_chunk::<8>() else {
        added.make_ascii_lowercase();
        return;
    };
    let mut words = added.chunks_exact_mut(8);
    for word in &mut words {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(word);
        word.copy_from_slice(&lower_case_word(u64::from_le_bytes(eight)).to_le_bytes());
    }
    if !words.into_remainder().is_empty()
        && let Some(tail) = added.last_chunk_mut::<8>()
    {
        *tail = lower_case_word(u64::from_le_bytes(last)).to_le_bytes();
    }
}

/// Eight bytes with each one's `0x20` bit set (see [`folded_hash`]).
#[inline]
fn fold_word(word: u64) -> u64 {
    word | 0x2020_2020_2020_2020
}

/// The bits of `n`, with `-0` as `0` (they compare equal).
fn number_bits(n: f64) -> u64 {
    if n == 0.0 { 0 } else { n.to_bits() }
}

/// Recent values a gate read on one thread, in direct-mapped slots: a sensor's records repeat
/// most values (the same programs, parents, hashes, versions and users run again and again),
/// and finding the literals of thousands of rules in a value costs far more than knowing it was
/// just seen. Over the 277 files of EVTX-ATTACK-SAMPLES in order, 64 slots per field found a
/// Sysmon process record's parent image in them 86% of the time, its image, hashes and parent
/// command line 70-72%; its command line only 16%, which costs a hash compare and a copy.
#[derive(Default)]
pub(crate) struct GateMemo {
    slots: Vec<Recent>,
}

/// Slots of a [`GateMemo`].
const MEMO_SLOTS: usize = 64;

/// Longest value a [`GateMemo`] keeps, so that a thread's memos stay bounded: at most
/// [`MEMO_SLOTS`] times this per gate its events reached (a Sysmon `Hashes` value is about 180
/// bytes). A slot's room grows to the longest value it held (reserved exactly) and is reused:
/// no allocation once grown.
const MEMO_VALUE_MAX_BYTES: usize = 512;

/// Most literals a kept value holds; a value holding more is found again at each sight.
const MEMO_LITERALS_MAX: usize = 8;

/// One value and the literals it holds.
#[derive(Default)]
struct Recent {
    /// The value's [`folded_hash`] with its lowest bit set; 0: the slot is empty.
    key: u64,
    /// The value as it was (compared exactly: a value in other case is simply not found).
    value: Vec<u8>,
    literals: [u32; MEMO_LITERALS_MAX],
    count: u8,
}

impl GateMemo {
    /// Empties every slot, keeping its room.
    pub(crate) fn forget(&mut self) {
        for slot in &mut self.slots {
            slot.key = 0;
        }
    }

    /// Marks what [`Gate::mark`] marks for `value` (whose [`folded_hash`] is `hash`), from the
    /// slot that saw it last when it is there; else from the gate, keeping what it finds.
    #[inline]
    pub(crate) fn mark(
        &mut self,
        gate: &Gate,
        value: &[u8],
        hash: u64,
        seen: &mut [u64],
        found: &mut Vec<u32>,
    ) {
        if value.len() > MEMO_VALUE_MAX_BYTES {
            return gate.mark(value, hash, seen, found);
        }
        if self.slots.is_empty() {
            self.slots.resize_with(MEMO_SLOTS, Recent::default);
        }
        let key = hash | 1;
        let slot = &mut self.slots[(hash.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize];
        if slot.key == key && slot.value == value {
            for &id in &slot.literals[..usize::from(slot.count)] {
                gate.admit(id as usize, seen, found);
            }
            return;
        }
        // The key is set last: a slot a caught panic leaves half-filled is never taken.
        slot.key = 0;
        slot.count = 0;
        let mut kept = true;
        gate.literals_in(value, hash, |id| {
            gate.admit(id, seen, found);
            let held = &slot.literals[..usize::from(slot.count)];
            if !held.contains(&(id as u32)) {
                match slot.literals.get_mut(usize::from(slot.count)) {
                    Some(free) => {
                        *free = id as u32;
                        slot.count += 1;
                    }
                    None => kept = false,
                }
            }
        });
        if kept {
            slot.value.clear();
            slot.value.reserve_exact(value.len());
            slot.value.extend_from_slice(value);
            slot.key = key;
        }
    }
}

/// One place's index over the literals that some rules of a group need there: an automaton
/// over the substrings, sorted tables of the whole values and numbers.
#[derive(Clone, Debug)]
pub(crate) struct Gate {
    /// The field's number in the set's table; `None`: any value of the event.
    pub(crate) field: Option<usize>,
    automaton: Option<Substrings>,
    /// (hash, literal number), sorted.
    equals: Vec<(u64, u32)>,
    /// (number bits, literal number), sorted.
    numbers: Vec<(u64, u32)>,
    /// The rules of literal `i` are `rules[starts[i]..starts[i + 1]]`: the automaton's
    /// patterns come first, in order. Each entry is a rule's clause the literal belongs to
    /// ([`tag`]).
    starts: Vec<u32>,
    rules: Vec<u32>,
    /// A literal holds a NUL: values are searched one by one, not in the event's text (see
    /// `EventText` in the engine).
    nul: bool,
    /// A keyword gate's rules that have one clause here and may have another elsewhere (each
    /// entry tagged with its clause, as in `rules`), when none has both here: see
    /// [`Gate::can_admit`]. `None`: the gate is always scanned.
    waiting: Option<Vec<u32>>,
    /// A keyword gate's few literals, found in the event's text where it lies in memory (see
    /// [`Gate::mark_in_values_text`]).
    caseless: Option<CaselessPairs>,
}

impl Gate {
    /// The gate of `field` over `literals`, each with the clauses of rules that need it
    /// ([`tag`]s, each once). `None` when the automaton cannot be built: its rules must then be
    /// evaluated on every event, which is slower, never wrong.
    pub(crate) fn build(field: Option<usize>, literals: &[(Key, Vec<u32>)]) -> Option<Gate> {
        // Substrings first: their literal numbers are the automaton's pattern ids.
        let mut order: Vec<&(Key, Vec<u32>)> = literals.iter().collect();
        order.sort_by_key(|(k, _)| !matches!(k, Key::Contains(_)));
        let substrings: Vec<&str> = order
            .iter()
            .filter_map(|(k, _)| match k {
                Key::Contains(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let nul = substrings.iter().any(|s| s.contains('\0'));
        let caseless = if field.is_none() && !nul {
            CaselessPairs::build(&substrings)
        } else {
            None
        };
        let automaton = if substrings.is_empty() {
            None
        } else {
            Some(Substrings::build(&substrings, field.is_none() && !nul)?)
        };
        let (mut equals, mut numbers) = (Vec::new(), Vec::new());
        let mut starts = Vec::with_capacity(order.len() + 1);
        let mut rules = Vec::new();
        for (id, (key, of)) in order.iter().enumerate() {
            match key {
                Key::Contains(_) => {}
                Key::Equals(h) => equals.push((*h, id as u32)),
                Key::Number(bits) => numbers.push((*bits, id as u32)),
            }
            starts.push(rules.len() as u32);
            rules.extend_from_slice(of);
        }
        starts.push(rules.len() as u32);
        equals.sort_unstable();
        numbers.sort_unstable();
        let waiting = field.is_none().then(|| {
            let mut tagged = rules.clone();
            tagged.sort_unstable();
            tagged.dedup();
            tagged
        });
        // A rule with both its clauses here needs nothing from another gate.
        let waiting = waiting.filter(|tagged| {
            !tagged
                .windows(2)
                .any(|pair| rule_of(pair[0]) == rule_of(pair[1]))
        });
        Some(Gate {
            nul,
            waiting,
            caseless,
            field,
            automaton,
            equals,
            numbers,
            starts,
            rules,
        })
    }

    /// Marks in `seen` the clauses of the literals `value` (whose [`folded_hash`] is `hash`)
    /// holds, adding to `found` each rule whose clauses are then all marked
    /// ([`Gate::admit`]).
    #[inline]
    pub(crate) fn mark(&self, value: &[u8], hash: u64, seen: &mut [u64], found: &mut Vec<u32>) {
        self.literals_in(value, hash, |id| self.admit(id, seen, found));
    }

    /// Calls `on` with the number of each literal `value` (whose [`folded_hash`] is `hash`)
    /// holds, once per occurrence: what [`Gate::mark`] admits rules for, and what a
    /// [`GateMemo`] keeps.
    #[inline]
    fn literals_in(&self, value: &[u8], hash: u64, mut on: impl FnMut(usize)) {
        if let Some(substrings) = &self.automaton {
            substrings.each(value, &mut on);
        }
        if !self.equals.is_empty() {
            Gate::each_keyed(&self.equals, hash, &mut on);
        }
        // Values are read as bytes (see `EventFields::attribute_bytes_at`); those of a field
        // whose literals include numbers are checked as text again, for the parse.
        if !self.numbers.is_empty()
            && let Ok(text) = std::str::from_utf8(value)
            && let Some(n) = parse_number(text)
        {
            Gate::each_keyed(&self.numbers, number_bits(n), &mut on);
        }
    }

    /// Whether finding its literals costs more than a [`GateMemo`] look: grams over many
    /// literals read the value byte by byte and check candidates; a small DFA over a short
    /// value, or whole values alone (a search in a sorted table), cost about what a look does
    /// (remembering every gate was slower on Security records, whose 62 gates are mostly so).
    #[inline]
    pub(crate) fn worth_remembering(&self) -> bool {
        self.automaton.as_ref().is_some_and(Substrings::is_grams)
    }

    /// A literal holds a NUL, the separator of an event's text: a keyword gate searches the
    /// values one by one.
    #[inline]
    pub(crate) fn spans_values(&self) -> bool {
        self.nul
    }

    /// Whether scanning can admit a rule: one of a single clause, or of two whose other clause
    /// an earlier gate marked in `seen`. A keyword gate comes last in its
    /// group, so that one whose rules all wait on another place's literal is skipped, with the
    /// event's text it would make, when none was found: SigmaHQ's "ESX Admins" rule (seven
    /// event ids and a keyword) made every Security record's text.
    #[inline]
    pub(crate) fn can_admit(&self, seen: &[u64]) -> bool {
        let Some(waiting) = &self.waiting else {
            return true;
        };
        waiting.iter().any(|&tagged| {
            let other = (tagged & !SOLE_CLAUSE) ^ 1;
            tagged & SOLE_CLAUSE != 0 || seen[other as usize / 64] & (1 << (other % 64)) != 0
        })
    }

    /// It looks whole values up (by hash or as numbers), not only substrings.
    #[inline]
    pub(crate) fn has_equals(&self) -> bool {
        !self.equals.is_empty() || !self.numbers.is_empty()
    }

    /// Substrings only: for places read value by value (keyword searches), and gates without
    /// whole values.
    #[inline]
    pub(crate) fn mark_substrings(&self, value: &[u8], seen: &mut [u64], found: &mut Vec<u32>) {
        if let Some(substrings) = &self.automaton {
            substrings.each(value, |id| self.admit(id, seen, found));
        }
    }

    /// A keyword gate's search of the event's values where they lie in one text
    /// ([`EventFields::values_text`]), without copying them; false when the gate cannot
    /// (more or other literals than [`CaselessPairs`] takes) or the event has no such text.
    #[inline]
    pub(crate) fn mark_in_values_text<E: EventFields>(
        &self,
        event: &E,
        seen: &mut [u64],
        found: &mut Vec<u32>,
    ) -> bool {
        let (Some(caseless), Some(text)) = (&self.caseless, event.values_text()) else {
            return false;
        };
        caseless.each_in(text, |id| self.admit(id, seen, found));
        true
    }

    /// Calls `on` with the literal of each entry of `table` keyed `key`.
    #[inline]
    fn each_keyed(table: &[(u64, u32)], key: u64, on: &mut impl FnMut(usize)) {
        let at = table.partition_point(|(k, _)| *k < key);
        for &(_, id) in table[at..].iter().take_while(|(k, _)| *k == key) {
            on(id as usize);
        }
    }

    /// Marks the clauses literal `id` satisfies in `seen` (two bits per rule, both for a rule
    /// of one clause); a rule goes to `found` when the last of its clauses is marked, once.
    /// Adding a rule at its first clause and dropping those still missing one after the
    /// group's gates cost a pass over every rule a gate touched (a Sysmon process record's
    /// dozens, most waiting for a command line's literal): this way, matching with the whole
    /// SigmaHQ set takes 1.9% fewer instructions (callgrind).
    #[inline]
    fn admit(&self, id: usize, seen: &mut [u64], found: &mut Vec<u32>) {
        let of = &self.rules[self.starts[id] as usize..self.starts[id + 1] as usize];
        for &tagged in of {
            let clause = tagged & !SOLE_CLAUSE;
            let (word, at) = (clause as usize / 64, clause % 64);
            // Both of the rule's bits sit in the same word, from its first.
            let first = at & !1;
            let bits = if tagged & SOLE_CLAUSE != 0 {
                0b11 << first
            } else {
                1 << at
            };
            let marks = seen[word];
            if marks & bits != bits {
                seen[word] = marks | bits;
                if ((marks | bits) >> first) & 0b11 == 0b11 {
                    found.push(rule_of(tagged));
                }
            }
        }
    }

    /// The rules this gate can admit, each as often as it has literals here.
    pub(crate) fn rules(&self) -> impl Iterator<Item = u32> + '_ {
        self.rules.iter().map(|&tagged| rule_of(tagged))
    }
}

#[cfg(test)]
mod tests {
    use super::{
        Literal, folded_hash, lower_case_word, necessary, push_lower_case, regex_literals,
    };
    use crate::mapping::Mapping;
    use crate::rule::{Body, parse_rule};

    /// The clauses of a rule's detection, as (field's first name, literal) pairs.
    fn clauses(detection: &str) -> Option<Vec<Vec<(String, String)>>> {
        let yaml = format!(
            "title: t\nid: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a80\nlogsource: {{product: windows, category: process_creation}}\ndetection:\n{detection}"
        );
        let rule = parse_rule(&yaml).unwrap();
        let Body::Detection {
            searches,
            condition,
        } = &rule.body
        else {
            unreachable!()
        };
        let got = necessary(searches, condition, &Mapping::bundled())?;
        Some(
            got.into_iter()
                .map(|clause| {
                    clause
                        .into_iter()
                        .map(|(place, literal)| {
                            let field = place.map_or("*".to_string(), |f| format!("{:?}", f.0[0]));
                            let text = match literal {
                                Literal::Contains(t) => t,
                                Literal::Equals { text, .. } => format!("={text}"),
                            };
                            (field, text)
                        })
                        .collect()
                })
                .collect(),
        )
    }

    #[test]
    fn a_conjunction_gives_its_two_rarest_clauses_a_negation_none() {
        let got = clauses(
            "  sel:\n    Image|endswith: '\\rundll32.exe'\n    CommandLine|contains: 'zzqx-unique'\n    ParentImage|endswith: '.exe'\n  condition: sel\n",
        )
        .unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        // `.exe` is in every parent image: the two rarer items are kept, the rarest first.
        assert_eq!(
            got[0],
            vec![(r#"Attr("Image")"#.into(), r"\rundll32.exe".into())]
        );
        assert_eq!(
            got[1],
            vec![(r#"Attr("CommandLine")"#.into(), "zzqx-unique".into())]
        );
        // Either of two searches: each clause is the union of the alternatives' clauses.
        let got = clauses(
            "  a:\n    Image|endswith: '\\aaaa.exe'\n    CommandLine|contains: 'alpha-arg'\n  b:\n    Image|endswith: '\\bbbb.exe'\n  condition: a or b\n",
        )
        .unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|c| c.len() == 2), "{got:?}");
        assert!(clauses("  sel:\n    Image|endswith: '\\x.exe'\n  condition: not sel\n").is_none());
    }

    fn lits(re: &str) -> Option<Vec<String>> {
        regex_literals(re)
    }

    fn one(re: &str) -> Option<String> {
        let set = lits(re)?;
        assert_eq!(set.len(), 1, "{re}: {set:?}");
        set.into_iter().next()
    }

    #[test]
    fn a_regex_gives_its_rarest_required_run() {
        assert_eq!(
            one(r"(?is).*wget .* \- http.*\| perl").as_deref(),
            Some(" - http")
        );
        assert_eq!(
            one(r"(?is)^cmd\.exe /c .*whoami$").as_deref(),
            Some("cmd.exe /c ")
        );
        assert_eq!(
            one(r"(?s)^cmd\.exe /s .*$").as_deref(),
            Some("cmd.exe /s "),
            "case-sensitive: no Unicode folding"
        );
        assert_eq!(lits(r"(?is)a.b"), None, "too short");
        assert_eq!(one(r"(?i:foo[0-9]+bar)").as_deref(), Some("foo"));
        assert_eq!(one(r"\d{3}-abcdef").as_deref(), Some("-abcdef"));
        assert_eq!(one("(?is).*chmod 777.*").as_deref(), Some("chmod 777"));
        assert_eq!(lits(r".{1000,}"), None, "no literal at all");
        // The SigmaHQ WSASS rule: `.exe` is in every command line, the tool's name is not.
        // `s` folds to the long s as well: two members.
        assert_eq!(
            lits(r#"(?i)\.exe["']?\s+[^"]{0,64}werfaultsecure\.exe["']?\s+\d{2,10}"#),
            Some(vec![
                "werfaultsecure.exe".into(),
                "werfault\u{17f}ecure.exe".into()
            ])
        );
    }

    #[test]
    fn alternatives_and_rare_characters_give_sets() {
        assert_eq!(
            lits(r"(?is)abc|defgh"),
            Some(vec!["abc".to_string(), "defgh".to_string()])
        );
        assert_eq!(
            one("(?is).*\u{1f986}.*longer part").as_deref(),
            Some("\u{1f986}"),
            "a non-ASCII literal is rare"
        );
        // A case-insensitive Cyrillic letter: both cases, two bytes each.
        assert_eq!(
            lits("(?i)\u{410}"),
            Some(vec!["\u{410}".to_string(), "\u{430}".to_string()])
        );
        // The escape and expansion characters of cmd and PowerShell are rare on their own.
        assert_eq!(one(r"\w+`(?:\w+|-|.)`[\w+|\s]").as_deref(), Some("`"));
        assert_eq!(one(r#""(?:\{\d\})+"\s*-f"#).as_deref(), Some("{"));
        assert_eq!(
            one(r"(?i)\$\{`?e`?n`?v`?:`?p`?a`?t`?h`?\}").as_deref(),
            Some("${")
        );
        assert_eq!(lits(r"\s[a-f0-9]{64}\s"), None, "no literal at all");
        assert_eq!(lits(r"a\.\d"), None, "`a.` is not rare");
    }

    #[test]
    fn obfuscation_marks_gate_though_short() {
        // SigmaHQ's "Potential Dosfuscation Activity" (part of its list).
        let got = clauses(
            "    selection:\n        CommandLine|contains: ['^^', '^|^', ',;,', '%COMSPEC:~', ' c^md']\n    condition: selection\n",
        );
        let got = got.expect("gated");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].len(), 5, "each literal of the list: {got:?}");
        // A common two-letter literal still does not gate.
        let got = clauses(
            "    selection:\n        CommandLine|contains: ['^^', 'ab']\n    condition: selection\n",
        );
        assert_eq!(got, None);
    }

    /// Each byte of a word is folded as `to_ascii_lowercase` folds it, beside any other bytes;
    /// the hash of a value is the hash of any spelling of its case, and not of a longer one.
    #[test]
    fn a_word_is_lower_cased_as_its_bytes_are() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut bytes = *b"AbZ@[`z{";
                bytes[at] = b;
                let folded = lower_case_word(u64::from_le_bytes(bytes)).to_le_bytes();
                assert_eq!(
                    folded,
                    bytes.map(|x| x.to_ascii_lowercase()),
                    "{b:#x} at {at}"
                );
            }
        }
        assert_eq!(
            folded_hash(r"C:\Windows\System32\CMD.EXE /c whoami"),
            folded_hash(r"c:\windows\system32\cmd.exe /C WHOAMI")
        );
        assert_ne!(folded_hash("4624"), folded_hash("4624\0"));
        assert_ne!(folded_hash("Security"), folded_hash("Securitx"));
        // By design, a few bytes besides the letters' cases meet (the engine's tests check that
        // rules still tell them apart).
        assert_eq!(folded_hash(r"corp\adm"), folded_hash("corp|adm"));
        // At every length: the same for any case, another for any one byte changed.
        let word = "C:\\Windows\\PERFC.DAT x";
        for len in 0..=word.len() {
            let (text, lower) = (&word[..len], word[..len].to_ascii_lowercase());
            assert_eq!(folded_hash(text), folded_hash(&lower), "{text:?}");
            for at in 0..len {
                let mut other = lower.clone().into_bytes();
                other[at] = b'#';
                let other = String::from_utf8(other).unwrap();
                assert_ne!(folded_hash(text), folded_hash(&other), "{text:?} {other:?}");
            }
        }
        // A text of any length, words and remainder, as `make_ascii_lowercase` makes it.
        let text: Vec<u8> = (0..=255u8)
            .chain(b"C:\\Windows\\PERFC.DAT@[`{".iter().copied())
            .collect();
        for len in 0..text.len() {
            let mut fast = b"ABC".to_vec();
            push_lower_case(&mut fast, &text[..len]);
            assert_eq!(fast[..3], *b"ABC", "{len} bytes");
            assert_eq!(fast[3..], text[..len].to_ascii_lowercase(), "{len} bytes");
        }
    }

    /// A rule goes to an event's list when its last clause is marked, once: a rule of one
    /// clause at its literal, one of two only once both clauses' literals were found, however
    /// often each is.
    #[test]
    fn a_rule_is_listed_once_when_all_its_clauses_are_marked() {
        use super::{Gate, Key, tag};
        let literal = |text: &str| Key::Contains(text.to_string());
        // Rule 0: one clause ("alpha"). Rule 1: "beta", then "gamma".
        let gate = Gate::build(
            Some(0),
            &[
                (literal("alpha"), vec![tag(0, 0, 1)]),
                (literal("beta"), vec![tag(1, 0, 2)]),
                (literal("gamma"), vec![tag(1, 1, 2)]),
            ],
        )
        .unwrap();
        let (mut seen, mut found) = (vec![0u64; 1], Vec::new());
        gate.mark_substrings(b"alpha beta ALPHA beta", &mut seen, &mut found);
        assert_eq!(found, [0], "rule 1 waits for gamma");
        gate.mark_substrings(b"gamma", &mut seen, &mut found);
        assert_eq!(found, [0, 1]);
        gate.mark_substrings(b"alpha gamma beta", &mut seen, &mut found);
        assert_eq!(found, [0, 1], "each once");
        assert_eq!(seen, [0b1111]);
    }

    /// A keyword gate whose rules all wait on a second clause admits only when another gate
    /// marked that clause, or when a rule has one clause; one holding both clauses of a rule
    /// is always scanned.
    #[test]
    fn a_keyword_gate_waits_for_the_other_clause_of_its_rules() {
        use super::{Gate, Key, tag};
        let keyword = |text: &str| Key::Contains(text.to_string());
        // Rule 0's clause 1 of 2 here; its clause 0 elsewhere.
        let gate = Gate::build(None, &[(keyword("esx admins"), vec![tag(0, 1, 2)])]).unwrap();
        assert!(!gate.can_admit(&[0]), "clause 0 not marked");
        assert!(gate.can_admit(&[0b01]), "clause 0 marked");
        let sole = Gate::build(None, &[(keyword("esx admins"), vec![tag(0, 0, 1)])]).unwrap();
        assert!(sole.can_admit(&[0]), "a rule of one clause");
        // Both of rule 0's clauses here.
        let both = Gate::build(
            None,
            &[
                (keyword("esx"), vec![tag(0, 0, 2)]),
                (keyword("admins"), vec![tag(0, 1, 2)]),
            ],
        )
        .unwrap();
        assert!(both.can_admit(&[0]));
        // A field's gate is always scanned.
        let field = Gate::build(Some(3), &[(keyword("esx admins"), vec![tag(0, 1, 2)])]).unwrap();
        assert!(field.can_admit(&[0]));
    }

    #[test]
    fn k_and_s_give_a_member_per_letter_unicode_folding_matches_them_with() {
        let re = "(?i)takeown";
        let kelvin = "ta\u{212a}eown /f x";
        assert!(regex::Regex::new(re).unwrap().is_match(kelvin));
        assert_eq!(
            lits(re),
            Some(vec!["takeown".into(), "ta\u{212a}eown".into()])
        );
        assert_eq!(
            lits("(?i)mimikatz"),
            Some(vec!["mimikatz".into(), "mimi\u{212a}atz".into()])
        );
    }
}
