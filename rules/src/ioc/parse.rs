//! One indicator's text into its canonical form, and the URL splitting shared by loading and
//! lookup (so both normalise a URL the same way, byte for byte).

use super::IocKind;
use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why a value is not an indicator, or cannot join the set. Loaders place it at its file and line
/// ([`IocError`](super::IocError)); `POST` of indicators answers 422 with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndicatorError {
    /// Nothing but white space.
    #[error("empty indicator")]
    Empty,
    /// The text (at most 80 characters of it) is not of the kind expected.
    #[error("`{text}` is not {expected}")]
    NotA {
        /// The text, shortened.
        text: String,
        /// What it should have been, in words.
        expected: &'static str,
    },
    /// The set holds the most indicators it can number.
    #[error("too many indicators (the limit is 2^32 - 1)")]
    SetFull,
}

/// What a feed says an indicator is; lenient, because feeds say `ip` for networks, `hostname` for
/// domains and `hash` for any digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hint {
    /// Nothing: decide from the text.
    Auto,
    /// Any address or network of either family.
    Ip,
    Domain,
    Url,
    /// Any of the three digests, by length.
    Hash,
    Md5,
    Sha1,
    Sha256,
}

impl From<IocKind> for Hint {
    fn from(k: IocKind) -> Hint {
        match k {
            IocKind::Ipv4 | IocKind::Ipv6 | IocKind::Cidr => Hint::Ip,
            IocKind::Domain => Hint::Domain,
            IocKind::Url => Hint::Url,
            IocKind::Md5 => Hint::Md5,
            IocKind::Sha1 => Hint::Sha1,
            IocKind::Sha256 => Hint::Sha256,
        }
    }
}

/// A feed's type name (CSV `type` column) as a hint, read word by word so that `ip-dst`,
/// `ipv4-addr`, `FileHash-SHA256` and `file:hashes.'SHA-256'` all work. `None`: a type this
/// module does not handle (email, file name, mutex...), which loaders skip rather than report.
pub(crate) fn type_hint(t: &str) -> Option<Hint> {
    let t = t.trim();
    if t.is_empty() {
        return Some(Hint::Auto);
    }
    let lower = t.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |set: &[&str]| words.iter().any(|w| set.contains(w));
    if has(&["md5"]) {
        Some(Hint::Md5)
    } else if has(&["sha1"]) || lower.contains("sha-1") {
        Some(Hint::Sha1)
    } else if has(&["sha256"]) || lower.contains("sha-256") {
        Some(Hint::Sha256)
    } else if has(&["hash", "hashes", "filehash", "digest"]) {
        Some(Hint::Hash)
    } else if has(&["url", "uri", "link"]) {
        Some(Hint::Url)
    } else if has(&["domain", "hostname", "fqdn", "host", "dns"]) {
        Some(Hint::Domain)
    } else if has(&[
        "ip",
        "ipv4",
        "ipv6",
        "ipaddress",
        "addr",
        "address",
        "cidr",
        "subnet",
        "netblock",
        "network",
        "net",
        "range",
    ]) {
        Some(Hint::Ip)
    } else {
        None
    }
}

/// An indicator in canonical form, before it gets an id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    V4(u32),
    V6(u128),
    /// Network address masked to the prefix, and the prefix (0..=31).
    Net4(u32, u8),
    /// Network address masked to the prefix, and the prefix (0..=127).
    Net6(u128, u8),
    /// Lower-case, no trailing dot.
    Domain(String),
    /// Normalised as [`UrlParts::pieces`] writes it.
    Url(String),
    Md5([u8; 16]),
    Sha1([u8; 20]),
    Sha256([u8; 32]),
}

impl Parsed {
    pub(crate) fn kind(&self) -> IocKind {
        match self {
            Parsed::V4(_) => IocKind::Ipv4,
            Parsed::V6(_) => IocKind::Ipv6,
            Parsed::Net4(..) | Parsed::Net6(..) => IocKind::Cidr,
            Parsed::Domain(_) => IocKind::Domain,
            Parsed::Url(_) => IocKind::Url,
            Parsed::Md5(_) => IocKind::Md5,
            Parsed::Sha1(_) => IocKind::Sha1,
            Parsed::Sha256(_) => IocKind::Sha256,
        }
    }

