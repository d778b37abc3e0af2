//! Encoded blocks and their commit: what a stage A worker hands the writer, and how a group of
//! blocks becomes one RocksDB write batch.
//!
//! The data plane's writer thread is the only caller of [`Store::commit_blocks`] for event data:
//! a single writer keeps block sequence numbers and commit order simple, and RocksDB's own
//! background threads do the compaction.

use crate::StoreError;
use crate::spool::SpoolMark;
use crate::{
    BlockKey, BlockMeta, CF_BLOCKS, CF_CHECKPOINTS, CF_ENTITIES, CF_EVENTS, CF_IDX_ENTITY,
    CF_IDX_SOURCE, CF_IDX_TEMPLATE, CF_TEMPLATES, Store, block_key, day_of, index_prefix,
    seal_block,
};
use rocksdb::WriteBatch;
use std::ops::Range;

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
    /// Progress of spooled requests that becomes durable with this block.
    pub spool: Vec<SpoolMark>,
    /// The block's key, given by the worker so that detection can name events before they are
    /// written; `None` lets the store choose one.
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
            spool: Vec::with_capacity(8),
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
        self.spool.clear();
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

/// A file offset that becomes durable together with the lines before it (see the file input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Identity of the tailed path (hash of the path).
    pub path_key: u64,
    /// The path itself, for the store's record.
    pub path: String,
    /// Device and inode of the file the offset belongs to.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Byte offset just after the last line of this batch from that file.
    pub offset: u64,
}

/// Reusable buffers of [`Store::commit_blocks`]: the writer keeps one, so a commit allocates
/// nothing in steady state.
#[derive(Debug)]
pub struct CommitScratch {
    meta: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Default for CommitScratch {
    fn default() -> CommitScratch {
        CommitScratch {
            meta: Vec::with_capacity(64),
            key: Vec::with_capacity(64),
            value: Vec::with_capacity(4096),
        }
    }
}

impl Store {
    /// Writes `blocks` and everything that must become durable with them (index entries, new
    /// entities and templates, file offsets) in one write batch: all of it or none of it.
    pub fn commit_blocks(
        &self,
        blocks: &mut [Box<EncodedBlock>],
        scratch: &mut CommitScratch,
    ) -> Result<(), StoreError> {
        self.check_write_fault()?;
        let mut wb = WriteBatch::default();
        for block in blocks.iter_mut() {
            add_block(self, &mut wb, block, scratch);
        }
        self.db().write_opt(wb, &self.write_options())?;
        Ok(())
    }
}

/// Adds one block to a write batch.
fn add_block(store: &Store, wb: &mut WriteBatch, block: &mut EncodedBlock, s: &mut CommitScratch) {
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
    crate::spool::add_marks(store, wb, &block.spool);
}
