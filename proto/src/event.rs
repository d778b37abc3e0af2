//! The normalised Event record, as stored and as the API returns it.
//!
//! Every input (syslog, JSON lines, file tail, HTTP ingest) is normalised into this one shape so
//! that filters, detectors and rules see the same fields whatever the producer. `docs/event.md`
//! documents each field and where it comes from for each input.

use crate::entity::EntityRef;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One normalised event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    /// Opaque, time-ordered id (36 hex digits), unique within one store.
    pub id: String,
    /// When the event happened, per the producer (syslog header, `@timestamp`, `TimeCreated`);
    /// the receive time when the producer gave none. Nanoseconds since the epoch.
    pub timestamp_ns: i64,
    /// When Watchpost received it. Nanoseconds since the epoch.
    pub received_ns: i64,
    /// Which input took it in: `syslog`, `json`, `file` or `http`.
    pub input: String,
    /// The producing program or log: syslog app-name/tag, ECS `event.dataset` / `service.name`,
    /// Windows `Channel`; the input name when the producer names none.
    pub source: String,
    /// Host that produced the event (syslog HOSTNAME, `host.name`, `Computer`); empty if unknown.
    pub host: String,
    /// 0 (debug) to 5 (critical), see [`crate::Severity`].
    pub severity: u8,
    /// The message text (syslog MSG, ECS `message`); for records without one, empty.
    pub message: String,
    /// Id of the message's template (16 hex digits), stable across restarts.
    pub template_id: String,
    /// Entities found in the event's fields and text.
    pub entities: Vec<EntityRef>,
    /// Every other field the producer sent, flattened with dots (`http.request.method`); values as
    /// text (arrays as JSON text).
    pub attributes: BTreeMap<String, String>,
    /// On a fleet's console, the sensor that stored the event (its node name); absent on a
    /// node answering from its own store.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sensor: String,
}

/// The id of the event at `pos` in block `key`: 36 hex digits, time-ordered.
pub fn event_id(key: &[u8], pos: u16) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(36);
    crate::push_hex(&mut s, key);
    let _ = write!(s, "{pos:04x}");
    s
}
