//! The condition language of a detection: `and`, `or`, `not`, parentheses, `1 of` / `all of`
//! over search names with `*` wildcards or `them`.
//!
//! Precedence, lowest first: `or`, `and`, `not`. `them` covers every search whose name does not
//! start with `_` (Sigma v2). The old pipe aggregations (`| count() > 5`) are refused with a
//! pointer to correlation rules, which replace them.

use crate::error::{ErrorKind, RuleError};
use crate::yaml::Pos;

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
    pos: Pos,
    len: usize,
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
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, RuleError> {
        let offset = self.here();
        let Some((tok, _)) = self.toks.get(self.at).cloned() else {
            return Err(self.err(offset, "the condition ends where a search was expected"));
        };
        self.at += 1;
        match tok {
            Tok::Open => {
                let e = self.or()?;
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
                match self.names.iter().position(|n| *n == w) {
                    Some(i) => Ok(Expr::Search(i)),
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
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            if !name.starts_with(head) {
                return false;
            }
            let tail = &name[head.len()..];
            if rest.is_empty() {
                return true;
            }
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob(rest, &tail[i..]))
        }
    }
}

/// Parses `text` (written at `pos`) against the rule's search names.
pub fn parse(text: &str, names: &[&str], pos: Pos) -> Result<Expr, RuleError> {
    let toks = lex(text);
    let mut p = P {
        toks,
        at: 0,
        names,
        pos,
        len: text.len(),
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
