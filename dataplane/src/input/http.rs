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

use super::body::{first_non_space, for_each_element, trim};
use super::ingest::{HttpIngest, IngestReceipt, Job};
use super::outlet::Outlet;
use super::registry::{Bound, Delivery, Input, Running, Start};
use super::spool::{self, Decoded, SpoolRecord};
use crate::Error;
use crossbeam_channel::{Receiver, Sender, bounded};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_normalize::Format;
use watchpost_proto::config::InputsConfig;
use watchpost_proto::{Config, InputId, now_ns};
use watchpost_store::{SpooledRequest, Store, StoreError};

/// Bodies spooled together at most: one write for up to this many waiting requests.
const GROUP: usize = 64;

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
            let body = job.body.bytes();
            if first_non_space(body) == Some(b'[') {
                // Checked when submitted (`CheckedBody`): it splits.
                let _ = for_each_element(body, &mut |r| push(&body[r]));
            } else {
                for line in body.split(|&b| b == b'\n') {
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

/// HTTP ingest in the registry: the control plane takes the requests and hands their bodies to
/// the [`HttpIngest`] this input starts.
pub(crate) struct HttpInput;

impl Input for HttpInput {
    fn id(&self) -> InputId {
        InputId::Http
    }

    fn delivery(&self) -> Delivery {
        Delivery::Durable
    }

    fn enabled(&self, inputs: &InputsConfig) -> bool {
        inputs.http.enabled
    }

    fn format(&self, _: &InputsConfig) -> Format {
        Format::Json
    }

    fn bind(&self, _: &Config) -> Result<Box<dyn Bound>, Error> {
        // The control plane's listener takes its requests.
        Ok(Box::new(BoundHttp))
    }
}

struct BoundHttp;

impl Bound for BoundHttp {
    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn start(self: Box<Self>, with: Start<'_>) -> Result<Running, Error> {
        let settings = HttpSettings {
            max_line: with.cfg.dataplane.max_line_bytes as usize,
            linger_ms: with.cfg.dataplane.batch_linger_ms,
            store: Arc::clone(with.store),
            pending: with.pending,
        };
        let (ingest, thread) = spawn(
            with.outlet,
            settings,
            Arc::clone(with.stats),
            Arc::clone(with.stop),
        )
        .map_err(Error::Thread)?;
        Ok(Running {
            thread,
            http: Some(ingest),
        })
    }
}
