//! Stage A workers: each pinned to a core, each draining its own SPSC rings (one per input) and
//! feeding one ring to the writer.
//!
//! A worker owns its normaliser and template miner outright, so nothing it does per event takes a
//! lock. It turns one raw batch into one encoded block and hands the raw batch straight back to its
//! input's pool; encoded blocks come back from the writer the same way.

use crate::batch::{Pool, RawBatch};
use crate::catalog::Catalog;
use crate::ioc::IocFeed;
use crate::ring::{Consumer, Pop, Producer};
use crate::stage::RecordBatch;
use crate::stats::Stats;
use crossbeam_channel::{Receiver, Select};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_detect::{DetectBatch, route, route_hits};
use watchpost_normalize::{Normalizer, Tally};
use watchpost_proto::now_ns;
use watchpost_store::{BlockKey, EncodedBlock, Store, block_key};

/// One input's ring into a worker, with the pool its batches go back to.
pub struct WorkerInput {
    /// Batches from the input.
    pub ring: Consumer<Box<RawBatch>>,
    /// Where the worker returns them.
    pub pool: Pool,
}

/// Everything a worker thread needs.
pub struct WorkerSetup {
    /// Worker number (also its index in the writer's return list).
    pub index: usize,
    /// Its input rings.
    pub inputs: Vec<WorkerInput>,
    /// Its ring to the writer.
    pub to_writer: Producer<Box<EncodedBlock>>,
    /// Blocks the writer has finished with.
    pub free_blocks: Receiver<Box<EncodedBlock>>,
    /// Most blocks this worker may have in flight.
    pub max_blocks: usize,
    /// Events per batch (block capacity).
    pub batch_size: usize,
    /// Its normaliser (and miner).
    pub normalizer: Normalizer,
    /// Core to pin to.
    pub core: Option<core_affinity::CoreId>,
    /// One ring to each stage B worker.
    pub to_detect: Vec<Producer<RecordBatch>>,
    /// Record vectors coming back from stage B, one channel per stage B worker.
    pub detect_free: Vec<Receiver<RecordBatch>>,
    /// The store, for block sequence numbers.
    pub store: Arc<Store>,
    /// The Sigma catalogue, whose current set the normaliser evaluates (`None`: no Sigma).
    pub catalog: Option<Arc<Catalog>>,
    /// The indicator feed, whose current set the normaliser matches (`None`: no IOC matching).
    pub iocs: Option<Arc<IocFeed>>,
}

/// Starts a worker; it ends when every input ring is closed and drained.
pub fn spawn_worker(setup: WorkerSetup, stats: Arc<Stats>) -> std::io::Result<JoinHandle<()>> {
    let index = setup.index;
    // Alive from the spawn on, not from the thread's first instruction: a health probe answered
    // between the two must not see a worker that is merely starting as stopped.
    stats.workers_alive[index].store(true, Ordering::Relaxed);
    let alive = stats.clone();
    std::thread::Builder::new()
        .name(format!("wp-worker-{index}"))
        .spawn(move || {
            if let Some(core) = setup.core {
                core_affinity::set_for_current(core);
            }
            run(setup, &stats);
            stats.workers_alive[index].store(false, Ordering::Relaxed);
        })
        .inspect_err(|_| alive.workers_alive[index].store(false, Ordering::Relaxed))
}

/// Block buffers of one worker: reused ones from the writer, new ones up to a bound.
struct Blocks {
    free: Receiver<Box<EncodedBlock>>,
    created: usize,
    max: usize,
    worker: usize,
    batch_size: usize,
}

impl Blocks {
    fn take(&mut self) -> Box<EncodedBlock> {
        if let Ok(b) = self.free.try_recv() {
            return b;
        }
        if self.created < self.max {
            self.created += 1;
            return Box::new(EncodedBlock::with_capacity(self.worker, self.batch_size));
        }
        self.free
            .recv()
            .unwrap_or_else(|_| Box::new(EncodedBlock::with_capacity(self.worker, self.batch_size)))
    }
}

