//! The literal index: for each rule, the literals it cannot match without and the field each
//! must sit in; for each group of rules, one index per field over its rules' literals.
//!
//! An event is scanned field by field, each field only by the index of the literals rules
//! need in that field, and only the rules whose literal was found are evaluated. Cost follows
//! the event's fields and the rules it can match, not the rule count: with the whole SigmaHQ
//! set a Sysmon process event reaches a few dozen of the ~1,300 process rules.

use crate::condition::Expr;
use crate::engine::Field;
use crate::mapping::Mapping;
use crate::pattern::{Pattern, Place as TextPlace, parse_number};
use crate::rule::{Item, Search};
use aho_corasick::Anchored;
use aho_corasick::automaton::Automaton;

/// Shortest literal that gates: one or two letters are in nearly every value, so such a rule
/// gains nothing and its literal would slow the scan for all (shorter ones gate only when they
/// hold a byte rare in values, see [`long_enough`]).
pub(crate) const MIN_LITERAL: usize = 3;

/// Most literals one rule is gated by. A rule with more is not gated (it is tried on every
/// event of its logsource): the bound keeps `x or x or x ...` over a long list from copying the
/// list once per reference.
const MAX_LITERALS: usize = 4096;

/// Literals up to which a keyword gate (searching the event's lower-cased text) is a
/// case-sensitive DFA, past them [`Grams`]. DFAs over thousands of literals took the whole
/// SigmaHQ set's load from 0.35 s and 255 MB to 0.54-1.2 s and 380 MB for no gain.
const KEYWORD_DFA_MAX_LITERALS: usize = 200;

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
/// deduplicated; `None` when no such set is known, is large, or has a member that is too short
/// ([`long_enough`]). Reads the regex's syntax tree: a concatenation yields the runs of its
/// literal parts and the sets of its other parts, the rarest kept; an alternation the union of
/// its branches; a repetition of at least one its body. Case-insensitive letters are taken as
/// their ASCII lower case, which the gate's automaton folds, except `k` and `s`, which Unicode
/// folding also matches with the Kelvin sign and the long s: they end a run.
fn regex_literals(re: &str) -> Option<Vec<String>> {
    let hir = regex_syntax::Parser::new().parse(re).ok()?;
    let mut set = hir_literals(&hir)?;
    for l in &mut set {
        l.make_ascii_lowercase();
    }
    set.sort();
    set.dedup();
    set.into_iter().map(|l| String::from_utf8(l).ok()).collect()
}

/// See [`regex_literals`].
fn hir_literals(hir: &regex_syntax::hir::Hir) -> Option<Vec<Vec<u8>>> {
    use regex_syntax::hir::HirKind;
    let usable = |set: &Vec<Vec<u8>>| {
        !set.is_empty() && set.len() <= MAX_REGEX_LITERALS && set.iter().all(|l| long_enough(l))
    };
    match hir.kind() {
        HirKind::Literal(l) => Some(vec![l.0.to_vec()]).filter(usable),
        HirKind::Class(c) => class_members(c).filter(usable),
        HirKind::Capture(c) => hir_literals(&c.sub),
        HirKind::Repetition(r) if r.min >= 1 => hir_literals(&r.sub),
        HirKind::Alternation(branches) => {
            let mut all = Vec::new();
            for b in branches {
                all.extend(hir_literals(b)?);
            }
            Some(all).filter(usable)
        }
        HirKind::Concat(parts) => {
            let mut best: Option<Vec<Vec<u8>>> = None;
            let mut consider = |set: Vec<Vec<u8>>| {
                let rarer = best
                    .as_ref()
                    .is_none_or(|b| set_frequency(&set) < set_frequency(b));
                if usable(&set) && rarer {
                    best = Some(set);
                }
            };
            let mut run: Vec<u8> = Vec::new();
            for part in parts {
                match run_piece(part) {
                    Some(bytes) => run.extend_from_slice(&bytes),
                    None => {
                        consider(vec![std::mem::take(&mut run)]);
                        if let Some(set) = hir_literals(part) {
                            consider(set);
                        }
                    }
                }
            }
            consider(vec![run]);
            best
        }
        _ => None,
    }
}

