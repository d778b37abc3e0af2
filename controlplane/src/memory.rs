//! The memory budget: the most each bounded part of the service may hold, worked out from the
//! configuration, and reported by `/stats` (`memory`) beside the resident memory in use, so an
//! operator sizing a sensor host reads what the keys allow, part by part, and which key to turn.
//!
//! Each figure is an upper bound of what the part holds at its configured limits, not what it
//! holds now: RocksDB's memtables are counted full in every family, every ring full of full
//! batches, every WebSocket client's queue full. docs/guarantees.md says how each was sized and
//! what is not in it.

use serde::Serialize;
use watchpost_proto::Config;

/// One bounded part.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct BudgetPart {
    /// What it is.
    pub part: &'static str,
    /// The keys that bound it.
    pub keys: &'static str,
    /// The most it holds, bytes.
    pub bytes: u64,
}

/// `/stats` `memory`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct MemoryStats {
    /// Resident memory of the process now (Linux `/proc/self/statm`; 0 where unavailable).
    pub resident_bytes: u64,
    /// The sum of the parts.
    pub budget_bytes: u64,
    /// The parts, largest first.
    pub parts: Vec<BudgetPart>,
}

const MIB: u64 = 1 << 20;
/// Bytes of an encoded block per event of a batch: the record, its compressed copy and its
/// postings (capacities `EncodedBlock::with_capacity` reserves).
const BLOCK_BYTES_PER_EVENT: u64 = 256 + 128 + 8 * 24;
/// Bytes of a UEBA baseline with its lists full of IPv6 sources, as `ueba_memory --ipv6`
/// measures it (docs/benchmarks.md), rounded up.
const BASELINE_BYTES: u64 = 2_200;
/// Bytes of one alert kept for a retry: a large alert's JSON-sized record.
const UNWRITTEN_ALERT_BYTES: u64 = 8 << 10;
/// Bytes of one open correlation group (keys, counts, distinct values kept).
const CORRELATION_GROUP_BYTES: u64 = 512;
/// Bytes of one address's persistence trail: in its table the key, the latest period and 144
/// bits of periods with the table's slack (48), and its entry in the buffer a full table's
/// eviction selects from (16) (`detect`'s `persistence::Trails`).
const PERSISTENCE_TRAIL_BYTES: u64 = 64;

/// The budget of `config`, largest part first.
pub fn budget(config: &Config) -> Vec<BudgetPart> {
    let dp = &config.dataplane;
    let st = &config.storage;
    let workers = u64::from(dp.parse_workers);
    let detectors = u64::from(dp.detect_workers);
    let ring = u64::from(dp.ring_capacity);
    let batch = u64::from(dp.batch_bytes) + u64::from(dp.batch_size) * 24;
    let mut parts = vec![
        BudgetPart {
            part: "rocksdb block cache",
            keys: "storage.block_cache_mb",
            bytes: u64::from(st.block_cache_mb) * MIB,
        },
        BudgetPart {
            part: "rocksdb memtables",
            keys: "storage.write_buffer_mb",
            bytes: watchpost_store::memtable_bound(st),
        },
        BudgetPart {
            part: "input batches",
            keys: "dataplane.ring_capacity, batch_bytes, batch_size, parse_workers",
            // Every input that may be enabled has its own rings and batches.
            bytes: watchpost_proto::InputId::ALL.len() as u64
                * (ring * workers + 2 * workers + 2)
                * batch,
        },
        BudgetPart {
            part: "encoded blocks",
            keys: "dataplane.ring_capacity, batch_size, parse_workers",
            bytes: workers * (ring + 2) * u64::from(dp.batch_size) * BLOCK_BYTES_PER_EVENT,
        },
        BudgetPart {
            part: "ueba baselines",
            keys: "ueba.max_entities, dataplane.detect_workers",
            bytes: config.ueba.max_entities * detectors * BASELINE_BYTES,
        },
        BudgetPart {
            part: "persistence trails",
            keys: "ueba.max_entities, dataplane.detect_workers",
            bytes: config.ueba.max_entities * detectors * PERSISTENCE_TRAIL_BYTES,
        },
        BudgetPart {
            part: "correlation groups",
            keys: "detection.correlation_max_groups, dataplane.detect_workers",
            bytes: u64::from(config.detection.correlation_max_groups)
                * detectors
                * CORRELATION_GROUP_BYTES,
        },
        BudgetPart {
            part: "alerts waiting for the store",
            keys: "(10,000 per detection worker)",
            bytes: watchpost_dataplane::MAX_UNWRITTEN as u64 * detectors * UNWRITTEN_ALERT_BYTES,
        },
        BudgetPart {
            part: "websocket queues",
            keys: "ws_max_connections, ws_queue_max_bytes, ws_frame_max_bytes",
            bytes: u64::from(config.ws_max_connections)
                * (config.ws_queue_max_bytes + config.ws_frame_max_bytes),
        },
        BudgetPart {
            // Held by crate::body's budget: every route's bodies as they arrive, an ingest
            // body's copy framed for the spool and its split, OTLP's decoding.
            part: "request bodies",
            keys: "api_body_memory_mb",
            bytes: u64::from(config.api_body_memory_mb) * MIB,
        },
        BudgetPart {
            part: "custom rule text",
            keys: "detection.sigma_custom_max_total_bytes",
            bytes: config.detection.sigma_custom_max_total_bytes,
        },
    ];
    parts.sort_by_key(|p| std::cmp::Reverse(p.bytes));
    parts
}

/// The budget with the resident memory now.
pub fn stats(config: &Config) -> MemoryStats {
    let parts = budget(config);
    MemoryStats {
        resident_bytes: resident_bytes().unwrap_or(0),
        budget_bytes: parts.iter().map(|p| p.bytes).sum(),
        parts,
    }
}

/// Resident memory of this process, from `/proc/self/statm` (pages).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_follows_its_keys() {
        let mut config = Config::default();
        let before = budget(&config);
        let ws = |parts: &[BudgetPart]| {
            parts
                .iter()
                .find(|p| p.part == "websocket queues")
                .unwrap()
                .bytes
        };
        config.ws_queue_max_bytes *= 2;
        let after = budget(&config);
        assert_eq!(
            ws(&after) - ws(&before),
            u64::from(config.ws_max_connections) * (config.ws_queue_max_bytes / 2)
        );
        assert!(after.windows(2).all(|w| w[0].bytes >= w[1].bytes));
        assert!(resident_bytes().unwrap() > 0);
    }
}
