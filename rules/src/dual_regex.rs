//! A regular expression compiled twice: as written (Unicode), and, when its text is ASCII,
//! without Unicode for values that are ASCII, which nearly all Windows and syslog values are.
//!
//! Unicode classes make large automata: `\w{1,64}` is 64 copies of every word character's
//! UTF-8 encoding, and `regex`'s lazy DFA spends its cache on them. SigmaHQ's "Uncommon
//! Svchost Command Line Parameter" (`-k\s\w{1,64}(?:\s?(?:-p|-s))?`) took 1.6-2.2 us per
//! command line so, 40-50 ns without Unicode.
//!
//! On an ASCII value the two mean the same: `\w`, `\d`, `\s`, `\b` and `.` agree on ASCII
//! characters, and case folding maps an ASCII letter to ASCII letters only, except for two
//! characters outside ASCII that fold *to* ASCII letters (the Kelvin sign to `k`, the long s
//! to `s`). An expression holding either gets no ASCII version: one with non-ASCII text, or an
//! escape that names a character by its number (`\x{212A}`, `\u017F`; the ASCII build would
//! take it as UTF-8 bytes, which case folding leaves alone). `tests::agree_on_ascii_values`
//! checks the claim on the constructs SigmaHQ uses.

use crate::factors;
use crate::folded::AnyFolded;
use regex::{Regex, RegexBuilder};

/// See the module's documentation.
#[derive(Clone, Debug)]
pub(crate) struct DualRegex {
    unicode: Regex,
    ascii: Option<regex::bytes::Regex>,
    /// Short literals one of which every match holds ([`factors::prefilter`]): a value
    /// without any is refused before either automaton runs.
    needs: Option<AnyFolded>,
}

impl DualRegex {
    /// `source` compiled under `size_limit`; the error is the Unicode build's (the ASCII one
    /// is optional).
    pub(crate) fn build(source: &str, size_limit: usize) -> Result<DualRegex, regex::Error> {
        let unicode = RegexBuilder::new(source).size_limit(size_limit).build()?;
        let ascii = names_ascii_only(source)
            .then(|| {
                regex::bytes::RegexBuilder::new(source)
                    .unicode(false)
                    .size_limit(size_limit)
                    .build()
                    .ok()
            })
            .flatten();
        let needs = factors::prefilter(source).map(|set| AnyFolded::new(&set));
        Ok(DualRegex {
            unicode,
            ascii,
            needs,
        })
    }

    /// Whether `value` matches: by the ASCII version when the value is ASCII and there is one.
    #[inline]
    pub(crate) fn is_match(&self, value: &str) -> bool {
        if let Some(needs) = &self.needs
            && !needs.any_in(value)
        {
            return false;
        }
        match &self.ascii {
            Some(ascii) if value.is_ascii() => ascii.is_match(value.as_bytes()),
            _ => self.unicode.is_match(value),
        }
    }

    /// Whether an ASCII version was built.
    #[cfg(test)]
    pub(crate) fn has_ascii(&self) -> bool {
        self.ascii.is_some()
    }
}

