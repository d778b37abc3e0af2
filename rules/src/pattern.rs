//! Value matching: one detection value with its modifiers, compiled into the cheapest test that
//! gives Sigma's meaning.
//!
//! Sigma compares strings case-insensitively unless `cased` is given; `*` and `?` are wildcards and
//! `\` escapes them. A value without wildcards compiles to a plain comparison (ASCII case folding
//! with no allocation; non-ASCII text goes through a case-insensitive regex instead); a value with
//! wildcards compiles to an anchored regex. Modifiers that transform the value (`base64`,
//! `base64offset`, `utf16*`/`wide`, `windash`) run first, left to right, and may turn one value into
//! several alternatives, any of which may match.

use crate::dual_regex::DualRegex;
use crate::error::Pos;
use crate::error::{ErrorKind, RuleError};
use crate::folded::{contains_folded, eq_lower};
use regex::RegexBuilder;
use std::sync::{Arc, OnceLock};

/// Where in the field a string must sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The whole value.
    Exact,
    /// At the start.
    Prefix,
    /// At the end.
    Suffix,
    /// Anywhere.
    Contains,
}

/// A numeric comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumOp {
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Gte,
    /// Less than.
    Lt,
    /// Less than or equal.
    Lte,
}

/// One compiled value test.
#[derive(Clone, Debug)]
pub enum Pattern {
    /// A literal, ASCII, compared with ASCII case folding (or exactly, when `cased`).
    Text {
        /// The literal; in ASCII lower case unless `cased`, so that a comparison lower-cases
        /// only the value, a word at a time ([`eq_lower`]).
        text: String,
        /// Where it must sit.
        place: Place,
        /// Case-sensitive.
        cased: bool,
        /// The literal as a number, for lenient comparison of `42` with `"42"` or `"042"`.
        number: Option<f64>,
    },
    /// A regular expression (wildcards, `re`, non-ASCII case folding).
    Regex(LazyRegex),
    /// A numeric comparison with a constant.
    Number(NumOp, f64),
    /// An address inside a network.
    Cidr {
        /// Network bits, IPv4 mapped into IPv6.
        net: u128,
        /// Prefix length in the 128-bit space.
        bits: u32,
    },
    /// The field is absent or empty (`null`).
    Null,
    /// The field is present (`exists: true`) or absent (`exists: false`).
    Exists(bool),
    /// `neq`: the field is present and none of these match.
    Not(Vec<Pattern>),
    /// The field equals (or contains, starts or ends with) another field's value.
    FieldRef {
        /// The other field, as written in the rule.
        field: String,
        /// Where the other value must sit.
        place: Place,
        /// Case-sensitive.
        cased: bool,
    },
}

/// A regular expression, compiled when it is first tested where that cannot fail.
///
/// The whole SigmaHQ set holds thousands of wildcard values; past the rule index most are never
/// tested, and compiling them all took a quarter of the set's load. What is deferred cannot fail
/// to compile: Sigma wildcards and non-ASCII text are escaped literals, `.*` and `.`, and only
/// values up to [`LazyRegex::DEFERRED_MAX_BYTES`] are deferred (a test compiles the costliest
/// such value under the size limit); a longer one is compiled when the rule is parsed. A `re`
/// value is compiled at parse and dropped, so that its error names the rule's line, and compiled
/// again at its first test. Clones share the compiled expression.
#[derive(Clone, Debug)]
pub struct LazyRegex {
    source: Arc<str>,
    size_limit: usize,
    compiled: Arc<OnceLock<Option<DualRegex>>>,
    /// Written by the rule (a `re` value), not made from a wildcard or a non-ASCII literal.
    written: bool,
}

impl LazyRegex {
    /// Longest wildcard expression compiled at its first test: half the length at which the
    /// costliest one (1,024 `.`, any character) still compiles under the size limit; 1,536
    /// would not.
    pub const DEFERRED_MAX_BYTES: usize = 512;

    /// `source` compiled now.
    fn compiled(source: &str, size_limit: usize) -> Result<LazyRegex, regex::Error> {
        let re = DualRegex::build(source, size_limit)?;
        Ok(LazyRegex {
            source: source.into(),
            size_limit,
            compiled: Arc::new(OnceLock::from(Some(re))),
            written: false,
        })
    }

