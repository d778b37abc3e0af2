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
//! atomics ([`Stats`]) and the store ([`watchpost_store::Store`]), never the workers' state.
//!
//! This crate is the runtime: threads, rings, sockets, files and the live content. What it runs
//! lives below it: stage A's per-line work in `watchpost_normalize` (no threads, no I/O), the
//! detection mathematics in `watchpost_detect` (no I/O), the RocksDB schema and queries in
//! `watchpost_store`, the rules in `watchpost_rules`.
//!
//! Modules are private; what the control plane, the binary and the benches use is re-exported
//! here, in one list.
//!
//! ```no_run
//! let config = watchpost_proto::Config::default();
//! let pipeline = watchpost_dataplane::Pipeline::start(&config).expect("start");
//! println!("stored so far: {}", pipeline.stats().snapshot().stored_total);
//! pipeline.shutdown();
//! ```
#![deny(missing_docs)]

mod analyze;
mod batch;
mod catalog;
mod error;
mod evtx;
mod exceptions;
mod input;
mod ioc;
mod live;
mod pipeline;
mod remote;
mod ring;
mod stage;
mod stats;
mod unwritten;
pub use unwritten::MAX_UNWRITTEN;
mod worker;
mod writer;

pub use analyze::{Summary, analyze, analyze_with, event_line, read_line, write_alerts};
pub use catalog::{Catalog, CatalogReload};
pub use error::Error;
pub use evtx::{DATA_SEPARATOR, EvtxRead, evtx_lines, flat_event, input_files, is_evtx};
pub use exceptions::{ExceptionBook, ExceptionError, MAX_EXCEPTIONS};
pub use input::{
    BodyError, Bound, CheckedBody, Delivery, HttpIngest, INPUTS, IngestReceipt, Input, OtlpAnswer,
    OtlpEncoding, OtlpError, OtlpEvents, RpcCode, Running, Start, UdpKernel, gunzip, ingest_events,
    otlp_events, otlp_gzip, otlp_messages, status_body, success_body, udp_kernel,
};
pub use ioc::{IocFeed, IocStatus};
pub use live::{AlertChange, LiveAlerts};
pub use pipeline::{Pipeline, ShutdownReport, Stopper, spare_cores};
pub use remote::{RecordPublisher, StageB};
pub use stage::{BaselineView, DetectHandle};
pub use stats::{
    Counter, DetectCounters, Histogram, InputCounters, InputSnapshot, LATENCY_BOUNDS_S,
    STALE_THREAD_NS, Stats, StatsSnapshot, ThreadState, WriterCounters,
};
