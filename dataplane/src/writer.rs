//! The writer thread: the one thread that commits stage A's encoded blocks to the store.
//!
//! A single writer keeps block sequence numbers and commit order simple, and RocksDB's own
//! background threads do the compaction. It takes whatever blocks are waiting (up to
//! [`MAX_GROUP`]) and commits them together, so the WAL sees fewer, larger writes exactly when
//! the load is highest; it runs retention every [`RETENTION_EVERY`].

use crate::ring::{Consumer, Pop};
use crate::stats::Stats;
use crossbeam_channel::{Select, Sender};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use watchpost_proto::{NS_PER_DAY, now_ns};
use watchpost_store::{CommitScratch, EncodedBlock, Store};

/// Most blocks committed in one write batch.
const MAX_GROUP: usize = 16;
/// How often retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(600);

/// Starts the writer thread. It ends once every worker ring is closed and drained, after
/// flushing the memtables.
pub fn spawn_writer(
    store: Arc<Store>,
    inputs: Vec<Consumer<Box<EncodedBlock>>>,
    returns: Vec<Sender<Box<EncodedBlock>>>,
    stats: Arc<Stats>,
    retention_days: u32,
    core: Option<core_affinity::CoreId>,
) -> std::io::Result<JoinHandle<()>> {
    // Alive from the spawn on (see `spawn_worker`).
    stats.writer_alive.store(true, Ordering::Relaxed);
    let alive = stats.clone();
    std::thread::Builder::new()
        .name("wp-writer".into())
        .spawn(move || {
            if let Some(core) = core {
                core_affinity::set_for_current(core);
            }
            run(&store, &inputs, &returns, &stats, retention_days);
            if let Err(e) = store.flush() {
                tracing::error!("final flush failed: {e}");
            }
            stats.writer_alive.store(false, Ordering::Relaxed);
        })
        .inspect_err(|_| alive.writer_alive.store(false, Ordering::Relaxed))
}

fn run(
    store: &Store,
    inputs: &[Consumer<Box<EncodedBlock>>],
    returns: &[Sender<Box<EncodedBlock>>],
    stats: &Stats,
    retention_days: u32,
) {
    let mut scratch = CommitScratch::default();
    let mut open: Vec<bool> = vec![true; inputs.len()];
    let mut open_count = inputs.len();
    let mut group: Vec<Box<EncodedBlock>> = Vec::with_capacity(MAX_GROUP);
    let mut last_retention = Instant::now() - RETENTION_EVERY;
    let retention_ns = i64::from(retention_days) * NS_PER_DAY;
    // Built once: a `Select` allocates, and the loop below runs per commit.
    let mut sel = Select::new();
    for c in inputs {
        sel.recv(c.receiver());
    }

    while open_count > 0 {
        if last_retention.elapsed() >= RETENTION_EVERY {
            last_retention = Instant::now();
            match store.enforce_retention(now_ns() - retention_ns) {
                Ok(true) => stats.writer.retention_runs.add(1),
                Ok(false) => {}
                Err(e) => tracing::warn!("retention failed: {e}"),
            }
        }
        // Wait for any worker's block, then take whatever else is already waiting.
        if sel.ready_timeout(Duration::from_secs(1)).is_err() {
            continue;
        }
        if stats.writer_hold.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        for (i, c) in inputs.iter().enumerate() {
            while open[i] && group.len() < MAX_GROUP {
                match c.try_pop() {
                    Pop::Item(b) => group.push(b),
                    Pop::Empty => break,
                    Pop::Closed => {
                        open[i] = false;
                        open_count -= 1;
                        sel.remove(i);
                    }
                }
            }
        }
        if group.is_empty() {
            continue;
        }
        commit(store, &mut group, &mut scratch, stats);
        for mut b in group.drain(..) {
            let home = b.worker;
            b.clear();
            if let Some(tx) = returns.get(home) {
                let _ = tx.try_send(b);
            }
        }
    }
}

/// Commits a group of blocks, retrying until RocksDB takes it: accepted events are never dropped
/// here. While it retries, the rings fill and the inputs slow down, and `/health` says why.
fn commit(
    store: &Store,
    group: &mut [Box<EncodedBlock>],
    scratch: &mut CommitScratch,
    stats: &Stats,
) {
    let mut delay = Duration::from_millis(50);
    let events: u64 = group.iter().map(|b| b.len() as u64).sum();
    let bytes: u64 = group.iter().map(|b| b.records.len() as u64).sum();
    loop {
        let started = Instant::now();
        match store.commit_blocks(group, scratch) {
            Ok(()) => {
                stats
                    .writer
                    .commit_latency
                    .observe_ns(started.elapsed().as_nanos() as u64);
                let now = now_ns();
                for b in group.iter() {
                    if !b.is_empty() && b.first_received_ns > 0 {
                        let behind = now.saturating_sub(b.first_received_ns).max(0);
                        stats.writer.ingest_to_store.observe_ns(behind as u64);
                    }
                }
                stats.writer.stored.add(events);
                stats.writer.bytes.add(bytes);
                stats.writer.commits.add(1);
                if let Ok(mut e) = stats.writer.last_error.lock() {
                    *e = None;
                }
                return;
            }
            Err(e) => {
                stats.writer.errors.add(1);
                tracing::error!("commit of {events} events failed, retrying: {e}");
                if let Ok(mut le) = stats.writer.last_error.lock() {
                    *le = Some(e.to_string());
                }
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}
