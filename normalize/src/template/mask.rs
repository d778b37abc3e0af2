//! Tokenising and masking one log line.
//!
//! Masking is what decides grouping quality: Drain can only merge lines whose constant tokens line
//! up, so every variable that is recognised here is one position Drain never has to guess about.
//! The scanners are hand-written byte loops rather than regexes because they run on every token of
//! every line; each one bails out on its first non-matching byte, so a plain word costs a couple of
//! comparisons.
//!
//! A line is split on ASCII whitespace. Each whitespace token is then lexed into segments at ASCII
//! punctuation, and at the start of every segment the value scanners get a chance to claim a
//! variable (so `uid=0` becomes `uid=<NUM>`, `/10.1.2.3:50010` becomes `/<IP>:<NUM>` and
//! `blk_-42` becomes `blk_<NUM>`). Three rules then work across whitespace tokens, because
//! otherwise one value would occupy a varying number of tokens and Drain, which only compares lines
//! of equal length, could never group them:
//!
//! - a number followed by a unit word (`12 ms`, `5.2 KB`, `0 bytes`) is one `<DURATION>`/`<SIZE>`;
//! - a ctime/syslog timestamp (`Fri Jun 17 07:07:00 2005`) is one `<TIMESTAMP>`;
//! - a run of like values is one value: adjacent placeholders of one kind (decimal and hex numbers
//!   count as one kind: `00030000` is as likely hex as `003b005b`), repeated identical tokens that
//!   hold a variable (`blk_<NUM> blk_<NUM> ...`), and a value restated in parentheses
//!   (`1190 bytes (1.16 KB)`, `10.0.0.1 (10.0.0.1)`) collapse into the first, since how many values
//!   a list holds is data, not structure. Tokens equal but for their digits (`an14 an15 an16`)
//!   are such a list too. A date followed by a time becomes one `<TIMESTAMP>`.

use watchpost_proto::{addr::dotted_quad, hash64};

/// The variable classes the built-in scanners recognise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Var {
    Num,
    Hex,
    Ip,
    Mac,
    Uuid,
    Path,
    Url,
    Size,
    Duration,
    Time,
    Date,
    Timestamp,
    Bool,
}

impl Var {
    const ALL: [Var; 13] = [
        Var::Num,
        Var::Hex,
        Var::Ip,
        Var::Mac,
        Var::Uuid,
        Var::Path,
        Var::Url,
        Var::Size,
        Var::Duration,
        Var::Time,
        Var::Date,
        Var::Timestamp,
        Var::Bool,
    ];

    pub(crate) const fn placeholder(self) -> &'static str {
        match self {
            Var::Num => "<NUM>",
            Var::Hex => "<HEX>",
            Var::Ip => "<IP>",
            Var::Mac => "<MAC>",
            Var::Uuid => "<UUID>",
            Var::Path => "<PATH>",
            Var::Url => "<URL>",
            Var::Size => "<SIZE>",
            Var::Duration => "<DURATION>",
            Var::Time => "<TIME>",
            Var::Date => "<DATE>",
            Var::Timestamp => "<TIMESTAMP>",
            Var::Bool => "<BOOL>",
        }
    }

    /// Nonzero code stored in [`Tok::pure`]; custom masks use [`CUSTOM_BASE`] and up.
    const fn code(self) -> u8 {
        self as u8 + 1
    }
}

/// `Tok::pure` code of the first user-supplied mask.
pub(crate) const CUSTOM_BASE: u8 = 64;
/// `Tok::pure` code of a placeholder this miner does not know (restored from another config).
pub(crate) const UNKNOWN_PLACEHOLDER: u8 = 255;

/// Code of the built-in or custom placeholder `text` (`<NUM>`, `<USER>`, ...), if it is one.
pub(crate) fn placeholder_code(text: &[u8], custom: &[CustomMask]) -> Option<u8> {
    if !is_placeholder_text(text) {
        return None;
    }
    if let Some(v) = Var::ALL.iter().find(|v| v.placeholder().as_bytes() == text) {
        return Some(v.code());
    }
    if let Some(i) = custom.iter().position(|c| c.placeholder.as_bytes() == text) {
        return Some(CUSTOM_BASE.saturating_add(i as u8));
    }
    Some(UNKNOWN_PLACEHOLDER)
}

/// `<` + upper-case letters, digits or `_` + `>`: the shape of every placeholder, so a restored
/// template recognises placeholders of masks it no longer has.
fn is_placeholder_text(t: &[u8]) -> bool {
    t.len() >= 3
        && t[0] == b'<'
        && t[t.len() - 1] == b'>'
        && t[1..t.len() - 1]
            .iter()
            .all(|&b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && t[1].is_ascii_uppercase()
}

/// A user-supplied regex mask, compiled and anchored.
#[derive(Debug)]
pub(crate) struct CustomMask {
    pub(crate) placeholder: String,
    pub(crate) re: regex::bytes::Regex,
}

/// One masked token: a span of [`Masker::buf`] plus what matching needs to know about it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tok {
    pub(crate) start: u32,
    pub(crate) end: u32,
    /// `hash64` of the masked text.
    pub(crate) hash: u64,
    /// `hash64` of the `key=` prefix for `key=value` tokens, 0 otherwise.
    pub(crate) key: u64,
    /// What follows `key=` (`VAL_*`).
    pub(crate) val: u8,
    /// Nonzero placeholder code when the token is exactly one placeholder.
    pub(crate) pure: u8,
    /// The token holds a placeholder or a digit, or is a dotted name, so it is no good as a tree
    /// branch.
    pub(crate) var: bool,
    /// `WORD_*`: whether the token is a plain word, and its case.
    pub(crate) word: u8,
}

