//! HTTP ingest: bodies posted to `POST /api/v1/ingest`, framed into batches by one thread.
//!
//! Request handlers run on the control plane's runtime, many at once; a single ingest thread owns
//! this input's rings so they stay single-producer. Handlers hand it a body over a bounded queue
//! and wait for its receipt; a full queue answers "busy" at once so the API stays responsive
//! under overload (the client retries) instead of queueing without bound.
//!
//! Acknowledged means durable: the thread frames every waiting body, writes them all to the
//! store's ingest spool in one write (the group commit: under load one write serves many
//! requests) and only then answers; a spool write that fails answers "unavailable" and nothing
//! of those bodies enters the pipeline, so the client's retry cannot store anything twice. The
//! lines then go on to the workers; a crash before they are stored replays them at the next
//! start ([`super::spool`]).

use super::outlet::Outlet;
use super::spool::{self, Decoded, SpoolRecord};
use crate::Error;
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_proto::{InputId, now_ns};
use watchpost_store::{SpooledRequest, Store, StoreError};

/// What the ingest thread answers for one body (and `POST /ingest` with 202).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "IngestResult")]
pub struct IngestReceipt {
    /// Events accepted: in the store's write-ahead log, so each one will be stored (malformed
    /// ones as free text) even if the service is killed now.
    pub accepted: u64,
    /// Of those, cut at `dataplane.max_line_bytes`.
    pub truncated: u64,
}

/// The ingest thread's answer to one body: its receipt, or why the store did not take it (one
/// failed write answers every request of its group, so the cause is shared).
type Answer = Result<IngestReceipt, Arc<StoreError>>;

/// Why an ingest body does not split into events: not a JSON array of objects (JSON lines are
/// split by newline and checked by the workers, line by line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Nothing but white space.
    #[error("empty body")]
    Empty,
    /// Split as an array, but it does not start with `[`.
    #[error("expected a JSON array")]
    NotArray,
    /// An element that is not an object, at this byte.
    #[error("array element at byte {0} is not an object")]
    NotObject(usize),
    /// A `}` closing nothing, at this byte.
    #[error("unbalanced `}}` at byte {0}")]
    Unbalanced(usize),
    /// The array never closes.
    #[error("unterminated JSON array")]
    Unterminated,
    /// Something after the closing `]`, at this byte.
    #[error("unexpected data after the array at byte {0}")]
    Trailing(usize),
}

struct Job {
    body: Vec<u8>,
    reply: Sender<Answer>,
}

/// Bodies spooled together at most: one write for up to this many waiting requests.
const GROUP: usize = 64;

/// The handle the control plane submits bodies through.
#[derive(Clone)]
pub struct HttpIngest {
    jobs: Sender<Job>,
}

impl HttpIngest {
    /// Submits a body (a JSON array of objects, or one JSON object per line) and waits until its
    /// events are durable: in the store's write-ahead log, on their way to the workers.
    /// Blocking: call it from a blocking task.
    pub fn submit(&self, body: Vec<u8>) -> Result<IngestReceipt, Error> {
        if first_non_space(&body) == Some(b'[') {
            for_each_element(&body, &mut |_| {}).map_err(Error::InvalidBody)?;
        }
        let (reply, answer) = bounded(1);
        match self.jobs.try_send(Job { body, reply }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(Error::IngestBusy),
            Err(TrySendError::Disconnected(_)) => return Err(Error::Stopped),
        }
        answer
            .recv()
            .map_err(|_| Error::Stopped)?
            .map_err(Error::NotDurable)
    }
}

/// What the ingest thread needs besides its rings.
pub struct HttpSettings {
    /// `dataplane.max_line_bytes`.
    pub max_line: usize,
    /// `dataplane.batch_linger_ms`.
    pub linger_ms: u64,
    /// The store whose spool makes acknowledgements durable.
    pub store: Arc<Store>,
    /// Requests this input spooled and the pipeline had not stored at the last stop.
    pub pending: Vec<SpooledRequest>,
}

