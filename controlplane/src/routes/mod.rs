//! One module per API area; each handler is thin and calls into the store or the counters.

pub mod alerts;
pub mod anomaly;
pub mod entities;
pub mod events;
pub mod ingest;
pub mod system;
