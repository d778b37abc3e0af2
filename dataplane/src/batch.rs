//! Pooled batches of raw lines, the unit that moves between threads.
//!
//! An I/O thread copies framed lines into a [`RawBatch`]'s one byte buffer and records where each
//! line starts; nothing is allocated per line. Batches come from a [`Pool`] and return to it once
//! a worker has parsed them, so after warm-up the data plane allocates nothing per event: memory is
//! bounded by the pool size, which the ring capacities bound.

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use watchpost_normalize::{Format, LineMeta};
use watchpost_proto::InputId;
use watchpost_store::{Checkpoint, SpoolMark};

/// A batch of raw lines from one input.
#[derive(Debug)]
pub struct RawBatch {
    /// The lines, back to back.
    pub bytes: Vec<u8>,
    /// One entry per line.
    pub lines: Vec<LineMeta>,
    /// Input that produced it.
    pub input: InputId,
    /// How to parse it.
    pub format: Format,
    /// File offsets to persist with these lines (file input only).
    pub checkpoints: Vec<Checkpoint>,
    /// Progress of spooled requests to persist with these lines (acknowledging inputs).
    pub spool: Vec<SpoolMark>,
    /// Receive time of the first line, for linger.
    pub opened_ns: i64,
    max_lines: usize,
}

impl RawBatch {
    fn new(input: InputId, format: Format, max_lines: usize, max_bytes: usize) -> RawBatch {
        RawBatch {
            bytes: Vec::with_capacity(max_bytes),
            lines: Vec::with_capacity(max_lines),
            input,
            format,
            checkpoints: Vec::with_capacity(4),
            spool: Vec::with_capacity(8),
            opened_ns: 0,
            max_lines,
        }
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.lines.clear();
        self.checkpoints.clear();
        self.spool.clear();
        self.opened_ns = 0;
    }

    /// Lines in the batch.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// No lines yet.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Whether a line of `len` bytes still fits without growing a buffer.
    pub fn fits(&self, len: usize) -> bool {
        self.lines.len() < self.max_lines && self.bytes.len() + len <= self.bytes.capacity()
    }

    /// Appends one line; the caller checked [`RawBatch::fits`] (otherwise the buffers grow, which
    /// is correct but allocates).
    pub fn push(&mut self, line: &[u8], received_ns: i64, truncated: bool) {
        if self.lines.is_empty() {
            self.opened_ns = received_ns;
        }
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(line);
        self.lines.push(LineMeta {
            start,
            len: line.len() as u32,
            received_ns,
            truncated,
        });
    }

    /// The bytes of line `index`.
    pub fn line(&self, index: usize) -> &[u8] {
        let m = &self.lines[index];
        &self.bytes[m.start as usize..(m.start + m.len) as usize]
    }
}

/// A bounded free list of batches shared by one producer and the workers that return batches.
#[derive(Clone)]
pub struct Pool {
    free_tx: Sender<Box<RawBatch>>,
    free_rx: Receiver<Box<RawBatch>>,
    created: Arc<AtomicUsize>,
    input: InputId,
    format: Format,
    max_lines: usize,
    max_bytes: usize,
}

impl Pool {
    /// A pool of at most `capacity` batches, created lazily (an idle input costs no memory).
    pub fn new(
        input: InputId,
        format: Format,
        capacity: usize,
        max_lines: usize,
        max_bytes: usize,
    ) -> Pool {
        let (free_tx, free_rx) = bounded(capacity);
        Pool {
            free_tx,
            free_rx,
            created: Arc::new(AtomicUsize::new(0)),
            input,
            format,
            max_lines,
            max_bytes,
        }
    }

    /// A cleared batch: a returned one if any, a new one while under capacity, otherwise waits for
    /// a worker to return one (the pool bounds memory; waiting here is backpressure).
    pub fn take(&self) -> Box<RawBatch> {
        if let Ok(b) = self.free_rx.try_recv() {
            return b;
        }
        if self.created.fetch_add(1, Ordering::Relaxed)
            < self.free_tx.capacity().unwrap_or(usize::MAX)
        {
            return Box::new(RawBatch::new(
                self.input,
                self.format,
                self.max_lines,
                self.max_bytes,
            ));
        }
        self.created.fetch_sub(1, Ordering::Relaxed);
        // Every batch is in flight; one comes back as soon as a worker finishes it. The pool holds
        // a sender itself, so this cannot wait forever while the pool exists.
        self.free_rx.recv().unwrap_or_else(|_| {
            Box::new(RawBatch::new(
                self.input,
                self.format,
                self.max_lines,
                self.max_bytes,
            ))
        })
    }

    /// Returns a batch for reuse.
    pub fn give(&self, mut batch: Box<RawBatch>) {
        batch.clear();
        match self.free_tx.try_send(batch) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            // More batches than capacity can only come from the fallback above; let it go.
            Err(TrySendError::Full(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_reused_not_reallocated() {
        let pool = Pool::new(InputId::SyslogTcp, Format::Syslog, 2, 4, 64);
        let mut a = pool.take();
        a.push(b"hello", 1, false);
        assert_eq!(a.line(0), b"hello");
        let ptr = a.bytes.as_ptr();
        pool.give(a);
        let b = pool.take();
        assert!(b.is_empty());
        assert_eq!(
            b.bytes.as_ptr(),
            ptr,
            "the returned buffer is handed out again"
        );
    }

    #[test]
    fn fits_respects_line_and_byte_limits() {
        let pool = Pool::new(InputId::SyslogTcp, Format::Syslog, 1, 2, 8);
        let mut b = pool.take();
        assert!(b.fits(8));
        assert!(!b.fits(9));
        b.push(b"abc", 0, false);
        b.push(b"d", 0, false);
        assert!(!b.fits(1), "line limit reached");
    }
}
