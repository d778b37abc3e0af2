//! Indicators of compromise (IOCs) from threat feeds, matched against events without allocating.
//!
//! Feeds name bad things (addresses, networks, domains, URLs, file hashes) in a few common shapes;
//! an [`IocSet`] reads them all into one set and answers "is this one of them?" on the ingest hot
//! path, where a million indicators must cost no more than a handful of map probes per value.
//!
//! - Loading ([`IocSet::load_dir`], [`IocSet::add_file`]) takes plain lists, CSV exports and STIX
//!   2.1 bundles. A feed with a few bad lines still loads: each bad line becomes an [`IocError`]
//!   naming its file and line, and the rest is used.
//! - Lookups ([`IocSet::match_ip`], [`IocSet::match_domain`], [`IocSet::match_url`],
//!   [`IocSet::match_hash`], [`IocSet::scan_text`]) read borrowed bytes, hash them in place and
//!   never allocate: per address one probe per CIDR prefix length in use, per domain one probe
//!   per parent suffix of a length and label count that some stored domain has, per URL or hash
//!   one probe.
//!
//! Domains and URLs are keyed by a seeded 64-bit hash of their canonical text, and every hit is
//! confirmed against the stored text, so a hash collision can cost a comparison but never gives a
//! false match.
//!
//! ```
//! use watchpost_rules::{IocKind, IocSet};
//!
//! let mut set = IocSet::new();
//! set.add("evil.com", None, "feed.txt", Some("phishing kit")).unwrap();
//! set.add("10.0.0.0/8", None, "feed.txt", None).unwrap();
//!
//! let id = set.match_domain("cdn.EVIL.com").unwrap();
//! assert_eq!(set.indicator(id).kind, IocKind::Domain);
//! assert!(set.match_domain("notevil.com").is_none());
//! assert!(set.match_ip("10.1.2.3".parse().unwrap()).is_some());
//!
//! let mut hits = Vec::new();
//! set.scan_text("Accepted password for root from 10.9.8.7 port 22", |id| hits.push(id));
//! assert_eq!(hits.len(), 1);
//! ```

mod csv;
mod file;
mod hash;
mod load;
mod parse;
mod scan;
mod stix;
#[cfg(test)]
mod tests;

pub use file::{FileStats, Format, IocError};
pub use load::IocLoad;
pub use scan::names_a_hash;

use hash::{KeyMap, StrHasher};
pub use parse::IndicatorError;
use parse::{Hint, Parsed, UrlParts};
use std::collections::hash_map::Entry;
use std::hash::{BuildHasher, Hash};
use std::net::IpAddr;
use std::sync::Arc;

/// A handle on one indicator of an [`IocSet`]; lookups return it so the hot path copies four
/// bytes, and [`IocSet::indicator`] turns it into the details when a match is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IocId(u32);

impl IocId {
    /// The position in load order, for callers that keep per-indicator state in a vector.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The handle at load position `index` (as carried between threads); [`IocSet::get`] checks
    /// it.
    pub fn from_index(index: u32) -> IocId {
        IocId(index)
    }
}

/// What an indicator names; decides which lookup can find it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IocKind {
    /// One IPv4 address (a `/32` network is stored as this).
    Ipv4,
    /// One IPv6 address (a `/128` network is stored as this; IPv4-mapped ones become IPv4).
    Ipv6,
    /// An IPv4 or IPv6 network; the longest matching prefix wins.
    Cidr,
    /// A domain together with all its subdomains.
    Domain,
    /// One URL, compared after normalisation.
    Url,
    /// An MD5 file hash.
    Md5,
    /// A SHA-1 file hash.
    Sha1,
    /// A SHA-256 file hash.
    Sha256,
}

impl IocKind {
    /// Every kind, in the order of [`IocSet::counts`].
    pub const ALL: [IocKind; 8] = [
        IocKind::Ipv4,
        IocKind::Ipv6,
        IocKind::Cidr,
        IocKind::Domain,
        IocKind::Url,
        IocKind::Md5,
        IocKind::Sha1,
        IocKind::Sha256,
    ];

