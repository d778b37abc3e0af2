//! Shared types of Watchpost, with no I/O: the Event record, entity ids, the severity scale, the
//! configuration, the API's common bodies, and the small vocabulary every stage shares (the
//! stable on-disk hash, the clock, the binary encoding, the event as rules read it, and the
//! time-series points detection hands the store).
//!
//! Every other crate depends on this one and it depends on none of them, so a type that crosses a
//! crate boundary (data plane to store to API) is defined once, here.
//!
//! ```
//! use watchpost_proto::{entity_uuid_of, EntityKind, Severity};
//! let a = entity_uuid_of(EntityKind::User, "CORP\\alice").unwrap();
//! let b = entity_uuid_of(EntityKind::User, "alice@corp").unwrap();
//! assert_eq!(a, b);
//! assert_eq!(Severity::from_syslog(3), Severity::High);
//! ```
#![deny(missing_docs)]

pub mod addr;
mod alert;
mod api;
mod authority;
mod clock;
mod codec;
pub mod config;
mod entity;
mod error;
mod event;
mod exception;
mod fields;
mod hash;
mod hex;
mod input;
pub mod mutate;
mod series;
mod severity;
pub mod store_url;

pub use alert::{
    Alert, AlertType, AttackMapping, CloseReason, Deviation, DeviationPart, DeviationSignal,
    Feedback, MAX_CONTRIBUTING, MAX_TRIAGE_HISTORY, Sustained, ThresholdChange, Triage,
    TriageChange, TriageStatus, Verdict, builtin_detector_name, finite,
};
pub use api::{
    ErrorBody, ListMeta, ListResponse, MissingSensor, SensorCoverage, TOTAL_EXACT_UP_TO,
};
pub use authority::{AllowedHosts, Authority, HostName};
pub use clock::{NS_PER_DAY, now_ns};
pub use codec::bincode_config;
pub use config::{Config, RateLimit, RiskLevelWeights};
pub use entity::{EntityKind, EntityRef, Role, canonicalize_into, entity_uuid, entity_uuid_of};
pub use error::ParseError;
pub use event::{Event, event_id};
pub use exception::{
    Exception, ExceptionConditions, ExceptionDraft, ExceptionPatch, ExceptionProblem,
    ExceptionScope, parse_cidr, parse_template,
};
pub use fields::{EventFields, PlainEvent};
pub use hash::{BuildPreHashed, PreHashed, U64Map, U64Set, fmix64, hash64, hash64_seeded};
pub use hex::{push_hex, to_hex};
pub use input::InputId;
pub use series::{MinutePoint, RiskPoint, RuleFires};
pub use severity::{Severity, SeverityScale};
pub use uuid::Uuid;
