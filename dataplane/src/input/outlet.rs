//! The producer end of an input: one open batch and one SPSC ring per worker.
//!
//! An input thread copies each framed line into the open batch of the worker it shards to; a full
//! batch, or one older than `dataplane.batch_linger_ms`, goes onto that worker's ring. Pushing
//! waits when the ring is full, which is how TCP and file inputs apply backpressure. UDP cannot
//! make its senders wait, so it uses [`Outlet::push_line_or_drop`] and counts what it drops.

use crate::batch::{Pool, RawBatch};
use crate::ring::Producer;
use crate::stats::InputCounters;
use std::sync::Arc;
use watchpost_store::{Checkpoint, SpoolMark};

/// The sending side of one input.
pub struct Outlet {
    rings: Vec<Producer<Box<RawBatch>>>,
    open: Vec<Option<Box<RawBatch>>>,
    pool: Pool,
    linger_ns: i64,
    stats: Arc<crate::stats::Stats>,
    input: watchpost_proto::InputId,
}

impl Outlet {
    /// An outlet over `rings` (one per worker).
    pub fn new(
        rings: Vec<Producer<Box<RawBatch>>>,
        pool: Pool,
        linger_ms: u64,
        stats: Arc<crate::stats::Stats>,
        input: watchpost_proto::InputId,
    ) -> Outlet {
        let open = (0..rings.len()).map(|_| None).collect();
        Outlet {
            rings,
            open,
            pool,
            linger_ns: linger_ms as i64 * 1_000_000,
            stats,
            input,
        }
    }

    /// Workers fed by this outlet.
    pub fn workers(&self) -> usize {
        self.rings.len()
    }

    fn counters(&self) -> &InputCounters {
        self.stats.input(self.input)
    }

    /// Adds a line for `worker`, sending the batch on when it is full (waiting if the ring is).
    pub fn push_line(&mut self, worker: usize, line: &[u8], received_ns: i64, truncated: bool) {
        let w = worker % self.rings.len();
        if let Some(b) = &self.open[w]
            && !b.fits(line.len())
        {
            self.send(w);
        }
        let b = self.open[w].get_or_insert_with(|| self.pool.take());
        b.push(line, received_ns, truncated);
        let c = self.stats.input(self.input);
        c.received.add(1);
        c.bytes.add(line.len() as u64);
    }

    /// Like [`Outlet::push_line`], but a full batch meeting a full ring is dropped and counted
    /// instead of waiting: for UDP, whose senders cannot be slowed down.
    pub fn push_line_or_drop(
        &mut self,
        worker: usize,
        line: &[u8],
        received_ns: i64,
        truncated: bool,
    ) {
        let w = worker % self.rings.len();
        let full = self.open[w].as_ref().is_some_and(|b| !b.fits(line.len()));
        if full
            && let Some(b) = self.open[w].take()
            && let Err(b) = self.rings[w].try_push(b)
        {
            self.counters().dropped.add(b.len() as u64);
            self.pool.give(b);
        }
        let b = self.open[w].get_or_insert_with(|| self.pool.take());
        b.push(line, received_ns, truncated);
        let c = self.counters();
        c.received.add(1);
        c.bytes.add(line.len() as u64);
    }

    /// Records a file offset that must become durable with the lines already pushed to `worker`.
    pub fn checkpoint(&mut self, worker: usize, cp: Checkpoint) {
        let w = worker % self.rings.len();
        let b = self.open[w].get_or_insert_with(|| self.pool.take());
        if let Some(existing) = b.checkpoints.iter_mut().find(|c| c.path_key == cp.path_key) {
            *existing = cp;
        } else {
            b.checkpoints.push(cp);
        }
    }

    /// Records how far a spooled request has got: durable with the lines already pushed to
    /// `worker`. Called after each of the request's lines, so the block that ends up holding
    /// the last one deletes the request, and one cut between two blocks records its progress.
    pub fn mark(&mut self, worker: usize, mark: SpoolMark) {
        let w = worker % self.rings.len();
        let b = self.open[w].get_or_insert_with(|| self.pool.take());
        match b.spool.last_mut() {
            Some(last) if last.seq == mark.seq => *last = mark,
            _ => b.spool.push(mark),
        }
    }

    fn send(&mut self, w: usize) {
        if let Some(b) = self.open[w].take() {
            if b.is_empty() && b.checkpoints.is_empty() && b.spool.is_empty() {
                self.pool.give(b);
                return;
            }
            if let Err(closed) = self.rings[w].push(b) {
                // Workers outlive inputs; a closed ring means the pipeline is being torn down
                // abnormally. Count the lines rather than lose them silently.
                self.counters().dropped.add(closed.0.len() as u64);
            }
        }
    }

    /// Sends every batch older than the linger time.
    pub fn flush_due(&mut self, now_ns: i64) {
        for w in 0..self.open.len() {
            let due = self.open[w].as_ref().is_some_and(|b| {
                (!b.is_empty() || !b.checkpoints.is_empty() || !b.spool.is_empty())
                    && now_ns - b.opened_ns >= self.linger_ns
            });
            if due {
                self.send(w);
            }
        }
    }

    /// Sends every open batch (shutdown).
    pub fn flush_all(&mut self) {
        for w in 0..self.open.len() {
            self.send(w);
        }
    }
}

impl Drop for Outlet {
    fn drop(&mut self) {
        self.flush_all();
    }
}
