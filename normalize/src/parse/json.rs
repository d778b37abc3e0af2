//! A strict JSON object scanner that flattens nested objects into dotted keys.
//!
//! JSON log lines (ECS, Bunyan, Windows event forwarders) are consumed field by field: the ingest
//! path wants `host.name`, `source.ip` or `@timestamp` and a handful of others, never a document
//! tree. Building a `serde_json::Value` per line costs several allocations per field; this scanner
//! costs none once its [`JsonScratch`] has grown to the longest key and escaped string seen, and it
//! hands out values that borrow from the input whenever no unescaping is needed.
//!
//! It is strict (RFC 8259): anything `serde_json` would reject is an error here too, including
//! control characters in strings, lone surrogates, leading zeros and trailing commas, so that a
//! line is either fully trusted or routed to the unstructured path. Arrays are validated but passed
//! through as raw text, because log fields that are arrays (tags, IP lists) are rarely matched on
//! and flattening them has no single right answer.

use std::fmt;

/// Nesting limit, counting the top-level object and any arrays. It bounds recursion (and so stack
/// use) on hostile input; real log documents rarely exceed 6.
pub const MAX_DEPTH: usize = 32;

/// One leaf value. `Str` is unescaped; `Num` is the number exactly as written, so that callers can
/// choose integer or float parsing (and keep 64-bit ids exact); `Array` is the array's raw JSON text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JsonScalar<'a> {
    /// A string, unescaped.
    Str(&'a str),
    /// A number as written (`-1.5e3`), validated against the JSON grammar.
    Num(&'a str),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// An array's raw JSON text, brackets included, validated but not visited.
    Array(&'a str),
}

/// Reusable buffers for [`scan_object`]: the dotted key path and the unescaped text of the current
/// string. Keep one per worker thread; it stops allocating once it has grown to fit the input.
#[derive(Debug, Default)]
pub struct JsonScratch {
    key: String,
    val: String,
}

impl JsonScratch {
    /// Empty buffers; they grow on first use and are then reused.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Why a line was rejected. Offsets are byte offsets into the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonError {
    /// The line (after leading whitespace) does not start with '{': not a JSON object line.
    NotAnObject,
    /// The text breaks the JSON grammar at `offset`.
    Syntax {
        /// Byte offset of the first offending byte.
        offset: usize,
    },
    /// The line is not valid UTF-8, which JSON requires.
    InvalidUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// Objects and arrays nest deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Something other than whitespace follows the object.
    TrailingData {
        /// Byte offset of the first byte after the object that is not whitespace.
        offset: usize,
    },
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::NotAnObject => {
                f.write_str("JSON line is not an object (must start with '{')")
            }
            JsonError::Syntax { offset } => write!(f, "JSON syntax error at byte {offset}"),
            JsonError::InvalidUtf8 { offset } => write!(f, "invalid UTF-8 at byte {offset}"),
            JsonError::TooDeep => write!(f, "JSON nested deeper than {MAX_DEPTH} levels"),
            JsonError::TrailingData { offset } => {
                write!(f, "unexpected data after the JSON object at byte {offset}")
            }
        }
    }
}

impl std::error::Error for JsonError {}