/// Whether every character `source` holds or names is ASCII: its text is, and no escape
/// names a character by number (a backslash escapes the character after it, in classes too).
fn names_ascii_only(source: &str) -> bool {
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        if !c.is_ascii() {
            return false;
        }
        if c == '\\' {
            match chars.next() {
                Some('x' | 'u' | 'U') => return false,
                Some(escaped) if !escaped.is_ascii() => return false,
                _ => {}
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::DualRegex;

    /// Expressions of the shapes SigmaHQ's `re` values and wildcard translations take, with
    /// every class whose Unicode and ASCII meanings differ.
    const EXPRESSIONS: &[&str] = &[
        r"-k\s\w{1,64}(?:\s?(?:-p|-s))?",
        r"(?i)-k\s\w{1,64}",
        r".{20,}",
        r"(.){8,}",
        r"[^/]{10,}$",
        r"\bcmd\b",
        r"(?i)\bSK\b",
        r"(?i)^.*\\kernel.*\.sys$",
        r"(?i)[a-z]{5}",
        r"\W\D\S",
        r"[[:alpha:]]+\d",
        r"(?is)a.b",
        r"(?i)K",
        r"(?i)s",
        r"^\s*$",
        r"[[:cntrl:]]",
        r"(?i)[^a-z0-9 ]",
    ];

    /// Every printable ASCII character, some control characters and the words around them.
    fn values() -> Vec<String> {
        let mut out: Vec<String> = (0u8..128).map(|b| (b as char).to_string()).collect();
        out.extend(
            [
                "",
                "svchost.exe -k netsvcs -p -s Schedule",
                "svchost.exe -k  netsvcs",
                "C:\\Windows\\System32\\drivers\\KERNEL32.SYS",
                "a\nb",
                "AbCdE fGhIj",
                "sk SK Sk",
                "x/yyyyyyyyyyyyyyyyyyyyyyyy",
                "   \t ",
                "line one\nline two is rather long indeed",
                "cmd.exe /c whoami",
                "\u{1}\u{1f}\u{7f}",
            ]
            .map(String::from),
        );
        out
    }

    #[test]
    fn agree_on_ascii_values() {
        for source in EXPRESSIONS {
            let dual = DualRegex::build(source, 1 << 22).unwrap();
            assert!(dual.has_ascii(), "{source}: has an ASCII version");
            let unicode = regex::Regex::new(source).unwrap();
            for value in values() {
                assert_eq!(
                    dual.is_match(&value),
                    unicode.is_match(&value),
                    "{source} on {value:?}"
                );
            }
        }
    }

    #[test]
    fn characters_that_fold_to_ascii_keep_the_unicode_meaning() {
        // The Kelvin sign folds to `k`, the long s to `s`: no ASCII version for such text.
        for source in ["(?i)\u{212A}ernel", "(?i)\u{17F}ystem"] {
            let dual = DualRegex::build(source, 1 << 22).unwrap();
            assert!(!dual.has_ascii(), "{source}");
            assert!(dual.is_match("KERNEL SYSTEM"), "{source}");
        }
        // Named by number, likewise.
        for source in [
            r"(?i)\x{212A}ernel",
            r"(?i)[\u017F]ystem",
            r"(?i)\U0000212Aernel",
        ] {
            let dual = DualRegex::build(source, 1 << 22).unwrap();
            assert!(!dual.has_ascii(), "{source}");
            assert!(dual.is_match("KERNEL SYSTEM"), "{source}");
        }
        // An escaped backslash before an `x` is a path, not a number.
        let dual = DualRegex::build(r"(?i)c:\\xampp", 1 << 22).unwrap();
        assert!(dual.has_ascii());
        assert!(dual.is_match(r"C:\XAMPP\htdocs"));
    }

    /// The prefilter only refuses values the expression does not match: each sample match
    /// spelled in other cases, with the Kelvin sign and the long s, inside other text.
    #[test]
    fn the_prefilter_refuses_no_match() {
        let samples = [
            ("(?i)takeown", "takeown"),
            ("(?i)system32", "system32"),
            (
                r#"\\[a-zA-Z0-9]{1,32}\.[a-zA-Z0-9]{1,6}\.[ "']{1}"#,
                r"\x.dat. ",
            ),
            (r"(?i)net\s+user\s+", "net  user "),
            (r"(?i)-k\s\w{1,64}", "-k netsvcs"),
        ];
        let mut words = crate::test_support::Words::new(0x5851_f42d_4c95_7f2d, "ab. \"'");
        let (mut matched, mut refused) = (0, 0);
        for (source, sample) in samples {
            let dual = DualRegex::build(source, 1 << 22).unwrap();
            assert!(dual.needs.is_some(), "{source} has a prefilter");
            let unicode = regex::Regex::new(source).unwrap();
            for _ in 0..2_000 {
                let spelled: String = sample
                    .chars()
                    .map(|c| match (c, words.below(4)) {
                        ('k', 0) => '\u{212A}',
                        ('s', 0) => '\u{17F}',
                        (c, 1) => c.to_ascii_uppercase(),
                        (_, 2) if words.below(8) == 0 => '.',
                        (c, _) => c,
                    })
                    .collect();
                let (before, after) = (words.below(6), words.below(6));
                let value = format!("{}{spelled}{}", words.word(before), words.word(after));
                let want = unicode.is_match(&value);
                assert_eq!(dual.is_match(&value), want, "{source} on {value:?}");
                matched += usize::from(want);
                refused += usize::from(!want);
            }
        }
        assert!(
            matched > 5_000 && refused > 100,
            "{matched} matched, {refused} not"
        );
    }

    #[test]
    fn values_outside_ascii_use_the_unicode_version() {
        let dual = DualRegex::build(r"^\w+$", 1 << 22).unwrap();
        assert!(dual.has_ascii());
        assert!(dual.is_match("Überwachung"));
        assert!(!dual.is_match("Über wachung"));
    }
}
