//! Normalise, first half: a line's fields. Syslog headers and structured data, JSON keys by
//! their names (docs/event.md), each value copied once into the worker's arena; the header
//! fields keep the best-ranked value a line offers.

use super::Normalizer;
use super::{MAX_ATTRIBUTES, MAX_KEY_BYTES};
use crate::parse::json::{JsonScalar, scan_object};
use crate::parse::syslog::{SyslogFormat, for_each_sd_param, parse_syslog, unescape_sd_value};
use crate::parse::time::parse_timestamp;
use std::ops::Range;
use watchpost_proto::{EntityKind, InputId, Role, Severity, SeverityScale};

/// Which field gave a value, so a better-named field can override a weaker one.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(super) struct Rank(pub(super) u8);

/// The fields of the event being built, as ranges into the arena.
#[derive(Default)]
pub(super) struct Fields {
    pub(super) timestamp_ns: Option<(i64, Rank)>,
    pub(super) severity: Option<(Severity, Rank)>,
    /// A numeric severity on the source's own scale (`event.severity`, `severity`, `level`):
    /// read at [`Normalizer::resolve`], once the source is known, and only when no field above
    /// gave the severity.
    pub(super) severity_number: Option<(f64, Rank)>,
    pub(super) source: Option<(Range<u32>, Rank)>,
    pub(super) host: Option<(Range<u32>, Rank)>,
    pub(super) message: Option<(Range<u32>, Rank)>,
}

impl Normalizer {
    /// Copies `s` into the arena.
    #[inline]
    pub(super) fn put(&mut self, s: &str) -> Range<u32> {
        let start = self.arena.len() as u32;
        self.arena.push_str(s);
        start..self.arena.len() as u32
    }

    pub(super) fn attr(&mut self, k: &str, v: &str) {
        if self.attributes.len() >= MAX_ATTRIBUTES || k.len() > MAX_KEY_BYTES {
            self.fields_dropped += 1;
            return;
        }
        let k = self.put(k);
        let v = self.put(v);
        self.attributes.push((k, v));
    }

    pub(super) fn syslog_fields(
        &mut self,
        line: &str,
        received_ns: i64,
        input: InputId,
        f: &mut Fields,
    ) -> Result<(), Option<String>> {
        let b = line.as_bytes();
        let rec = parse_syslog(b, received_ns);
        let s = |r: &Range<usize>| line.get(r.clone()).unwrap_or("");
        if let Some(ts) = rec.timestamp_ns {
            f.timestamp_ns = Some((ts, Rank(1)));
        }
        if let Some(sev) = rec.severity {
            f.severity = Some((Severity::from_syslog(sev), Rank(1)));
        }
        if let Some(h) = &rec.host {
            let r = self.put(s(h));
            f.host = Some((r, Rank(1)));
        }
        if let Some(a) = &rec.app {
            let r = self.put(s(a));
            f.source = Some((r, Rank(1)));
        }
        let msg = self.put(s(&rec.msg));
        f.message = Some((msg.clone(), Rank(1)));
        if let Some(fac) = rec.facility {
            let mut buf = [0u8; 3];
            self.attr("syslog.facility", fmt_u8(fac, &mut buf));
        }
        if let Some(p) = &rec.procid {
            self.attr("syslog.procid", s(p));
        }
        if let Some(m) = &rec.msgid {
            self.attr("syslog.msgid", s(m));
        }
        if let Some(sd) = &rec.structured_data {
            let sd_bytes = &b[sd.clone()];
            let mut pairs: [(Range<usize>, Range<usize>, Range<usize>); 32] = Default::default();
            let mut n = 0;
            let base = sd_bytes.as_ptr() as usize;
            let ok = for_each_sd_param(sd_bytes, &mut |id, name, value| {
                if n < pairs.len() {
                    let at = |x: &[u8]| {
                        let st = x.as_ptr() as usize - base;
                        st..st + x.len()
                    };
                    pairs[n] = (at(id), at(name), at(value));
                    n += 1;
                }
            });
            if ok {
                for (id, name, value) in pairs.iter().take(n) {
                    if id.len() + name.len() + 4 > MAX_KEY_BYTES
                        || self.attributes.len() >= MAX_ATTRIBUTES
                    {
                        self.fields_dropped += 1;
                        continue;
                    }
                    unescape_sd_value(&sd_bytes[value.clone()], &mut self.sd_value);
                    let key_start = self.arena.len() as u32;
                    self.arena.push_str("sd.");
                    self.arena
                        .push_str(std::str::from_utf8(&sd_bytes[id.clone()]).unwrap_or("?"));
                    self.arena.push('.');
                    self.arena
                        .push_str(std::str::from_utf8(&sd_bytes[name.clone()]).unwrap_or("?"));
                    let key = key_start..self.arena.len() as u32;
                    let start = self.arena.len() as u32;
                    self.arena
                        .push_str(&String::from_utf8_lossy(&self.sd_value));
                    let v = start..self.arena.len() as u32;
                    self.attributes.push((key, v));
                }
            }
        }
        self.text_entities_of(msg);
        let strict_input = matches!(input, InputId::SyslogTcp | InputId::SyslogUdp);
        if strict_input && rec.format == SyslogFormat::Unstructured {
            // Not syslog at all: kept whole as the message, counted as malformed.
            return Err(None);
        }
        Ok(())
    }