/// Scans one JSON object, calling `visit(dotted_key, value)` for every leaf in document order.
///
/// Nested objects are flattened (`{"host":{"name":"x"}}` gives `host.name`); empty objects produce
/// nothing; keys are not escaped, so a key containing '.' is indistinguishable from nesting, and
/// duplicate keys are all visited. The key and value borrow from `scratch` or `line` only for the
/// duration of the call.
///
/// The visitor runs while the line is still being validated: on `Err`, callers must discard
/// everything the visitor collected for this line.
pub fn scan_object(
    line: &[u8],
    scratch: &mut JsonScratch,
    visit: &mut dyn FnMut(&str, JsonScalar<'_>),
) -> Result<(), JsonError> {
    let start = line
        .iter()
        .position(|b| !is_ws(*b))
        .ok_or(JsonError::NotAnObject)?;
    if line[start] != b'{' {
        return Err(JsonError::NotAnObject);
    }
    let text = std::str::from_utf8(line).map_err(|e| JsonError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    let mut p = Parser {
        s: text,
        b: line,
        pos: start + 1,
    };
    scratch.key.clear();
    p.object(1, scratch, visit)?;
    p.skip_ws();
    if p.pos != line.len() {
        return Err(JsonError::TrailingData { offset: p.pos });
    }
    Ok(())
}

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Bytes that end a run of plain string content: the quote, a backslash, or a control character.
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while self.pos < self.b.len() && is_ws(self.b[self.pos]) {
            self.pos += 1;
        }
    }

    #[inline]
    fn err(&self) -> JsonError {
        JsonError::Syntax { offset: self.pos }
    }

    #[inline]
    fn expect(&mut self, c: u8) -> Result<(), JsonError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err())
        }
    }

    /// The text between `start` and `end`; both are always at ASCII delimiters, so this cannot
    /// fail, but an error beats a panic if that reasoning is ever broken.
    fn slice(&self, start: usize, end: usize) -> Result<&'a str, JsonError> {
        self.s
            .get(start..end)
            .ok_or(JsonError::Syntax { offset: start })
    }

    /// Parses an object's members after its '{', visiting leaves under the current key prefix.
    fn object(
        &mut self,
        depth: usize,
        scratch: &mut JsonScratch,
        visit: &mut dyn FnMut(&str, JsonScalar<'_>),
    ) -> Result<(), JsonError> {
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            self.expect(b'"')?;
            let prefix_len = scratch.key.len();
            if prefix_len > 0 {
                scratch.key.push('.');
            }
            let (start, end, escaped) = self.string()?;
            if escaped {
                unescape(self.slice(start, end)?, &mut scratch.key, start)?;
            } else {
                scratch.key.push_str(self.slice(start, end)?);
            }
            self.skip_ws();
            self.expect(b':')?;
            self.skip_ws();
            match self.peek() {
                Some(b'{') => {
                    if depth >= MAX_DEPTH {
                        return Err(JsonError::TooDeep);
                    }
                    self.pos += 1;
                    self.object(depth + 1, scratch, visit)?;
                }
                Some(b'"') => {
                    self.pos += 1;
                    let (start, end, escaped) = self.string()?;
                    let raw = self.slice(start, end)?;
                    let value = if escaped {
                        scratch.val.clear();
                        unescape(raw, &mut scratch.val, start)?;
                        scratch.val.as_str()
                    } else {
                        raw
                    };
                    visit(&scratch.key, JsonScalar::Str(value));
                }
                Some(b'[') => {
                    let start = self.pos;
                    self.array(depth + 1)?;
                    visit(
                        &scratch.key,
                        JsonScalar::Array(self.slice(start, self.pos)?),
                    );
                }
                _ => {
                    let v = self.scalar()?;
                    visit(&scratch.key, v);
                }
            }
            scratch.key.truncate(prefix_len);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.err()),
            }
        }
    }

    /// A number or literal at the current position.
    fn scalar(&mut self) -> Result<JsonScalar<'a>, JsonError> {
        let rest = &self.b[self.pos.min(self.b.len())..];
        for (word, value) in [
            (&b"true"[..], JsonScalar::Bool(true)),
            (b"false", JsonScalar::Bool(false)),
            (b"null", JsonScalar::Null),
        ] {
            if rest.starts_with(word) {
                self.pos += word.len();
                return Ok(value);
            }
        }
        let start = self.pos;
        self.number()?;
        Ok(JsonScalar::Num(self.slice(start, self.pos)?))
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<(), JsonError> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err()),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.err());
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.err());
            }
            self.digits();
        }
        Ok(())
    }

    #[inline]
    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    /// Scans a string body after its opening quote, validating escapes (including surrogate
    /// pairing), and returns (content start, content end, whether it contains escapes). Leaves the
    /// position after the closing quote.
    fn string(&mut self) -> Result<(usize, usize, bool), JsonError> {
        let start = self.pos;
        let mut escaped = false;
        loop {
            while self.pos < self.b.len() && !STRING_STOP[self.b[self.pos] as usize] {
                self.pos += 1;
            }
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok((start, self.pos - 1, escaped));
                }
                Some(b'\\') => {
                    escaped = true;
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            let at = self.pos - 1;
                            self.pos += 1;
                            let cu = self.hex4()?;
                            if (0xDC00..0xE000).contains(&cu) {
                                return Err(JsonError::Syntax { offset: at });
                            }
                            if (0xD800..0xDC00).contains(&cu) {
                                if self.b.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(JsonError::Syntax { offset: at });
                                }
                                self.pos += 2;
                                if !(0xDC00..0xE000).contains(&self.hex4()?) {
                                    return Err(JsonError::Syntax { offset: at });
                                }
                            }
                        }
                        _ => return Err(self.err()),
                    }
                }
                // A control character or the end of input.
                _ => return Err(self.err()),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let v = self
            .b
            .get(self.pos..self.pos + 4)
            .and_then(hex4)
            .ok_or(self.err())?;
        self.pos += 4;
        Ok(v)
    }

    /// Validates an array after its '[' without visiting it; `depth` counts the array itself.
    fn array(&mut self, depth: usize) -> Result<(), JsonError> {
        if depth > MAX_DEPTH {
            return Err(JsonError::TooDeep);
        }
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            self.skip_value(depth)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.err()),
            }
        }
    }

    /// Validates any value at the current position inside a container at `depth`.
    fn skip_value(&mut self, depth: usize) -> Result<(), JsonError> {
        match self.peek() {
            Some(b'[') => self.array(depth + 1),
            Some(b'{') => {
                if depth + 1 > MAX_DEPTH {
                    return Err(JsonError::TooDeep);
                }
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_ws();
                    self.expect(b'"')?;
                    self.string()?;
                    self.skip_ws();
                    self.expect(b':')?;
                    self.skip_ws();
                    self.skip_value(depth + 1)?;
                    self.skip_ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(());
                        }
                        _ => return Err(self.err()),
                    }
                }
            }
            Some(b'"') => {
                self.pos += 1;
                self.string().map(|_| ())
            }
            _ => self.scalar().map(|_| ()),
        }
    }
}