    /// Its name, as used in reports and in the serialised form.
    pub fn as_str(self) -> &'static str {
        match self {
            IocKind::Ipv4 => "ipv4",
            IocKind::Ipv6 => "ipv6",
            IocKind::Cidr => "cidr",
            IocKind::Domain => "domain",
            IocKind::Url => "url",
            IocKind::Md5 => "md5",
            IocKind::Sha1 => "sha1",
            IocKind::Sha256 => "sha256",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// One indicator with what an analyst needs to act on a match: where it came from and what the
/// feed said about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Indicator {
    /// Which lookup finds it.
    pub kind: IocKind,
    /// The canonical text: lower-case, a network masked to its prefix, a URL normalised, a hash in
    /// lower-case hex; two feeds naming the same thing give the same text.
    pub value: Box<str>,
    /// The name of the feed file (shared by all indicators of that file).
    pub source: Arc<str>,
    /// The feed's name or description for it (shared when consecutive rows repeat it).
    pub label: Option<Arc<str>>,
    /// The feed's confidence in it, 0 to 100 (STIX 2.1 `confidence`, a CSV `confidence`
    /// column); `None` when the feed does not say. Below `detection.ioc_alert_min_confidence` a
    /// match is a risk signal, not an alert.
    pub confidence: Option<u8>,
}

/// What [`IocSet::add`] did, so loaders can count duplicates across feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Added {
    /// The indicator is new and got this id.
    New(IocId),
    /// An equal indicator was already there (the first one is kept, with its source and label).
    Duplicate(IocId),
}

/// The networks of one prefix length: addresses are masked to `prefix` and looked up exactly.
#[derive(Clone, Debug)]
struct Nets<K> {
    prefix: u8,
    map: KeyMap<K>,
}

/// Ids keyed by the 64-bit hash of their canonical text. A hit is confirmed against the text;
/// an indicator whose hash collides with a different one already stored goes to `overflow`,
/// which is only searched when a confirmation fails (in practice never).
#[derive(Clone, Debug, Default)]
struct StrMap {
    map: KeyMap<u64>,
    overflow: Vec<(u64, u32)>,
}

impl StrMap {
    #[inline]
    fn get(&self, h: u64, eq: impl Fn(u32) -> bool) -> Option<u32> {
        let &id = self.map.get(&h)?;
        if eq(id) {
            return Some(id);
        }
        self.overflow
            .iter()
            .find(|&&(k, id)| k == h && eq(id))
            .map(|&(_, id)| id)
    }

    /// The id already stored for this text, else stores `next` and gives `None`.
    fn claim(&mut self, h: u64, next: u32, eq: impl Fn(u32) -> bool) -> Option<u32> {
        if let Some(id) = self.get(h, eq) {
            return Some(id);
        }
        match self.map.entry(h) {
            Entry::Occupied(_) => self.overflow.push((h, next)),
            Entry::Vacant(v) => {
                v.insert(next);
            }
        }
        None
    }

    fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn shrink_to_fit(&mut self) {
        self.map.shrink_to_fit();
        self.overflow.shrink_to_fit();
    }
}

/// The lengths and label counts of the stored domains. With a million domains most lengths
/// occur, but a suffix must have both a stored length and a stored label count, which rules out
/// most of the suffixes of a deep name before any hashing or probing.
#[derive(Clone, Debug, Default)]
struct DomainShape {
    /// Bit `n`: some domain is `n` bytes long (domains are at most 253).
    lens: [u64; 4],
    /// Bit `n`: some domain has `n` labels (63 or more share bit 63).
    labels: u64,
    max_len: usize,
}

impl DomainShape {
    fn add(&mut self, d: &str) {
        let len = d.len().min(255);
        self.lens[len / 64] |= 1 << (len % 64);
        let labels = (d.bytes().filter(|&b| b == b'.').count() + 1).min(63);
        self.labels |= 1 << labels;
        self.max_len = self.max_len.max(d.len());
    }

    #[inline]
    fn holds(&self, len: usize, labels: usize) -> bool {
        len < 256
            && self.lens[len / 64] & (1 << (len % 64)) != 0
            && self.labels & (1 << labels.min(63)) != 0
    }
}