/// Reusable buffers for masking; after the longest line has been seen nothing here allocates.
#[derive(Debug, Default)]
pub(crate) struct Masker {
    raw: Vec<Raw>,
    /// Masked tokens joined by single spaces: this is the template text of a new cluster.
    pub(crate) buf: Vec<u8>,
    pub(crate) toks: Vec<Tok>,
    pub(crate) custom: Vec<CustomMask>,
}

impl Masker {
    pub(crate) fn new(custom: Vec<CustomMask>) -> Self {
        Masker {
            custom,
            ..Masker::default()
        }
    }

    /// Masks `line` into `buf`/`toks`.
    pub(crate) fn mask(&mut self, line: &str) {
        let Masker {
            raw,
            buf,
            toks,
            custom,
        } = self;
        raw.clear();
        buf.clear();
        toks.clear();
        let bytes = line.as_bytes();
        split_whitespace(bytes, raw);

        let mut i = 0;
        while i < raw.len() {
            if !toks.is_empty() {
                buf.push(b' ');
            }
            let start = buf.len();
            let r = raw[i];
            let tok = &bytes[r.start as usize..r.end as usize];
            let (consumed, info) = if let Some(code) = apply_custom(custom, tok, buf) {
                (1, Info::scan(&buf[start..], code))
            } else if let Some(n) = timestamp_tokens(bytes, &raw[i..], buf) {
                (n, Info::scan(&buf[start..], 0))
            } else if let Some(n) = quantity_tokens(bytes, &raw[i..], buf) {
                (n, Info::scan(&buf[start..], 0))
            } else {
                (1, mask_token(tok, r.flags, buf))
            };
            finish_token(buf, toks, start, info);
            i += consumed;
        }
    }
}

/// A whitespace token of the line, with the `F_*` classes of the bytes it holds.
#[derive(Clone, Copy, Debug)]
struct Raw {
    start: u32,
    end: u32,
    flags: u8,
}

const F_SPACE: u8 = 1;
const F_DIGIT: u8 = 2;
const F_DOT: u8 = 4;
const F_COLON: u8 = 8;
const F_EQ: u8 = 16;
const F_LT: u8 = 32;
const F_SLASH: u8 = 64;

/// Byte classes, so that one pass over the line both splits it and tells each token's lexer
/// which value scanners can possibly match.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b' ' as usize] = F_SPACE;
    t[b'\t' as usize] = F_SPACE;
    t[b'\n' as usize] = F_SPACE;
    t[b'\r' as usize] = F_SPACE;
    t[0x0b] = F_SPACE;
    t[0x0c] = F_SPACE;
    let mut d = b'0';
    while d <= b'9' {
        t[d as usize] = F_DIGIT;
        d += 1;
    }
    t[b'.' as usize] = F_DOT;
    t[b':' as usize] = F_COLON;
    t[b'=' as usize] = F_EQ;
    t[b'<' as usize] = F_LT;
    t[b'/' as usize] = F_SLASH;
    t
};

fn split_whitespace(bytes: &[u8], raw: &mut Vec<Raw>) {
    let mut i = 0;
    let n = bytes.len();
    while i < n {
        while i < n && CLASS[bytes[i] as usize] == F_SPACE {
            i += 1;
        }
        let start = i;
        let mut flags = 0;
        while i < n {
            let c = CLASS[bytes[i] as usize];
            if c == F_SPACE {
                break;
            }
            flags |= c;
            i += 1;
        }
        if i > start {
            raw.push(Raw {
                start: start as u32,
                end: i as u32,
                flags,
            });
        }
    }
}

/// What the lexer learnt about a token it wrote, so that recording it needs no second scan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Info {
    /// Placeholder code when the token is exactly one placeholder.
    pure: u8,
    /// Holds a digit or a placeholder.
    var: bool,
    /// Holds `=` or `:` (so may be `key=value`).
    eq: bool,
    /// Holds `.` (so may be a dotted name).
    dot: bool,
}

impl Info {
    fn scan(text: &[u8], pure: u8) -> Info {
        Info {
            pure: if pure != 0 { pure } else { builtin_code(text) },
            var: has_var(text),
            eq: text.iter().any(|&b| b == b'=' || b == b':'),
            dot: text.contains(&b'.'),
        }
    }
}

/// User masks see whole tokens, first as written, then without wrapping punctuation (so that
/// `(alice),` still masks as `(<USER>),`).
fn apply_custom(custom: &[CustomMask], tok: &[u8], buf: &mut Vec<u8>) -> Option<u8> {
    if custom.is_empty() {
        return None;
    }
    let (lead, core, trail) = split_punct(tok);
    for (i, c) in custom.iter().enumerate() {
        let code = CUSTOM_BASE.saturating_add(i as u8);
        if c.re.is_match(tok) {
            buf.extend_from_slice(c.placeholder.as_bytes());
            return Some(code);
        }
        if !core.is_empty() && core.len() < tok.len() && c.re.is_match(core) {
            buf.extend_from_slice(lead);
            buf.extend_from_slice(c.placeholder.as_bytes());
            buf.extend_from_slice(trail);
            return Some(if lead.is_empty() && trail.is_empty() {
                code
            } else {
                0
            });
        }
    }
    None
}

