//! Inputs: syslog over UDP and TCP, JSON lines over TCP, file tail, and HTTP ingest.
//!
//! Each input is one thread that frames messages into pooled batches and sends them on its own
//! SPSC rings, one per stage A worker ([`outlet`]). Sockets are bound by the pipeline before any
//! thread starts, so a port already in use is a start-up error naming the config key.

pub mod file;
pub mod framing;
pub mod http;
pub mod otlp;
pub mod outlet;
pub mod relp;
mod relp_frame;
pub(crate) mod spool;
pub mod tcp;
pub mod udp;

pub use http::{BodyError, HttpIngest, IngestReceipt, ingest_events};
pub use otlp::{
    OtlpEncoding, OtlpError, OtlpEvents, gunzip, otlp_events, otlp_messages, status_body,
    success_body,
};
pub use udp::{UdpKernel, udp_kernel};