/// A set of indicators, built once from feeds and then shared read-only by the detection
/// workers (it is `Send + Sync`; lookups take `&self`).
///
/// Memory per indicator, beyond its own strings: 56 bytes of [`Indicator`] plus one map slot of
/// key and id (8 bytes for IPv4 up to 36 for SHA-256, at the map's load factor); a mixed million
/// measures about 85 bytes each, 170 with the canonical text and the allocator's share.
#[derive(Clone)]
pub struct IocSet {
    indicators: Vec<Indicator>,
    counts: [usize; 8],
    v4: KeyMap<u32>,
    /// By prefix length, longest first.
    v4_nets: Vec<Nets<u32>>,
    v6: KeyMap<u128>,
    /// By prefix length, longest first.
    v6_nets: Vec<Nets<u128>>,
    domains: StrMap,
    /// Which suffixes of a name can be stored domains at all, so most are never probed.
    domain_shape: DomainShape,
    urls: StrMap,
    md5: KeyMap<u128>,
    sha1: KeyMap<[u8; 20]>,
    sha256: KeyMap<[u8; 32]>,
    /// Seeds the domain and URL hashes so that feed authors cannot aim collisions at a map.
    seed: u64,
}

impl Default for IocSet {
    fn default() -> Self {
        IocSet::new()
    }
}

impl std::fmt::Debug for IocSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("IocSet");
        d.field("len", &self.len());
        for k in IocKind::ALL {
            d.field(k.as_str(), &self.count(k));
        }
        d.finish()
    }
}

fn claim<K: Hash + Eq>(map: &mut KeyMap<K>, key: K, next: u32) -> Option<u32> {
    match map.entry(key) {
        Entry::Occupied(e) => Some(*e.get()),
        Entry::Vacant(v) => {
            v.insert(next);
            None
        }
    }
}

fn nets_for<K>(nets: &mut Vec<Nets<K>>, prefix: u8) -> &mut KeyMap<K> {
    let at = match nets.iter().position(|n| n.prefix <= prefix) {
        Some(i) if nets[i].prefix == prefix => i,
        Some(i) => {
            nets.insert(
                i,
                Nets {
                    prefix,
                    map: KeyMap::default(),
                },
            );
            i
        }
        None => {
            nets.push(Nets {
                prefix,
                map: KeyMap::default(),
            });
            nets.len() - 1
        }
    };
    &mut nets[at].map
}

#[inline]
fn mask4(a: u32, prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        a & (u32::MAX << (32 - u32::from(prefix)))
    }
}

#[inline]
fn mask6(a: u128, prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        a & (u128::MAX << (128 - u32::from(prefix)))
    }
}

impl IocSet {
    /// An empty set, to fill with [`IocSet::add`] or [`IocSet::add_file`].
    pub fn new() -> IocSet {
        IocSet {
            indicators: Vec::new(),
            counts: [0; 8],
            v4: KeyMap::default(),
            v4_nets: Vec::new(),
            v6: KeyMap::default(),
            v6_nets: Vec::new(),
            domains: StrMap::default(),
            domain_shape: DomainShape::default(),
            urls: StrMap::default(),
            md5: KeyMap::default(),
            sha1: KeyMap::default(),
            sha256: KeyMap::default(),
            seed: std::collections::hash_map::RandomState::new().hash_one(0x1dc0_u64),
        }
    }

    /// Adds one indicator written as a feed would write it. `kind` `None` detects the kind from
    /// the text; any of the three address kinds accepts any address or network (feeds often say
    /// `ip` for all of them). Defanged text (`hxxp://evil[.]com`) is accepted.
    ///
    /// Errors: the text is not an indicator (of `kind`), in words.
    pub fn add(
        &mut self,
        text: &str,
        kind: Option<IocKind>,
        source: &str,
        label: Option<&str>,
    ) -> Result<Added, IndicatorError> {
        let parsed = parse::parse(text, kind.map_or(Hint::Auto, Hint::from))?;
        let source: Arc<str> = Arc::from(source);
        let label: Option<Arc<str>> = label.map(Arc::from);
        self.insert(parsed, &source, label.as_ref(), None)
    }

    /// [`IocSet::add`] with the feed's confidence in the indicator (0 to 100).
    ///
    /// Errors: as [`IocSet::add`].
    pub fn add_with_confidence(
        &mut self,
        text: &str,
        kind: Option<IocKind>,
        source: &str,
        confidence: u8,
    ) -> Result<Added, IndicatorError> {
        let parsed = parse::parse(text, kind.map_or(Hint::Auto, Hint::from))?;
        let source: Arc<str> = Arc::from(source);
        self.insert(parsed, &source, None, Some(confidence.min(100)))
    }