    pub(super) fn json_fields(&mut self, line: &str, f: &mut Fields) -> Result<(), Option<String>> {
        let mut json = self.json.take().unwrap_or_default();
        let res = scan_object(line.as_bytes(), &mut json, &mut |key, value| {
            let v: &str = match value {
                JsonScalar::Str(s) | JsonScalar::Num(s) | JsonScalar::Array(s) => s,
                JsonScalar::Bool(true) => "true",
                JsonScalar::Bool(false) => "false",
                JsonScalar::Null => return,
            };
            self.json_field(key, v, matches!(value, JsonScalar::Num(_)), f);
        });
        self.json = Some(json);
        match res {
            Ok(()) => {
                if let Some((m, _)) = &f.message {
                    let m = m.clone();
                    self.text_entities_of(m);
                }
                Ok(())
            }
            Err(e) => Err(Some(format!("invalid JSON: {e}"))),
        }
    }

    fn json_field(&mut self, key: &str, v: &str, numeric: bool, f: &mut Fields) {
        match key {
            "@timestamp" | "timestamp" | "TimeCreated" | "time" | "ts" | "event.created"
            | "eventTime" => {
                let rank = Rank(match key {
                    "@timestamp" => 5,
                    "TimeCreated" => 4,
                    "timestamp" => 3,
                    _ => 2,
                });
                if f.timestamp_ns.as_ref().is_none_or(|(_, r)| *r < rank)
                    && let Some(ts) = parse_timestamp(v.as_bytes())
                {
                    f.timestamp_ns = Some((ts, rank));
                    return;
                }
            }
            "message" | "msg" | "Message" | "log" | "text" => {
                let rank = Rank(if key == "message" { 3 } else { 2 });
                if f.message.as_ref().is_none_or(|(_, r)| *r < rank) {
                    let r = self.put(v);
                    f.message = Some((r, rank));
                    return;
                }
            }
            "host.name" | "host.hostname" | "hostname" | "Computer" | "host" => {
                let rank = Rank(match key {
                    "host.name" => 4,
                    "Computer" => 3,
                    "host.hostname" => 2,
                    _ => 1,
                });
                if f.host.as_ref().is_none_or(|(_, r)| *r < rank) {
                    let r = self.put(v);
                    f.host = Some((r, rank));
                }
                self.entity(EntityKind::Host, Role::Reporter, v);
                return;
            }
            "event.dataset" | "service.name" | "Channel" | "Provider_Name" | "source" | "app"
            | "program" | "log.logger" | "logger" | "event.module" => {
                let rank = Rank(match key {
                    "event.dataset" => 9,
                    "Channel" => 8,
                    "service.name" => 7,
                    "event.module" => 6,
                    "source" => 5,
                    "Provider_Name" => 4,
                    "app" | "program" => 3,
                    _ => 2,
                });
                if f.source.as_ref().is_none_or(|(_, r)| *r < rank) {
                    let r = self.put(v);
                    f.source = Some((r, rank));
                }
            }
            "event.severity"
            | "log.level"
            | "level"
            | "severity"
            | "Level"
            | "log.syslog.severity.code"
            | "watchpost.severity" => {
                // Which field wins (docs/event.md, "Severity"): a number on Watchpost's own
                // scale, syslog's severity, a level word, Windows' numeric `Level`; a bare
                // number elsewhere only on the scale configured for its source, at `resolve`.
                let (sev, rank) = match key {
                    "watchpost.severity" if numeric => (
                        v.parse::<f64>()
                            .ok()
                            .and_then(|n| SeverityScale::Watchpost.read(n)),
                        Rank(6),
                    ),
                    "log.syslog.severity.code" => (
                        v.parse::<f64>()
                            .ok()
                            .and_then(|n| SeverityScale::Syslog.read(n)),
                        Rank(5),
                    ),
                    "Level" if numeric => (
                        v.parse::<f64>()
                            .ok()
                            .and_then(|n| SeverityScale::Windows.read(n)),
                        Rank(3),
                    ),
                    "watchpost.severity" => (None, Rank(0)),
                    _ if numeric => {
                        let rank = Rank(match key {
                            "event.severity" => 3,
                            "severity" => 2,
                            _ => 1,
                        });
                        if let Ok(n) = v.parse::<f64>()
                            && f.severity_number.as_ref().is_none_or(|(_, r)| *r < rank)
                        {
                            f.severity_number = Some((n, rank));
                        }
                        (None, rank)
                    }
                    _ => (Severity::from_word(v), Rank(4)),
                };
                if let Some(sev) = sev
                    && f.severity.as_ref().is_none_or(|(_, r)| *r < rank)
                {
                    f.severity = Some((sev, rank));
                }
            }
            _ => {}
        }
        if let Some((kind, role)) = json_entity(key) {
            self.entity(kind, role, v);
        }
        self.attr(key, v);
    }
}