fn hex4(h: &[u8]) -> Option<u32> {
    h.iter().try_fold(0u32, |v, &c| {
        let d = (c as char).to_digit(16)?;
        Some(v * 16 + d)
    })
}

/// Appends the unescaped form of an already validated string body to `out`. `at` is the body's
/// offset in the line, for error reporting should validation and unescaping ever disagree.
fn unescape(raw: &str, out: &mut String, at: usize) -> Result<(), JsonError> {
    let err = JsonError::Syntax { offset: at };
    let b = raw.as_bytes();
    let mut i = 0;
    let mut run = 0;
    while let Some(off) = memchr::memchr(b'\\', &b[i..]) {
        let bs = i + off;
        out.push_str(raw.get(run..bs).ok_or(err)?);
        let c = *b.get(bs + 1).ok_or(err)?;
        i = bs + 2;
        let ch = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = b.get(i..i + 4).and_then(hex4).ok_or(err)?;
                i += 4;
                let cp = if (0xD800..0xDC00).contains(&hi) {
                    let lo = b.get(i + 2..i + 6).and_then(hex4).ok_or(err)?;
                    i += 6;
                    0x10000 + ((hi - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF)
                } else {
                    hi
                };
                char::from_u32(cp).ok_or(err)?
            }
            _ => return Err(err),
        };
        out.push(ch);
        run = i;
    }
    out.push_str(raw.get(run..).ok_or(err)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Owned {
        Str(String),
        Num(String),
        Bool(bool),
        Null,
        Array(String),
    }

    fn collect(line: &str) -> Result<Vec<(String, Owned)>, JsonError> {
        let mut scratch = JsonScratch::new();
        collect_with(line.as_bytes(), &mut scratch)
    }

    fn collect_with(
        line: &[u8],
        scratch: &mut JsonScratch,
    ) -> Result<Vec<(String, Owned)>, JsonError> {
        let mut out = Vec::new();
        scan_object(line, scratch, &mut |k, v| {
            let v = match v {
                JsonScalar::Str(s) => Owned::Str(s.to_owned()),
                JsonScalar::Num(s) => Owned::Num(s.to_owned()),
                JsonScalar::Bool(b) => Owned::Bool(b),
                JsonScalar::Null => Owned::Null,
                JsonScalar::Array(s) => Owned::Array(s.to_owned()),
            };
            out.push((k.to_owned(), v));
        })?;
        Ok(out)
    }

    fn st(s: &str) -> Owned {
        Owned::Str(s.to_owned())
    }

    #[test]
    fn flattens_ecs_document() {
        let line = r#" {"@timestamp":"2026-11-21T10:00:00.123Z","event":{"category":["authentication"],"outcome":"failure"},"source":{"ip":"1.2.3.4","port":4242,"geo":{}},"user":{"name":"root"},"ok":true,"bad":false,"x":null,"n":-1.5e+3} "#;
        let got = collect(line).unwrap();
        let want = vec![
            ("@timestamp".into(), st("2026-11-21T10:00:00.123Z")),
            (
                "event.category".into(),
                Owned::Array(r#"["authentication"]"#.into()),
            ),
            ("event.outcome".into(), st("failure")),
            ("source.ip".into(), st("1.2.3.4")),
            ("source.port".into(), Owned::Num("4242".into())),
            ("user.name".into(), st("root")),
            ("ok".into(), Owned::Bool(true)),
            ("bad".into(), Owned::Bool(false)),
            ("x".into(), Owned::Null),
            ("n".into(), Owned::Num("-1.5e+3".into())),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn unescapes_strings_and_keys() {
        let got = collect(
            r#"{"a\"b":"x\n\t\\\/\b\f\r\u00e9\u20AC\ud83d\ude00","k":{"n\u0061me":"\"q\""},"plain":"é"}"#,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                ("a\"b".into(), st("x\n\t\\/\u{8}\u{c}\ré€😀")),
                ("k.name".into(), st("\"q\"")),
                ("plain".into(), st("é")),
            ]
        );
    }

    #[test]
    fn unescaped_strings_borrow_from_the_input() {
        let line = br#"{"a":"plain","b":"esc\n"}"#;
        let range = line.as_ptr_range();
        let mut scratch = JsonScratch::new();
        let mut borrowed = Vec::new();
        scan_object(line, &mut scratch, &mut |_, v| {
            if let JsonScalar::Str(s) = v {
                borrowed.push(range.contains(&s.as_ptr()));
            }
        })
        .unwrap();
        assert_eq!(borrowed, [true, false]);
    }

    #[test]
    fn scratch_is_reused_across_lines() {
        let mut scratch = JsonScratch::new();
        let a = collect_with(br#"{"deep":{"er":{"key":"v\u0041"}}}"#, &mut scratch).unwrap();
        assert_eq!(a, vec![("deep.er.key".into(), st("vA"))]);
        let b = collect_with(br#"{"k":"w"}"#, &mut scratch).unwrap();
        assert_eq!(b, vec![("k".into(), st("w"))]);
        // An error mid-way leaves no stale prefix for the next line.
        assert!(collect_with(br#"{"a":{"b":tru}}"#, &mut scratch).is_err());
        let c = collect_with(br#"{"c":1}"#, &mut scratch).unwrap();
        assert_eq!(c, vec![("c".into(), Owned::Num("1".into()))]);
    }

    #[test]
    fn arrays_are_raw_but_validated() {
        let got = collect(r#"{"a":[1, "x\"]", {"b":[true,null]}, []],"e":[]}"#).unwrap();
        assert_eq!(
            got,
            vec![
                (
                    "a".into(),
                    Owned::Array(r#"[1, "x\"]", {"b":[true,null]}, []]"#.into())
                ),
                ("e".into(), Owned::Array("[]".into())),
            ]
        );
        for bad in [
            r#"{"a":[1,]}"#,
            r#"{"a":[1 2]}"#,
            r#"{"a":[{"b"}]}"#,
            r#"{"a":["\x"]}"#,
            r#"{"a":[01]}"#,
        ] {
            assert!(
                matches!(collect(bad), Err(JsonError::Syntax { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn errors() {
        use JsonError::*;
        assert_eq!(collect(""), Err(NotAnObject));
        assert_eq!(collect("   "), Err(NotAnObject));
        assert_eq!(collect("[1]"), Err(NotAnObject));
        assert_eq!(collect("\"x\""), Err(NotAnObject));
        assert_eq!(collect(r#"{"a":1} x"#), Err(TrailingData { offset: 8 }));
        assert_eq!(collect(r#"{"a":1}{}"#), Err(TrailingData { offset: 7 }));
        assert_eq!(collect(r#"{"a":1,}"#), Err(Syntax { offset: 7 }));
        assert_eq!(collect(r#"{"a" 1}"#), Err(Syntax { offset: 5 }));
        assert_eq!(collect(r#"{"a":01}"#), Err(Syntax { offset: 6 }));
        assert_eq!(collect(r#"{a:1}"#), Err(Syntax { offset: 1 }));
        assert_eq!(collect("{\"a\":\"x\ty\"}"), Err(Syntax { offset: 7 }));
        assert_eq!(collect(r#"{"a":"\ud800"}"#), Err(Syntax { offset: 6 }));
        assert_eq!(
            collect(r#"{"a":"\udc00\ud800"}"#),
            Err(Syntax { offset: 6 })
        );
        assert_eq!(
            collect(r#"{"a":"\ud800\u0041"}"#),
            Err(Syntax { offset: 6 })
        );
        assert_eq!(collect(r#"{"a":"\u12g4"}"#), Err(Syntax { offset: 8 }));
        for bad in [
            "{",
            r#"{"a""#,
            r#"{"a":"#,
            r#"{"a":"x"#,
            r#"{"a":1"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":1e}"#,
            r#"{"a":.5}"#,
            r#"{"a":+1}"#,
            r#"{"a":tru}"#,
            r#"{"a":nul}"#,
            r#"{"a":'x'}"#,
            r#"{,}"#,
        ] {
            assert!(matches!(collect(bad), Err(Syntax { .. })), "{bad}");
        }
        assert_eq!(
            scan_object(b"{\"a\":\"\xff\"}", &mut JsonScratch::new(), &mut |_, _| {}),
            Err(InvalidUtf8 { offset: 6 })
        );
        let msg = Syntax { offset: 3 }.to_string();
        assert!(msg.contains("byte 3"), "{msg}");
        assert!(TooDeep.to_string().contains("32"));
    }

    #[test]
    fn numbers() {
        for ok in [
            "0",
            "-0",
            "12",
            "1.5",
            "1e9",
            "1E+9",
            "-1.25e-3",
            "18446744073709551616",
        ] {
            let got = collect(&format!(r#"{{"n":{ok}}}"#)).unwrap();
            assert_eq!(got, vec![("n".into(), Owned::Num(ok.into()))]);
        }
    }

    #[test]
    fn depth_limit() {
        let nest = |n: usize| {
            let mut s = String::new();
            for _ in 0..n - 1 {
                s.push_str(r#"{"a":"#);
            }
            s.push_str(r#"{"a":1}"#);
            for _ in 0..n - 1 {
                s.push('}');
            }
            s
        };
        let got = collect(&nest(MAX_DEPTH)).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.len(), MAX_DEPTH * 2 - 1);
        assert_eq!(collect(&nest(MAX_DEPTH + 1)), Err(JsonError::TooDeep));
        let arrays = |n: usize| format!(r#"{{"a":{}{}}}"#, "[".repeat(n), "]".repeat(n));
        assert!(collect(&arrays(MAX_DEPTH - 1)).is_ok());
        assert_eq!(collect(&arrays(MAX_DEPTH)), Err(JsonError::TooDeep));
        // Hostile depth fails fast without recursing further.
        let deep = format!(r#"{{"a":{}"#, "[".repeat(1 << 20));
        assert_eq!(collect(&deep), Err(JsonError::TooDeep));
    }

    #[test]
    fn visitor_sees_prefix_before_error() {
        let mut seen = 0;
        let r = scan_object(
            br#"{"a":1,"b":2,"c":}"#,
            &mut JsonScratch::new(),
            &mut |_, _| seen += 1,
        );
        assert_eq!(seen, 2);
        assert!(r.is_err());
    }

    #[test]
    fn huge_line() {
        let mut line = String::from(r#"{"msg":""#);
        line.push_str(&"ab\\n".repeat(1 << 18));
        line.push_str(r#"","n":1}"#);
        let got = collect(&line).unwrap();
        assert_eq!(got.len(), 2);
        let Owned::Str(s) = &got[0].1 else { panic!() };
        assert_eq!(s.len(), 3 << 18);
    }

    /// Agrees with an independent reference on strings that stress escapes: `char::escape_unicode`
    /// style `\uXXXX` for every BMP scalar, surrogate pairs above it.
    #[test]
    fn unicode_escapes_round_trip() {
        let mut x: u32 = 0x1234_5678;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let Some(c) = char::from_u32(x % 0x11_0000) else {
                continue;
            };
            let mut units = [0u16; 2];
            let esc: String = c
                .encode_utf16(&mut units)
                .iter()
                .map(|u| format!("\\u{u:04x}"))
                .collect();
            let got = collect(&format!(r#"{{"k":"<{esc}>"}}"#)).unwrap();
            assert_eq!(got, vec![("k".into(), Owned::Str(format!("<{c}>")))]);
        }
    }

    #[test]
    fn fuzz_never_panics() {
        let seeds: [&[u8]; 5] = [
            br#"{"@timestamp":"2026-11-21T10:00:00Z","host":{"name":"web-01","ip":["10.0.0.1","::1"]},"n":-1.5e3}"#,
            br#"{"a\"b":"x\n\u00e9\ud83d\ude00","k":{"n\u0061me":null,"t":true,"f":false}}"#,
            br#"{"a":[1,{"b":[[[]]]},"\\"],"c":{}}"#,
            b"{\"\xc3\xa9\":\"\xe2\x82\xac\"}",
            br#"  {"x":{"y":{"z":{"w":0}}}}  "#,
        ];
        let mut x: u64 = 0xDEAD_BEEF_CAFE_F00D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut scratch = JsonScratch::new();
        let mut buf = Vec::new();
        let mut ok = 0;
        for i in 0..30_000 {
            buf.clear();
            if i % 10 == 0 {
                buf.push(b'{');
                let alphabet = b"{}[]\":,\\u0e.-tfn \x80\xc3 a";
                for _ in 0..next() % 60 {
                    buf.push(alphabet[next() as usize % alphabet.len()]);
                }
            } else {
                buf.extend_from_slice(seeds[i % seeds.len()]);
                for _ in 0..(next() % 4) {
                    let r = next();
                    let len = buf.len();
                    match r % 4 {
                        0 if len > 0 => buf[(r >> 8) as usize % len] = (r >> 16) as u8,
                        1 if len > 0 => buf.truncate((r >> 8) as usize % len),
                        2 if len > 0 => {
                            buf.remove((r >> 8) as usize % len);
                        }
                        _ => buf.insert(
                            (r >> 8) as usize % (len + 1),
                            b"{}[]\":,\\"[(r >> 16) as usize % 8],
                        ),
                    }
                }
            }
            let line_range = buf.as_ptr_range();
            let res = scan_object(&buf, &mut scratch, &mut |k, v| {
                let _ = k.len();
                if let JsonScalar::Num(s) | JsonScalar::Array(s) = v {
                    // Borrowed values lie inside the line.
                    assert!(line_range.contains(&s.as_ptr()) || s.is_empty());
                }
            });
            match res {
                Ok(()) => ok += 1,
                Err(
                    JsonError::Syntax { offset }
                    | JsonError::InvalidUtf8 { offset }
                    | JsonError::TrailingData { offset },
                ) => {
                    assert!(offset <= buf.len())
                }
                Err(_) => {}
            }
        }
        assert!(
            ok > 1000,
            "mutations should leave many lines valid, got {ok}"
        );
    }
}
