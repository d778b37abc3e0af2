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

#![deny(missing_docs)]

pub mod attack;
pub mod bundled;
pub mod condition;
pub mod correlation;
pub mod engine;
pub mod error;
pub mod ioc;
pub mod load;
pub mod mapping;
pub mod pattern;
pub mod rule;
pub mod yaml;

pub use engine::{EventFields, PlainEvent, RuleSet};
pub use error::{ErrorKind, RuleError};
pub use mapping::Mapping;
pub use rule::{Level, Rule, parse_rule};