/// JSON fields that name an entity (ECS, Windows event data, common producers).
fn json_entity(key: &str) -> Option<(EntityKind, Role)> {
    use EntityKind::*;
    Some(match key {
        "source.ip" | "client.ip" | "IpAddress" | "SourceAddress" | "SourceIp" | "src_ip"
        | "srcip" | "src" | "ClientIP" | "remote_addr" | "clientip" => (Ip, Role::Source),
        "destination.ip" | "server.ip" | "DestAddress" | "DestinationIp" | "dst_ip" | "dstip"
        | "dst" => (Ip, Role::Destination),
        "host.ip" | "ip" => (Ip, Role::Other),
        "user.name" | "SubjectUserName" | "User" | "user" | "username" | "source.user.name"
        | "AccountName" => (User, Role::Subject),
        "user.target.name" | "TargetUserName" | "destination.user.name" | "TargetUser" => {
            (User, Role::Target)
        }
        "source.domain" | "WorkstationName" | "SourceHostname" | "client.domain" => {
            (Host, Role::Source)
        }
        "destination.domain" | "DestinationHostname" | "server.domain" => (Host, Role::Destination),
        "dns.question.name" | "url.domain" | "QueryName" | "domain" | "url.registered_domain" => {
            (Domain, Role::Other)
        }
        _ => return None,
    })
}

/// Writes `v` in decimal into `buf`, returning the text.
pub(super) fn fmt_u8(v: u8, buf: &mut [u8; 3]) -> &str {
    let mut n = 0;
    if v >= 100 {
        buf[n] = b'0' + v / 100;
        n += 1;
    }
    if v >= 10 {
        buf[n] = b'0' + (v / 10) % 10;
        n += 1;
    }
    buf[n] = b'0' + v % 10;
    n += 1;
    std::str::from_utf8(&buf[..n]).unwrap_or("0")
}
