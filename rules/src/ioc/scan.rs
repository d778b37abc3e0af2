//! Finding indicators in free text (log messages) in one pass, without allocating.
//!
//! The text is cut into tokens of `[A-Za-z0-9._:-]`; while a token is read the classes of its
//! bytes are or-ed together, so deciding what it could be (hash, IPv4, IPv6, domain) costs
//! nothing more, and only tokens of a kind the set holds are looked up. A token with colons that
//! is not an IPv6 address is split at them (`1.2.3.4:22`, `evil.com:443`, `dst:10.0.0.1`).
//! `scheme://` starts a URL, taken up to the next blank or quote; its host and path are then
//! read as ordinary tokens, so a URL can match as a URL and as a domain.

use super::{IocId, IocSet};
use std::net::Ipv6Addr;
use watchpost_proto::addr::dotted_quad;

const WORD: u8 = 1;
const DIGIT: u8 = 2;
/// `a-f`, `A-F`.
const HEX: u8 = 4;
/// Letters other than hex digits.
const ALPHA: u8 = 8;
const DOT: u8 = 16;
const COLON: u8 = 32;
/// `-` and `_`.
const DASH: u8 = 64;

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = match c {
            b'0'..=b'9' => WORD | DIGIT,
            b'a'..=b'f' | b'A'..=b'F' => WORD | HEX,
            b'g'..=b'z' | b'G'..=b'Z' => WORD | ALPHA,
            b'.' => WORD | DOT,
            b':' => WORD | COLON,
            b'-' | b'_' => WORD | DASH,
            _ => 0,
        };
        i += 1;
    }
    t
};

/// Longest URL looked up. Indicator URLs are far shorter; a longer run of URL bytes is junk or
/// an attack on the scanner, and looking it up from each of its `://` would be quadratic.
const MAX_URL_LEN: usize = 8 << 10;

/// Bytes that end a URL in running text.
#[inline]
fn ends_url(c: u8) -> bool {
    c <= b' '
        || matches!(
            c,
            b'"' | b'\'' | b'<' | b'>' | b'`' | b'\\' | b'|' | b'{' | b'}' | 0x7f
        )
}

/// The ids reported so far in one call; past its capacity an indicator may be reported again.
struct Seen {
    ids: [u32; 16],
    n: usize,
}

/// Which lookups the set can answer at all, worked out once per call.
#[derive(Clone, Copy)]
struct Wanted {
    v4: bool,
    v6: bool,
    domain: bool,
    url: bool,
    hash: bool,
}

/// Whether a field name says it holds file hashes: it mentions hash, md5, sha1 or sha256
/// (ASCII case aside).
pub fn names_a_hash(key: &str) -> bool {
    let k = key.as_bytes();
    k.len() >= 3
        && k.windows(3).any(|w| {
            w.eq_ignore_ascii_case(b"has")
                || w.eq_ignore_ascii_case(b"md5")
                || w.eq_ignore_ascii_case(b"sha")
        })
}