    pub(crate) fn canonical(&self) -> String {
        match self {
            Parsed::V4(a) => Ipv4Addr::from(*a).to_string(),
            Parsed::V6(a) => Ipv6Addr::from(*a).to_string(),
            Parsed::Net4(a, p) => format!("{}/{p}", Ipv4Addr::from(*a)),
            Parsed::Net6(a, p) => format!("{}/{p}", Ipv6Addr::from(*a)),
            Parsed::Domain(s) | Parsed::Url(s) => s.clone(),
            Parsed::Md5(d) => hex(d),
            Parsed::Sha1(d) => hex(d),
            Parsed::Sha256(d) => hex(d),
        }
    }
}

fn hex(d: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(d.len() * 2);
    for &b in d {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Hex digits (either case) into `N` bytes; `None` unless there are exactly `2 * N` of them.
#[inline]
pub(crate) fn unhex<const N: usize>(hex: &[u8]) -> Option<[u8; N]> {
    #[inline]
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    if hex.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *o = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// A feed's confidence in an indicator: an integer 0 to 100 (a decimal is rounded), or the
/// words of the STIX 2.1 High-Medium-Low scale (appendix A: high 85, medium 50, low 15, none 0).
pub(crate) fn confidence(text: &str) -> Option<u8> {
    match text.trim().to_ascii_lowercase().as_str() {
        "high" => Some(85),
        "medium" | "med" => Some(50),
        "low" => Some(15),
        "none" => Some(0),
        number => number
            .parse::<f64>()
            .ok()
            .filter(|c| (0.0..=100.0).contains(c))
            .map(|c| c.round() as u8),
    }
}

/// At most 80 characters of `s`, for error messages about arbitrary input.
pub(crate) fn short(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(80) {
        Some((i, _)) => Cow::Owned(format!("{}…", &s[..i])),
        None => Cow::Borrowed(s),
    }
}

/// Undoes the usual defanging of shared indicators (`hxxp://evil[.]com`), so feeds written for
/// humans load too.
fn refang(t: &str) -> Cow<'_, str> {
    let lower_start = t.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("hxxp"));
    if !lower_start && !t.contains(['[', '(', '{']) {
        return Cow::Borrowed(t);
    }
    let mut s = t.to_string();
    for (from, to) in [
        ("[.]", "."),
        ("(.)", "."),
        ("{.}", "."),
        ("[dot]", "."),
        ("(dot)", "."),
        ("[:]", ":"),
        ("[://]", "://"),
        ("[@]", "@"),
    ] {
        if s.contains(from) {
            s = s.replace(from, to);
        }
    }
    if lower_start {
        s.replace_range(..4, "http");
    }
    Cow::Owned(s)
}

/// Parses one indicator; the error says why it is not one, quoting (at most 80 characters of)
/// the text.
pub(crate) fn parse(text: &str, hint: Hint) -> Result<Parsed, IndicatorError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(IndicatorError::Empty);
    }
    let t = refang(t);
    let t = t.as_ref();
    let bad = |expected: &'static str| IndicatorError::NotA {
        text: short(t).into_owned(),
        expected,
    };
    match hint {
        Hint::Auto => {
            if t.contains("://") {
                return parse_url(t).ok_or_else(|| bad("a URL"));
            }
            if let Some(p) = parse_ip_or_net(t) {
                return Ok(p);
            }
            if matches!(t.len(), 32 | 40 | 64) && t.bytes().all(|b| b.is_ascii_hexdigit()) {
                return parse_hash(t, Hint::Hash).ok_or_else(|| bad("a hash"));
            }
            parse_domain(t, true)
                .ok_or_else(|| bad("an IP address, network, domain, URL or MD5/SHA-1/SHA-256 hash"))
        }
        Hint::Ip => parse_ip_or_net(t).ok_or_else(|| bad("an IP address or CIDR network")),
        Hint::Domain => parse_ip_or_net(t)
            .or_else(|| parse_domain(t, false))
            .ok_or_else(|| bad("a domain name (non-ASCII names must be written as xn--)")),
        Hint::Url => {
            if t.contains("://") {
                parse_url(t).ok_or_else(|| bad("a URL"))
            } else {
                parse_url(&format!("http://{t}")).ok_or_else(|| bad("a URL"))
            }
        }
        Hint::Hash | Hint::Md5 | Hint::Sha1 | Hint::Sha256 => {
            parse_hash(t, hint).ok_or_else(|| {
                bad(match hint {
                    Hint::Md5 => "an MD5 hash (32 hex digits)",
                    Hint::Sha1 => "a SHA-1 hash (40 hex digits)",
                    Hint::Sha256 => "a SHA-256 hash (64 hex digits)",
                    _ => "an MD5, SHA-1 or SHA-256 hash (32, 40 or 64 hex digits)",
                })
            })
        }
    }
}

