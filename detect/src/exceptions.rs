//! Exceptions compiled for the detector: each condition becomes what a [`DetectRecord`] carries
//! (entity name hashes, a network and mask, a template id), so a check compares integers.
//!
//! The check runs only where an alert would be raised or joined, never per event otherwise, and
//! an empty set costs one branch there. Hits are counted in [`ExceptionHits`] shared by every
//! worker and every compiled version of the set, so a recompile (an exception added elsewhere)
//! loses no count.

use crate::record::DetectRecord;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use watchpost_proto::{
    EntityKind, Exception, ExceptionScope, canonicalize_into, hash64_seeded, parse_cidr,
    parse_template,
};

/// The hits of one exception: events it kept from raising or joining an alert.
#[derive(Debug)]
pub struct ExceptionHits {
    count: AtomicU64,
    last_ns: AtomicI64,
}

impl Default for ExceptionHits {
    fn default() -> Self {
        ExceptionHits {
            count: AtomicU64::new(0),
            last_ns: AtomicI64::new(i64::MIN),
        }
    }
}

impl ExceptionHits {
    /// Starting from saved figures.
    pub fn new(count: u64, last_ns: Option<i64>) -> ExceptionHits {
        ExceptionHits {
            count: AtomicU64::new(count),
            last_ns: AtomicI64::new(last_ns.unwrap_or(i64::MIN)),
        }
    }

    /// Hits so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Event time of the latest hit.
    pub fn last_ns(&self) -> Option<i64> {
        Some(self.last_ns.load(Ordering::Relaxed)).filter(|&t| t != i64::MIN)
    }

    fn hit(&self, ts_ns: i64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.last_ns.fetch_max(ts_ns, Ordering::Relaxed);
    }
}

/// One exception's conditions as the record shows them.
#[derive(Debug)]
struct Compiled {
    users: Vec<u64>,
    hosts: Vec<u64>,
    ips: Vec<u64>,
    domains: Vec<u64>,
    /// (network, mask) over IPv6, IPv4 mapped.
    networks: Vec<(u128, u128)>,
    log_sources: Vec<Box<str>>,
    templates: Vec<u64>,
    expires_ns: i64,
    hits: Arc<ExceptionHits>,
}

/// The enabled exceptions, by what they apply to.
#[derive(Debug, Default)]
pub struct ExceptionSet {
    by_detector: HashMap<String, Vec<Compiled>>,
    prefixes: Vec<(String, Compiled)>,
    global: Vec<Compiled>,
    len: usize,
}

impl ExceptionSet {
    /// Compiles the enabled exceptions of `list`; `hits` gives each its shared counter. Values
    /// were validated when the exception was accepted; one that no longer parses (it cannot,
    /// short of a hand-edited store) is left out of its list, which can only narrow what the
    /// exception suppresses.
    pub fn compile(
        list: &[Exception],
        mut hits: impl FnMut(&Exception) -> Arc<ExceptionHits>,
    ) -> ExceptionSet {
        let mut set = ExceptionSet::default();
        for e in list.iter().filter(|e| e.enabled) {
            let c = compile_one(e, hits(e));
            set.len += 1;
            match (e.scope, e.detector.as_deref()) {
                (ExceptionScope::Global, _) | (_, None) => set.global.push(c),
                (ExceptionScope::Detector, Some(d)) => match d.strip_suffix('*') {
                    Some(prefix) => set.prefixes.push((prefix.to_string(), c)),
                    None => set.by_detector.entry(d.to_string()).or_default().push(c),
                },
            }
        }
        set
    }

    /// No exception in force.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Exceptions in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether an exception keeps `detector`'s alert about `record` (none: a correlation that
    /// fired without one event to show) from being raised or joined at `ts_ns`; the first that
    /// does counts the hit.
    pub fn suppresses(&self, detector: &str, record: Option<&DetectRecord>, ts_ns: i64) -> bool {
        let exact = self.by_detector.get(detector).into_iter().flatten();
        let prefixed = self
            .prefixes
            .iter()
            .filter(|(p, _)| detector.starts_with(p.as_str()))
            .map(|(_, c)| c);
        for c in exact.chain(prefixed).chain(self.global.iter()) {
            if ts_ns < c.expires_ns && c.matches(record) {
                c.hits.hit(ts_ns);
                return true;
            }
        }
        false
    }
}

fn compile_one(e: &Exception, hits: Arc<ExceptionHits>) -> Compiled {
    let c = &e.conditions;
    let mut canon = String::new();
    let mut names = |kind: EntityKind, list: &[String]| -> Vec<u64> {
        let mut out = Vec::with_capacity(list.len());
        for v in list {
            if canonicalize_into(kind, v, &mut canon) {
                out.push(hash64_seeded(canon.as_bytes(), kind as u64));
            }
        }
        out
    };
    Compiled {
        users: names(EntityKind::User, &c.users),
        hosts: names(EntityKind::Host, &c.hosts),
        ips: names(EntityKind::Ip, &c.ips),
        domains: names(EntityKind::Domain, &c.domains),
        networks: c
            .source_cidrs
            .iter()
            .filter_map(|v| parse_cidr(v).ok())
            .map(|(net, bits)| {
                let mask = if bits == 0 {
                    0
                } else {
                    u128::MAX << (128 - bits)
                };
                (net, mask)
            })
            .collect(),
        log_sources: c.log_sources.iter().map(|s| s.as_str().into()).collect(),
        templates: c
            .templates
            .iter()
            .filter_map(|t| parse_template(t).ok())
            .collect(),
        expires_ns: e.expires_ns.unwrap_or(i64::MAX),
        hits,
    }
}