/// Splits wrapping punctuation off a token: `("abc"),` -> (`("`, `abc`, `"),`).
fn split_punct(tok: &[u8]) -> (&[u8], &[u8], &[u8]) {
    let mut s = 0;
    while s < tok.len() && matches!(tok[s], b'(' | b'[' | b'{' | b'<' | b'\'' | b'"') {
        s += 1;
    }
    let mut e = tok.len();
    while e > s
        && matches!(
            tok[e - 1],
            b')' | b']' | b'}' | b'>' | b'\'' | b'"' | b',' | b';' | b':' | b'.' | b'!' | b'?'
        )
    {
        e -= 1;
    }
    (&tok[..s], &tok[s..e], &tok[e..])
}

/// Records the token just written at `buf[start..]`, folding it into the previous token when the
/// two are one value (see the module doc).
fn finish_token(buf: &mut Vec<u8>, toks: &mut Vec<Tok>, start: usize, info: Info) {
    let pure = info.pure;
    if let Some(prev) = toks.last().copied() {
        if prev.pure != 0 {
            let prev_start = prev.start as usize;
            // A run of like values: keep the first (a date followed by a time is a timestamp).
            if pure != 0 && same_family(prev.pure, pure) {
                buf.truncate(start - 1);
                if prev.pure == Var::Date.code() && pure == Var::Time.code() {
                    buf.truncate(prev_start);
                    buf.extend_from_slice(Var::Timestamp.placeholder().as_bytes());
                    toks.pop();
                    let info = Info::scan(&buf[prev_start..], Var::Timestamp.code());
                    push_tok(buf, toks, prev_start, info);
                }
                return;
            }
            // `<SIZE> (<SIZE>),` -> `<SIZE>,`: a value restated in parentheses.
            let cur = &buf[start..];
            let ph = &buf[prev_start..start - 1];
            if cur.len() >= ph.len() + 2
                && cur[0] == b'('
                && &cur[1..1 + ph.len()] == ph
                && cur[1 + ph.len()] == b')'
                && cur[2 + ph.len()..]
                    .iter()
                    .all(|&b| !is_word(b) && b != b'<')
            {
                let tail = start + 2 + ph.len();
                let tail_len = buf.len() - tail;
                buf.copy_within(tail.., start - 1);
                buf.truncate(start - 1 + tail_len);
                toks.pop();
                let code = if tail_len == 0 { prev.pure } else { 0 };
                let info = Info::scan(&buf[prev_start..], code);
                push_tok(buf, toks, prev_start, info);
                return;
            }
        } else if prev.var
            && info.var
            && same_shape(&buf[start..], &buf[prev.start as usize..prev.end as usize])
        {
            // `blk_<NUM> blk_<NUM> ...`, `an14 an15 ...`: a list of like values.
            buf.truncate(start - 1);
            return;
        }
    }
    push_tok(buf, toks, start, info);
}

/// Equal, or equal but for the digit runs in them (`an14` and `an152`, `cpu3:` and `cpu12:`).
fn same_shape(a: &[u8], b: &[u8]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            i = digits_end(a, i);
            j = digits_end(b, j);
        } else if a[i] == b[j] {
            i += 1;
            j += 1;
        } else {
            return false;
        }
    }
    i == a.len() && j == b.len()
}

/// Placeholders that can stand for the same kind of value: equal ones, numbers written in decimal
/// or hex (`00030000` next to `003b005b`), and a date with its time.
fn same_family(a: u8, b: u8) -> bool {
    let numeric = |c| c == Var::Num.code() || c == Var::Hex.code();
    a == b || (numeric(a) && numeric(b)) || (a == Var::Date.code() && b == Var::Time.code())
}

fn push_tok(buf: &[u8], toks: &mut Vec<Tok>, start: usize, info: Info) {
    let text = &buf[start..];
    let (key, val) = if info.eq {
        key_val(text)
    } else {
        (0, VAL_NONE)
    };
    toks.push(Tok {
        start: start as u32,
        end: buf.len() as u32,
        hash: hash64(text),
        key,
        val,
        pure: info.pure,
        var: info.pure != 0 || info.var || (info.dot && dotted_name(text)),
        word: if info.var {
            WORD_NONE
        } else {
            word_class(text)
        },
    });
}

fn builtin_code(text: &[u8]) -> u8 {
    if text.len() < 3 || text[0] != b'<' || text[text.len() - 1] != b'>' {
        return 0;
    }
    Var::ALL
        .iter()
        .find(|v| v.placeholder().as_bytes() == text)
        .map_or(0, |v| v.code())
}

/// A digit or a placeholder inside: the token is (partly) variable.
pub(crate) fn has_var(text: &[u8]) -> bool {
    text.iter().any(|&b| b.is_ascii_digit() || b == b'<')
}

