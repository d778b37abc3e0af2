//! Inputs: syslog over UDP and TCP, JSON lines over TCP, file tail, and HTTP ingest.
//!
//! Every input implements one trait (`registry`) and is listed once, in [`INPUTS`]: the pipeline binds and
//! starts what the list holds, and `/health` reports it.
//!
//! Each input is one thread that frames messages into pooled batches and sends them on its own
//! SPSC rings, one per stage A worker ([`outlet`]). Sockets are bound by the pipeline before any
//! thread starts, so a port already in use is a start-up error naming the config key.

mod body;
pub mod file;
pub mod framing;
pub mod http;
mod ingest;
pub mod otlp;
mod otlp_answer;
pub mod outlet;
mod registry;
pub mod relp;
mod relp_frame;
pub(crate) mod spool;
pub mod tcp;
pub mod udp;

pub use body::{BodyError, CheckedBody, ingest_events};
pub use ingest::{HttpIngest, IngestReceipt};
pub use otlp::{
    OtlpEncoding, OtlpError, OtlpEvents, gunzip, otlp_events, otlp_messages, status_body,
    success_body,
};
pub use otlp_answer::{OtlpAnswer, RpcCode, otlp_gzip};
pub use registry::{Bound, Delivery, Input, Running, Start};
pub use udp::{UdpKernel, udp_kernel};

/// Every input, in counter order ([`watchpost_proto::InputId::ALL`]).
pub static INPUTS: [&dyn Input; 6] = [
    &udp::SyslogUdp,
    &tcp::SYSLOG_TCP,
    &tcp::JSON_TCP,
    &file::FileTail,
    &http::HttpInput,
    &relp::RelpInput,
];
