//! The condition language of a detection: `and`, `or`, `not`, parentheses, `1 of` / `all of`
//! over search names with `*` wildcards or `them`.
//!
//! Precedence, lowest first: `or`, `and`, `not`. `them` covers every search whose name does not
//! start with `_` (Sigma v2). The old pipe aggregations (`| count() > 5`) are refused with a
//! pointer to correlation rules, which replace them.
//!
//! The parser recurses once per bracket and per `not`, so their nesting is bounded by
//! [`MAX_CONDITION_DEPTH`]: a condition of a few thousand brackets would otherwise overflow the
//! stack of the thread validating it (an API request's) and abort the whole process.

use crate::error::Pos;
use crate::error::{ErrorKind, RuleError};

/// Deepest nesting of brackets and `not` in one condition. Public rules nest three or four deep;
/// this leaves room for generated ones while keeping the parser's and the matcher's recursion
/// (a few hundred bytes of stack a level) far from any thread's stack size.
pub const MAX_CONDITION_DEPTH: usize = 64;

/// Longest condition, in bytes. Public conditions stay under one kilobyte. Every `1 of x*` in a
/// condition tests every search name, so the length bounds that work too.
pub const MAX_CONDITION_BYTES: usize = 64 << 10;

/// A parsed condition over search indexes.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// Every part holds.
    And(Vec<Expr>),
    /// Any part holds.
    Or(Vec<Expr>),
    /// The part does not hold.
    Not(Box<Expr>),
    /// Search number `i` matches.
    Search(usize),
}

impl Expr {
    /// Evaluates with `search(i)` telling whether search `i` matched.
    #[inline]
    pub fn eval(&self, search: &mut impl FnMut(usize) -> bool) -> bool {
        match self {
            Expr::And(parts) => parts.iter().all(|p| p.eval(search)),
            Expr::Or(parts) => parts.iter().any(|p| p.eval(search)),
            Expr::Not(p) => !p.eval(search),
            Expr::Search(i) => search(*i),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Open,
    Close,
    Pipe,
}

fn lex(s: &str) -> Vec<(Tok, usize)> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' => {
                out.push((Tok::Open, i));
                i += 1;
            }
            b')' => {
                out.push((Tok::Close, i));
                i += 1;
            }
            b'|' => {
                out.push((Tok::Pipe, i));
                i += 1;
            }
            _ => {
                let start = i;
                while i < b.len() && !b" \t\n\r()|".contains(&b[i]) {
                    i += 1;
                }
                out.push((Tok::Word(s[start..i].to_string()), start));
            }
        }
    }
    out
}

struct P<'a> {
    toks: Vec<(Tok, usize)>,
    at: usize,
    names: &'a [&'a str],
    /// Search number by name.
    index: std::collections::HashMap<&'a str, usize>,
    pos: Pos,
    len: usize,
    /// Brackets and `not`s open around the token at `at`.
    depth: usize,
}

