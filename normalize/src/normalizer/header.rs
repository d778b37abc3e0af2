//! Normalise, last step: the event's header. Its source, host, message and template, its
//! severity (by field rank, else on its source's scale) and its time.

use super::Normalizer;
use super::fields::{Fields, Rank};
use crate::template::Change;
use std::ops::Range;
use watchpost_proto::{EntityKind, InputId, Role, Severity, SeverityScale, U64Map, hash64};
use watchpost_store::EncodedBlock;

/// `[severity]` as the normaliser looks it up: by the hash of the event's source, so that an
/// event pays one hash and one probe, and only when its severity is a bare number.
#[derive(Default)]
pub(super) struct SeverityScales {
    pub(super) default: SeverityScale,
    pub(super) by_source: U64Map<SeverityScale>,
}

impl SeverityScales {
    fn of(&self, source: &str) -> SeverityScale {
        if self.by_source.is_empty() {
            return self.default;
        }
        self.by_source
            .get(&hash64(source.as_bytes()))
            .copied()
            .unwrap_or(self.default)
    }
}

/// An event's resolved header fields (ranges in the worker's arena).
pub(super) struct Head {
    pub(super) source: Range<u32>,
    pub(super) host: Range<u32>,
    pub(super) message: Range<u32>,
    pub(super) template_id: u64,
    pub(super) severity: u8,
    pub(super) timestamp_ns: i64,
}

impl Normalizer {
    /// The event's header: its source (the input's name when it has none), host (recorded as
    /// the reporting entity), message and its template (new or changed templates go to `out`),
    /// severity and time.
    pub(super) fn resolve(
        &mut self,
        f: Fields,
        received_ns: i64,
        input: InputId,
        out: &mut EncodedBlock,
    ) -> Head {
        let source = match f.source {
            Some((r, _)) if r.start != r.end => r,
            _ => self.put(input.event_input()),
        };
        let host = f.host.map(|(r, _)| r).unwrap_or(0..0);
        if host.start != host.end {
            let r = host.start as usize..host.end as usize;
            let is_ip = self
                .arena
                .get(r.clone())
                .is_some_and(|h| h.parse::<std::net::IpAddr>().is_ok());
            let kind = if is_ip {
                EntityKind::Ip
            } else {
                EntityKind::Host
            };
            self.entity_in_arena(kind, Role::Reporter, r);
        }
        let message = f.message.map(|(r, _)| r).unwrap_or(0..0);
        let msg_text = self
            .arena
            .get(message.start as usize..message.end as usize)
            .unwrap_or("");
        let template_id = if msg_text.trim().is_empty() {
            0
        } else {
            let outcome = self.miner.mine(msg_text);
            if !matches!(outcome.change, Change::None)
                && let Some(t) = self.miner.template(outcome.id)
            {
                let start = out.template_text.len() as u32;
                out.template_text.push_str(t);
                out.templates
                    .push((outcome.id, start..out.template_text.len() as u32));
            }
            outcome.id
        };
        let severity = self.severity_of(f.severity, f.severity_number, &source) as u8;
        Head {
            source,
            host,
            message,
            template_id,
            severity,
            timestamp_ns: f.timestamp_ns.map_or(received_ns, |(t, _)| t),
        }
    }

    /// The event's severity: the best-ranked field that named one, else its bare number on its
    /// source's scale, else informational (what a producer that says nothing means).
    fn severity_of(
        &self,
        named: Option<(Severity, Rank)>,
        number: Option<(f64, Rank)>,
        source: &Range<u32>,
    ) -> Severity {
        if let Some((s, _)) = named {
            return s;
        }
        number
            .and_then(|(n, _)| {
                let source = self
                    .arena
                    .get(source.start as usize..source.end as usize)
                    .unwrap_or("");
                self.scales.of(source).read(n)
            })
            .unwrap_or(Severity::Info)
    }
}
