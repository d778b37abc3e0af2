//! STIX 2.1 bundles: the indicator objects whose patterns name a value this module can match.
//!
//! Only the simple patterns that feeds publish for single values are taken: comparisons
//! `object-path = 'value'` joined by `OR`, inside one bracket or across several. A pattern that
//! needs more (`AND`, `FOLLOWEDBY`, other operators, qualifiers, other object paths) is skipped
//! and counted, not reported: matching part of a conjunction would flag things the feed did not.

use super::file::FileCtx;
use super::parse::Hint;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Why a pattern gave no values.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// Valid STIX this module does not match; skipped and counted.
    Unsupported(String),
    /// Not a pattern at all; reported.
    Invalid(String),
}

#[derive(Debug, PartialEq, Eq)]
enum Tok<'a> {
    Open,
    Close,
    Paren,
    Str(String),
    /// A typed literal (`h'..'`, `b'..'`, `t'..'`), which no supported comparison uses.
    Typed,
    Word(&'a str),
    Op(&'a str),
}

fn tokenize(p: &str) -> Result<Vec<Tok<'_>>, PatternError> {
    let b = p.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let string_at = |mut i: usize| -> Result<(String, usize), PatternError> {
        // `i` is just past the opening quote.
        let mut s = String::new();
        loop {
            match b.get(i) {
                None => return Err(PatternError::Invalid("unterminated string".into())),
                Some(b'\'') => return Ok((s, i + 1)),
                Some(b'\\') if matches!(b.get(i + 1), Some(b'\'' | b'\\')) => {
                    s.push(char::from(b[i + 1]));
                    i += 2;
                }
                Some(_) => {
                    let end = p[i..]
                        .find(['\'', '\\'])
                        .map_or(b.len(), |e| i + e)
                        .max(i + 1);
                    s.push_str(&p[i..end]);
                    i = end;
                }
            }
        }
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'[' => {
                out.push(Tok::Open);
                i += 1;
            }
            b']' => {
                out.push(Tok::Close);
                i += 1;
            }
            b'(' | b')' => {
                out.push(Tok::Paren);
                i += 1;
            }
            b'\'' => {
                let (s, next) = string_at(i + 1)?;
                out.push(Tok::Str(s));
                i = next;
            }
            b'=' | b'!' | b'<' | b'>' => {
                let len = if b.get(i + 1) == Some(&b'=') { 2 } else { 1 };
                out.push(Tok::Op(&p[i..i + len]));
                i += len;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                if matches!(c, b'h' | b'b' | b't') && b.get(i + 1) == Some(&b'\'') {
                    let (_, next) = string_at(i + 2)?;
                    out.push(Tok::Typed);
                    i = next;
                    continue;
                }
                let start = i;
                while i < b.len() {
                    let c = b[i];
                    if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b':' | b'.' | b'*') {
                        i += 1;
                    } else if c == b'\'' && b[i - 1] == b'.' {
                        // A quoted path step: file:hashes.'SHA-256'.
                        let end = p[i + 1..].find('\'').ok_or_else(|| {
                            PatternError::Invalid("unterminated quoted path step".into())
                        })?;
                        i += end + 2;
                    } else if c == b'['
                        && b[i - 1] != b' '
                        && let Some(len) = list_step_len(&b[i..])
                    {
                        // A list step: extensions.values[*].
                        i += len;
                    } else {
                        break;
                    }
                }
                out.push(Tok::Word(&p[start..i]));
            }
            _ => {
                return Err(PatternError::Invalid(format!(
                    "unexpected `{}` in pattern",
                    p[i..].chars().next().unwrap_or('?')
                )));
            }
        }
    }
    Ok(out)
}

/// The length of the list step (`[*]`, `[3]`) that `b` starts with, if it starts with one. Looks
/// no further than an index can be long: searching the rest of the pattern for `]` from every
/// `[` was quadratic (`a[a[a[...`, seconds for a megabyte).
fn list_step_len(b: &[u8]) -> Option<usize> {
    const MAX_INDEX_LEN: usize = 20;
    let inner = b
        .iter()
        .skip(1)
        .take(MAX_INDEX_LEN + 1)
        .position(|&c| !(c == b'*' || c.is_ascii_digit()))?;
    (b.get(1 + inner) == Some(&b']')).then_some(inner + 2)
}