fn run(setup: WorkerSetup, stats: &Stats) {
    let WorkerSetup {
        index,
        inputs,
        to_writer,
        free_blocks,
        max_blocks,
        batch_size,
        mut normalizer,
        core: _,
        to_detect,
        detect_free,
        store,
        catalog,
        iocs,
    } = setup;
    let mut rules_version = 0;
    let mut ioc_version = 0;
    let mut detect = DetectOut {
        rings: to_detect,
        free: detect_free,
        bufs: Vec::new(),
        batch_size,
    };
    detect.bufs = (0..detect.rings.len())
        .map(|_| Box::new(DetectBatch::with_capacity(batch_size)))
        .collect();
    let mut blocks = Blocks {
        free: free_blocks,
        created: 0,
        max: max_blocks,
        worker: index,
        batch_size,
    };
    // Built once: a `Select` allocates, and the loop below runs per batch.
    let mut sel = Select::new();
    for inp in &inputs {
        sel.recv(inp.ring.receiver());
    }
    let mut open = inputs.len();
    while open > 0 {
        stats.worker_heartbeat_ns[index].store(now_ns(), Ordering::Relaxed);
        let i = match sel.ready_timeout(Duration::from_millis(250)) {
            Ok(i) => i,
            Err(_) => continue,
        };
        match inputs[i].ring.try_pop() {
            Pop::Item(batch) => {
                // One atomic load per batch; a new set only after an upload or a toggle.
                if let Some(c) = &catalog
                    && c.version() != rules_version
                {
                    let (version, rules, (plan_version, plan)) = c.snapshot();
                    rules_version = version;
                    normalizer.set_rules(Some(rules));
                    normalizer.set_plan(plan_version, Some(plan));
                }
                if let Some(f) = &iocs
                    && f.version() != ioc_version
                {
                    let (version, set) = f.current();
                    ioc_version = version;
                    normalizer.set_iocs(version, Some(set));
                }
                let mut block = process(&mut normalizer, &inputs[i], batch, &mut blocks, stats);
                let key = block_key(block.first_received_ns, store.take_seq());
                block.key = Some(key);
                detect.send(key, normalizer.detect_batch());
                if to_writer.push(block).is_err() {
                    // The writer stops only after every worker; reaching this is a bug, and loud.
                    tracing::error!("worker {index}: writer ring closed with events in flight");
                }
            }
            Pop::Empty => {}
            Pop::Closed => {
                sel.remove(i);
                open -= 1;
            }
        }
    }
}

/// The rings to stage B and the vectors being filled for each.
struct DetectOut {
    rings: Vec<Producer<RecordBatch>>,
    free: Vec<Receiver<RecordBatch>>,
    bufs: Vec<RecordBatch>,
    batch_size: usize,
}

impl DetectOut {
    /// Names each record's event by the block key and hands the records to the stage B workers
    /// that own them. Waits when a stage B ring is full: detection is never skipped.
    fn send(&mut self, key: BlockKey, block: &mut DetectBatch) {
        for r in block.records.iter_mut() {
            r.block = key;
        }
        for h in block.hits.iter_mut() {
            h.record.block = key;
        }
        route(block, &mut self.bufs);
        route_hits(&block.hits, &mut self.bufs);
        block.clear();
        for (s, buf) in self.bufs.iter_mut().enumerate() {
            if buf.is_empty() {
                continue;
            }
            let next = self.free[s]
                .try_recv()
                .unwrap_or_else(|_| Box::new(DetectBatch::with_capacity(self.batch_size)));
            let full = std::mem::replace(buf, next);
            if self.rings[s].push(full).is_err() {
                tracing::error!("stage B worker {s} stopped before stage A");
            }
        }
    }
}

/// Normalises one batch into one block and gives the batch back to its pool.
fn process(
    normalizer: &mut Normalizer,
    input: &WorkerInput,
    mut batch: Box<RawBatch>,
    blocks: &mut Blocks,
    stats: &Stats,
) -> Box<EncodedBlock> {
    let mut block = blocks.take();
    let mut tally = Tally::default();
    for i in 0..batch.len() {
        let meta = batch.lines[i];
        normalizer.push_line(
            batch.line(i),
            &meta,
            batch.input,
            batch.format,
            &mut block,
            &mut tally,
        );
    }
    block.seal();
    // Moved, not cloned: the offsets travel on with the block to the writer.
    block.checkpoints.append(&mut batch.checkpoints);
    block.spool.append(&mut batch.spool);
    let counters = stats.input(batch.input);
    counters.parsed.add(tally.parsed);
    counters.malformed.add(tally.malformed);
    counters.invalid_utf8.add(tally.invalid_utf8);
    counters.truncated.add(tally.truncated);
    stats.detect.sigma_matches.add(tally.sigma_matches);
    stats.detect.sigma_dropped.add(tally.sigma_dropped);
    stats.detect.ioc_matches.add(tally.ioc_matches);
    stats.events_parsed.add(batch.len() as u64);
    stats
        .templates
        .store(normalizer.miner().len() as u64, Ordering::Relaxed);
    input.pool.give(batch);
    block
}
