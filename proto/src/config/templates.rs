//! The `[templates]` table: the miner and the operator's masks.

use super::Config;
use super::problems::Problems;
use serde::{Deserialize, Serialize};

/// `[templates]`: the miner has one default configuration for every log; operators may only add
/// masks for variables specific to their logs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TemplatesConfig {
    /// Extra masks: tokens matching `pattern` (a regex) are replaced by `<NAME>`.
    pub extra_masks: Vec<MaskConfig>,
}

/// One user-added template mask.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskConfig {
    /// Upper-case name shown in templates as `<NAME>`.
    pub name: String,
    /// Regular expression a whole token must match.
    pub pattern: String,
}

/// Checks the table's keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    for (n, m) in config.templates.extra_masks.iter().enumerate() {
        let ok = !m.name.is_empty()
            && m.name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            p.add(
                &format!("templates.extra_masks[{n}].name"),
                "must be non-empty upper-case letters, digits or _",
            );
        }
        if m.pattern.is_empty() {
            p.add(
                &format!("templates.extra_masks[{n}].pattern"),
                "must not be empty",
            );
        }
    }
}
