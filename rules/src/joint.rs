//! Several patterns of one item tested as one matcher: an automaton over its substrings, an
//! alternation of its regexes. A value is then read once rather than once per pattern.
//!
//! The matcher is built at the item's first test. Past the rule index most items of a large
//! set are never tested (a Sysmon process event reaches a dozen of the whole SigmaHQ set's
//! 1,300 process rules), and building every item's matcher took most of the set's per-rule
//! compile time (150 of 180 ms). Should a matcher fail to build, its patterns are tested one
//! by one: slower, the same result.

use crate::dual_regex::DualRegex;
use crate::pattern::Pattern;
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

#[cfg(test)]
mod tests {
    use super::Joint;
    use crate::dual_regex::DualRegex;
    use crate::error::Pos;
    use crate::pattern::{Pattern, Place, compile_regex, compile_text};
    use crate::substrings::Substrings;

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
}
