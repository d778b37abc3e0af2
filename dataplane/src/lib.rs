//! Watchpost's data plane: from listening sockets and tailed files to RocksDB.
//!
//! ```text
//! inputs (UDP, TCP, files, HTTP) -- pooled batches --> SPSC rings --> stage A workers (pinned)
//!     parse, normalise, mine templates, find entities, encode --> SPSC rings --> writer --> RocksDB
//!                                          \--> detection records --> SPSC rings --> stage B
//!     (content ensemble by source, UEBA by entity, alert dedup) --> alerts, series, models
//! ```
//!
//! Batches, not events, cross threads; every buffer is pooled; each worker owns its state. So the
//! steady state allocates nothing and takes no lock per event, and the control plane reads only
//! atomics ([`stats`]) and the store ([`watchpost_store::Store`]), never the workers' state.
//!
//! This crate is the runtime: threads, rings, sockets, files and the live content. What it runs
//! lives below it: the detection mathematics in `watchpost_detect` (no I/O), the RocksDB schema
//! and queries in `watchpost_store`, the rules in `watchpost_rules`.
//!
//! ```no_run
//! let config = watchpost_proto::Config::default();
//! let pipeline = watchpost_dataplane::Pipeline::start(&config).expect("start");
//! println!("stored so far: {}", pipeline.stats().snapshot().stored_total);
//! pipeline.shutdown();
//! ```
#![deny(missing_docs)]

pub mod analyze;
pub mod batch;
pub mod catalog;
mod error;
pub mod input;
pub mod ioc;
pub mod live;
pub mod normalize;
pub mod parse;
pub mod pipeline;
pub mod ring;
pub mod sigma;
pub mod stage;
pub mod stats;
pub mod template;
pub mod worker;
pub mod writer;

pub use error::Error;
pub use pipeline::Pipeline;