    pub(crate) fn insert(
        &mut self,
        parsed: Parsed,
        source: &Arc<str>,
        label: Option<&Arc<str>>,
        confidence: Option<u8>,
    ) -> Result<Added, IndicatorError> {
        let next = u32::try_from(self.indicators.len())
            .ok()
            .filter(|&n| n < u32::MAX)
            .ok_or(IndicatorError::SetFull)?;
        let kind = parsed.kind();
        let value = parsed.canonical();
        let seed = self.seed;
        let existing = match &parsed {
            Parsed::V4(a) => claim(&mut self.v4, *a, next),
            Parsed::V6(a) => claim(&mut self.v6, *a, next),
            Parsed::Net4(a, p) => claim(nets_for(&mut self.v4_nets, *p), *a, next),
            Parsed::Net6(a, p) => claim(nets_for(&mut self.v6_nets, *p), *a, next),
            Parsed::Md5(d) => claim(&mut self.md5, u128::from_be_bytes(*d), next),
            Parsed::Sha1(d) => claim(&mut self.sha1, *d, next),
            Parsed::Sha256(d) => claim(&mut self.sha256, *d, next),
            Parsed::Domain(d) => {
                let inds = &self.indicators;
                let h = hash::domain_hash(seed, d.as_bytes());
                let found = self
                    .domains
                    .claim(h, next, |id| *inds[id as usize].value == **d);
                if found.is_none() {
                    self.domain_shape.add(d);
                }
                found
            }
            Parsed::Url(u) => {
                // The canonical text splits into the same pieces as the text it came from.
                let parts = parse::split_url(u).ok_or_else(|| IndicatorError::NotA {
                    text: parse::short(u).into_owned(),
                    expected: "a URL",
                })?;
                let inds = &self.indicators;
                self.urls.claim(url_hash(seed, &parts), next, |id| {
                    *inds[id as usize].value == **u
                })
            }
        };
        if let Some(id) = existing {
            return Ok(Added::Duplicate(IocId(id)));
        }
        self.indicators.push(Indicator {
            kind,
            value: value.into_boxed_str(),
            source: Arc::clone(source),
            label: label.cloned(),
            confidence,
        });
        self.counts[kind.slot()] += 1;
        Ok(Added::New(IocId(next)))
    }

    /// Gives back the spare capacity that loading leaves in the maps (up to half of them);
    /// [`IocSet::load_dir`] calls it when done.
    pub fn shrink_to_fit(&mut self) {
        self.indicators.shrink_to_fit();
        self.v4.shrink_to_fit();
        self.v6.shrink_to_fit();
        for n in &mut self.v4_nets {
            n.map.shrink_to_fit();
        }
        for n in &mut self.v6_nets {
            n.map.shrink_to_fit();
        }
        self.domains.shrink_to_fit();
        self.urls.shrink_to_fit();
        self.md5.shrink_to_fit();
        self.sha1.shrink_to_fit();
        self.sha256.shrink_to_fit();
    }

    /// How many indicators there are.
    pub fn len(&self) -> usize {
        self.indicators.len()
    }

    /// Whether there are none (then every lookup returns at once).
    pub fn is_empty(&self) -> bool {
        self.indicators.is_empty()
    }

    /// How many indicators there are of `kind`.
    pub fn count(&self, kind: IocKind) -> usize {
        self.counts[kind.slot()]
    }

    /// The count of every kind, in the order of [`IocKind::ALL`].
    pub fn counts(&self) -> [(IocKind, usize); 8] {
        IocKind::ALL.map(|k| (k, self.count(k)))
    }

    /// The details of a match.
    ///
    /// Panics when `id` is not from this set.
    pub fn indicator(&self, id: IocId) -> &Indicator {
        &self.indicators[id.index()]
    }

    /// The details of `id`, or `None` when it is not from this set.
    pub fn get(&self, id: IocId) -> Option<&Indicator> {
        self.indicators.get(id.index())
    }

    /// Every indicator, in load order.
    pub fn iter(&self) -> impl Iterator<Item = (IocId, &Indicator)> {
        self.indicators
            .iter()
            .enumerate()
            .map(|(i, ind)| (IocId(i as u32), ind))
    }

