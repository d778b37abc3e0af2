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
    /// Detector: matches (Sigma, correlation, indicator) of content this node does not hold,
    /// dropped (a rule or feed the sensor has and this detector has not, yet or at all).
    pub content_unresolved: AtomicU64,
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
    /// Console: verdicts sent to the detectors' partitions (one per partition), and ones
    /// dropped because the queue to the stream was full.
    pub feedback_sent: AtomicU64,
    /// See `feedback_sent`.
    pub feedback_dropped: AtomicU64,
    /// Detector: verdicts applied to a partition's thresholds.
    pub feedback_applied: AtomicU64,
    /// Detector: writes of the partitions' series (sources' minutes, entities' hourly risk,
    /// rule fires) the node's store refused.
    pub series_errors: AtomicU64,
    /// Shared content: the highest revision of the content bucket this node has written (a
    /// console) or applied (any other node).
    pub content_revision: AtomicU64,
    /// Shared content: entries and files written (a console) or that changed this node's
    /// content (any other node).
    pub content_changes: AtomicU64,
    /// Shared content: entries or files that could not be written or applied.
    pub content_errors: AtomicU64,
    content_error: Mutex<Option<String>>,
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

    /// Why the last shared content could not be written or applied.
    pub fn content_error(&self) -> Option<String> {
        self.content_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Content up to `revision` is held (0: a file, which has no revision).
    pub(crate) fn content_at(&self, revision: u64) {
        self.content_revision.fetch_max(revision, Ordering::Relaxed);
    }

    /// One entry or file changed content, at `revision`.
    pub(crate) fn content_changed(&self, revision: u64) {
        self.content_at(revision);
        self.content_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// A console's pass wrote everything it had to: the fleet holds its content, and the last
    /// failure (a bucket not ready yet at start, the servers away) is history.
    pub(crate) fn content_in_sync(&self) {
        *self.content_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// One entry or file failed, for `why` (logged, and kept for the API).
    pub(crate) fn content_failed(&self, why: String) {
        tracing::warn!("cluster: shared content: {why}");
        self.content_errors.fetch_add(1, Ordering::Relaxed);
        *self.content_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
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