/// A dotted name such as `com.apple.Safari.Update:` or `org.example.Main` (two or more dots
/// between word characters): a job, class or host name, as likely to vary at the head of a
/// message as a number is, so it takes the tree's wildcard branch. Drain still compares it.
pub(crate) fn dotted_name(text: &[u8]) -> bool {
    text.windows(3)
        .filter(|w| w[1] == b'.' && is_word(w[0]) && is_word(w[2]))
        .nth(1)
        .is_some()
}

/// `Tok::word` of a token that is not a plain word.
pub(crate) const WORD_NONE: u8 = 0;
/// `Tok::word` of a plain word starting lower-case (`root`, `spawned`).
pub(crate) const WORD_LOWER: u8 = 1;
/// `Tok::word` of a plain word starting upper-case (`Started`, `SPP.`, `'Active'`).
pub(crate) const WORD_UPPER: u8 = 2;

/// Whether `text` (no digits, no placeholder) is a plain word: ASCII letters and `_`, wrapped
/// in punctuation at most; and if so its case (`WORD_*`).
pub(crate) fn word_class(text: &[u8]) -> u8 {
    let (_, core, _) = split_punct(text);
    if core.is_empty() || !core.iter().all(|&b| b.is_ascii_alphabetic() || b == b'_') {
        WORD_NONE
    } else if core[0].is_ascii_uppercase() {
        WORD_UPPER
    } else {
        WORD_LOWER
    }
}

/// `Tok::val` of a token that is not `key=value`.
pub(crate) const VAL_NONE: u8 = 0;
/// `Tok::val` of `key=` with nothing after it.
pub(crate) const VAL_EMPTY: u8 = 1;
/// `Tok::val` of `key=<PLACEHOLDER>` (trailing punctuation allowed).
pub(crate) const VAL_PURE: u8 = 2;
/// `Tok::val` of any other `key=value`.
pub(crate) const VAL_OTHER: u8 = 3;

/// The `key=` prefix hash (an optional `(` or `[`, an identifier, `=`) and the kind of value
/// (`VAL_*`), or `(0, VAL_NONE)`. Keys make `uid=0` and `uid=5` one token with different values,
/// and `uid=0` and `gid=0` different tokens whatever the value. `key:value` is a key too when the
/// key is a plain identifier and the value starts with a letter in the same token
/// (`overlap:<BOOL>`, `nodes:node-<NUM>`); `host.name:<NUM>`, `Class::method` and `ARPT:` are not.
pub(crate) fn key_val(text: &[u8]) -> (u64, u8) {
    let mut i = 0;
    if i < text.len() && matches!(text[i], b'(' | b'[' | b'{') {
        i += 1;
    }
    if i >= text.len() || !text[i].is_ascii_alphabetic() {
        return (0, VAL_NONE);
    }
    let ident_start = i;
    while i < text.len() {
        match text[i] {
            b':' if text.get(i + 1).is_some_and(u8::is_ascii_alphabetic)
                && text[ident_start..i]
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                let key = hash64(&text[..=i]) | 1;
                let mut v = &text[i + 1..];
                while let [rest @ .., b')' | b']' | b'}' | b',' | b';' | b':' | b'.'] = v {
                    v = rest;
                }
                let val = if is_placeholder_text(v) {
                    VAL_PURE
                } else {
                    VAL_OTHER
                };
                return (key, val);
            }
            b'=' => {
                let key = hash64(&text[..=i]) | 1;
                let mut v = &text[i + 1..];
                while let [rest @ .., b')' | b']' | b'}' | b',' | b';' | b':' | b'.'] = v {
                    v = rest;
                }
                let val = if text.len() == i + 1 {
                    VAL_EMPTY
                } else if is_placeholder_text(v) {
                    VAL_PURE
                } else {
                    VAL_OTHER
                };
                return (key, val);
            }
            b if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-') => i += 1,
            _ => return (0, VAL_NONE),
        }
    }
    (0, VAL_NONE)
}

#[inline]
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b >= 0x80
}

#[inline]
fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// True when a value ending at `e` is not glued to more word characters.
#[inline]
fn boundary(t: &[u8], e: usize) -> bool {
    e >= t.len() || !is_word(t[e])
}

fn digits_end(t: &[u8], mut i: usize) -> usize {
    while i < t.len() && t[i].is_ascii_digit() {
        i += 1;
    }
    i
}

fn hex_end(t: &[u8], mut i: usize) -> usize {
    while i < t.len() && is_hex(t[i]) {
        i += 1;
    }
    i
}

fn alpha_end(t: &[u8], mut i: usize) -> usize {
    while i < t.len() && t[i].is_ascii_alphabetic() {
        i += 1;
    }
    i
}

/// Per-token facts that let the value scanners skip classes that cannot match.
#[derive(Clone, Copy)]
struct Hints {
    digit: bool,
    dot: bool,
    colon: bool,
    url: bool,
}

