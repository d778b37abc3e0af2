//! The `[dataplane]` table: workers, cores, rings and batches.

use super::Config;
use super::problems::Problems;
use serde::{Deserialize, Serialize};

/// `[dataplane]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DataplaneConfig {
    /// Stage A workers (parse, normalise, template mining), each on its own SPSC rings.
    pub parse_workers: u32,
    /// Stage B workers (content ensemble sharded by source, UEBA sharded by entity, alert
    /// dedup), each fed by one SPSC ring from every stage A worker.
    pub detect_workers: u32,
    /// Pin worker threads to cores with `core_affinity`.
    pub pin_workers: bool,
    /// Core ids to pin workers to, in order: parse workers, the writer, detect workers; empty = round-robin
    /// over every core the process may use.
    pub cores: Vec<u32>,
    /// Batches each ring holds before its producer waits.
    pub ring_capacity: u32,
    /// Most events in one batch.
    pub batch_size: u32,
    /// Most bytes of raw lines in one batch.
    pub batch_bytes: u32,
    /// Milliseconds a partly filled batch waits for more lines before it is sent on.
    pub batch_linger_ms: u64,
    /// Longest line kept whole; longer lines are truncated to this and flagged (and counted).
    pub max_line_bytes: u32,
    /// Seconds a stop (SIGTERM, SIGINT) waits for what was accepted to be stored before the
    /// process exits anyway, reporting what was not (a failing disk must not keep it running).
    pub shutdown_timeout_seconds: u64,
}

impl Default for DataplaneConfig {
    fn default() -> DataplaneConfig {
        DataplaneConfig {
            parse_workers: 1,
            detect_workers: 1,
            pin_workers: true,
            cores: Vec::new(),
            ring_capacity: 64,
            batch_size: 1024,
            batch_bytes: 1 << 20,
            batch_linger_ms: 20,
            max_line_bytes: 64 << 10,
            shutdown_timeout_seconds: 30,
        }
    }
}

/// Checks the table's keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    let dp = &config.dataplane;
    p.range_u64("dataplane.parse_workers", dp.parse_workers.into(), 1, 64);
    p.range_u64("dataplane.detect_workers", dp.detect_workers.into(), 1, 64);
    p.range_u64(
        "dataplane.ring_capacity",
        dp.ring_capacity.into(),
        2,
        1 << 16,
    );
    p.range_u64("dataplane.batch_size", dp.batch_size.into(), 1, 65_535);
    p.range_u64("dataplane.batch_linger_ms", dp.batch_linger_ms, 1, 10_000);
    p.range_u64(
        "dataplane.shutdown_timeout_seconds",
        dp.shutdown_timeout_seconds,
        1,
        3600,
    );
    p.range_u64(
        "dataplane.max_line_bytes",
        dp.max_line_bytes.into(),
        256,
        16 << 20,
    );
    p.range_u64(
        "dataplane.batch_bytes",
        dp.batch_bytes.into(),
        4096,
        256 << 20,
    );
    if dp.batch_bytes < dp.max_line_bytes {
        p.add(
            "dataplane.batch_bytes",
            "must be at least dataplane.max_line_bytes",
        );
    }
}