    /// `source`, a rule's own expression, checked now and compiled again at its first test.
    /// The check is `regex`'s own build, dropped at once: a cheaper check (the Thompson NFA
    /// alone, forward and reverse) accepted expressions `regex` then refused (`.{4300}` under
    /// the 4 MB limit), which would have matched nothing without a word. Dropping it keeps the
    /// parsed rules' memory for the expressions no event reaches.
    fn checked(source: &str, size_limit: usize) -> Result<LazyRegex, regex::Error> {
        drop(RegexBuilder::new(source).size_limit(size_limit).build()?);
        Ok(LazyRegex {
            source: source.into(),
            size_limit,
            compiled: Arc::new(OnceLock::new()),
            written: true,
        })
    }

    /// `source`, a Sigma wildcard's translation, compiled at its first test when it is short
    /// enough that compiling cannot fail, now otherwise.
    fn wildcard(source: &str, size_limit: usize) -> Result<LazyRegex, regex::Error> {
        if source.len() > LazyRegex::DEFERRED_MAX_BYTES {
            return LazyRegex::compiled(source, size_limit);
        }
        Ok(LazyRegex {
            source: source.into(),
            size_limit,
            compiled: Arc::new(OnceLock::new()),
            written: false,
        })
    }

    /// Whether the rule wrote it (a `re` value) rather than a wildcard or a non-ASCII literal
    /// making it: what [`crate::Rule::regex_values`] counts.
    pub fn is_written(&self) -> bool {
        self.written
    }

    /// The expression's text.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `value` matches. Compiles the expression at the first call.
    #[inline]
    pub fn is_match(&self, value: &str) -> bool {
        self.regex().is_some_and(|re| re.is_match(value))
    }

    /// The compiled expression; `None` only if a deferred one failed to compile, which the
    /// size bound rules out.
    fn regex(&self) -> Option<&DualRegex> {
        self.compiled
            .get_or_init(|| DualRegex::build(&self.source, self.size_limit).ok())
            .as_ref()
    }
}

impl Pattern {
    /// Tests one field value (`None`: the field is absent). `other` resolves a field reference.
    #[inline]
    pub fn test<'a>(
        &self,
        value: Option<&'a str>,
        other: impl Fn(&str) -> Option<&'a str>,
    ) -> bool {
        match self {
            Pattern::Null => value.is_none_or(str::is_empty),
            Pattern::Exists(want) => value.is_some() == *want,
            _ => match value {
                None => false,
                Some(v) => self.test_value(v, &other),
            },
        }
    }

    fn test_value<'a>(&self, v: &'a str, other: &dyn Fn(&str) -> Option<&'a str>) -> bool {
        match self {
            Pattern::Text {
                text,
                place,
                cased,
                number,
            } => {
                let placed = if *cased {
                    place_match(v, text, *place, true)
                } else {
                    lower_place_match(v, text, *place)
                };
                placed
                    || (*place == Place::Exact
                        && number.is_some_and(|n| parse_number(v) == Some(n)))
            }
            Pattern::Regex(re) => re.is_match(v),
            Pattern::Not(ps) => !ps.iter().any(|p| p.test_value(v, other)),
            Pattern::Number(op, n) => parse_number(v).is_some_and(|x| match op {
                NumOp::Gt => x > *n,
                NumOp::Gte => x >= *n,
                NumOp::Lt => x < *n,
                NumOp::Lte => x <= *n,
            }),
            Pattern::Cidr { net, bits } => parse_ip(v).is_some_and(|a| prefix_eq(a, *net, *bits)),
            Pattern::FieldRef {
                field,
                place,
                cased,
            } => other(field).is_some_and(|o| {
                // ASCII folding needs no allocation; other text is folded per comparison, which
                // only `fieldref` on non-ASCII values pays.
                if *cased || o.is_ascii() {
                    place_match(v, o, *place, *cased)
                } else {
                    place_match(&v.to_lowercase(), &o.to_lowercase(), *place, true)
                }
            }),
            Pattern::Null | Pattern::Exists(_) => unreachable!("handled by test"),
        }
    }
}

