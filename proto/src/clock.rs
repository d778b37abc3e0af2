//! Wall-clock time in nanoseconds, the unit of every `*_ns` field.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch. One `clock_gettime` (vDSO, no syscall): called per batch on
/// the hot path, not per event.
#[inline]
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Nanoseconds per day, for day partitions of index keys and retention.
pub const NS_PER_DAY: i64 = 86_400 * 1_000_000_000;