/// Lexes one whitespace token into `buf`, replacing recognised values by placeholders.
fn mask_token(t: &[u8], flags: u8, buf: &mut Vec<u8>) -> Info {
    let hints = Hints {
        digit: flags & F_DIGIT != 0,
        dot: flags & F_DOT != 0,
        colon: flags & F_COLON != 0,
        url: flags & (F_COLON | F_SLASH) == F_COLON | F_SLASH,
    };
    let start = buf.len();
    let n = t.len();
    let mut i = 0;
    let mut seg_start = true;
    let mut placeholders = 0u32;
    let mut last = Var::Num;
    let mut no_path_before = 0;
    while i < n {
        if seg_start && let Some((e, v)) = match_value(t, i, hints, &mut no_path_before) {
            buf.extend_from_slice(v.placeholder().as_bytes());
            placeholders += 1;
            last = v;
            i = e;
            seg_start = false;
            continue;
        }
        if is_word(t[i]) {
            let s = i;
            while i < n && is_word(t[i]) {
                i += 1;
            }
            buf.extend_from_slice(&t[s..i]);
            seg_start = false;
        } else {
            buf.push(t[i]);
            i += 1;
            seg_start = true;
        }
    }
    let only = placeholders == 1 && buf.len() - start == last.placeholder().len();
    Info {
        pure: if only { last.code() } else { 0 },
        var: placeholders > 0 || flags & (F_DIGIT | F_LT) != 0,
        eq: flags & (F_EQ | F_COLON) != 0,
        dot: flags & F_DOT != 0,
    }
}

/// Tries every value class at `t[i..]` (the start of a segment); returns where the value ends.
/// `no_path_before` carries what earlier path scans of the token learnt ([`match_path`]).
fn match_value(t: &[u8], i: usize, h: Hints, no_path_before: &mut usize) -> Option<(usize, Var)> {
    let c = t[i];
    if c.is_ascii_digit() {
        // Every class but plain numbers and hex needs punctuation or length.
        if (h.colon || h.dot || t.len() - i >= 8)
            && let Some(r) = match_date(t, i)
                .or_else(|| match_time(t, i))
                .or_else(|| match_ipv4(t, i))
                .or_else(|| match_mac(t, i))
                .or_else(|| match_uuid(t, i))
                .or_else(|| if h.colon { match_ipv6(t, i) } else { None })
        {
            return Some(r);
        }
        return match_hex(t, i).or_else(|| match_number(t, i));
    }
    match c {
        b'-' | b'+' | b'<' | b'>' | b'~' if h.digit => {
            if c == b'~' && t.get(i + 1) == Some(&b'/') {
                return match_path(t, i, no_path_before);
            }
            match_number(t, i)
        }
        b'/' | b'.' | b'~' => match_path(t, i, no_path_before),
        b':' if h.colon => match_ipv6(t, i),
        _ if c.is_ascii_alphabetic() => {
            if matches!(c, b't' | b'f' | b'T' | b'F')
                && let Some(r) = match_bool(t, i)
            {
                return Some(r);
            }
            if h.colon && t.get(i + 1) == Some(&b':') && t.get(i + 2) == Some(&b'\\') {
                return match_windows_path(t, i);
            }
            if h.url
                && let Some(r) = match_url(t, i)
            {
                return Some(r);
            }
            if h.digit && is_hex(c) {
                return match_mac(t, i)
                    .or_else(|| match_uuid(t, i))
                    .or_else(|| if h.colon { match_ipv6(t, i) } else { None })
                    .or_else(|| match_hex(t, i));
            }
            None
        }
        _ => None,
    }
}

/// `true` or `false` in any case, as a whole word: a flag's value, never what tells events apart.
fn match_bool(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let e = alpha_end(t, i);
    let w = &t[i..e];
    if (w.eq_ignore_ascii_case(b"true") || w.eq_ignore_ascii_case(b"false")) && boundary(t, e) {
        Some((e, Var::Bool))
    } else {
        None
    }
}

/// `[<>~]=?[+-]?digits(.digits)*([eE][+-]?digits)?` with an optional unit suffix (`12ms`, `5KB`).
fn match_number(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let n = t.len();
    let mut j = i;
    if j < n && matches!(t[j], b'<' | b'>' | b'~') {
        j += 1;
        if j < n && t[j] == b'=' {
            j += 1;
        }
    }
    if j < n && matches!(t[j], b'-' | b'+') {
        j += 1;
    }
    let d = j;
    j = digits_end(t, j);
    if j == d {
        return None;
    }
    while j + 1 < n && t[j] == b'.' && t[j + 1].is_ascii_digit() {
        j = digits_end(t, j + 1);
    }
    if j + 1 < n && matches!(t[j], b'e' | b'E') {
        let mut k = j + 1;
        if matches!(t[k], b'+' | b'-') {
            k += 1;
        }
        let ke = digits_end(t, k);
        if ke > k && boundary(t, ke) {
            return Some((ke, Var::Num));
        }
    }
    if j < n && t[j].is_ascii_alphabetic() {
        let mut e = alpha_end(t, j);
        let v = unit(&t[j..e], true)?;
        // `1h30m5s`: more number+unit pairs.
        while v == Var::Duration && e < n && t[e].is_ascii_digit() {
            let d = digits_end(t, e);
            let u = alpha_end(t, d);
            if u == d || unit(&t[d..u], true) != Some(Var::Duration) {
                return None;
            }
            e = u;
        }
        return if boundary(t, e) { Some((e, v)) } else { None };
    }
    if !boundary(t, j) {
        return None;
    }
    Some((j, Var::Num))
}