/// Starts the ingest thread: it first replays what was pending, then serves bodies.
pub fn spawn(
    mut outlet: Outlet,
    settings: HttpSettings,
    stats: Arc<crate::stats::Stats>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(HttpIngest, JoinHandle<()>)> {
    let (tx, rx): (Sender<Job>, Receiver<Job>) = bounded(64);
    let handle = std::thread::Builder::new()
        .name("wp-in-http".into())
        .spawn(move || {
            let replayed = spool::replay(&mut outlet, InputId::Http, &settings.pending);
            stats.spool.replayed.add(replayed);
            drop(settings.pending);
            let mut group = Group::default();
            let mut next = 0usize;
            loop {
                match rx.recv_timeout(Duration::from_millis(settings.linger_ms.max(1))) {
                    Ok(job) => {
                        group.take(job, &rx);
                        group.frame(settings.max_line);
                        let durable = group.spool(&settings.store, &stats);
                        group.answer(&durable);
                        if durable.is_ok() {
                            group.feed(&mut outlet, &mut next);
                        }
                        outlet.flush_all();
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                }
            }
            outlet.flush_all();
        })?;
    Ok((HttpIngest { jobs: tx }, handle))
}

/// The requests served together, and their records (reused from group to group).
#[derive(Default)]
struct Group {
    jobs: Vec<Job>,
    records: Vec<SpoolRecord>,
    receipts: Vec<IngestReceipt>,
    seqs: Vec<u64>,
}

impl Group {
    /// Takes `first` and whatever else is waiting, up to [`GROUP`].
    fn take(&mut self, first: Job, rx: &Receiver<Job>) {
        self.jobs.clear();
        self.jobs.push(first);
        while self.jobs.len() < GROUP {
            match rx.try_recv() {
                Ok(job) => self.jobs.push(job),
                Err(_) => break,
            }
        }
    }

    /// Frames each body into its record: trimmed lines, cut at `max_line`, blanks skipped.
    fn frame(&mut self, max_line: usize) {
        while self.records.len() < self.jobs.len() {
            self.records.push(SpoolRecord::default());
        }
        self.receipts.clear();
        let now = now_ns();
        for (job, record) in self.jobs.iter().zip(self.records.iter_mut()) {
            record.begin(InputId::Http, now);
            let mut receipt = IngestReceipt {
                accepted: 0,
                truncated: 0,
            };
            let mut push = |line: &[u8]| {
                let line = trim(line);
                if line.is_empty() {
                    return;
                }
                let truncated = line.len() > max_line;
                record.push(&line[..line.len().min(max_line)], truncated);
                receipt.accepted += 1;
                receipt.truncated += u64::from(truncated);
            };
            if first_non_space(&job.body) == Some(b'[') {
                // Checked when submitted: it splits.
                let _ = for_each_element(&job.body, &mut |r| push(&job.body[r]));
            } else {
                for line in job.body.split(|&b| b == b'\n') {
                    push(line);
                }
            }
            self.receipts.push(receipt);
        }
    }

    /// Writes the group's non-empty records to the spool in one write.
    fn spool(
        &mut self,
        store: &Arc<Store>,
        stats: &crate::stats::Stats,
    ) -> Result<(), Arc<StoreError>> {
        let records: Vec<&SpoolRecord> = self.records[..self.jobs.len()]
            .iter()
            .filter(|r| r.lines() > 0)
            .collect();
        if records.is_empty() {
            return Ok(());
        }
        match spool::commit(store, &records, &mut self.seqs) {
            Ok(()) => {
                stats.spool.requests.add(records.len() as u64);
                Ok(())
            }
            Err(e) => {
                stats.spool.failures.add(1);
                tracing::error!("ingest spool write failed, answering 503: {e}");
                Err(Arc::new(e))
            }
        }
    }

    /// Answers every request of the group.
    fn answer(&mut self, durable: &Result<(), Arc<StoreError>>) {
        for (job, receipt) in self.jobs.iter().zip(&self.receipts) {
            let answer = match durable {
                Ok(()) => Ok(*receipt),
                Err(e) => Err(Arc::clone(e)),
            };
            // A handler that gave up waiting is gone; its events are durable all the same.
            let _ = job.reply.send(answer);
        }
    }

    /// Sends the spooled lines on, one request per worker in turn.
    fn feed(&mut self, outlet: &mut Outlet, next: &mut usize) {
        let workers = outlet.workers().max(1);
        let spooled = self.records[..self.jobs.len()]
            .iter()
            .filter(|r| r.lines() > 0);
        for (record, &seq) in spooled.zip(&self.seqs) {
            *next = (*next + 1) % workers;
            match Decoded::read(record.as_bytes()) {
                Ok(d) => {
                    if let Err(e) = spool::feed(outlet, *next, seq, &d, 0) {
                        tracing::error!("ingest: a record just written does not read: {e}");
                    }
                }
                Err(e) => tracing::error!("ingest: a record just written does not read: {e}"),
            }
        }
    }
}

fn first_non_space(b: &[u8]) -> Option<u8> {
    b.iter().copied().find(|c| !c.is_ascii_whitespace())
}

fn trim(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b
        && first.is_ascii_whitespace()
    {
        b = rest;
    }
    while let [rest @ .., last] = b
        && last.is_ascii_whitespace()
    {
        b = rest;
    }
    b
}

/// Splits a JSON array into the byte ranges of its elements (each must be an object), checking
/// brackets and strings but leaving full validation of each element to the worker.
#[cfg(test)]
fn split_array(body: &[u8]) -> Result<Vec<std::ops::Range<usize>>, BodyError> {
    let mut out = Vec::new();
    for_each_element(body, &mut |r| out.push(r))?;
    Ok(out)
}

/// The events of an ingest body: the elements of a JSON array, or the non-empty lines of JSON
/// lines; an error for an array that does not split. Reads the body once and allocates nothing,
/// so a body can be refused for its count before anything is built for each event (5.5 million
/// empty objects in 16.5 MB took 240 MB to split).
pub fn ingest_events(body: &[u8]) -> Result<usize, BodyError> {
    if first_non_space(body) == Some(b'[') {
        let mut n = 0;
        for_each_element(body, &mut |_| n += 1)?;
        Ok(n)
    } else {
        Ok(body
            .split(|&b| b == b'\n')
            .filter(|l| !trim(l).is_empty())
            .count())
    }
}

/// Calls `f` with the byte range of each element of a JSON array (see [`split_array`]).
fn for_each_element(
    body: &[u8],
    f: &mut dyn FnMut(std::ops::Range<usize>),
) -> Result<(), BodyError> {
    let mut i = body
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .ok_or(BodyError::Empty)?;
    if body[i] != b'[' {
        return Err(BodyError::NotArray);
    }
    i += 1;
    let mut depth = 0usize;
    let mut in_str = false;
    let mut esc = false;
    let mut start: Option<usize> = None;
    let mut closed = false;
    while i < body.len() {
        let c = body[i];
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' | b'[' => {
                    if depth == 0 {
                        if c != b'{' {
                            return Err(BodyError::NotObject(i));
                        }
                        start = Some(i);
                    }
                    depth += 1;
                }
                b'}' | b']' => {
                    if depth == 0 {
                        if c == b']' {
                            closed = true;
                            i += 1;
                            break;
                        }
                        return Err(BodyError::Unbalanced(i));
                    }
                    depth -= 1;
                    if depth == 0
                        && let Some(s) = start.take()
                    {
                        f(s..i + 1);
                    }
                }
                b',' if depth == 0 => {}
                c if depth == 0 && !c.is_ascii_whitespace() => {
                    return Err(BodyError::NotObject(i));
                }
                _ => {}
            }
        }
        i += 1;
    }
    if !closed {
        return Err(BodyError::Unterminated);
    }
    if body[i..].iter().any(|c| !c.is_ascii_whitespace()) {
        return Err(BodyError::Trailing(i));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_split_into_objects() {
        let b = br#" [ {"a":"x]}"}, {"b":{"c":[1,2]}} ] "#;
        let r = split_array(b).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(&b[r[0].clone()], br#"{"a":"x]}"}"#);
        assert_eq!(&b[r[1].clone()], br#"{"b":{"c":[1,2]}}"#);
        assert_eq!(split_array(b"[]").unwrap().len(), 0);
    }

    #[test]
    fn bad_arrays_are_refused_with_a_reason() {
        assert_eq!(split_array(b"[1,2]"), Err(BodyError::NotObject(1)));
        assert_eq!(split_array(b"[{\"a\":1}"), Err(BodyError::Unterminated));
        assert_eq!(split_array(b"[{}] x"), Err(BodyError::Trailing(4)));
        assert!(split_array(b"[}]").is_err());
        assert_eq!(
            split_array(b"[1,2]").unwrap_err().to_string(),
            "array element at byte 1 is not an object"
        );
    }
}