/// Which values an object path holds, when this module can match it.
fn path_hint(path: &str) -> Option<Hint> {
    let (object, property) = path.split_once(':')?;
    let object = object.to_ascii_lowercase();
    match (object.as_str(), property) {
        ("ipv4-addr" | "ipv6-addr", "value") => Some(Hint::Ip),
        ("domain-name", "value") => Some(Hint::Domain),
        ("url", "value") => Some(Hint::Url),
        ("file" | "artifact", p) => {
            let algo = p.strip_prefix("hashes.")?;
            let algo: String = algo
                .chars()
                .filter(|c| !matches!(c, '\'' | '"' | '-' | '_'))
                .collect::<String>()
                .to_ascii_uppercase();
            match algo.as_str() {
                "MD5" => Some(Hint::Md5),
                "SHA1" => Some(Hint::Sha1),
                "SHA256" => Some(Hint::Sha256),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The values of a pattern made of `path = 'value'` comparisons joined by `OR`, with what each
/// should be. Comparisons on unsupported paths are left out; a pattern with none left is
/// unsupported.
pub(crate) fn parse_pattern(p: &str) -> Result<Vec<(Hint, String)>, PatternError> {
    let toks = tokenize(p)?;
    for t in &toks {
        match t {
            Tok::Word(w) if is_keyword(w) && !w.eq_ignore_ascii_case("OR") => {
                return Err(PatternError::Unsupported(format!(
                    "`{}` in pattern",
                    w.to_ascii_uppercase()
                )));
            }
            Tok::Op(op) if *op != "=" => {
                return Err(PatternError::Unsupported(format!("operator `{op}`")));
            }
            _ => {}
        }
    }
    // Only OR is left, so grouping does not change the meaning: parentheses can go.
    let mut toks = toks.into_iter().filter(|t| *t != Tok::Paren).peekable();
    let mut values = Vec::new();
    let mut unsupported = None;
    let invalid = |m: &str| Err(PatternError::Invalid(m.to_string()));
    let is_or = |t: &Tok<'_>| matches!(t, Tok::Word(w) if w.eq_ignore_ascii_case("OR"));
    if toks.peek().is_none() {
        return invalid("empty pattern");
    }
    while let Some(t) = toks.next() {
        if t != Tok::Open {
            return invalid("expected `[` to open an observation");
        }
        loop {
            let (Some(Tok::Word(path)), Some(op), Some(value)) =
                (toks.next(), toks.next(), toks.next())
            else {
                return invalid("expected a comparison `object:path = 'value'`");
            };
            if op != Tok::Op("=") {
                return invalid("expected `=` after the object path");
            }
            let value = match value {
                Tok::Str(s) => s,
                Tok::Typed => {
                    unsupported.get_or_insert_with(|| "typed literal".to_string());
                    String::new()
                }
                _ => return invalid("expected a quoted value after `=`"),
            };
            match path_hint(path) {
                Some(h) if !value.is_empty() => values.push((h, value)),
                Some(_) => {}
                None => {
                    unsupported.get_or_insert_with(|| format!("object path `{path}`"));
                }
            }
            match toks.next() {
                Some(Tok::Close) => break,
                Some(ref t) if is_or(t) => continue,
                _ => return invalid("expected `OR` or `]` after a comparison"),
            }
        }
        match toks.next() {
            None => break,
            Some(ref t) if is_or(t) => {}
            Some(_) => return invalid("expected `OR` between observations"),
        }
        if toks.peek().is_none() {
            return invalid("pattern ends after `OR`");
        }
    }
    if values.is_empty() {
        return Err(PatternError::Unsupported(
            unsupported.unwrap_or_else(|| "no comparison".to_string()),
        ));
    }
    Ok(values)
}

fn is_keyword(w: &str) -> bool {
    const KEYWORDS: [&str; 17] = [
        "AND",
        "OR",
        "NOT",
        "FOLLOWEDBY",
        "LIKE",
        "MATCHES",
        "IN",
        "ISSUBSET",
        "ISSUPERSET",
        "EXISTS",
        "WITHIN",
        "REPEATS",
        "TIMES",
        "SECONDS",
        "START",
        "STOP",
        "FOR",
    ];
    KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(w))
}

/// Seconds since the Unix epoch of an RFC 3339 timestamp (`2024-05-01T12:00:00.5Z`,
/// `...+02:00`); `None` when it is not one.
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, to: usize| -> Option<i64> {
        let d = b.get(from..to)?;
        if !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(d.iter().fold(0, |n, &c| n * 10 + i64::from(c - b'0')))
    };
    let sep = |at: usize, ok: &[u8]| b.get(at).is_some_and(|c| ok.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        c @ (b'+' | b'-') if i + 6 == b.len() && sep(i + 3, b":") => {
            let (h, m) = (num(i + 1, i + 3)?, num(i + 4, i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let o = h * 3600 + m * 60;
            if *c == b'-' { -o } else { o }
        }
        _ => return None,
    };
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Lines of the indicator objects, by id, found by scanning for `"id": "indicator--...` (the
/// JSON tree does not keep positions); built only when an error needs one.
fn indicator_lines(text: &str) -> HashMap<&str, usize> {
    let mut lines = HashMap::new();
    let mut line = 1;
    let mut counted = 0;
    for (at, _) in text.match_indices("\"indicator--") {
        let before = text[..at].trim_end();
        let Some(before) = before.strip_suffix(':') else {
            continue;
        };
        if !before.trim_end().ends_with("\"id\"") {
            continue;
        }
        let start = at + 1;
        let Some(len) = text[start..].find('"') else {
            continue;
        };
        line += text.as_bytes()[counted..at]
            .iter()
            .filter(|&&c| c == b'\n')
            .count();
        counted = at;
        lines.entry(&text[start..start + len]).or_insert(line);
    }
    lines
}

/// Reads one STIX file into the set through `ctx`.
pub(crate) fn read(ctx: &mut FileCtx<'_>, bytes: &[u8], now: i64) {
    let root: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            ctx.error(e.line(), format!("not valid JSON: {e}"));
            return;
        }
    };
    let text = std::str::from_utf8(bytes).unwrap_or("");
    let objects: &[Value] = match &root {
        Value::Array(items) => items,
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("bundle") => match o.get("objects") {
                Some(Value::Array(items)) => items,
                None => &[],
                Some(_) => {
                    ctx.error(1, "the bundle's `objects` is not a list".to_string());
                    return;
                }
            },
            Some("indicator") => std::slice::from_ref(&root),
            _ => {
                ctx.error(
                    1,
                    "not a STIX bundle (no `\"type\": \"bundle\"`)".to_string(),
                );
                return;
            }
        },
        _ => {
            ctx.error(1, "not a STIX bundle".to_string());
            return;
        }
    };
    let mut lines: Option<HashMap<&str, usize>> = None;
    for obj in objects {
        if obj.get("type").and_then(Value::as_str) != Some("indicator") {
            continue;
        }
        let id = obj.get("id").and_then(Value::as_str).unwrap_or("");
        let mut line_of = || {
            *lines
                .get_or_insert_with(|| indicator_lines(text))
                .get(id)
                .unwrap_or(&0)
        };
        if obj.get("revoked").and_then(Value::as_bool) == Some(true) {
            ctx.stats.skipped += 1;
            continue;
        }
        match obj.get("pattern_type").and_then(Value::as_str) {
            None | Some("stix") => {}
            Some(_) => {
                ctx.stats.skipped += 1;
                continue;
            }
        }
        if let Some(until) = obj.get("valid_until").and_then(Value::as_str) {
            match parse_rfc3339(until) {
                Some(t) if t <= now => {
                    ctx.stats.skipped += 1;
                    continue;
                }
                Some(_) => {}
                None => {
                    let line = line_of();
                    ctx.error(
                        line,
                        format!("{id}: `valid_until` `{until}` is not an RFC 3339 timestamp"),
                    );
                    continue;
                }
            }
        }
        let Some(pattern) = obj.get("pattern").and_then(Value::as_str) else {
            let line = line_of();
            ctx.error(line, format!("{id}: indicator without a `pattern`"));
            continue;
        };
        let label = ["name", "description"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(Value::as_str))
            .filter(|l| !l.trim().is_empty());
        // STIX 2.1 `confidence`: an integer 0 to 100 (section 3.2); anything else is ignored.
        let confidence = obj
            .get("confidence")
            .and_then(Value::as_u64)
            .and_then(|c| u8::try_from(c).ok())
            .filter(|c| *c <= 100);
        match parse_pattern(pattern) {
            Ok(values) => {
                let label: Option<Arc<str>> = label.map(|l| ctx.label(l));
                let mut failed = Vec::new();
                for (hint, value) in values {
                    if let Err(m) = ctx.add(&value, hint, label.as_ref(), confidence) {
                        failed.push(m);
                    }
                }
                if !failed.is_empty() {
                    let line = line_of();
                    for m in failed {
                        ctx.error(line, format!("{id}: {m}"));
                    }
                }
            }
            Err(PatternError::Unsupported(_)) => ctx.stats.skipped += 1,
            Err(PatternError::Invalid(m)) => {
                let line = line_of();
                ctx.error(line, format!("{id}: bad pattern: {m}"));
            }
        }
    }
}
