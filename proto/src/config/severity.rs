//! The `[severity]` table: which scale each source's numeric severities are on.

use super::Config;
use super::problems::Problems;
use crate::SeverityScale;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[severity]`: how a numeric severity (`event.severity`, `severity`, `level`) is read. A word
/// (`log.level`, `level: "warn"`), syslog's own severity and Windows' `Level` need no table;
/// a number means something only on its source's scale (docs/event.md, "Severity").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SeverityConfig {
    /// Scale of a source not listed in `sources`: `none` (the default: the number is kept as an
    /// attribute and sets nothing), `watchpost`, `syslog`, `windows`, `otel` or `bunyan`.
    pub default_scale: SeverityScale,
    /// Scale per source, by the event's `source` exactly as stored (`event.dataset`,
    /// `service.name`, the syslog program...).
    pub sources: BTreeMap<String, SeverityScale>,
}

/// Checks the table's keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    for source in config.severity.sources.keys() {
        if source.trim().is_empty() {
            p.add("severity.sources", "a source name must not be empty");
        }
    }
}
