//! The store writer: one thread that turns encoded blocks into RocksDB write batches.
//!
//! A single writer keeps block sequence numbers and commit order simple, and RocksDB's own
//! background threads do the compaction. When several blocks are waiting the writer commits them
//! in one write batch, so the WAL sees fewer, larger writes exactly when the load is highest.

use super::{
    BlockKey, BlockMeta, CF_BLOCKS, CF_CHECKPOINTS, CF_ENTITIES, CF_EVENTS, CF_IDX_ENTITY,
    CF_IDX_SOURCE, CF_IDX_TEMPLATE, CF_TEMPLATES, Store, block_key, day_of, index_prefix,
    seal_block,
};
use crate::batch::Checkpoint;
use crate::clock::{NS_PER_DAY, now_ns};
use crate::detect::record::{CorrelationHit, DetectRecord};
use crate::ring::{Consumer, Pop};
use crate::stats::Stats;
use crossbeam_channel::{Select, Sender};
use rocksdb::WriteBatch;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Which index a posting goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum PostingKind {
    /// `idx_entity`, tag = entity kind.
    Entity = 0,
    /// `idx_source`.
    Source = 1,
    /// `idx_template`.
    Template = 2,
}

/// "The event at `pos` has this indexed value."
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Posting {
    /// Which index.
    pub kind: PostingKind,
    /// Entity kind for entity postings, 0 otherwise.
    pub tag: u8,
    /// Name hash, source hash or template id.
    pub hash: u64,
    /// Position of the event in its block.
    pub pos: u16,
}

/// An entity seen for the first time by a worker: the writer records its UUID and name.
#[derive(Clone, Debug)]
pub struct NewEntity {
    /// UUID5 bytes.
    pub uuid: [u8; 16],
    /// `EntityKind as u8`.
    pub kind: u8,
    /// First receive time, ns.
    pub first_seen_ns: i64,
    /// Canonical name, in [`EncodedBlock::names`].
    pub name: Range<u32>,
}

/// What a stage A worker hands the writer: one block of encoded events and everything to persist
/// with it. Buffers are reused: the writer sends the block back to its worker.
#[derive(Debug, Default)]
pub struct EncodedBlock {
    /// Which worker owns this block (to send it back).
    pub worker: usize,
    /// Records back to back.
    pub records: Vec<u8>,
    /// Start of each record in `records`.
    pub offsets: Vec<u32>,
    /// The block as stored (compressed), filled by [`EncodedBlock::seal`] on the worker.
    pub sealed: Vec<u8>,
    /// Receive time of the first event.
    pub first_received_ns: i64,
    /// Summary for the `blocks` family.
    pub meta: BlockMeta,
    /// Index entries.
    pub postings: Vec<Posting>,
    /// Entities to record.
    pub new_entities: Vec<NewEntity>,
    /// Text of the new entities' names.
    pub names: String,
    /// Templates created or generalised: id and text range in `template_text`.
    pub templates: Vec<(u64, Range<u32>)>,
    /// Text of those templates.
    pub template_text: String,
    /// File offsets that become durable with this block.
    pub checkpoints: Vec<Checkpoint>,
    /// What detection needs of each event, moved on to stage B by the worker.
    pub detect: Vec<DetectRecord>,
    /// Correlation hits of the block's events, moved on with `detect`.
    pub hits: Vec<CorrelationHit>,
    /// Sigma matches: (event position in the block, rule index in the worker's rule set).
    pub sigma: Vec<(u16, u32)>,
    /// The block's key, given by the worker so that detection can name events before they are
    /// written; `None` lets the writer choose one.
    pub key: Option<BlockKey>,
}

impl EncodedBlock {
    /// An empty block with room for `events` events.
    pub fn with_capacity(worker: usize, events: usize) -> EncodedBlock {
        EncodedBlock {
            worker,
            records: Vec::with_capacity(events * 256),
            offsets: Vec::with_capacity(events),
            sealed: Vec::with_capacity(events * 128),
            postings: Vec::with_capacity(events * 8),
            new_entities: Vec::with_capacity(64),
            names: String::with_capacity(4096),
            templates: Vec::with_capacity(16),
            template_text: String::with_capacity(4096),
            checkpoints: Vec::with_capacity(4),
            detect: Vec::with_capacity(events),
            hits: Vec::with_capacity(16),
            sigma: Vec::with_capacity(64),
            ..EncodedBlock::default()
        }
    }