/// The class of a unit word; `attached` is true for a suffix (`12ms`) rather than a word (`12 ms`).
fn unit(w: &[u8], attached: bool) -> Option<Var> {
    if w.len() == 1 {
        return match w[0] {
            b'B' | b'K' | b'M' | b'G' | b'T' => Some(Var::Size),
            b'k' | b'b' if attached => Some(Var::Size),
            b's' | b'h' => Some(Var::Duration),
            b'm' | b'd' if attached => Some(Var::Duration),
            _ => None,
        };
    }
    if w.len() > 12 {
        return None;
    }
    let mut low = [0u8; 12];
    for (d, s) in low.iter_mut().zip(w) {
        *d = s.to_ascii_lowercase();
    }
    let low = &low[..w.len()];
    const SIZES: &[&[u8]] = &[
        b"kb", b"mb", b"gb", b"tb", b"pb", b"kib", b"mib", b"gib", b"tib", b"byte", b"bytes",
    ];
    const DURATIONS: &[&[u8]] = &[
        b"ns",
        b"us",
        b"ms",
        b"sec",
        b"secs",
        b"min",
        b"mins",
        b"hr",
        b"hrs",
        b"msec",
        b"msecs",
        b"usec",
        b"usecs",
        b"nsec",
        b"nsecs",
        b"second",
        b"seconds",
        b"minute",
        b"minutes",
        b"hour",
        b"hours",
        b"day",
        b"days",
        b"millis",
        b"micros",
        b"nanos",
        b"millisecond",
        b"milliseconds",
        b"microsecond",
        b"microseconds",
        b"nanosecond",
        b"nanoseconds",
    ];
    if SIZES.contains(&low) {
        Some(Var::Size)
    } else if DURATIONS.contains(&low) {
        Some(Var::Duration)
    } else {
        None
    }
}

/// `0x1f`, or a bare run of at least 6 hex digits mixing digits and letters (`003a90fc`).
fn match_hex(t: &[u8], i: usize) -> Option<(usize, Var)> {
    if t[i] == b'0' && matches!(t.get(i + 1), Some(b'x' | b'X')) {
        let e = hex_end(t, i + 2);
        if e > i + 2 && boundary(t, e) {
            return Some((e, Var::Hex));
        }
        return None;
    }
    let e = hex_end(t, i);
    if e - i < 6 || !boundary(t, e) {
        return None;
    }
    let s = &t[i..e];
    if s.iter().any(u8::is_ascii_digit) && s.iter().any(u8::is_ascii_alphabetic) {
        Some((e, Var::Hex))
    } else {
        None
    }
}

/// Dotted quad (octets of at most 255, the grammar every scanner shares) with an optional
/// `/prefix`; a quad glued to `.word` is part of a host name.
fn match_ipv4(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let n = t.len();
    let mut j = i + dotted_quad(&t[i..])?.1;
    if !boundary(t, j) || (j + 1 < n && t[j] == b'.' && is_word(t[j + 1])) {
        return None;
    }
    if j + 1 < n && t[j] == b'/' {
        let e = digits_end(t, j + 1);
        if e > j + 1 && e - j <= 3 && boundary(t, e) && !(e < n && t[e] == b'.') {
            j = e;
        }
    }
    Some((j, Var::Ip))
}

/// At least three `:`-separated groups of up to four hex digits, with at most one `::`; eight
/// groups when there is no `::`.
fn match_ipv6(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let n = t.len();
    let mut j = i;
    let mut groups = 0;
    let mut colons = 0;
    let mut double = false;
    let mut last_group_end = i;
    while j < n {
        let e = hex_end(t, j);
        if e - j > 4 {
            return None;
        }
        if e > j {
            groups += 1;
            last_group_end = e;
        }
        // No address has more: stop here rather than read a long run of `1:1:1:...` to its end
        // from every colon in it.
        if groups > 8 || colons > 8 {
            return None;
        }
        j = e;
        if j < n && t[j] == b':' {
            colons += 1;
            j += 1;
            if j < n && t[j] == b':' {
                if double {
                    return None;
                }
                double = true;
                colons += 1;
                j += 1;
                last_group_end = j;
            }
        } else {
            break;
        }
    }
    let e = last_group_end;
    let ok = if double {
        groups >= 1 && colons >= 2
    } else {
        groups == 8 && colons == 7
    };
    if ok && boundary(t, e) && !(e < n && t[e] == b':') {
        Some((e, Var::Ip))
    } else {
        None
    }
}

/// Six or more two-digit hex groups separated by one consistent `:` or `-`.
fn match_mac(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let n = t.len();
    if i + 17 > n || !is_hex(t[i]) || !is_hex(t[i + 1]) {
        return None;
    }
    let sep = t[i + 2];
    if sep != b':' && sep != b'-' {
        return None;
    }
    let mut j = i;
    let mut groups = 0;
    loop {
        if j + 2 > n || !is_hex(t[j]) || !is_hex(t[j + 1]) {
            return None;
        }
        j += 2;
        groups += 1;
        if j + 2 < n && t[j] == sep && is_hex(t[j + 1]) && is_hex(t[j + 2]) {
            j += 1;
        } else {
            break;
        }
    }
    if groups >= 6 && boundary(t, j) {
        Some((j, Var::Mac))
    } else {
        None
    }
}