/// The bytes `part` matches when it matches exactly one thing up to ASCII case: a literal, or
/// a letter and its ASCII other case (`[Aa]`). `k`, `s` and anything else: `None`.
fn run_piece(part: &regex_syntax::hir::Hir) -> Option<Vec<u8>> {
    use regex_syntax::hir::HirKind;
    match part.kind() {
        HirKind::Literal(l) => Some(l.0.to_vec()),
        HirKind::Class(c) => {
            let members = class_members(c)?;
            let [a, b] = members.as_slice() else {
                return None;
            };
            let (&[x], &[y]) = (a.as_slice(), b.as_slice()) else {
                return None;
            };
            (x.is_ascii_alphabetic() && x != y && x.eq_ignore_ascii_case(&y))
                .then(|| vec![x.to_ascii_lowercase()])
        }
        _ => None,
    }
}

/// The members of a small class (at most four characters), each as its UTF-8 bytes.
fn class_members(class: &regex_syntax::hir::Class) -> Option<Vec<Vec<u8>>> {
    use regex_syntax::hir::Class;
    let mut out = Vec::new();
    match class {
        Class::Unicode(c) => {
            for r in c.ranges() {
                for ch in r.start()..=r.end() {
                    if out.len() == 4 {
                        return None;
                    }
                    out.push(ch.to_string().into_bytes());
                }
            }
        }
        Class::Bytes(c) => {
            for r in c.ranges() {
                for b in r.start()..=r.end() {
                    if out.len() == 4 {
                        return None;
                    }
                    out.push(vec![b]);
                }
            }
        }
    }
    Some(out)
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
            .map(|f| crate::engine::resolve(mapping, f));
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

/// An automaton over a gate's substrings, of a concrete type: the search loop is compiled for
/// it, with no call through a trait object per byte (what `AhoCorasick`'s searches pay, 20% of
/// matching with the whole SigmaHQ set).
#[derive(Clone, Debug)]
enum Substrings {
    Dfa(aho_corasick::dfa::DFA),
    Grams(Grams),
}

impl Substrings {
    /// ASCII case folded: a DFA up to [`GRAMS_MIN_LITERALS`], [`Grams`] past them. `lower`:
    /// the haystacks are in lower case already (a keyword gate's event text), and the DFA
    /// compares exactly, up to [`KEYWORD_DFA_MAX_LITERALS`]: its prefilters (memmem, Teddy)
    /// skip far faster than a case-folding DFA's.
    fn build(patterns: &[&str], lower: bool) -> Option<Substrings> {
        if lower && patterns.len() <= KEYWORD_DFA_MAX_LITERALS {
            return aho_corasick::dfa::Builder::new()
                .build(patterns)
                .ok()
                .map(Substrings::Dfa);
        }
        if patterns.len() > GRAMS_MIN_LITERALS {
            return Grams::build(patterns).map(Substrings::Grams);
        }
        aho_corasick::dfa::Builder::new()
            .ascii_case_insensitive(true)
            .build(patterns)
            .ok()
            .map(Substrings::Dfa)
    }

    /// Calls `on` with the number of every pattern occurring in `haystack`, overlaps included.
    #[inline]
    fn each(&self, haystack: &[u8], on: impl FnMut(usize)) {
        match self {
            Substrings::Dfa(a) => occurrences(a, haystack, on),
            Substrings::Grams(g) => g.each(haystack, on),
        }
    }
}

/// Literals past which a gate finds them by their grams ([`Grams`]) instead of an automaton:
/// with the whole SigmaHQ set, grams for every gate past 16 literals matched Windows records
/// 5-10% faster than DFAs up to 200 literals and contiguous NFAs past them.
const GRAMS_MIN_LITERALS: usize = 16;

/// Many literals found by one rare four-byte gram of each, in the manner of Wu-Manber: a
/// value is read a byte at a time, the gram ending at each byte hashed into a bitmap, and only
/// where a bit is set are the literals with that gram compared. With thousands of literals
/// (8,835 for the command line with the whole SigmaHQ set) an automaton's states spread over
/// megabytes and every byte of a value costs a cache miss (22 ns per byte of a command line);
/// the bitmap takes 16 bits per literal and most bytes stop at it. Literals under four bytes
/// go to a small automaton beside it.
#[derive(Clone, Debug)]
struct Grams {
    /// One bit per hash of a gram ([`Grams::hash`]).
    bits: Vec<u64>,
    /// Per word of `bits`: the bits set in the words before it, so that the entries of a set
    /// bit are found without a search ([`Grams::probe`]).
    ranks: Vec<u32>,
    /// `32 - log2(bits)`: the hash's top bits index the bitmap.
    shift: u32,
    /// Where each set bit's entries start in `entries`, by the bit's rank, and one past the
    /// last.
    starts: Vec<u32>,
    /// Per literal of four bytes or more, by its gram's hash: (gram, literal, bytes of the
    /// literal up to the gram's end).
    entries: Vec<(u32, u32, u32)>,
    /// The literals, ASCII lower case, by pattern number.
    literals: Vec<Box<[u8]>>,
    /// The literals under four bytes (by their own numbers, mapped through `short_ids`).
    short: Option<aho_corasick::dfa::DFA>,
    short_ids: Vec<u32>,
}

impl Grams {
    /// Bits per literal in the bitmap: about one probe in 16 finds a bit set by another gram.
    const BITS_PER_LITERAL: usize = 16;

    fn build(patterns: &[&str]) -> Option<Grams> {
        let literals: Vec<Box<[u8]>> = patterns
            .iter()
            .map(|p| p.to_ascii_lowercase().into_bytes().into_boxed_slice())
            .collect();
        // How many literals hold each gram: a literal is found by its least shared one, so
        // that a gram common in values (`.exe`) stops few of them.
        let mut shared: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        for l in literals.iter().filter(|l| l.len() >= 4) {
            let mut grams: Vec<u32> = l.windows(4).map(Grams::pack).collect();
            grams.sort_unstable();
            grams.dedup();
            for g in grams {
                *shared.entry(g).or_default() += 1;
            }
        }
        let size = (literals.len() * Grams::BITS_PER_LITERAL)
            .next_power_of_two()
            .clamp(1 << 10, 1 << 22);
        let shift = 32 - size.trailing_zeros();
        let mut entries: Vec<(usize, u32, u32, u32)> = Vec::with_capacity(literals.len());
        let mut short_ids = Vec::new();
        let mut short_patterns = Vec::new();
        for (id, l) in literals.iter().enumerate() {
            if l.len() < 4 {
                short_ids.push(id as u32);
                short_patterns.push(&l[..]);
                continue;
            }
            let (end, gram) = l
                .windows(4)
                .enumerate()
                .map(|(at, g)| (at + 4, Grams::pack(g)))
                .min_by_key(|(end, gram)| (shared[gram], Grams::commonness(&l[end - 4..*end])))?;
            entries.push((Grams::hash(gram, shift), gram, id as u32, end as u32));
        }
        entries.sort_unstable();
        let mut bits = vec![0u64; size / 64];
        for &(h, ..) in &entries {
            bits[h / 64] |= 1 << (h % 64);
        }
        let mut ranks = Vec::with_capacity(bits.len());
        let mut rank = 0u32;
        for w in &bits {
            ranks.push(rank);
            rank += w.count_ones();
        }
        let mut starts = Vec::with_capacity(rank as usize + 1);
        for (i, e) in entries.iter().enumerate() {
            if i == 0 || entries[i - 1].0 != e.0 {
                starts.push(i as u32);
            }
        }
        starts.push(entries.len() as u32);
        let short = if short_patterns.is_empty() {
            None
        } else {
            Some(
                aho_corasick::dfa::Builder::new()
                    .ascii_case_insensitive(true)
                    .build(&short_patterns)
                    .ok()?,
            )
        };
        Some(Grams {
            bits,
            ranks,
            shift,
            starts,
            entries: entries
                .into_iter()
                .map(|(_, g, id, end)| (g, id, end))
                .collect(),
            literals,
            short,
            short_ids,
        })
    }

    /// A gram's bytes, its first in the highest place (as [`Grams::each`] rolls them in).
    fn pack(gram: &[u8]) -> u32 {
        gram.iter().fold(0u32, |g, &b| (g << 8) | u32::from(b))
    }

    #[inline]
    fn hash(gram: u32, shift: u32) -> usize {
        (gram.wrapping_mul(0x9e37_79b1) >> shift) as usize
    }

    /// How common a gram's bytes are in log values, to break ties: letters, path separators,
    /// dots and spaces are everywhere; digits and other punctuation less so.
    fn commonness(gram: &[u8]) -> u32 {
        gram.iter()
            .map(|b| match b {
                b'a'..=b'z' | b'\\' | b'.' | b' ' | b'/' => 2,
                b'0'..=b'9' | b'-' | b'_' | b':' => 1,
                _ => 0,
            })
            .sum()
    }

    /// Calls `on` with the number of every literal occurring in `haystack` (once per
    /// occurrence).
    #[inline]
    fn each(&self, haystack: &[u8], mut on: impl FnMut(usize)) {
        if let Some(short) = &self.short {
            occurrences(short, haystack, |i| on(self.short_ids[i] as usize));
        }
        if haystack.len() < 4 {
            return;
        }
        let mut gram = haystack[..3]
            .iter()
            .fold(0u32, |g, &b| (g << 8) | u32::from(b.to_ascii_lowercase()));
        for at in 3..haystack.len() {
            gram = (gram << 8) | u32::from(haystack[at].to_ascii_lowercase());
            let h = Grams::hash(gram, self.shift);
            let word = self.bits[h / 64];
            let bit = 1u64 << (h % 64);
            if word & bit != 0 {
                let rank = self.ranks[h / 64] + (word & (bit - 1)).count_ones();
                self.probe(gram, rank as usize, at, haystack, &mut on);
            }
        }
    }

    /// The literals of the bit of rank `rank` whose gram is `gram`, ending at byte `at` of
    /// `haystack`, that sit there.
    #[inline(never)]
    fn probe(
        &self,
        gram: u32,
        rank: usize,
        at: usize,
        haystack: &[u8],
        on: &mut impl FnMut(usize),
    ) {
        let span = self.starts[rank] as usize..self.starts[rank + 1] as usize;
        for &(g, id, end) in &self.entries[span] {
            if g != gram {
                continue;
            }
            let literal = &self.literals[id as usize];
            let Some(start) = (at + 1).checked_sub(end as usize) else {
                continue;
            };
            if haystack
                .get(start..start + literal.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(literal))
            {
                on(id as usize);
            }
        }
    }
}

/// Every pattern occurrence of `automaton` (built for standard, overlapping matches) in
/// `haystack`. No pattern is empty, so the start state is never a match. In the start state
/// the automaton's prefilter (a SIMD search for a few literals, rare bytes for more) skips to
/// the next place a match can start, as `AhoCorasick`'s own searches do.
#[inline]
fn occurrences<A: Automaton>(automaton: &A, haystack: &[u8], mut on: impl FnMut(usize)) {
    let Ok(mut sid) = automaton.start_state(Anchored::No) else {
        return;
    };
    let mut skips = Skips::default();
    let prefilter = automaton.prefilter();
    // Where the prefilter is taken up again after a stretch it did not pay for.
    let mut paused_until = 0;
    let mut at = 0;
    if let Some(pre) = prefilter {
        match pre
            .find_in(haystack, aho_corasick::Span::from(0..haystack.len()))
            .into_option()
        {
            None => return,
            Some(i) => at = i,
        }
    }
    while at < haystack.len() {
        sid = automaton.next_state(Anchored::No, sid, haystack[at]);
        if automaton.is_special(sid) {
            if automaton.is_dead(sid) {
                return;
            }
            if automaton.is_match(sid) {
                for i in 0..automaton.match_len(sid) {
                    on(automaton.match_pattern(sid, i).as_usize());
                }
            } else if let Some(pre) = prefilter.filter(|_| at >= paused_until) {
                // Back in the start state: skip to the next candidate.
                let span = aho_corasick::Span::from(at + 1..haystack.len());
                match pre.find_in(haystack, span).into_option() {
                    None => return,
                    Some(i) => {
                        if skips.record(i - at - 1) {
                            paused_until = i + Skips::PAUSE;
                            skips = Skips::default();
                        }
                        at = i;
                        continue;
                    }
                }
            }
        }
        at += 1;
    }
}

/// How far a haystack's prefilter calls have skipped. In a value the rare bytes fill (hex
/// digits of `Hashes` against its hash literals) each call skips a byte or none and costs more
/// than the automaton's step: 2.0 us against 1.0 us per Sysmon `Hashes` value. After
/// [`Skips::TRIED`] calls that skipped under [`Skips::WORTH`] bytes on average, the next
/// [`Skips::PAUSE`] bytes are stepped through, as `aho-corasick`'s own searches give up an
/// ineffective prefilter; then it is tried again, since a keyword gate's haystack is a whole
/// event's text, whose other values it may skip well.
#[derive(Default)]
struct Skips {
    calls: u32,
    skipped: usize,
}

impl Skips {
    const TRIED: u32 = 8;
    const WORTH: usize = 4;
    const PAUSE: usize = 256;

    /// Records a call that skipped `bytes`; true when the prefilter is not worth its calls.
    #[inline]
    fn record(&mut self, bytes: usize) -> bool {
        self.calls += 1;
        self.skipped += bytes;
        self.calls >= Skips::TRIED && self.skipped < Skips::WORTH * self.calls as usize
    }
}

/// A literal as a gate indexes it: the same key for the same literal in any spelling of case.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    /// A substring, ASCII lower case.
    Contains(String),
    /// A whole value, by the hash of its ASCII lower case ([`folded_hash`]).
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

/// A hash of the ASCII lower case of `text`, eight bytes at a time (the case folded in the
/// word, [`lower_case_word`]): values hashed per event include whole command lines.
pub(crate) fn folded_hash(text: &str) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let bytes = text.as_bytes();
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h ^ lower_case_word(u64::from_le_bytes(word))).wrapping_mul(K);
        h ^= h >> 31;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let word = rest
            .iter()
            .rev()
            .fold(0u64, |w, &b| (w << 8) | u64::from(b.to_ascii_lowercase()));
        h = (h ^ word).wrapping_mul(K);
        h ^= h >> 31;
    }
    h
}