    /// The indicator for `ip`: the address itself, else the network with the longest prefix
    /// that holds it. An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) is looked up as IPv4.
    #[inline]
    pub fn match_ip(&self, ip: IpAddr) -> Option<IocId> {
        match ip {
            IpAddr::V4(a) => self.match_v4(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => self
                    .match_v4(u32::from(v4))
                    .or_else(|| self.match_v6_nets(u128::from(a))),
                None => {
                    let a = u128::from(a);
                    match self.v6.get(&a) {
                        Some(&id) => Some(IocId(id)),
                        None => self.match_v6_nets(a),
                    }
                }
            },
        }
    }

    #[inline]
    fn match_v4(&self, a: u32) -> Option<IocId> {
        if let Some(&id) = self.v4.get(&a) {
            return Some(IocId(id));
        }
        self.v4_nets
            .iter()
            .find_map(|n| n.map.get(&mask4(a, n.prefix)).map(|&id| IocId(id)))
    }

    #[inline]
    fn match_v6_nets(&self, a: u128) -> Option<IocId> {
        self.v6_nets
            .iter()
            .find_map(|n| n.map.get(&mask6(a, n.prefix)).map(|&id| IocId(id)))
    }

    /// The domain indicator covering `name`: the name itself or its nearest listed parent
    /// (`a.b.evil.com` finds `b.evil.com` before `evil.com`). Case does not matter and one
    /// trailing dot is ignored.
    ///
    /// Only the suffixes whose length and label count some stored domain has are hashed (eight
    /// bytes at a time, lower-casing as it goes) and probed; with feeds of mostly two- and
    /// three-label domains that is one or two per name.
    pub fn match_domain(&self, name: &str) -> Option<IocId> {
        if self.domains.is_empty() {
            return None;
        }
        let b = name.as_bytes();
        let b = b.strip_suffix(b".").unwrap_or(b);
        let shape = &self.domain_shape;
        let mut best = None;
        let mut labels = 0;
        let mut end = b.len();
        loop {
            let start = b[..end]
                .iter()
                .rposition(|&c| c == b'.')
                .map_or(0, |d| d + 1);
            labels += 1;
            let len = b.len() - start;
            if len > shape.max_len {
                break;
            }
            if shape.holds(len, labels) {
                let suffix = &b[start..];
                let h = hash::domain_hash(self.seed, suffix);
                if let Some(id) = self.domains.get(h, |id| {
                    self.indicators[id as usize]
                        .value
                        .as_bytes()
                        .eq_ignore_ascii_case(suffix)
                }) {
                    best = Some(IocId(id));
                }
            }
            if start == 0 {
                break;
            }
            end = start - 1;
        }
        best
    }

    /// The URL indicator equal to `url` once both are normalised: scheme and host lower-case,
    /// the scheme's default port and the fragment dropped, an empty path written `/`.
    pub fn match_url(&self, url: &str) -> Option<IocId> {
        if self.urls.is_empty() {
            return None;
        }
        let parts = parse::split_url(url)?;
        let h = url_hash(self.seed, &parts);
        self.urls
            .get(h, |id| {
                parts.eq_canonical(&self.indicators[id as usize].value)
            })
            .map(IocId)
    }

    /// The hash indicator for a hex digest of 32 (MD5), 40 (SHA-1) or 64 (SHA-256) digits, in
    /// either case.
    #[inline]
    pub fn match_hash(&self, hex: &str) -> Option<IocId> {
        let b = hex.as_bytes();
        let id = match b.len() {
            32 if !self.md5.is_empty() => self.md5.get(&u128::from_be_bytes(parse::unhex(b)?)),
            40 if !self.sha1.is_empty() => self.sha1.get(&parse::unhex::<20>(b)?),
            64 if !self.sha256.is_empty() => self.sha256.get(&parse::unhex::<32>(b)?),
            _ => None,
        };
        id.map(|&id| IocId(id))
    }
}

fn url_hash(seed: u64, parts: &UrlParts<'_>) -> u64 {
    let mut h = StrHasher::new(seed);
    parts.pieces(|p, lower| h.write(p.as_bytes(), lower));
    h.finish()
}