/// 8-4-4-4-12 hex digits.
fn match_uuid(t: &[u8], i: usize) -> Option<(usize, Var)> {
    if i + 36 > t.len() {
        return None;
    }
    let mut j = i;
    for (k, len) in [8usize, 4, 4, 4, 12].into_iter().enumerate() {
        if hex_end(t, j) - j != len {
            return None;
        }
        j += len;
        if k < 4 {
            if t[j] != b'-' {
                return None;
            }
            j += 1;
        }
    }
    if boundary(t, j) {
        Some((j, Var::Uuid))
    } else {
        None
    }
}

/// `H:MM`, `HH:MM:SS` with an optional `.fff`/`,fff` fraction.
fn match_time(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let j = time_end(t, i)?;
    // `1:23:45:67` is not a time, and neither is `12:34abc`.
    if !boundary(t, j) || (j + 1 < t.len() && t[j] == b':' && t[j + 1].is_ascii_digit()) {
        return None;
    }
    Some((j, Var::Time))
}

fn time_end(t: &[u8], i: usize) -> Option<usize> {
    let n = t.len();
    let e = digits_end(t, i);
    if e - i == 0 || e - i > 2 || e >= n || t[e] != b':' {
        return None;
    }
    let mut j = e + 1;
    let m = digits_end(t, j);
    if m - j != 2 {
        return None;
    }
    j = m;
    if j + 2 < n && t[j] == b':' && digits_end(t, j + 1) - (j + 1) == 2 {
        j += 3;
        if j + 1 < n && matches!(t[j], b'.' | b',') && t[j + 1].is_ascii_digit() {
            j = digits_end(t, j + 1);
        }
    }
    Some(j)
}

/// `YYYY-MM-DD` (also `/` and `.`), optionally followed by `T`/`_` and a time and zone, or
/// `DD/MM/YYYY`-style slashed dates.
fn match_date(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let n = t.len();
    let e = digits_end(t, i);
    if e - i == 4 && e < n && matches!(t[e], b'-' | b'/' | b'.') {
        let sep = t[e];
        let m = digits_end(t, e + 1);
        if m - (e + 1) == 0 || m - (e + 1) > 2 || m >= n || t[m] != sep {
            return None;
        }
        let d = digits_end(t, m + 1);
        if d - (m + 1) == 0 || d - (m + 1) > 2 {
            return None;
        }
        if d + 1 < n
            && matches!(t[d], b'T' | b'_')
            && let Some(mut j) = time_end(t, d + 1)
        {
            if j < n && t[j] == b'Z' {
                j += 1;
            } else if j + 1 < n && matches!(t[j], b'+' | b'-') && t[j + 1].is_ascii_digit() {
                let z = digits_end(t, j + 1);
                j = if z < n && t[z] == b':' {
                    digits_end(t, z + 1)
                } else {
                    z
                };
            }
            if boundary(t, j) {
                return Some((j, Var::Timestamp));
            }
        }
        if boundary(t, d) && !(d + 1 < n && t[d] == b'.' && t[d + 1].is_ascii_digit()) {
            return Some((d, Var::Date));
        }
        return None;
    }
    if (1..=2).contains(&(e - i)) && e < n && t[e] == b'/' {
        let m = digits_end(t, e + 1);
        if m - (e + 1) == 0 || m - (e + 1) > 2 || m >= n || t[m] != b'/' {
            return None;
        }
        let y = digits_end(t, m + 1);
        if (y - (m + 1) == 2 || y - (m + 1) == 4) && boundary(t, y) && !(y < n && t[y] == b'/') {
            return Some((y, Var::Date));
        }
    }
    None
}

/// Longest URL scheme looked for (registered schemes are under 30 characters). Without a bound,
/// `a.a.a.a...` with no `://` was read to its end from every dot in it.
const MAX_SCHEME_LEN: usize = 32;

/// `scheme://rest`, up to a closing bracket, quote or comma.
fn match_url(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let n = t.len();
    let mut j = i;
    while j < n && (t[j].is_ascii_alphanumeric() || matches!(t[j], b'+' | b'.' | b'-')) {
        j += 1;
        if j - i > MAX_SCHEME_LEN {
            return None;
        }
    }
    if j + 3 > n || &t[j..j + 3] != b"://" {
        return None;
    }
    j += 3;
    let body = j;
    while j < n
        && !matches!(
            t[j],
            b'"' | b'\'' | b'<' | b'>' | b')' | b']' | b'}' | b'|' | b','
        )
    {
        j += 1;
    }
    while j > body && matches!(t[j - 1], b'.' | b':' | b';' | b'!' | b'?') {
        j -= 1;
    }
    if j > body { Some((j, Var::Url)) } else { None }
}