fn parse_hash(t: &str, hint: Hint) -> Option<Parsed> {
    let b = t.as_bytes();
    match (b.len(), hint) {
        (32, Hint::Hash | Hint::Md5) => unhex(b).map(Parsed::Md5),
        (40, Hint::Hash | Hint::Sha1) => unhex(b).map(Parsed::Sha1),
        (64, Hint::Hash | Hint::Sha256) => unhex(b).map(Parsed::Sha256),
        _ => None,
    }
}

fn parse_ip_or_net(t: &str) -> Option<Parsed> {
    let (addr, prefix) = match t.split_once('/') {
        Some((a, p)) => {
            if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (a, Some(p.parse::<u8>().ok()?))
        }
        None => (t, None),
    };
    let addr = addr
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or(addr);
    match addr.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) => net4(u32::from(a), prefix.unwrap_or(32)),
        IpAddr::V6(a) => match (a.to_ipv4_mapped(), prefix.unwrap_or(128)) {
            (Some(v4), p) if p >= 96 => net4(u32::from(v4), p - 96),
            (_, p) if p > 128 => None,
            (_, 128) => Some(Parsed::V6(u128::from(a))),
            (_, p) => Some(Parsed::Net6(super::mask6(u128::from(a), p), p)),
        },
    }
}

fn net4(a: u32, prefix: u8) -> Option<Parsed> {
    match prefix {
        32 => Some(Parsed::V4(a)),
        p if p < 32 => Some(Parsed::Net4(super::mask4(a, p), p)),
        _ => None,
    }
}

/// A domain in canonical form. `auto`: the text was not typed as a domain, so it must look like
/// one (a dot, a top-level label that is not a number).
fn parse_domain(t: &str, auto: bool) -> Option<Parsed> {
    let d = t.trim_end_matches('.');
    let d = d.strip_prefix("*.").unwrap_or(d);
    let d = d.strip_prefix('.').unwrap_or(d);
    if d.is_empty() || d.len() > 253 || !d.is_ascii() {
        return None;
    }
    let mut labels = 0;
    for l in d.split('.') {
        let ok = !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return None;
        }
        labels += 1;
    }
    let tld = d.rsplit('.').next().unwrap_or(d);
    if tld.bytes().all(|b| b.is_ascii_digit()) || (auto && labels < 2) {
        return None;
    }
    Some(Parsed::Domain(d.to_ascii_lowercase()))
}

fn parse_url(t: &str) -> Option<Parsed> {
    let parts = split_url(t)?;
    let mut s = String::with_capacity(t.len() + 1);
    parts.pieces(|p, lower| {
        let at = s.len();
        s.push_str(p);
        if lower {
            s[at..].make_ascii_lowercase();
        }
    });
    // Lookups hash the pieces of the text they are given, inserts the pieces of this canonical
    // text: they must agree, which holds when normalising is idempotent.
    let again = split_url(&s)?;
    again.eq_canonical(&s).then_some(Parsed::Url(s))
}

/// A URL cut into the parts that normalisation treats differently, borrowing from the text.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UrlParts<'a> {
    scheme: &'a str,
    userinfo: Option<&'a str>,
    /// With brackets for IPv6; trailing dots removed.
    host: &'a str,
    /// Digits without leading zeros; `None` when absent or the scheme's default.
    port: Option<&'a str>,
    /// Path and query as written (may be empty or start with `?`).
    path: &'a str,
}

