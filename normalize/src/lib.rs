//! Watchpost's stage A, pure: what happens to one log line between its bytes and the two records
//! it becomes. No threads, no sockets, no files: the data plane's workers, `watchpost analyze`,
//! `watchpost rules test` and the benches all push lines through the same [`Normalizer`], so what
//! they report is what live ingestion stores and detects.
//!
//! ```text
//! line bytes --parse--> fields --normalise--> event (header, template, entities)
//!     --match--> Sigma rules in place, indicators, correlation keys
//!     --encode--> stored record + postings (EncodedBlock, to the writer)
//!              \-> detection record + matches + correlation hits (DetectBatch, to stage B)
//! ```
//!
//! Every buffer is owned by the normaliser and reused, so a steady stream of lines allocates
//! nothing (`dataplane/tests/zero_alloc.rs` proves it end to end). Modules are private; what other
//! crates use is re-exported here, in one list.
//!
//! ```
//! use watchpost_normalize::{LineMatcher, LineMeta, MinerConfig, Normalizer, TemplateMiner};
//! let miner = TemplateMiner::new(&MinerConfig::default()).expect("default masks compile");
//! let mut normalizer = Normalizer::new(miner);
//! let mut block = watchpost_store::EncodedBlock::with_capacity(0, 1);
//! let mut tally = Default::default();
//! let line = b"<38>Jan  5 10:00:00 web1 sshd[42]: Failed password for root from 203.0.113.9";
//! let meta = LineMeta { start: 0, len: line.len() as u32, received_ns: 0, truncated: false };
//! normalizer.push_line(
//!     line,
//!     &meta,
//!     watchpost_proto::InputId::SyslogUdp,
//!     watchpost_normalize::Format::Syslog,
//!     &mut block,
//!     &mut tally,
//! );
//! assert_eq!(block.len(), 1);
//! assert_eq!(normalizer.detect_batch().records.len(), 1);
//! # let _ = LineMatcher::new;
//! ```
#![deny(missing_docs)]

mod line;
mod line_matcher;
mod normalizer;
mod parse;
mod template;

pub use line::{Format, LineMeta};
pub use line_matcher::LineMatcher;
pub use normalizer::{Normalizer, Tally};
pub use parse::syslog::{SyslogFormat, parse_syslog};
pub use parse::time::{Rfc3339, parse_rfc3339};
pub use template::{Change, MinerConfig, MinerError, TemplateId, TemplateMiner};
