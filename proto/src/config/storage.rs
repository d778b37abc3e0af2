//! The `[storage]` table.

use super::Config;
use super::problems::Problems;
use serde::{Deserialize, Serialize};

/// `[storage]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// Folder of the RocksDB store and the miner state; relative paths are from the working dir.
    pub data_dir: String,
    /// Days events are kept.
    pub retention_days: u32,
    /// RocksDB memtable size in MiB (per column family).
    pub write_buffer_mb: u32,
    /// RocksDB block cache in MiB (shared).
    pub block_cache_mb: u32,
    /// fsync the WAL on every write batch (slower; survives power loss, not just crashes).
    pub sync_writes: bool,
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        StorageConfig {
            data_dir: "data".into(),
            retention_days: 30,
            write_buffer_mb: 64,
            block_cache_mb: 256,
            sync_writes: false,
        }
    }
}

/// Checks the table's keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    let s = &config.storage;
    if s.data_dir.trim().is_empty() {
        p.add("storage.data_dir", "must not be empty");
    }
    p.range_u64("storage.retention_days", s.retention_days.into(), 1, 36_500);
    p.range_u64("storage.write_buffer_mb", s.write_buffer_mb.into(), 1, 4096);
    p.range_u64("storage.block_cache_mb", s.block_cache_mb.into(), 1, 65_536);
}
