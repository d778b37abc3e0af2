//! Several patterns of one item tested as one matcher: an automaton over its substrings, an
//! alternation of its regexes. A value is then read once rather than once per pattern.
//!
//! The matcher is built at the item's first test. Past the rule index most items of a large
//! set are never tested (a Sysmon process event reaches a dozen of the whole SigmaHQ set's
//! 1,300 process rules), and building every item's matcher took most of the set's per-rule
//! compile time (150 of 180 ms). Should a matcher fail to build, its patterns are tested one
//! by one: slower, the same result.

use super::gate::folded_hash_bytes;
use crate::dual_regex::DualRegex;
use crate::folded::eq_lower;
use crate::pattern::{Pattern, Place};
use crate::substrings::Substrings;
use std::sync::OnceLock;

/// Compiled size allowed an alternation: past it the regexes are tested one by one.
const ALTERNATION_SIZE_LIMIT: usize = 1 << 24;

/// Patterns of one item matched together, by a `T` built at the first test.
#[derive(Clone, Debug)]
pub(crate) struct Joint<T> {
    patterns: Vec<Pattern>,
    /// Boxed: an automaton is hundreds of bytes (its byte classes alone 256), which inline
    /// would spread every item of a rule, built or not, over several cache lines.
    built: OnceLock<Option<Box<T>>>,
}

impl<T> Joint<T> {
    pub(crate) fn new(patterns: Vec<Pattern>) -> Joint<T> {
        Joint {
            patterns,
            built: OnceLock::new(),
        }
    }

    /// Whether any pattern matches `value`, by the matcher `build` makes at the first call.
    #[inline]
    fn any(
        &self,
        value: &str,
        build: impl FnOnce(&[Pattern]) -> Option<T>,
        test: impl FnOnce(&T, &str) -> bool,
    ) -> bool {
        match self
            .built
            .get_or_init(|| build(&self.patterns).map(Box::new))
        {
            Some(matcher) => test(matcher, value),
            None => self.patterns.iter().any(|p| p.test(Some(value), |_| None)),
        }
    }
}

impl Joint<Substrings> {
    /// Whether `value` contains any of the item's substrings (ASCII, compared with ASCII case
    /// folding: the rule's own comparison).
    #[inline]
    pub(crate) fn matches(&self, value: &str) -> bool {
        self.any(
            value,
            |patterns| {
                let needles: Vec<&str> = patterns
                    .iter()
                    .filter_map(|p| match p {
                        Pattern::Text { text, .. } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                Substrings::build(&needles, false)
            },
            |automaton, value| automaton.any(value.as_bytes()),
        )
    }
}

impl Joint<DualRegex> {
    /// Whether `value` matches any of the item's regexes. Each carries its flags inline (see
    /// `pattern`), so the alternation means what the separate regexes meant.
    #[inline]
    pub(crate) fn matches(&self, value: &str) -> bool {
        self.any(
            value,
            |patterns| {
                let branches: Vec<String> = patterns
                    .iter()
                    .filter_map(|p| match p {
                        Pattern::Regex(re) => Some(format!("(?:{})", re.as_str())),
                        _ => None,
                    })
                    .collect();
                DualRegex::build(&branches.join("|"), ALTERNATION_SIZE_LIMIT).ok()
            },
            |alternation, value| alternation.is_match(value),
        )
    }
}

/// Whole values, prefixes or suffixes of an item (one place for all) in one table: a value
/// is hashed once per distinct length of the texts (its first or last bytes of that length)
/// and looked up, rather than compared with each text. SigmaHQ's "Potential System DLL
/// Sideloading From Non System Locations" lists 400 DLL names an image must end with: compared
/// one by one they took 4 us of each image-load record the rule index let through.
#[derive(Clone, Debug)]
pub(crate) struct Affixes {
    place: Place,
    /// The texts' distinct lengths, ascending.
    lengths: Vec<usize>,
    /// (length, folded hash, text number), sorted.
    table: Vec<(usize, u64, u32)>,
    /// In ASCII lower case, as the patterns hold them.
    texts: Vec<Box<[u8]>>,
}

impl Affixes {
    /// The index of the item's texts that sit at `place` (not [`Place::Contains`]).
    fn build(patterns: &[Pattern]) -> Option<Affixes> {
        let mut place = None;
        let mut texts: Vec<Box<[u8]>> = Vec::with_capacity(patterns.len());
        for p in patterns {
            match p {
                Pattern::Text {
                    text,
                    place: at,
                    cased: false,
                    number: None,
                } if *at != Place::Contains && place.is_none_or(|place| place == *at) => {
                    place = Some(*at);
                    texts.push(text.as_bytes().into());
                }
                _ => return None,
            }
        }
        let mut table: Vec<(usize, u64, u32)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (t.len(), folded_hash_bytes(t), i as u32))
            .collect();
        table.sort_unstable();
        let mut lengths: Vec<usize> = table.iter().map(|e| e.0).collect();
        lengths.dedup();
        Some(Affixes {
            place: place?,
            lengths,
            table,
            texts,
        })
    }

    /// Whether a text sits in `value` at the place.
    #[inline]
    fn matches(&self, value: &[u8]) -> bool {
        for &len in &self.lengths {
            let part = match self.place {
                _ if len > value.len() => return false,
                Place::Exact if len != value.len() => continue,
                Place::Prefix => &value[..len],
                Place::Suffix => &value[value.len() - len..],
                Place::Exact | Place::Contains => value,
            };
            let hash = folded_hash_bytes(part);
            let at = self.table.partition_point(|e| (e.0, e.1) < (len, hash));
            let same = self.table[at..]
                .iter()
                .take_while(|e| e.0 == len && e.1 == hash)
                .any(|e| eq_lower(part, &self.texts[e.2 as usize]));
            if same {
                return true;
            }
        }
        false
    }
}

impl Joint<Affixes> {
    /// Whether `value` is, starts or ends with one of the item's texts (ASCII, compared with
    /// ASCII case folding: the rule's own comparison).
    #[inline]
    pub(crate) fn matches(&self, value: &str) -> bool {
        self.any(value, Affixes::build, |affixes, value| {
            affixes.matches(value.as_bytes())
        })
    }
}

/// Whether an item's pattern can join an [`Affixes`] index at `place`: ASCII text, compared
/// folded, with no numeric reading (`42` against `042`).
pub(crate) fn is_affix(pattern: &Pattern, place: Place) -> bool {
    matches!(pattern, Pattern::Text { place: at, cased: false, number: None, .. } if *at == place)
}

#[cfg(test)]
mod tests {
    use super::Affixes;
    use super::Joint;
    use crate::dual_regex::DualRegex;
    use crate::error::Pos;
    use crate::pattern::{Pattern, Place, compile_regex, compile_text};
    use crate::substrings::Substrings;
    use crate::test_support::Words;