    /// Empties the block, keeping its buffers.
    pub fn clear(&mut self) {
        self.records.clear();
        self.offsets.clear();
        self.sealed.clear();
        self.first_received_ns = 0;
        self.meta = BlockMeta::default();
        self.postings.clear();
        self.new_entities.clear();
        self.names.clear();
        self.templates.clear();
        self.template_text.clear();
        self.checkpoints.clear();
        self.detect.clear();
        self.hits.clear();
        self.sigma.clear();
        self.key = None;
    }

    /// Compresses the records into [`EncodedBlock::sealed`]. Workers call it, so that compression
    /// runs on as many cores as there are workers rather than on the one writer thread.
    pub fn seal(&mut self) {
        seal_block(&mut self.sealed, &self.offsets, &mut self.records);
    }

    /// Events in the block.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// No events.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// Reusable buffers of the writer.
struct Scratch {
    meta: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Adds one block to a write batch.
fn add_block(store: &Store, wb: &mut WriteBatch, block: &mut EncodedBlock, s: &mut Scratch) {
    let key = block
        .key
        .unwrap_or_else(|| block_key(block.first_received_ns, store.take_seq()));
    if !block.is_empty() {
        if block.sealed.is_empty() {
            block.seal();
        }
        wb.put_cf(store.cf(CF_EVENTS), key, &block.sealed);
        s.meta.clear();
        block.meta.encode(&mut s.meta);
        wb.put_cf(store.cf(CF_BLOCKS), key, &s.meta);

        let day = day_of(block.first_received_ns);
        block.postings.sort_unstable();
        let mut i = 0;
        while i < block.postings.len() {
            let p = block.postings[i];
            s.value.clear();
            let mut last = u32::MAX;
            while i < block.postings.len()
                && block.postings[i].kind == p.kind
                && block.postings[i].tag == p.tag
                && block.postings[i].hash == p.hash
            {
                let pos = block.postings[i].pos;
                if u32::from(pos) != last {
                    s.value.extend_from_slice(&pos.to_le_bytes());
                    last = u32::from(pos);
                }
                i += 1;
            }
            s.key.clear();
            s.key.extend_from_slice(&index_prefix(day, p.tag, p.hash));
            s.key.extend_from_slice(&key);
            let cf = match p.kind {
                PostingKind::Entity => CF_IDX_ENTITY,
                PostingKind::Source => CF_IDX_SOURCE,
                PostingKind::Template => CF_IDX_TEMPLATE,
            };
            wb.put_cf(store.cf(cf), &s.key, &s.value);
        }
    }
    for e in &block.new_entities {
        s.value.clear();
        s.value.push(e.kind);
        s.value.extend_from_slice(&e.first_seen_ns.to_be_bytes());
        s.value
            .extend_from_slice(&block.names.as_bytes()[e.name.start as usize..e.name.end as usize]);
        wb.put_cf(store.cf(CF_ENTITIES), e.uuid, &s.value);
    }
    for (id, text) in &block.templates {
        let t = &block.template_text[text.start as usize..text.end as usize];
        wb.put_cf(store.cf(CF_TEMPLATES), id.to_be_bytes(), t.as_bytes());
    }
    for c in &block.checkpoints {
        s.value.clear();
        s.value.extend_from_slice(&c.dev.to_be_bytes());
        s.value.extend_from_slice(&c.ino.to_be_bytes());
        s.value.extend_from_slice(&c.offset.to_be_bytes());
        s.value.extend_from_slice(c.path.as_bytes());
        wb.put_cf(store.cf(CF_CHECKPOINTS), c.path_key.to_be_bytes(), &s.value);
    }
}

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
    let mut scratch = Scratch {
        meta: Vec::with_capacity(64),
        key: Vec::with_capacity(64),
        value: Vec::with_capacity(4096),
    };
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
fn commit(store: &Store, group: &mut [Box<EncodedBlock>], s: &mut Scratch, stats: &Stats) {
    let mut delay = Duration::from_millis(50);
    loop {
        let started = Instant::now();
        let mut wb = WriteBatch::default();
        let mut events = 0u64;
        let mut bytes = 0u64;
        for b in group.iter_mut() {
            events += b.len() as u64;
            bytes += b.records.len() as u64;
            add_block(store, &mut wb, b, s);
        }
        match store.db().write_opt(wb, &store.write_options()) {
            Ok(()) => {
                stats
                    .writer
                    .commit_latency
                    .observe_ns(started.elapsed().as_nanos() as u64);
                let now = crate::clock::now_ns();
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