#[inline]
fn place_match(v: &str, text: &str, place: Place, cased: bool) -> bool {
    let (vb, tb) = (v.as_bytes(), text.as_bytes());
    if cased {
        return match place {
            Place::Exact => vb == tb,
            Place::Prefix => vb.starts_with(tb),
            Place::Suffix => vb.ends_with(tb),
            Place::Contains => v.contains(text),
        };
    }
    match place {
        Place::Exact => vb.eq_ignore_ascii_case(tb),
        Place::Prefix => vb.len() >= tb.len() && vb[..tb.len()].eq_ignore_ascii_case(tb),
        Place::Suffix => vb.len() >= tb.len() && vb[vb.len() - tb.len()..].eq_ignore_ascii_case(tb),
        Place::Contains => contains_folded(v, text),
    }
}

/// [`place_match`] without case of a `text` in ASCII lower case: a value's bytes are
/// lower-cased a word at a time and the text's not at all.
#[inline]
fn lower_place_match(v: &str, text: &str, place: Place) -> bool {
    let (vb, tb) = (v.as_bytes(), text.as_bytes());
    match place {
        Place::Exact => eq_lower(vb, tb),
        Place::Prefix => vb.get(..tb.len()).is_some_and(|head| eq_lower(head, tb)),
        Place::Suffix => vb.len() >= tb.len() && eq_lower(&vb[vb.len() - tb.len()..], tb),
        Place::Contains => contains_folded(v, text),
    }
}

/// A number in decimal, or hexadecimal with `0x`.
pub fn parse_number(text: &str) -> Option<f64> {
    let text = text.trim();
    // Most numbers in records are short unsigned integers (event ids, logon types, process
    // ids), which a gate over numbers reads in every record: summed as an integer rather than
    // through the float parser (9% of matching a Security record, callgrind). Fifteen digits
    // stay below 2^53, where the integer is the float exactly.
    if (1..=15).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit()) {
        let n = text
            .bytes()
            .fold(0u64, |n, digit| n * 10 + u64::from(digit - b'0'));
        return Some(n as f64);
    }
    if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok().map(|n| n as f64);
    }
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
    {
        return None;
    }
    text.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// An address as 128 bits, IPv4 mapped into IPv6.
pub fn parse_ip(text: &str) -> Option<u128> {
    match text.trim().parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(a) => Some(u128::from(a.to_ipv6_mapped())),
        std::net::IpAddr::V6(a) => Some(u128::from(a)),
    }
}

#[inline]
fn prefix_eq(a: u128, net: u128, bits: u32) -> bool {
    if bits == 0 {
        return true;
    }
    let mask = u128::MAX << (128 - bits);
    (a & mask) == (net & mask)
}

/// Parses a CIDR (`10.0.0.0/8`, `2001:db8::/32`, or a bare address).
pub fn parse_cidr(text: &str) -> Option<(u128, u32)> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u32>().ok()?)),
        None => (text, None),
    };
    let ip: std::net::IpAddr = addr.trim().parse().ok()?;
    match ip {
        std::net::IpAddr::V4(a) => {
            let len = len.unwrap_or(32);
            (len <= 32).then(|| (u128::from(a.to_ipv6_mapped()), 96 + len))
        }
        std::net::IpAddr::V6(a) => {
            let len = len.unwrap_or(128);
            (len <= 128).then_some((u128::from(a), len))
        }
    }
}

/// A piece of a Sigma string value.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Lit(char),
    Star,
    Question,
}

/// Splits a Sigma string into literals and wildcards. `\*`, `\?` and `\\` escape; any other
/// backslash is literal (Sigma's rule, so Windows paths need no doubling).
fn pieces(s: &str) -> Vec<Piece> {
    let mut out = Vec::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.peek() {
                Some('*') | Some('?') | Some('\\') => {
                    out.push(Piece::Lit(chars.next().unwrap_or('\\')));
                }
                _ => out.push(Piece::Lit('\\')),
            },
            '*' => out.push(Piece::Star),
            '?' => out.push(Piece::Question),
            c => out.push(Piece::Lit(c)),
        }
    }
    out
}

/// Compiled size allowed a wildcard's expression (a `re` value gets four times as much).
const WILDCARD_SIZE_LIMIT: usize = 1 << 20;

