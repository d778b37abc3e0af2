//! The Sigma engine of Watchpost.
//!
//! - [`yaml`]: YAML into a tree that remembers line and column of every node;
//! - [`rule`]: a rule checked against the Sigma specification (v2), values compiled with their
//!   modifiers ([`pattern`]) and the condition parsed ([`condition`]), every error with its place;
//! - [`mapping`]: which events a logsource covers and where a Sigma field is found (data files in
//!   `rules/mappings/`);
//! - [`engine`]: the compiled [`RuleSet`] that matches events without allocating;
//! - [`load`]: reading rule files and folders;
//! - [`bundled`]: the project's own rules, embedded;
//! - [`attack`]: the embedded MITRE ATT&CK catalogue and the mapping of rule tags onto it.
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

pub mod attack;
pub mod bundled;
pub mod condition;
pub mod correlation;
pub mod engine;
mod entry;
pub mod error;
pub mod ioc;
pub mod load;
pub mod mapping;
pub mod pattern;
pub mod rule;
pub mod yaml;

pub use engine::RuleSet;
pub use entry::{Origin, RuleEntry};
pub use error::{ErrorKind, RuleError};
pub use mapping::Mapping;
pub use rule::{Level, Rule, parse_rule};
/// Rules read events through this trait; defined with the shared types (see `watchpost_proto`).
pub use watchpost_proto::{EventFields, PlainEvent};