    const P: Pos = Pos { line: 1, column: 1 };

    fn text(value: &str) -> Pattern {
        compile_text(value, Place::Contains, false, false, P).unwrap()
    }

    #[test]
    fn substrings_are_matched_by_one_automaton_built_at_the_first_test() {
        let joint: Joint<Substrings> = Joint::new(vec![text("mimikatz"), text("sekurlsa::")]);
        assert!(joint.built.get().is_none());
        assert!(joint.matches("x SEKURLSA::logonpasswords"));
        assert!(matches!(joint.built.get(), Some(Some(_))));
        assert!(!joint.matches("notepad.exe"));
    }

    #[test]
    fn regexes_keep_their_own_flags_in_the_alternation() {
        let cased = compile_regex("^Invoke-", false, false, false, P).unwrap();
        let folded = compile_regex("\\.ps1$", true, false, false, P).unwrap();
        let joint: Joint<DualRegex> = Joint::new(vec![cased, folded]);
        assert!(joint.matches("Invoke-Mimikatz"));
        assert!(!joint.matches("invoke-mimikatz"));
        assert!(joint.matches("C:\\x\\RUN.PS1"));
    }

    #[test]
    fn patterns_are_tested_one_by_one_when_the_alternation_is_too_large() {
        // Each regex compiles under its own limit; a thousand of them together do not.
        let big = compile_regex("\\w{60}\\d{60}", false, false, false, P).unwrap();
        let mut patterns = vec![big; 1000];
        patterns.push(compile_regex("needle", false, false, false, P).unwrap());
        let joint: Joint<DualRegex> = Joint::new(patterns);
        assert!(joint.matches("a needle"));
        assert!(matches!(joint.built.get(), Some(None)));
        assert!(!joint.matches("hay"));
    }

    /// The affix index answers as the patterns tested one by one do, for each place, whatever
    /// the case, for values shorter than, as long as and longer than the texts.
    #[test]
    fn an_affix_index_agrees_with_its_patterns_one_by_one() {
        let mut words = Words::new(0x2545_f491_4f6c_dd1d, "aAbB\\.dlL");
        for place in [Place::Exact, Place::Prefix, Place::Suffix] {
            let texts: Vec<String> = (0..40).map(|i| words.word(1 + i % 9)).collect();
            let patterns: Vec<Pattern> = texts
                .iter()
                .map(|t| compile_text(t, place, false, false, P).unwrap())
                .collect();
            let affixes = Affixes::build(&patterns).unwrap();
            let mut hits = 0;
            for _ in 0..3000 {
                let len = words.below(14);
                let value = words.word(len);
                let want = patterns.iter().any(|p| p.test(Some(&value), |_| None));
                assert_eq!(
                    affixes.matches(value.as_bytes()),
                    want,
                    "{place:?} {value:?}"
                );
                hits += usize::from(want);
            }
            assert!(hits > 100, "{place:?}: the values hold texts: {hits}");
        }
        // Contains, case-sensitive or numeric texts are not joined.
        let contains = text("abc");
        assert!(Affixes::build(&[contains]).is_none());
        let cased = compile_text("abc", Place::Suffix, true, false, P).unwrap();
        assert!(Affixes::build(&[cased]).is_none());
        let number = compile_text("42", Place::Exact, false, true, P).unwrap();
        assert!(Affixes::build(&[number]).is_none());
    }
}
