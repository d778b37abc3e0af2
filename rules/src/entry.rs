//! A rule as a catalogue holds it: the parsed rule with what stage B and the API read of it on
//! every alert (its fire-count key, ATT&CK mappings, severity, whether it is on), computed once.
//!
//! It lives with the rules, not with the live catalogue, so that detection can name the rules
//! stage A reports by number without depending on the catalogue that holds them.

use crate::attack::Attack;
use crate::rule::Body;
use crate::{Mapping, Rule};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use watchpost_proto::{AttackMapping, hash64};

/// Where a rule came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Written by this project, embedded in the binary.
    Bundled,
    /// From a folder of `detection.sigma_rules_dirs`.
    Directory,
    /// Uploaded through the API (a file in the custom upload folder).
    Custom,
}

impl Origin {
    /// The API name: `bundled`, `directory` or `custom`.
    pub fn name(self) -> &'static str {
        match self {
            Origin::Bundled => "bundled",
            Origin::Directory => "directory",
            Origin::Custom => "custom",
        }
    }
}

/// One rule of the catalogue.
#[derive(Debug)]
pub struct RuleEntry {
    /// The parsed rule.
    pub rule: Arc<Rule>,
    /// Its YAML, as loaded.
    pub yaml: String,
    /// Where it came from.
    pub origin: Origin,
    /// Its file (for bundled rules, the path under `rules/sigma/`).
    pub path: String,
    /// `hash64(id)`: the key of its fire counts in the store.
    pub key: u64,
    /// ATT&CK mappings of its tags.
    pub attack: Vec<AttackMapping>,
    /// Alert severity (0 to 5) from its level; 3 when it has none.
    pub severity: u8,
    /// Its logsource maps onto events (a rule whose logsource does not can never fire).
    pub mapped: bool,
    enabled: AtomicBool,
}

impl RuleEntry {
    /// Catalogues `rule`, read from `path` (its `yaml`), enabled; `mapping` says whether its
    /// logsource can ever match an event.
    pub fn new(
        mut rule: Rule,
        yaml: String,
        origin: Origin,
        path: String,
        mapping: &Mapping,
    ) -> RuleEntry {
        // Fields its logsource's events never carry: said with the parser's warnings, wherever
        // the rule is listed or uploaded.
        rule.warnings.extend(mapping.field_warnings(&rule));
        let attack = Attack::get().mappings(&rule.tags);
        let mapped = match &rule.body {
            Body::Detection { .. } => mapping.shapes(&rule.logsource).is_some(),
            Body::Correlation(_) => true,
        };
        RuleEntry {
            key: hash64(rule.id.as_bytes()),
            severity: rule.level.map_or(3, |l| l.severity()),
            rule: Arc::new(rule),
            yaml,
            origin,
            path,
            attack,
            mapped,
            enabled: AtomicBool::new(true),
        }
    }

    /// Applied to events?
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Turns the rule on or off. The flag is atomic because stage B reads it through a shared
    /// entry while the API toggles it; the catalogue recompiles its set after a change.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// A detection rule (rather than a correlation rule)?
    pub fn is_detection(&self) -> bool {
        matches!(self.rule.body, Body::Detection { .. })
    }
}