/// Compiles a string value (after transformations) for `place`.
pub fn compile_text(
    value: &str,
    place: Place,
    cased: bool,
    plain_number: bool,
    pos: Pos,
) -> Result<Pattern, RuleError> {
    let ps = pieces(value);
    let wild = ps.iter().any(|p| !matches!(p, Piece::Lit(_)));
    let literal: String = ps
        .iter()
        .filter_map(|p| match p {
            Piece::Lit(c) => Some(*c),
            _ => None,
        })
        .collect();
    if !wild && (cased || literal.is_ascii()) {
        let number = if plain_number {
            parse_number(&literal)
        } else {
            None
        };
        return Ok(Pattern::Text {
            text: if cased {
                literal
            } else {
                literal.to_ascii_lowercase()
            },
            place,
            cased,
            number,
        });
    }
    // Flags are written into the expression rather than set on the builder, so that the text
    // of the compiled regex says everything about it: the engine joins the regexes of one item
    // into a single alternation.
    let mut re = String::with_capacity(value.len() * 2 + 16);
    re.push_str(if cased { "(?s)" } else { "(?is)" });
    if matches!(place, Place::Exact | Place::Prefix) {
        re.push('^');
    }
    for p in &ps {
        match p {
            Piece::Lit(c) => re.push_str(&regex::escape(c.encode_utf8(&mut [0u8; 4]))),
            Piece::Star => re.push_str(".*"),
            Piece::Question => re.push('.'),
        }
    }
    if matches!(place, Place::Exact | Place::Suffix) {
        re.push('$');
    }
    let re = LazyRegex::wildcard(&re, WILDCARD_SIZE_LIMIT)
        .map_err(|e| RuleError::at(pos, ErrorKind::Regex, format!("value `{value}`: {e}")))?;
    Ok(Pattern::Regex(re))
}

/// Compiles a `re` value with its flags (`i`, `m`, `s`).
pub fn compile_regex(
    value: &str,
    insensitive: bool,
    multiline: bool,
    dotall: bool,
    pos: Pos,
) -> Result<Pattern, RuleError> {
    let mut flags = String::from("(?");
    for (on, f) in [(insensitive, 'i'), (multiline, 'm'), (dotall, 's')] {
        if on {
            flags.push(f);
        }
    }
    let text = if flags.len() > 2 {
        // A group, so that the rule's own inline flags and alternations keep their meaning.
        format!("{flags}:{value})")
    } else {
        value.to_string()
    };
    LazyRegex::checked(&text, 1 << 22)
        .map(Pattern::Regex)
        .map_err(|e| {
            RuleError::at(
                pos,
                ErrorKind::Regex,
                format!("invalid regular expression: {}", first_line(&e.to_string())),
            )
        })
}

fn first_line(s: &str) -> String {
    s.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .to_string()
}

/// Standard base64 of `bytes`.
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// The three base64 renderings of `bytes` at offsets 0, 1 and 2 within an encoded stream,
/// trimmed to the characters that do not depend on the unknown neighbours (Sigma's
/// `base64offset`).
pub fn base64_offsets(bytes: &[u8]) -> Vec<String> {
    const START: [usize; 3] = [0, 2, 3];
    const END_TRIM: [usize; 3] = [0, 3, 2];
    (0..3)
        .map(|i| {
            let mut padded = vec![0u8; i];
            padded.extend_from_slice(bytes);
            let enc = base64(&padded);
            // Characters that mix in the padding or a neighbour's bits are dropped at both ends
            // (the end count includes any `=` padding).
            let end_trim = END_TRIM[(bytes.len() + i) % 3];
            let start = START[i];
            let end = enc.len().saturating_sub(end_trim);
            enc.get(start..end.max(start)).unwrap_or("").to_string()
        })
        .collect()
}

/// `text` in UTF-16, little or big endian.
pub fn utf16(text: &str, little: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 2);
    for u in text.encode_utf16() {
        out.extend_from_slice(&if little {
            u.to_le_bytes()
        } else {
            u.to_be_bytes()
        });
    }
    out
}