impl P<'_> {
    fn err(&self, offset: usize, msg: impl Into<String>) -> RuleError {
        RuleError::at(
            Pos {
                line: self.pos.line,
                column: self.pos.column + offset,
            },
            ErrorKind::Condition,
            msg,
        )
    }

    fn here(&self) -> usize {
        self.toks.get(self.at).map_or(self.len, |t| t.1)
    }

    fn peek_word(&self) -> Option<&str> {
        match self.toks.get(self.at) {
            Some((Tok::Word(w), _)) => Some(w),
            _ => None,
        }
    }

    fn or(&mut self) -> Result<Expr, RuleError> {
        self.joined("or", Self::and, Expr::Or)
    }

    fn and(&mut self) -> Result<Expr, RuleError> {
        self.joined("and", Self::not, Expr::And)
    }

    /// Operands of `part` joined by `word`; a single operand stands alone.
    fn joined(
        &mut self,
        word: &str,
        part: fn(&mut Self) -> Result<Expr, RuleError>,
        wrap: fn(Vec<Expr>) -> Expr,
    ) -> Result<Expr, RuleError> {
        let mut parts = vec![part(self)?];
        while self.peek_word() == Some(word) {
            self.at += 1;
            parts.push(part(self)?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            wrap(parts)
        })
    }

    fn not(&mut self) -> Result<Expr, RuleError> {
        if self.peek_word() == Some("not") {
            let inner = self.nested(Self::not)?;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.primary()
    }

    /// Steps over the opening token (`(` or `not`) at `at` and parses what it opens with `inner`,
    /// one level deeper; refuses to go past [`MAX_CONDITION_DEPTH`].
    fn nested(
        &mut self,
        inner: fn(&mut Self) -> Result<Expr, RuleError>,
    ) -> Result<Expr, RuleError> {
        if self.depth == MAX_CONDITION_DEPTH {
            return Err(self.err(
                self.here(),
                format!("brackets and `not` nest deeper than {MAX_CONDITION_DEPTH} levels"),
            ));
        }
        self.at += 1;
        self.depth += 1;
        let e = inner(self);
        self.depth -= 1;
        e
    }

    fn primary(&mut self) -> Result<Expr, RuleError> {
        let offset = self.here();
        let Some((tok, _)) = self.toks.get(self.at).cloned() else {
            return Err(self.err(offset, "the condition ends where a search was expected"));
        };
        match tok {
            Tok::Open => {
                let e = self.nested(Self::or)?;
                match self.toks.get(self.at) {
                    Some((Tok::Close, _)) => {
                        self.at += 1;
                        Ok(e)
                    }
                    _ => Err(self.err(self.here(), "missing `)`")),
                }
            }
            Tok::Close => Err(self.err(offset, "unexpected `)`")),
            Tok::Pipe => Err(self.err(offset, "unexpected `|`")),
            Tok::Word(w) => {
                self.at += 1;
                if matches!(w.as_str(), "and" | "or") {
                    return Err(self.err(offset, format!("`{w}` needs a search before it")));
                }
                if self.peek_word() == Some("of") {
                    self.at += 1;
                    let quant = w;
                    let Some(target) = self.peek_word().map(str::to_string) else {
                        return Err(self.err(self.here(), "`of` needs a search pattern or `them`"));
                    };
                    let target_at = self.here();
                    self.at += 1;
                    let matched: Vec<usize> = if target == "them" {
                        (0..self.names.len())
                            .filter(|&i| !self.names[i].starts_with('_'))
                            .collect()
                    } else {
                        (0..self.names.len())
                            .filter(|&i| glob(&target, self.names[i]))
                            .collect()
                    };
                    if matched.is_empty() {
                        return Err(self.err(
                            target_at,
                            format!("`{target}` matches no search identifier"),
                        ));
                    }
                    let parts: Vec<Expr> = matched.into_iter().map(Expr::Search).collect();
                    return match quant.as_str() {
                        "all" => Ok(Expr::And(parts)),
                        "1" | "any" => Ok(Expr::Or(parts)),
                        n => {
                            match n.parse::<usize>() {
                                // "N of": at least N; expanded as an OR of the AND-combinations
                                // would explode, so only 1 and all are accepted, as in the spec.
                                Ok(_) => Err(self.err(
                                    offset,
                                    format!("`{n} of` is not Sigma: use `1 of` or `all of`"),
                                )),
                                Err(_) => Err(self
                                    .err(offset, format!("`{n} of`: expected `1 of` or `all of`"))),
                            }
                        }
                    };
                }
                match self.index.get(w.as_str()) {
                    Some(&i) => Ok(Expr::Search(i)),
                    None => Err(self.err(
                        offset,
                        format!(
                            "`{w}` is not a search identifier of this rule (have: {})",
                            self.names.join(", ")
                        ),
                    )),
                }
            }
        }
    }
}

