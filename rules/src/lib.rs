//! The Sigma engine of Watchpost: rules checked against the Sigma specification (v2) with every
//! error at its line and column ([`RuleError`]), compiled into a [`RuleSet`] that matches events
//! in place without allocating; correlation rules compiled into a [`Plan`] a [`Correlator`]
//! evaluates; the field and logsource [`Mapping`] (data files in `rules/mappings/`); the embedded
//! MITRE ATT&CK catalogue ([`Attack`]); indicator sets ([`IocSet`]); reading rule files and
//! folders ([`load_file`], [`rule_files`]); and the project's own rules ([`BUNDLED`]).
//!
//! Modules are private; everything another crate may use is re-exported here, in one list.
//!
//! The bundled rules live as YAML under `rules/sigma/`, each with a `.tests.jsonl` of events it
//! must and must not match.
//!
//! Load one rule, compile it, match one event:
//!
//! ```
//! use std::sync::Arc;
//! use watchpost_rules::{Mapping, PlainEvent, RuleSet, parse_rule};
//!
//! let rule = parse_rule(
//!     r#"
//! title: Shadow copies deleted
//! id: 5f2a3c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b
//! logsource: {product: windows, category: process_creation}
//! detection:
//!     selection:
//!         Image|endswith: '\vssadmin.exe'
//!         CommandLine|contains|all: [delete, shadows]
//!     condition: selection
//! "#,
//! )
//! .expect("a valid rule");
//! let set = RuleSet::compile([Arc::new(rule)], &Mapping::bundled());
//!
//! let event = PlainEvent {
//!     source: "Microsoft-Windows-Sysmon/Operational".into(),
//!     attributes: [
//!         ("Channel", "Microsoft-Windows-Sysmon/Operational"),
//!         ("EventID", "1"),
//!         ("Image", r"C:\Windows\System32\vssadmin.exe"),
//!         ("CommandLine", "vssadmin delete shadows /all /quiet"),
//!     ]
//!     .map(|(k, v)| (k.to_string(), v.to_string()))
//!     .to_vec(),
//!     ..PlainEvent::default()
//! };
//! let mut matched = Vec::new();
//! set.matches(&event, &mut matched);
//! assert_eq!(matched, [0], "rule number 0 of the set matched");
//! ```

#![deny(missing_docs)]

mod attack;
mod bundled;
mod caseless;
mod condition;
mod correlation;
mod dual_regex;
mod engine;
mod entry;
mod error;
mod factors;
mod field;
mod folded;
mod ioc;
mod load;
mod mapping;
mod pattern;
mod rule;
mod substrings;
#[cfg(test)]
mod test_support;
mod yaml;

pub use attack::{Attack, LICENSE as ATTACK_LICENSE, Tactic, Technique};
pub use bundled::BUNDLED;
pub use correlation::{
    CorrelationError, Correlator, Fired, Hit, Kind as CorrelationKind, Plan, Tap,
};
pub use engine::RuleSet;
pub use entry::{Origin, RuleEntry};
pub use error::{ErrorKind, Pos, RuleError};
pub use ioc::{
    FileStats, Format as IocFormat, Indicator, IndicatorError, IocError, IocId, IocKind, IocLoad,
    IocSet, names_a_hash,
};
pub use load::{Loaded, load_file, load_files, rule_files};
pub use mapping::{Mapping, MappingError};
pub use rule::{Body, Level, Logsource, MAX_UPLOAD_REGEX_VALUES, Rule, parse_rule};
/// Rules read events through this trait; defined with the shared types (see `watchpost_proto`).
pub use watchpost_proto::{EventFields, PlainEvent};