/// An absolute (`/a/b`), home (`~/a`) or explicitly relative (`./a`, `../a`) path.
///
/// `no_path_before`: a run of path characters without a letter or digit is no path, nor is any
/// part of it. When one is found its end is kept here, and starts before it are not scanned
/// again: `////...` was otherwise read to its end from every slash, quadratic in the token.
fn match_path(t: &[u8], i: usize, no_path_before: &mut usize) -> Option<(usize, Var)> {
    if i < *no_path_before {
        return None;
    }
    let n = t.len();
    let mut j = i;
    match t[i] {
        b'/' => {}
        b'~' if t.get(i + 1) == Some(&b'/') => j += 1,
        b'.' if t.get(i + 1) == Some(&b'/') => j += 1,
        b'.' if t.get(i + 1) == Some(&b'.') && t.get(i + 2) == Some(&b'/') => j += 2,
        _ => return None,
    }
    // `/10.1.2.3:80` is Java's rendering of a socket address, not a path.
    if j + 1 < n && t[j + 1].is_ascii_digit() && match_ipv4(t, j + 1).is_some() {
        return None;
    }
    while j < n
        && (is_word(t[j])
            || matches!(
                t[j],
                b'/' | b'.' | b'_' | b'-' | b'~' | b'+' | b'@' | b'%' | b'$'
            ))
    {
        j += 1;
    }
    let run_end = j;
    while j > i + 1 && t[j - 1] == b'.' {
        j -= 1;
    }
    if !t[i..j].iter().any(|&b| is_word(b)) {
        *no_path_before = run_end;
        return None;
    }
    if j - i < 2 {
        return None;
    }
    Some((j, Var::Path))
}

/// `C:\dir\file`: up to a quote, a closing bracket or a separator.
fn match_windows_path(t: &[u8], i: usize) -> Option<(usize, Var)> {
    let mut j = i + 3;
    while j < t.len() && !matches!(t[j], b'"' | b'\'' | b')' | b']' | b',' | b';') {
        j += 1;
    }
    while j > i + 3 && t[j - 1] == b'.' {
        j -= 1;
    }
    Some((j, Var::Path))
}

const WEEKDAYS: [&[u8]; 7] = [b"mon", b"tue", b"wed", b"thu", b"fri", b"sat", b"sun"];
const MONTHS: [&[u8]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
];

fn is_name3(w: &[u8], names: &[&[u8]]) -> bool {
    w.len() == 3 && {
        let l = [
            w[0].to_ascii_lowercase(),
            w[1].to_ascii_lowercase(),
            w[2].to_ascii_lowercase(),
        ];
        names.contains(&&l[..])
    }
}

/// ctime and syslog timestamps spread over several whitespace tokens:
/// `[Dow] Mon DD HH:MM:SS [TZ] [YYYY]`. Writes `<TIMESTAMP>` (keeping punctuation around it) and
/// returns how many tokens it used.
fn timestamp_tokens(bytes: &[u8], raw: &[Raw], buf: &mut Vec<u8>) -> Option<usize> {
    let tok = |k: usize| -> &[u8] { &bytes[raw[k].start as usize..raw[k].end as usize] };
    if raw.len() < 3 {
        return None;
    }
    let first = tok(0);
    let lead = first
        .iter()
        .take_while(|&&b| matches!(b, b'(' | b'[' | b'{' | b'<' | b'\'' | b'"'))
        .count();
    let w0 = &first[lead..];
    let mut k = 0;
    let mut word = w0;
    if is_name3(word, &WEEKDAYS) {
        k = 1;
        word = tok(1);
    }
    if !is_name3(word, &MONTHS) || raw.len() < k + 3 {
        return None;
    }
    let day = tok(k + 1);
    if day.is_empty() || day.len() > 2 || !day.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let time = tok(k + 2);
    let (te, _) = match_time(time, 0)?;
    let mut last = k + 2;
    let mut trail = &time[te..];
    if trail.is_empty() {
        // Optional zone then year, or just the year.
        let is_year = |w: &[u8]| {
            let d = digits_end(w, 0);
            d == 4 && w[d..].iter().all(|&b| !is_word(b))
        };
        if raw.len() > last + 1 && is_year(tok(last + 1)) {
            last += 1;
        } else if raw.len() > last + 2 {
            let z = tok(last + 1);
            if (2..=5).contains(&z.len())
                && z.iter().all(u8::is_ascii_uppercase)
                && is_year(tok(last + 2))
            {
                last += 2;
            }
        }
        if last > k + 2 {
            trail = &tok(last)[4..];
        }
    }
    buf.extend_from_slice(&first[..lead]);
    buf.extend_from_slice(Var::Timestamp.placeholder().as_bytes());
    buf.extend_from_slice(trail);
    Some(last + 1)
}

/// A number token followed by a unit word (`12 ms`, `(1.16 KB)`): one `<SIZE>`/`<DURATION>`.
fn quantity_tokens(bytes: &[u8], raw: &[Raw], buf: &mut Vec<u8>) -> Option<usize> {
    if raw.len() < 2 || raw[0].flags & F_DIGIT == 0 {
        return None;
    }
    let num = &bytes[raw[0].start as usize..raw[0].end as usize];
    let c = num[0];
    if !(c.is_ascii_digit() || matches!(c, b'(' | b'[' | b'-' | b'+' | b'<' | b'>' | b'~')) {
        return None;
    }
    let lead = num
        .iter()
        .take_while(|&&b| matches!(b, b'(' | b'[' | b'{'))
        .count();
    match match_number(num, lead) {
        Some((end, Var::Num)) if end == num.len() => {}
        _ => return None,
    }
    let w = &bytes[raw[1].start as usize..raw[1].end as usize];
    let ue = alpha_end(w, 0);
    if ue == 0 || w[ue..].iter().any(|&b| is_word(b) || b == b'<') {
        return None;
    }
    let v = unit(&w[..ue], false)?;
    buf.extend_from_slice(&num[..lead]);
    buf.extend_from_slice(v.placeholder().as_bytes());
    buf.extend_from_slice(&w[ue..]);
    Some(2)
}
