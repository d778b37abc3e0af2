//! What the fleet's parts of this node count, for `/stats`, `/metrics`, `/health` and
//! `/api/v1/cluster`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// A sensor's link to the detection stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected yet, or the stream not opened yet.
    Connecting = 0,
    /// Records go out as they come.
    Connected = 1,
    /// The servers do not acknowledge: records wait in the spool (up to its bound).
    Spooling = 2,
    /// The servers are back: the spool is being sent.
    Draining = 3,
}

impl LinkState {
    /// Its name in `/health` and `/api/v1/cluster`.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Connecting => "connecting",
            LinkState::Connected => "connected",
            LinkState::Spooling => "spooling",
            LinkState::Draining => "draining",
        }
    }

    fn from_u8(v: u8) -> LinkState {
        match v {
            1 => LinkState::Connected,
            2 => LinkState::Spooling,
            3 => LinkState::Draining,
            _ => LinkState::Connecting,
        }
    }
}

/// A partition this detector owns, as of its last record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionView {
    /// Its number.
    pub partition: u32,
    /// The stream sequence of the last record applied.
    pub sequence: u64,
    /// Records of the partition in the stream after that one (the lag).
    pub pending: u64,
    /// When this detector took it, ns since the epoch.
    pub since_ns: i64,
    /// The lease's revision (a fencing token: grows with every renewal).
    pub lease_revision: u64,
}

/// The counters (monotonic unless named a gauge).
#[derive(Debug, Default)]
pub struct FleetCounters {
    link: AtomicU8,
    /// Sensor: records handed to the link.
    pub records_queued: AtomicU64,
    /// Sensor: records the stream acknowledged.
    pub records_published: AtomicU64,
    /// Sensor: records dropped because the spool was full (or too large for a message).
    pub records_dropped: AtomicU64,
    /// Sensor: bytes waiting for the stream (a gauge).
    pub spool_bytes: AtomicU64,
    /// Sensor: the most bytes that waited at once (a gauge's high-water mark).
    pub spool_peak_bytes: AtomicU64,
    /// Sensor: messages the stream acknowledged.
    pub messages_published: AtomicU64,
    /// Sensor and detector: publications not acknowledged (each retried).
    pub publish_failures: AtomicU64,
    /// Detector: records scored.
    pub records_scored: AtomicU64,
    /// Detector: messages refused (another format, damaged).
    pub messages_refused: AtomicU64,
    /// Detector: partitions taken (at start, over from a dead detector, or handed over).
    pub partitions_taken: AtomicU64,
    /// Detector: partitions given up (handed over to balance, or a lease lost).
    pub partitions_released: AtomicU64,
    /// Detector: snapshots written.
    pub snapshots_written: AtomicU64,
    /// Detector: snapshots that could not be written or read.
    pub snapshot_errors: AtomicU64,
    /// Detector: alerts and signals published.
    pub alerts_published: AtomicU64,
    /// Detector: alerts and signals dropped (the queue to the stream was full).
    pub alerts_dropped: AtomicU64,
    /// Console: alerts and signals stored from the stream.
    pub alerts_received: AtomicU64,
    /// Console: ones the store refused (redelivered by the stream).
    pub alert_store_errors: AtomicU64,
    partitions: Mutex<Vec<PartitionView>>,
}

impl FleetCounters {
    /// The sensor link's state.
    pub fn link(&self) -> LinkState {
        LinkState::from_u8(self.link.load(Ordering::Relaxed))
    }

    pub(crate) fn set_link(&self, state: LinkState) {
        self.link.store(state as u8, Ordering::Relaxed);
    }

    /// The partitions this detector owns.
    pub fn partitions(&self) -> Vec<PartitionView> {
        self.partitions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_partitions(&self, views: Vec<PartitionView>) {
        *self.partitions.lock().unwrap_or_else(|e| e.into_inner()) = views;
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn spool_add(&self, bytes: u64) -> u64 {
        let now = self.spool_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.spool_peak_bytes.fetch_max(now, Ordering::Relaxed);
        now
    }

    pub(crate) fn spool_sub(&self, bytes: u64) {
        self.spool_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
}