/// Each ASCII capital of eight bytes in lower case, the other bytes as they are.
#[inline]
fn lower_case_word(word: u64) -> u64 {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low7 = word & !HIGH;
    // The high bit of each byte: its low seven bits are at least `A`, above `Z`.
    let from_a = low7.wrapping_add(0x3f3f_3f3f_3f3f_3f3f);
    let past_z = low7.wrapping_add(0x2525_2525_2525_2525);
    let capitals = from_a & !past_z & !word & HIGH;
    word | (capitals >> 2)
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
        value: &str,
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
        if slot.key == key && slot.value == value.as_bytes() {
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
            slot.value.extend_from_slice(value.as_bytes());
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
    /// patterns come first, in order. Each entry is a rule's number times two plus the clause
    /// the literal belongs to (see [`MAX_CLAUSES`]).
    starts: Vec<u32>,
    rules: Vec<u32>,
    /// A literal holds a NUL: values are searched one by one, not in the event's text (see
    /// `EventText` in the engine).
    nul: bool,
}

impl Gate {
    /// The gate of `field` over `literals`, each with the rules that need it (ascending, each
    /// once). `None` when the automaton cannot be built: its rules must then be evaluated on
    /// every event, which is slower, never wrong.
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
        Some(Gate {
            nul,
            field,
            automaton,
            equals,
            numbers,
            starts,
            rules,
        })
    }

    /// Adds to `found` each rule with a literal that `value` (whose [`folded_hash`] is `hash`)
    /// holds and whose bit in `seen` is clear, setting the bit.
    #[inline]
    pub(crate) fn mark(&self, value: &str, hash: u64, seen: &mut [u64], found: &mut Vec<u32>) {
        self.literals_in(value, hash, |id| self.admit(id, seen, found));
    }

    /// Calls `on` with the number of each literal `value` (whose [`folded_hash`] is `hash`)
    /// holds, once per occurrence: what [`Gate::mark`] admits rules for, and what a
    /// [`GateMemo`] keeps.
    #[inline]
    fn literals_in(&self, value: &str, hash: u64, mut on: impl FnMut(usize)) {
        if let Some(substrings) = &self.automaton {
            substrings.each(value.as_bytes(), &mut on);
        }
        if !self.equals.is_empty() {
            Gate::each_keyed(&self.equals, hash, &mut on);
        }
        if !self.numbers.is_empty()
            && let Some(n) = parse_number(value)
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
        matches!(self.automaton, Some(Substrings::Grams(_)))
    }

    /// A literal holds a NUL, the separator of an event's text: a keyword gate searches the
    /// values one by one.
    #[inline]
    pub(crate) fn spans_values(&self) -> bool {
        self.nul
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

    /// Calls `on` with the literal of each entry of `table` keyed `key`.
    #[inline]
    fn each_keyed(table: &[(u64, u32)], key: u64, on: &mut impl FnMut(usize)) {
        let at = table.partition_point(|(k, _)| *k < key);
        for &(_, id) in table[at..].iter().take_while(|(k, _)| *k == key) {
            on(id as usize);
        }
    }

    /// Marks the clauses literal `id` satisfies in `seen` (two bits per rule); a rule goes to
    /// `found` when the first of its clauses is marked.
    #[inline]
    fn admit(&self, id: usize, seen: &mut [u64], found: &mut Vec<u32>) {
        let of = &self.rules[self.starts[id] as usize..self.starts[id + 1] as usize];
        for &tagged in of {
            let (word, bit) = (tagged as usize / 64, 1u64 << (tagged % 64));
            if seen[word] & bit == 0 {
                seen[word] |= bit;
                // The other clause's bit sits beside it, in the same word.
                let partner = 1u64 << ((tagged ^ 1) % 64);
                if seen[word] & partner == 0 {
                    found.push(tagged >> 1);
                }
            }
        }
    }

    /// The rules this gate can admit, each as often as it has literals here.
    pub(crate) fn rules(&self) -> impl Iterator<Item = u32> + '_ {
        self.rules.iter().map(|tagged| tagged >> 1)
    }
}