fn default_port(scheme: &str) -> Option<&'static str> {
    const DEFAULTS: [(&str, &str); 5] = [
        ("http", "80"),
        ("https", "443"),
        ("ftp", "21"),
        ("ws", "80"),
        ("wss", "443"),
    ];
    DEFAULTS
        .iter()
        .find(|(s, _)| s.eq_ignore_ascii_case(scheme))
        .map(|&(_, p)| p)
}

/// Splits `s` as `scheme://[userinfo@]host[:port][path][?query][#fragment]`; `None` when it is
/// not shaped like that. Allocates nothing.
pub(crate) fn split_url(s: &str) -> Option<UrlParts<'_>> {
    // Byte loops rather than `find`: URLs are short and this runs per event.
    let b = s.as_bytes();
    let sep = b
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))?;
    if sep == 0 || !b[0].is_ascii_alphabetic() || !b[sep..].starts_with(b"://") {
        return None;
    }
    let scheme = &s[..sep];
    let from = sep + 3;
    let auth_end = b[from..]
        .iter()
        .position(|c| matches!(c, b'/' | b'?' | b'#'))
        .map_or(b.len(), |p| from + p);
    let frag = b[auth_end..]
        .iter()
        .position(|&c| c == b'#')
        .map_or(b.len(), |p| auth_end + p);
    // All cuts are at ASCII bytes, so at character boundaries.
    let auth = &s[from..auth_end];
    let path = &s[auth_end..frag];
    let ab = auth.as_bytes();
    let (userinfo, hostport) = match ab.iter().rposition(|&c| c == b'@') {
        Some(i) => (Some(&auth[..i]), &auth[i + 1..]),
        None => (None, auth),
    };
    let hb = hostport.as_bytes();
    let (host, port) = if hb.first() == Some(&b'[') {
        let close = hb.iter().position(|&c| c == b']')?;
        let after = &hostport[close + 1..];
        let port = if after.is_empty() {
            None
        } else {
            Some(after.strip_prefix(':')?)
        };
        (&hostport[..=close], port)
    } else {
        match hb.iter().rposition(|&c| c == b':') {
            Some(i) => (&hostport[..i], Some(&hostport[i + 1..])),
            None => (hostport, None),
        }
    };
    let host = host.trim_end_matches('.');
    if host.is_empty() || host.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(p) => {
            if !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let trimmed = p.trim_start_matches('0');
            let p = if trimmed.is_empty() {
                &p[p.len() - 1..]
            } else {
                trimmed
            };
            if default_port(scheme) == Some(p) {
                None
            } else {
                Some(p)
            }
        }
    };
    Some(UrlParts {
        scheme,
        userinfo,
        host,
        port,
        path,
    })
}

impl UrlParts<'_> {
    /// The normalised URL as a sequence of pieces, each with whether it is compared
    /// case-insensitively (scheme, host); hashing and comparing walk this instead of a string.
    #[inline]
    pub(crate) fn pieces(&self, mut f: impl FnMut(&str, bool)) {
        f(self.scheme, true);
        f("://", false);
        if let Some(u) = self.userinfo {
            f(u, false);
            f("@", false);
        }
        f(self.host, true);
        if let Some(p) = self.port {
            f(":", false);
            f(p, false);
        }
        if !self.path.starts_with('/') {
            f("/", false);
        }
        f(self.path, false);
    }

    /// Whether these parts normalise to `canonical` (which is lower-case where it matters).
    #[inline]
    pub(crate) fn eq_canonical(&self, canonical: &str) -> bool {
        let mut rest = canonical.as_bytes();
        let mut ok = true;
        self.pieces(|p, lower| {
            let p = p.as_bytes();
            if !ok || rest.len() < p.len() {
                ok = false;
                return;
            }
            let (head, tail) = rest.split_at(p.len());
            ok = if lower {
                head.eq_ignore_ascii_case(p)
            } else {
                head == p
            };
            rest = tail;
        });
        ok && rest.is_empty()
    }
}