impl IocSet {
    /// The first hash or URL indicator in `text` (with `hashes`, `urls` saying which to look
    /// for): runs of exactly 32, 40 or 64 hex digits, and `scheme://...` tokens. Cheaper than
    /// [`IocSet::scan_text`], which reads every token: the hash test looks at one byte in 32
    /// (a hash needs 32 hex digits in a row, so a byte that is not hex rules out every run
    /// through it) and URLs start at a SIMD search for `://`. The data plane runs it on every
    /// event while the set holds hashes or URLs; addresses and names it matches as entities.
    pub fn find_hash_or_url(&self, text: &str, hashes: bool, urls: bool) -> Option<IocId> {
        let b = text.as_bytes();
        if hashes {
            let n = b.len();
            let mut i = 0;
            while i + 32 <= n {
                let p = i + 31;
                if !b[p].is_ascii_hexdigit() {
                    i = p + 1;
                    continue;
                }
                // `i` follows a non-hex byte (or is 0), so the run through `p` starts at `s`.
                let mut s = p;
                while s > i && b[s - 1].is_ascii_hexdigit() {
                    s -= 1;
                }
                let mut e = p + 1;
                while e < n && b[e].is_ascii_hexdigit() {
                    e += 1;
                }
                if matches!(e - s, 32 | 40 | 64)
                    && let Some(id) = self.match_hash(&text[s..e])
                {
                    return Some(id);
                }
                i = e + 1;
            }
        }
        if urls {
            static SCHEME: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
                std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"://"));
            // Every `://` inside one run of URL bytes ends where the run ends: found once, not
            // again from each (`a://a://...` was quadratic in the line).
            let mut run_end = 0;
            for at in SCHEME.find_iter(b) {
                let start = b[..at]
                    .iter()
                    .rposition(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))
                    .map_or(0, |p| p + 1);
                if at >= run_end {
                    run_end = b[at..]
                        .iter()
                        .position(|&c| ends_url(c))
                        .map_or(b.len(), |p| at + p);
                }
                if start < at
                    && run_end - start <= MAX_URL_LEN
                    && let Some(id) = self.match_url(&text[start..run_end])
                {
                    return Some(id);
                }
            }
        }
        None
    }

    /// Calls `found` with every indicator found in `text`: IPv4 and IPv6 addresses (with or without
    /// a port), `http`/`https`/`ftp` URLs, domain-like tokens (a dot and a top-level label that
    /// starts with a letter) and 32/40/64-digit hex tokens.
    ///
    /// Each indicator is reported once per call for the first 16 distinct ones; beyond that a
    /// repeated indicator may be reported again. A URL that matches a URL indicator is also read
    /// for its host, so one URL can report both a URL and a domain or address indicator.
    /// Allocates nothing; returns at once when the set is empty.
    pub fn scan_text(&self, text: &str, mut found: impl FnMut(IocId)) {
        if self.is_empty() {
            return;
        }
        let want = Wanted {
            v4: !self.v4.is_empty() || !self.v4_nets.is_empty(),
            v6: !self.v6.is_empty() || !self.v6_nets.is_empty(),
            domain: !self.domains.is_empty(),
            url: !self.urls.is_empty(),
            hash: !self.md5.is_empty() || !self.sha1.is_empty() || !self.sha256.is_empty(),
        };
        let mut seen = Seen { ids: [0; 16], n: 0 };
        let mut report = |id: IocId| {
            if seen.ids[..seen.n].contains(&id.0) {
                return;
            }
            if seen.n < seen.ids.len() {
                seen.ids[seen.n] = id.0;
                seen.n += 1;
            }
            found(id);
        };
        let b = text.as_bytes();
        let mut url_run_end = 0;
        let mut i = 0;
        while i < b.len() {
            while i < b.len() && CLASS[usize::from(b[i])] == 0 {
                i += 1;
            }
            let start = i;
            let mut acc = 0u8;
            while i < b.len() {
                let c = CLASS[usize::from(b[i])];
                if c == 0 {
                    break;
                }
                acc |= c;
                i += 1;
            }
            if start == i {
                break;
            }
            // Token bytes are ASCII and the byte after them is not a UTF-8 continuation byte,
            // so both ends are character boundaries.
            let tok = &text[start..i];
            if want.url && b[i - 1] == b':' && b[i..].starts_with(b"//") {
                self.scan_url(text, start, i, &mut url_run_end, &mut report);
            }
            self.token(tok, acc, want, &mut report);
        }
    }

    /// A URL whose `scheme:` ends the token `text[start..colon_end]`. `run_end` is where the last
    /// run of URL bytes looked at ends: a URL starting inside it ends there too, so it is not
    /// read again (`http://http://...` was quadratic in the line).
    fn scan_url(
        &self,
        text: &str,
        start: usize,
        colon_end: usize,
        run_end: &mut usize,
        report: &mut impl FnMut(IocId),
    ) {
        let b = text.as_bytes();
        let scheme_end = colon_end - 1;
        let scheme_start = b[start..scheme_end]
            .iter()
            .rposition(|c| !c.is_ascii_alphabetic())
            .map_or(start, |p| start + p + 1);
        let scheme = &b[scheme_start..scheme_end];
        let known = [&b"http"[..], b"https", b"ftp"]
            .iter()
            .any(|s| scheme.eq_ignore_ascii_case(s));
        if !known {
            return;
        }
        if colon_end >= *run_end {
            *run_end = b[colon_end..]
                .iter()
                .position(|&c| ends_url(c))
                .map_or(b.len(), |p| colon_end + p);
        }
        let mut end = *run_end;
        if end - scheme_start > MAX_URL_LEN {
            return;
        }
        // Trimming takes only closing punctuation off the end, never an opening bracket.
        let url = &b[scheme_start..end];
        let (open_paren, open_bracket) = (url.contains(&b'('), url.contains(&b'['));
        while end > colon_end + 2 {
            let last = b[end - 1];
            let trim = matches!(last, b'.' | b',' | b';' | b':' | b'!' | b'?')
                || (last == b')' && !open_paren)
                || (last == b']' && !open_bracket);
            if !trim {
                break;
            }
            end -= 1;
        }
        // `end` sits on an ASCII byte or at a boundary before a non-URL byte.
        if let Some(url) = text.get(scheme_start..end)
            && let Some(id) = self.match_url(url)
        {
            report(id);
        }
    }

    #[inline]
    fn token(&self, tok: &str, acc: u8, want: Wanted, report: &mut impl FnMut(IocId)) {
        if acc & COLON != 0 {
            if (want.v6 || want.v4)
                && acc & (ALPHA | DASH) == 0
                && let Ok(a) = tok.parse::<Ipv6Addr>()
            {
                if let Some(id) = self.match_ip(a.into()) {
                    report(id);
                }
                return;
            }
            for piece in tok.split(':') {
                let acc = piece.bytes().fold(0, |acc, c| acc | CLASS[usize::from(c)]);
                self.piece(piece, acc, want, report);
            }
        } else {
            self.piece(tok, acc, want, report);
        }
    }

    /// A token without colons.
    #[inline]
    fn piece(&self, tok: &str, acc: u8, want: Wanted, report: &mut impl FnMut(IocId)) {
        let edge = |c: &u8| matches!(c, b'.' | b'-' | b'_');
        let b = tok.as_bytes();
        let start = b.iter().position(|c| !edge(c)).unwrap_or(b.len());
        let end = b.iter().rposition(|c| !edge(c)).map_or(start, |e| e + 1);
        // ASCII bytes were cut, so both ends are character boundaries.
        let tok = &tok[start..end];
        if tok.len() < 3 {
            return;
        }
        let id = if acc & (ALPHA | DOT | DASH) == 0 {
            // Hex digits only.
            if want.hash && matches!(tok.len(), 32 | 40 | 64) {
                self.match_hash(tok)
            } else {
                None
            }
        } else if acc & (ALPHA | HEX | DASH) == 0 {
            // Digits and dots.
            if want.v4 {
                dotted_quad(tok.as_bytes())
                    .filter(|&(_, len)| len == tok.len())
                    .and_then(|(addr, _)| self.match_v4(addr))
            } else {
                None
            }
        } else if want.domain && acc & DOT != 0 && tok.contains('.') {
            let tld = tok.rsplit('.').next().unwrap_or("");
            if tld.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) {
                self.match_domain(tok)
            } else {
                None
            }
        } else {
            None
        };
        if let Some(id) = id {
            report(id);
        }
    }
}