/// `*` matches any run of characters (Sigma's identifier patterns know no other wildcard).
///
/// Greedy with one backtrack point, the last `*`: at most pattern length times name length steps,
/// where trying every split at every `*` was exponential in the number of stars (`*a*a*a*...b`).
/// Bytes compare as well as characters: a literal run of the pattern starts with an ASCII or a
/// lead byte, which never equals a continuation byte inside a character of the name.
fn glob(pattern: &str, name: &str) -> bool {
    let (pattern, name) = (pattern.as_bytes(), name.as_bytes());
    let (mut p, mut n) = (0, 0);
    // After the last `*` seen: where the pattern goes on, and where in the name it was tried.
    let mut backtrack: Option<(usize, usize)> = None;
    while n < name.len() {
        if pattern.get(p) == Some(&b'*') {
            p += 1;
            backtrack = Some((p, n));
        } else if pattern.get(p) == Some(&name[n]) {
            p += 1;
            n += 1;
        } else if let Some((after_star, tried)) = backtrack {
            // The star takes one more byte of the name.
            p = after_star;
            n = tried + 1;
            backtrack = Some((after_star, n));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// Parses `text` (written at `pos`) against the rule's search names.
pub fn parse(text: &str, names: &[&str], pos: Pos) -> Result<Expr, RuleError> {
    if text.len() > MAX_CONDITION_BYTES {
        return Err(RuleError::at(
            pos,
            ErrorKind::Condition,
            format!(
                "the condition is {} bytes; at most {MAX_CONDITION_BYTES}",
                text.len()
            ),
        ));
    }
    let toks = lex(text);
    let mut index = std::collections::HashMap::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        index.entry(*name).or_insert(i);
    }
    let mut p = P {
        toks,
        at: 0,
        names,
        index,
        pos,
        len: text.len(),
        depth: 0,
    };
    if let Some(i) = p.toks.iter().position(|t| t.0 == Tok::Pipe) {
        return Err(p.err(
            p.toks[i].1,
            "aggregations after `|` were removed from Sigma: write a correlation rule instead",
        ));
    }
    let e = p.or()?;
    if p.at < p.toks.len() {
        return Err(p.err(p.here(), "unexpected text after the condition"));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 4] = ["sel_a", "sel_b", "filter", "_hidden"];

    fn p(s: &str) -> Result<Expr, RuleError> {
        parse(
            s,
            &NAMES,
            Pos {
                line: 10,
                column: 16,
            },
        )
    }

    #[test]
    fn precedence_and_quantifiers() {
        use Expr::*;
        assert_eq!(
            p("sel_a or sel_b and not filter").unwrap(),
            Or(vec![
                Search(0),
                And(vec![Search(1), Not(Box::new(Search(2)))])
            ])
        );
        assert_eq!(p("1 of sel_*").unwrap(), Or(vec![Search(0), Search(1)]));
        assert_eq!(
            p("all of them").unwrap(),
            And(vec![Search(0), Search(1), Search(2)])
        );
        assert_eq!(
            p("(sel_a or sel_b) and not 1 of filter*").unwrap(),
            And(vec![
                Or(vec![Search(0), Search(1)]),
                Not(Box::new(Or(vec![Search(2)])))
            ])
        );
    }

    #[test]
    fn nesting_is_bounded_with_the_place_it_goes_too_deep() {
        let at_limit = format!(
            "{}sel_a{}",
            "(".repeat(MAX_CONDITION_DEPTH),
            ")".repeat(MAX_CONDITION_DEPTH)
        );
        assert_eq!(p(&at_limit).unwrap(), Expr::Search(0));
        let nots = format!("{}sel_a", "not ".repeat(MAX_CONDITION_DEPTH));
        assert!(p(&nots).is_ok());
        let mixed = format!("{}sel_a{}", "not (".repeat(32), ")".repeat(32));
        assert!(p(&mixed).is_ok(), "32 brackets and 32 nots are 64 levels");

        let past = format!(
            "{}sel_a{}",
            "(".repeat(MAX_CONDITION_DEPTH + 1),
            ")".repeat(MAX_CONDITION_DEPTH + 1)
        );
        let e = p(&past).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Condition);
        assert_eq!((e.line(), e.column()), (10, 16 + MAX_CONDITION_DEPTH));
        assert!(e.message.contains("nest deeper than 64"), "{e:?}");
        let e = p(&format!("{}sel_a", "not ".repeat(MAX_CONDITION_DEPTH + 1))).unwrap_err();
        assert_eq!(e.column(), 16 + 4 * MAX_CONDITION_DEPTH);
        // What overflowed the stack before: thousands of levels, and they fail the same way.
        assert!(p(&format!("{}sel_a{}", "(".repeat(2_000), ")".repeat(2_000))).is_err());
        assert!(p(&format!("{}sel_a", "not ".repeat(5_000))).is_err());
        assert!(p(&"(".repeat(200_000)).is_err());
    }

    #[test]
    fn identifier_patterns_match_in_linear_time() {
        assert!(glob("sel_*", "sel_a"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(glob("*é*", "café crème"));
        assert!(!glob("a*b", "acbx"));
        assert!(!glob("sel_a", "sel_ab"));
        assert!(glob("s*l*_*a", "sel_a"));
        // Thirty stars against a long name that nearly matches: exponential by splitting.
        let pattern = format!("{}b", "*a".repeat(30));
        assert!(!glob(&pattern, &"a".repeat(4_000)));
        assert!(glob(&pattern, &format!("{}b", "a".repeat(4_000))));
    }

    #[test]
    fn errors_have_columns() {
        let e = p("sel_a and nope").unwrap_err();
        assert_eq!((e.line(), e.column()), (10, 26));
        assert!(p("sel_a and").is_err());
        assert!(p("(sel_a").is_err());
        assert!(
            p("sel_a | count() > 5")
                .unwrap_err()
                .message
                .contains("correlation")
        );
        assert!(p("1 of nothing*").is_err());
        assert!(p("sel_a sel_b").is_err());
    }
}