#[cfg(test)]
mod tests {
    use super::{
        GRAMS_MIN_LITERALS, Literal, Substrings, folded_hash, lower_case_word, necessary,
        regex_literals,
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
        assert_eq!(
            one(r#"(?i)\.exe["']?\s+[^"]{0,64}werfaultsecure\.exe["']?\s+\d{2,10}"#).as_deref(),
            Some("ecure.exe")
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

    /// A Sysmon `Hashes` value is hex digits throughout, the bytes a hash literal's prefilter
    /// looks for: the DFA's scan gives the prefilter up part way and must still find every
    /// literal, before and after that point; the gram index must find them too.
    #[test]
    fn literals_in_a_value_the_prefilter_cannot_skip_are_all_found() {
        let md5 = "md5=0f343b0931126a20f133d67c2b018a3b";
        let imphash = "imphash=f34d5f2d4577ed6d9ceec516c1f5a744";
        let value = format!(
            "SHA1=0A1B2C3D4E5F60718293A4B5C6D7E8F901234567,{},SHA256=\
             9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08,{}",
            md5.to_uppercase(),
            imphash.to_uppercase()
        );
        // 12 patterns: a DFA with a prefilter of hex digits; 650: grams.
        for others in [10, 648] {
            let mut patterns: Vec<String> = (0..others).map(|i| format!("sha1={i:040x}")).collect();
            patterns.push(md5.to_string());
            patterns.push(imphash.to_string());
            let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
            let substrings = Substrings::build(&refs, false).unwrap();
            assert_eq!(
                matches!(substrings, Substrings::Grams(_)),
                others > GRAMS_MIN_LITERALS
            );
            let mut found = Vec::new();
            substrings.each(value.as_bytes(), |id| found.push(id));
            assert_eq!(found, vec![others, others + 1], "{others} others");
        }
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
    }

    /// The gram index finds what a case-folding automaton finds over the same literals: each
    /// at every place (a value's first and last bytes, overlapping others), in any case, short
    /// literals and a two-byte Cyrillic letter among them.
    #[test]
    fn grams_find_every_literal_an_automaton_finds() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        let alphabet: Vec<char> = "abcdeABCDE\\.- 019\u{436}\u{416}".chars().collect();
        let word = |len: usize, next: &mut dyn FnMut(usize) -> usize| -> String {
            (0..len).map(|_| alphabet[next(alphabet.len())]).collect()
        };
        let mut patterns: Vec<String> = (0..300)
            .map(|i| word(3 + i % 7, &mut next).to_lowercase())
            .filter(|w| w.len() >= 3)
            .collect();
        patterns.push("\u{436}".to_string());
        patterns.sort();
        patterns.dedup();
        let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
        let grams = Substrings::build(&refs, false).unwrap();
        assert!(matches!(grams, Substrings::Grams(_)));
        let automaton = aho_corasick::dfa::Builder::new()
            .ascii_case_insensitive(true)
            .build(&refs)
            .unwrap();
        let mut hits = 0;
        for _ in 0..3000 {
            let len = next(60);
            let value = word(len, &mut next);
            let (mut want, mut got) = (Vec::new(), Vec::new());
            super::occurrences(&automaton, value.as_bytes(), |id| want.push(id));
            grams.each(value.as_bytes(), |id| got.push(id));
            want.sort_unstable();
            want.dedup();
            got.sort_unstable();
            got.dedup();
            assert_eq!(got, want, "{value:?}");
            hits += want.len();
        }
        assert!(hits > 1000, "the values hold literals: {hits}");
    }

    #[test]
    fn k_and_s_end_a_run_as_unicode_folding_matches_them_with_other_letters() {
        let re = "(?i)takeown";
        assert_eq!(one(re).as_deref(), Some("eown"));
        let kelvin = "ta\u{212a}eown /f x";
        assert!(regex::Regex::new(re).unwrap().is_match(kelvin));
        assert!(kelvin.contains("eown"));
        assert_eq!(one("(?i)mimikatz").as_deref(), Some("mimi"));
    }
}