/// Sigma's `windash`: every `-` or `/` that starts a command-line option may be written with any
/// of the dashes Windows tools accept.
pub fn windash(text: &str) -> Vec<String> {
    const DASHES: [char; 5] = ['-', '/', '\u{2013}', '\u{2014}', '\u{2015}'];
    let positions: Vec<usize> = text
        .char_indices()
        .filter(|&(i, c)| {
            (c == '-' || c == '/')
                && (i == 0 || text[..i].ends_with(' ') || text[..i].ends_with('*'))
        })
        .map(|(i, _)| i)
        .collect();
    if positions.is_empty() {
        return vec![text.to_string()];
    }
    // One variant per dash, applied to every option position alike (as pySigma does); the
    // combinations across positions would grow as 5^n for little gain.
    DASHES
        .iter()
        .map(|d| {
            let mut out = String::with_capacity(text.len() + 4);
            for (i, c) in text.char_indices() {
                if positions.binary_search(&i).is_ok() {
                    out.push(*d);
                } else {
                    out.push(c);
                }
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Pos = Pos { line: 1, column: 1 };

    fn t(p: &Pattern, v: &str) -> bool {
        p.test(Some(v), |_| None)
    }

    #[test]
    fn plain_values_fold_ascii_case_and_compare_numbers_leniently() {
        let p = compile_text("Mimikatz", Place::Contains, false, false, P).unwrap();
        assert!(t(&p, "run MIMIKATZ.exe"));
        assert!(!t(&p, "mimikat"));
        let p = compile_text("4625", Place::Exact, false, true, P).unwrap();
        assert!(t(&p, "4625") && t(&p, "04625") && !t(&p, "4624"));
        let p = compile_text("Abc", Place::Exact, true, false, P).unwrap();
        assert!(t(&p, "Abc") && !t(&p, "abc"));
    }

    /// A deferred expression cannot fail to compile: the costliest things a wildcard's
    /// translation can repeat (any character, letters whose case folds to three, `.*`) fill
    /// the longest deferred expression and still compile under the size limit.
    #[test]
    fn the_costliest_deferred_wildcard_compiles() {
        for unit in [".", "k", "ǅ", ".*", "\\*", "ſ."] {
            let mut source = String::from("(?is)^");
            while source.len() + unit.len() < LazyRegex::DEFERRED_MAX_BYTES {
                source.push_str(unit);
            }
            source.push('$');
            let deferred = LazyRegex::wildcard(&source, WILDCARD_SIZE_LIMIT).unwrap();
            assert!(deferred.compiled.get().is_none(), "{unit}: deferred");
            assert!(deferred.regex().is_some(), "{unit}: compiles");
        }
    }

    #[test]
    fn a_re_value_is_checked_at_parse_and_compiled_at_its_first_test() {
        let p = compile_regex("^Invoke-(Mimikatz|Kerberoast)$", true, false, false, P).unwrap();
        let Pattern::Regex(re) = &p else {
            panic!("a re value compiles to a regex")
        };
        assert!(re.compiled.get().is_none());
        assert!(p.test(Some("invoke-kerberoast"), |_| None));
        assert!(!p.test(Some("Invoke-Other"), |_| None));
        let e = compile_regex("(unclosed", false, false, false, P).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Regex);
        assert!(e.message.contains("unclosed group"), "{}", e.message);
        // Well formed, too large compiled: refused at parse as `regex` would refuse it.
        let e = compile_regex("\\w{5000}", false, false, false, P).unwrap_err();
        assert!(e.message.contains("size limit"), "{}", e.message);
        // The Thompson NFA alone, forward and reverse, accepts this one; `regex` does not.
        assert!(compile_regex(".{4300}", false, false, false, P).is_err());
        assert!(compile_regex("\\w{100}", false, false, false, P).is_err());
        assert!(
            RegexBuilder::new("\\w{5000}")
                .size_limit(1 << 22)
                .build()
                .is_err()
        );
        assert!(compile_regex("\\w{50}", false, false, false, P).is_ok());
    }

    #[test]
    fn a_wildcard_is_compiled_at_its_first_test_and_shared_by_its_clones() {
        let p = compile_text("*\\rundll32.exe*", Place::Exact, false, false, P).unwrap();
        let Pattern::Regex(re) = &p else {
            panic!("a wildcard compiles to a regex")
        };
        let clone = p.clone();
        assert!(re.compiled.get().is_none());
        assert!(clone.test(Some(r"C:\Windows\System32\RUNDLL32.EXE shell32"), |_| None));
        assert!(
            re.compiled.get().is_some(),
            "the clone's compilation is the original's"
        );
        assert!(!p.test(Some("rundll.exe"), |_| None));
    }

    #[test]
    fn wildcards_and_escapes() {
        // `\\*` is a backslash then a wildcard; `\*` alone would be a literal star.
        let p = compile_text(r"C:\Windows\\*\cmd.exe", Place::Exact, false, false, P).unwrap();
        assert!(t(&p, r"c:\windows\system32\CMD.EXE"));
        assert!(!t(&p, r"d:\windows\system32\cmd.exe"));
        let p = compile_text(r"a\*b", Place::Exact, false, false, P).unwrap();
        assert!(t(&p, "a*b") && !t(&p, "axb"));
        let p = compile_text(r"what\?", Place::Exact, false, false, P).unwrap();
        assert!(t(&p, "WHAT?") && !t(&p, "whatx"));
        let p = compile_text("a?c", Place::Exact, false, false, P).unwrap();
        assert!(t(&p, "abc") && !t(&p, "abbc"));
        let p = compile_text("ÄRGER", Place::Contains, false, false, P).unwrap();
        assert!(t(&p, "großer ärger"));
    }

    /// Short integers are summed, not parsed as floats: the same numbers either way, at
    /// every length up to where the sum would no longer be exact and past it.
    #[test]
    fn integers_read_as_the_float_parser_reads_them() {
        let digits = "9007199254740993123";
        for len in 1..=digits.len() {
            for text in [&digits[..len], &format!("00{}", &digits[..len])] {
                assert_eq!(parse_number(text), text.parse::<f64>().ok(), "{text}");
            }
        }
        assert_eq!(parse_number(" 4624 "), Some(4624.0));
        assert_eq!(parse_number("0x1210"), Some(4624.0));
        assert_eq!(parse_number("-5"), Some(-5.0));
        assert_eq!(parse_number("4624a"), None);
        assert_eq!(parse_number(""), None);
    }

    #[test]
    fn numbers_cidr_null_exists() {
        let p = Pattern::Number(NumOp::Gte, 10.0);
        assert!(t(&p, "10") && t(&p, "0x10") && !t(&p, "9") && !t(&p, "ten"));
        let (net, bits) = parse_cidr("10.1.0.0/16").unwrap();
        let p = Pattern::Cidr { net, bits };
        assert!(t(&p, "10.1.200.3") && !t(&p, "10.2.0.1") && !t(&p, "host"));
        let (net, bits) = parse_cidr("2001:db8::/32").unwrap();
        assert!(t(&Pattern::Cidr { net, bits }, "2001:db8:1::5"));
        assert!(Pattern::Null.test(None, |_| None) && Pattern::Null.test(Some(""), |_| None));
        assert!(!Pattern::Null.test(Some("x"), |_| None));
        assert!(Pattern::Exists(false).test(None, |_| None));
        let r = Pattern::FieldRef {
            field: "other".into(),
            place: Place::Contains,
            cased: false,
        };
        assert!(r.test(Some("run EVIL.exe now"), |_| Some("evil.EXE")));
        assert!(!r.test(Some("run good.exe"), |_| Some("evil.exe")));
        assert!(!Pattern::Exists(true).test(None, |_| None));
    }

    #[test]
    fn base64_forms() {
        assert_eq!(base64(b"Hello"), "SGVsbG8=");
        // The three offsets of "http://" as pySigma renders them.
        assert_eq!(
            base64_offsets(b"http://"),
            vec!["aHR0cDovL", "h0dHA6Ly", "odHRwOi8v"]
        );
        assert_eq!(utf16("ab", true), vec![b'a', 0, b'b', 0]);
    }

    #[test]
    fn windash_variants() {
        let v = windash("-enc ");
        assert_eq!(v.len(), 5);
        assert!(v.contains(&"/enc ".to_string()) && v.contains(&"\u{2013}enc ".to_string()));
        assert_eq!(windash("abc"), vec!["abc".to_string()]);
    }
}