impl Compiled {
    fn unconditional(&self) -> bool {
        self.users.is_empty()
            && self.hosts.is_empty()
            && self.ips.is_empty()
            && self.domains.is_empty()
            && self.networks.is_empty()
            && self.log_sources.is_empty()
            && self.templates.is_empty()
    }

    fn matches(&self, record: Option<&DetectRecord>) -> bool {
        let Some(r) = record else {
            return self.unconditional();
        };
        let entity = |kind: EntityKind, list: &[u64]| {
            list.is_empty()
                || r.entities()
                    .iter()
                    .any(|e| e.kind == kind as u8 && list.contains(&e.hash))
        };
        entity(EntityKind::User, &self.users)
            && (entity(EntityKind::Host, &self.hosts)
                || (r.reporter != 0 && self.hosts.contains(&r.reporter)))
            && entity(EntityKind::Ip, &self.ips)
            && entity(EntityKind::Domain, &self.domains)
            && (self.networks.is_empty()
                || (r.client_ip != 0
                    && self
                        .networks
                        .iter()
                        .any(|&(net, mask)| r.client_ip & mask == net)))
            && (self.log_sources.is_empty()
                || self.log_sources.iter().any(|s| **s == *r.source_name()))
            && (self.templates.is_empty() || self.templates.contains(&r.template))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordEntity;
    use watchpost_proto::{ExceptionDraft, Uuid};

    fn rand_id() -> u128 {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        u128::from(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    fn exception(json: serde_json::Value) -> Exception {
        let d: ExceptionDraft = serde_json::from_value(json).unwrap();
        Exception::create(d, Uuid::from_u128(rand_id()), 0).unwrap()
    }

    fn record(user: &str, host: &str, client: &str) -> DetectRecord {
        let mut r = DetectRecord {
            ts_ns: 100,
            template: 0xabc,
            client_ip: match client.parse::<std::net::IpAddr>().unwrap() {
                std::net::IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
                std::net::IpAddr::V6(v6) => u128::from(v6),
            },
            n_entities: 1,
            ..DetectRecord::default()
        };
        r.set_source_name("sshd");
        r.entities[0] = RecordEntity {
            hash: hash64_seeded(user.as_bytes(), EntityKind::User as u64),
            kind: EntityKind::User as u8,
            ..RecordEntity::default()
        };
        r.reporter = hash64_seeded(host.as_bytes(), EntityKind::Host as u64);
        r
    }

    fn set(list: &[Exception]) -> ExceptionSet {
        ExceptionSet::compile(list, |_| Arc::new(ExceptionHits::default()))
    }

    #[test]
    fn every_condition_given_must_hold_and_the_hit_is_counted() {
        let e = exception(serde_json::json!({
            "detector": "ueba:user", "reason": "scanner", "author": "ana",
            "conditions": {"users": ["Alice"], "source_cidrs": ["10.9.0.0/16"], "log_sources": ["sshd"]}
        }));
        let hits = Arc::new(ExceptionHits::default());
        let s = ExceptionSet::compile(std::slice::from_ref(&e), |_| hits.clone());
        let r = record("alice", "web-1", "10.9.3.4");
        assert!(s.suppresses("ueba:user", Some(&r), 100));
        assert!(
            !s.suppresses("ueba:host", Some(&r), 100),
            "another detector"
        );
        assert!(!s.suppresses("ueba:user", Some(&record("bob", "web-1", "10.9.3.4")), 100));
        assert!(!s.suppresses(
            "ueba:user",
            Some(&record("alice", "web-1", "10.8.3.4")),
            100
        ));
        assert!(
            !s.suppresses("ueba:user", None, 100),
            "conditions need an event"
        );
        assert_eq!((hits.count(), hits.last_ns()), (1, Some(100)));
    }

    #[test]
    fn prefixes_globals_expiry_and_the_reporting_host() {
        let prefix = exception(serde_json::json!({
            "detector": "ueba:*", "reason": "r", "author": "a", "conditions": {"hosts": ["WEB-1"]}
        }));
        let global = exception(serde_json::json!({
            "scope": "global", "reason": "r", "author": "a", "conditions": {"templates": ["0000000000000abc"]},
            "expires_ns": 500
        }));
        let s = set(&[prefix, global]);
        let r = record("carol", "web-1", "192.0.2.1");
        assert!(
            s.suppresses("ueba:ip", Some(&r), 100),
            "the reporter is web-1"
        );
        assert!(
            s.suppresses("3f1c-rule", Some(&r), 100),
            "the template, globally"
        );
        assert!(!s.suppresses("3f1c-rule", Some(&r), 500), "expired");
        let mut off =
            exception(serde_json::json!({"detector": "ioc:misp", "reason": "r", "author": "a"}));
        off.enabled = false;
        assert!(set(&[off]).is_empty());
    }
}
