//! The RocksDB store: events in blocks, indexes by entity, source and template, and the state that
//! must survive a restart (templates, entities, file offsets).
//!
//! It uses only `watchpost_proto`: the data plane's writer thread commits the blocks stage A
//! encodes ([`EncodedBlock`], [`Store::commit_blocks`]), stage B saves alerts, series and models
//! through it, and the control plane queries it. No detection type crosses into it; the points
//! detection hands it ([`watchpost_proto::MinutePoint`]...) are shared types.
//!
//! Column families and keys (all integers big-endian so that byte order is time order):
//!
//! | family         | key                                                | value                                |
//! |----------------|----------------------------------------------------|--------------------------------------|
//! | `events`       | block key: first receive ns (8) + sequence (8)     | block: version, count, LZ4 of records + offsets |
//! | `blocks`       | block key                                          | [`BlockMeta`] (42 bytes)             |
//! | `idx_entity`   | day (4) + kind (1) + name hash (8) + block key      | positions in the block (u16 LE each) |
//! | `idx_source`   | day (4) + 0 + source hash (8) + block key           | positions                            |
//! | `idx_template` | day (4) + 0 + template id (8) + block key           | positions                            |
//! | `entities`     | entity UUID (16)                                   | kind (1) + first seen ns (8) + canonical name |
//! | `templates`    | template id (8)                                    | template text                        |
//! | `checkpoints`  | path hash (8)                                      | dev (8) + ino (8) + offset (8) + path |
//!
//! Detection's families (alerts, feedback, models, baselines, series) are described in
//! `detection.rs`.
//!
//! Index keys lead with the receive day so retention drops whole days with one range delete per
//! family, and a lookup is one prefix scan per day. Writes arrive as one `WriteBatch` per event
//! block (events, meta, every index entry, new entities and templates, file offsets), so a block
//! and everything that points at it become durable together, and a file offset is never ahead of
//! the lines before it.

mod closed;
mod codec;
mod detection;
mod outbox;
mod query;
mod spool;
mod writer;

pub use codec::{
    BLOCK_META_LEN, BlockMeta, BlockReader, EntitySlot, EventView, FLAG_INVALID_UTF8,
    FLAG_MALFORMED, FLAG_TRUNCATED, StoredEvent, seal_block, write_block,
};
pub use detection::{AlertOrder, AlertPage, AlertQuery, TriageError, TriageUpdate, alert_key};
pub use outbox::alert_id;
pub use query::{EntityFilter, EntityHit, EventPage, EventQuery, parse_event_id};
pub use spool::{SpoolMark, SpooledRequest};
pub use writer::{Checkpoint, CommitScratch, EncodedBlock, NewEntity, Posting, PostingKind};

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DB, DBCompressionType, Options,
    SliceTransform, WriteOptions,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use watchpost_proto::NS_PER_DAY;
use watchpost_proto::config::StorageConfig;

/// Column family names.
pub(crate) const CF_EVENTS: &str = "events";
pub(crate) const CF_BLOCKS: &str = "blocks";
pub(crate) const CF_IDX_ENTITY: &str = "idx_entity";
pub(crate) const CF_IDX_SOURCE: &str = "idx_source";
pub(crate) const CF_IDX_TEMPLATE: &str = "idx_template";
pub(crate) const CF_ENTITIES: &str = "entities";
pub(crate) const CF_TEMPLATES: &str = "templates";
pub(crate) const CF_CHECKPOINTS: &str = "checkpoints";
const ALL_CFS: [&str; 23] = [
    CF_EVENTS,
    CF_BLOCKS,
    CF_IDX_ENTITY,
    CF_IDX_SOURCE,
    CF_IDX_TEMPLATE,
    CF_ENTITIES,
    CF_TEMPLATES,
    CF_CHECKPOINTS,
    detection::CF_ALERTS,
    detection::CF_ALERT_IDX,
    detection::CF_FEEDBACK,
    detection::CF_MODELS,
    detection::CF_BASELINES,
    detection::CF_SERIES,
    detection::CF_RULES,
    detection::CF_TRIAGE,
    detection::CF_EXCEPTIONS,
    detection::CF_SIGNALS,
    detection::CF_SIGNAL_IDX,
    detection::CF_ALERT_RECENT,
    detection::CF_SIGNAL_RECENT,
    spool::CF_SPOOL,
    outbox::CF_OUTBOX,
];
const INDEX_CFS: [&str; 3] = [CF_IDX_ENTITY, CF_IDX_SOURCE, CF_IDX_TEMPLATE];

/// Length of a block key.
pub const BLOCK_KEY_LEN: usize = 16;
/// Length of an index key's prefix (day, tag, hash).
pub const INDEX_PREFIX_LEN: usize = 13;

/// A block key: first receive time and a sequence number, big-endian.
pub type BlockKey = [u8; BLOCK_KEY_LEN];

/// Builds a block key.
pub fn block_key(received_ns: i64, seq: u64) -> BlockKey {
    let mut k = [0u8; BLOCK_KEY_LEN];
    k[..8].copy_from_slice(&(received_ns.max(0) as u64).to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// Receive time of a block key.
pub fn block_key_time(key: &[u8]) -> i64 {
    key.get(..8)
        .and_then(|b| b.try_into().ok())
        .map(|b: [u8; 8]| u64::from_be_bytes(b) as i64)
        .unwrap_or(0)
}

/// Day number (days since the epoch) of a receive time, the index partition.
pub fn day_of(ns: i64) -> u32 {
    (ns.max(0) / NS_PER_DAY) as u32
}

/// An index key prefix: day, tag, hash.
pub fn index_prefix(day: u32, tag: u8, hash: u64) -> [u8; INDEX_PREFIX_LEN] {
    let mut k = [0u8; INDEX_PREFIX_LEN];
    k[..4].copy_from_slice(&day.to_be_bytes());
    k[4] = tag;
    k[5..].copy_from_slice(&hash.to_be_bytes());
    k
}

/// The memtable size of family `name`: the busy ones (events, indexes, the spool) get
/// `storage.write_buffer_mb`, the rest an eighth of it.
fn write_buffer_bytes(cfg: &StorageConfig, name: &str) -> u64 {
    let mb = u64::from(cfg.write_buffer_mb);
    let busy = name == CF_EVENTS || name == spool::CF_SPOOL || INDEX_CFS.contains(&name);
    (if busy { mb } else { (mb / 8).max(1) }) << 20
}

/// The most all memtables hold together: the store's bound on them (eight write buffers), or
/// every family's four memtables full, whichever is less. The memory budget reports it.
pub fn memtable_bound(cfg: &StorageConfig) -> u64 {
    // Memtables a family may hold before writes stall (`max_write_buffer_number`).
    const PER_FAMILY: u64 = 4;
    let all: u64 = ALL_CFS
        .iter()
        .map(|n| write_buffer_bytes(cfg, n) * PER_FAMILY)
        .sum();
    all.min((u64::from(cfg.write_buffer_mb) * 8) << 20)
}

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// RocksDB refused an operation.
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// The data folder could not be created.
    #[error("cannot create data folder {path}: {source}")]
    DataDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A record could not be encoded for writing (nothing was written).
    #[error("cannot encode a {what} for the store: {reason}")]
    Encode {
        /// What was written (`alert`, `triage`...).
        what: &'static str,
        /// Why it does not encode.
        reason: String,
    },
    /// A write failed on purpose (the test suite's write-fault hook), as on a full disk.
    #[error("write refused: injected fault (as no space left on device)")]
    WriteFault,
    /// A stored record does not decode: the store is damaged or was written by another layout.
    #[error("a stored {what} does not decode: {reason}")]
    Decode {
        /// What was read (`alert`, `event block`...).
        what: &'static str,
        /// Why it does not decode.
        reason: String,
    },
}

/// Failed reads of the store, for `/health`, `/stats` and `/metrics`. Reads never turn a failure
/// into "not found" or a default: they return it, and it is counted here as well.
#[derive(Default)]
struct ReadFailures {
    count: AtomicU64,
    /// When the last one happened (ns) and what it was.
    last: std::sync::Mutex<Option<(i64, String)>>,
}

/// What [`Store::read_health`] reports.
#[derive(Clone, Debug, Default, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "StoreReads")]
pub struct ReadHealth {
    /// Reads that failed since the store was opened.
    pub read_errors: u64,
    /// The last failure, if any.
    pub last_read_error: Option<String>,
    /// When it happened, ns since the epoch (0 when none).
    pub last_read_error_ns: i64,
}

/// The open store, shared by the writer thread and the control plane (`Arc<Store>`).
pub struct Store {
    db: DB,
    path: PathBuf,
    /// Next block sequence number: stage A workers take one per block (the writer only for
    /// blocks that come without a key).
    next_seq: AtomicU64,
    /// Next ingest spool sequence number (see the `spool` module).
    next_spool_seq: AtomicU64,
    sync_writes: bool,
    /// While set, every write fails as a full disk would (see [`Store::inject_write_fault`]).
    write_fault: std::sync::atomic::AtomicBool,
    /// New alerts are queued for the notification channels (see the `outbox` module).
    outbox_on: std::sync::atomic::AtomicBool,
    /// Outbox entries deleted since open (see the `outbox` module).
    outbox_deletes: AtomicU64,
    /// Serialises triage read-modify-writes (the control plane's, a few per minute at most).
    triage_lock: std::sync::Mutex<()>,
    /// Alerts closed by analysts, for the detectors (see the `closed` module).
    closed: closed::ClosedLog,
    read_failures: ReadFailures,
}

impl Store {
    /// Opens (creating if needed) the store under `<data_dir>/db`.
    pub fn open(data_dir: &Path, cfg: &StorageConfig) -> Result<Store, StoreError> {
        let path = data_dir.join("db");
        std::fs::create_dir_all(&path).map_err(|source| StoreError::DataDir {
            path: path.clone(),
            source,
        })?;
        let cache = Cache::new_lru_cache(cfg.block_cache_mb as usize * (1 << 20));
        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.increase_parallelism(2);
        db_opts.set_max_background_jobs(2);
        db_opts.set_bytes_per_sync(1 << 20);
        db_opts.set_keep_log_file_num(4);
        // All memtables together: without this bound twenty families of up to four memtables
        // each could hold 1.7 GiB at the default write buffer; eight write buffers' worth is
        // four times what the busiest family (events) needs to flush smoothly.
        db_opts.set_db_write_buffer_size(memtable_bound(cfg) as usize);

        let cf_opts = |name: &str| {
            let mut o = Options::default();
            let mut t = BlockBasedOptions::default();
            t.set_block_cache(&cache);
            t.set_block_size(if name == CF_EVENTS {
                64 << 10
            } else {
                16 << 10
            });
            t.set_cache_index_and_filter_blocks(true);
            if INDEX_CFS.contains(&name) {
                t.set_bloom_filter(10.0, false);
                o.set_prefix_extractor(SliceTransform::create_fixed_prefix(INDEX_PREFIX_LEN));
                o.set_memtable_prefix_bloom_ratio(0.1);
            }
            o.set_block_based_table_factory(&t);
            // The spool's records live from an acknowledgement to the commit of their events,
            // milliseconds to seconds: a memtable as large as the events' lets a record and its
            // deletion meet there and vanish at the flush, instead of a flush writing records
            // that are deleted a moment later.
            o.set_write_buffer_size(write_buffer_bytes(cfg, name) as usize);
            o.set_max_write_buffer_number(4);
            // Fresh data is read most (live tails, dashboards): keep the upper levels uncompressed
            // and cheap to write, compress what settles.
            // Event blocks arrive LZ4-compressed by the workers; compressing them again would
            // spend compaction CPU for nothing.
            let settled = if name == CF_EVENTS {
                DBCompressionType::None
            } else {
                DBCompressionType::Lz4
            };
            o.set_compression_per_level(&[
                DBCompressionType::None,
                DBCompressionType::None,
                settled,
                settled,
                settled,
                settled,
                settled,
            ]);
            o.set_level_compaction_dynamic_level_bytes(true);
            o
        };
        let descriptors: Vec<ColumnFamilyDescriptor> = ALL_CFS
            .iter()
            .map(|n| ColumnFamilyDescriptor::new(*n, cf_opts(n)))
            .collect();
        let db = DB::open_cf_descriptors(&db_opts, &path, descriptors)?;
        let store = Store {
            db,
            path,
            next_seq: AtomicU64::new(0),
            next_spool_seq: AtomicU64::new(0),
            sync_writes: cfg.sync_writes,
            write_fault: std::sync::atomic::AtomicBool::new(false),
            outbox_on: std::sync::atomic::AtomicBool::new(false),
            outbox_deletes: AtomicU64::new(0),
            triage_lock: std::sync::Mutex::new(()),
            closed: closed::ClosedLog::default(),
            read_failures: ReadFailures::default(),
        };
        let next = store.last_block_seq().map_or(0, |s| s + 1);
        store.next_seq.store(next, Ordering::Relaxed);
        let next = store.last_spool_seq().map_or(0, |s| s + 1);
        store.next_spool_seq.store(next, Ordering::Relaxed);
        let indexed = store.backfill_recent()?;
        if indexed > 0 {
            tracing::info!("indexed {indexed} stored alerts and signals by latest activity");
        }
        Ok(store)
    }

    /// Where the database lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Failed reads so far, and the last one.
    pub fn read_health(&self) -> ReadHealth {
        let last = self
            .read_failures
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        ReadHealth {
            read_errors: self.read_failures.count.load(Ordering::Relaxed),
            last_read_error_ns: last.as_ref().map_or(0, |l| l.0),
            last_read_error: last.map(|l| l.1),
        }
    }

    /// Passes `result` through, counting it when it is a failed read.
    pub(crate) fn counted<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e) = &result {
            self.read_failures.count.fetch_add(1, Ordering::Relaxed);
            *self
                .read_failures
                .last
                .lock()
                .unwrap_or_else(|p| p.into_inner()) =
                Some((watchpost_proto::now_ns(), e.to_string()));
            tracing::error!("store read failed: {e}");
        }
        result
    }

    pub(crate) fn cf(&self, name: &str) -> &ColumnFamily {
        // Every family is created at open, so a missing one is a programming error.
        self.db
            .cf_handle(name)
            .unwrap_or_else(|| panic!("column family {name} was opened with the store"))
    }

    pub(crate) fn db(&self) -> &DB {
        &self.db
    }

    /// Makes every write fail (`true`) as a full disk would, until called with `false`: how the
    /// tests show that acknowledged events, alerts and triage survive a disk that refuses
    /// writes. Read once per write, never per event. Test hook: the `testsuite` feature.
    #[cfg(any(test, feature = "testsuite"))]
    pub fn inject_write_fault(&self, failing: bool) {
        self.write_fault.store(failing, Ordering::Relaxed);
    }

    /// The injected write failure, if one is set.
    pub(crate) fn check_write_fault(&self) -> Result<(), StoreError> {
        if self.write_fault.load(Ordering::Relaxed) {
            return Err(StoreError::WriteFault);
        }
        Ok(())
    }

    pub(crate) fn write_options(&self) -> WriteOptions {
        let mut w = WriteOptions::default();
        w.set_sync(self.sync_writes);
        w
    }

    /// A fresh block sequence number (workers key their blocks before detection names events).
    pub fn take_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    fn last_block_seq(&self) -> Option<u64> {
        let mut it = self.db.raw_iterator_cf(self.cf(CF_BLOCKS));
        it.seek_to_last();
        let key = it.key()?;
        key.get(8..16)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    }

    /// Every persisted template, for the miners to resume with the same ids.
    pub fn templates(&self) -> Result<Vec<(u64, String)>, StoreError> {
        self.counted((|| {
            let mut out = Vec::new();
            let mut it = self.db.raw_iterator_cf(self.cf(CF_TEMPLATES));
            it.seek_to_first();
            while let (Some(k), Some(v)) = (it.key(), it.value()) {
                let id = <[u8; 8]>::try_from(k).map_err(|_| StoreError::Decode {
                    what: "template key",
                    reason: format!("{} bytes, not 8", k.len()),
                })?;
                out.push((
                    u64::from_be_bytes(id),
                    String::from_utf8_lossy(v).into_owned(),
                ));
                it.next();
            }
            it.status()?;
            Ok(out)
        })())
    }

    /// The template text of `id`.
    pub fn template(&self, id: u64) -> Result<Option<String>, StoreError> {
        let v = self.counted(
            self.db
                .get_pinned_cf(self.cf(CF_TEMPLATES), id.to_be_bytes())
                .map_err(StoreError::from),
        )?;
        Ok(v.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// The file offset persisted for `path_key`.
    pub fn checkpoint(&self, path_key: u64) -> Result<Option<Checkpoint>, StoreError> {
        let v = self.counted(
            self.db
                .get_pinned_cf(self.cf(CF_CHECKPOINTS), path_key.to_be_bytes())
                .map_err(StoreError::from),
        )?;
        let Some(v) = v else {
            return Ok(None);
        };
        if v.len() < 24 {
            return self.counted(Err(StoreError::Decode {
                what: "file checkpoint",
                reason: format!("{} bytes, fewer than 24", v.len()),
            }));
        }
        let n = |i: usize| u64::from_be_bytes(v[i..i + 8].try_into().unwrap_or([0; 8]));
        Ok(Some(Checkpoint {
            path_key,
            dev: n(0),
            ino: n(8),
            offset: n(16),
            path: String::from_utf8_lossy(&v[24..]).into_owned(),
        }))
    }

    /// The kind and canonical name of an entity UUID, if the store has seen it.
    pub fn entity(&self, uuid: &[u8; 16]) -> Result<Option<(u8, i64, String)>, StoreError> {
        let v = self.counted(
            self.db
                .get_pinned_cf(self.cf(CF_ENTITIES), uuid)
                .map_err(StoreError::from),
        )?;
        let Some(v) = v else {
            return Ok(None);
        };
        if v.len() < 9 {
            return self.counted(Err(StoreError::Decode {
                what: "entity",
                reason: format!("{} bytes, fewer than 9", v.len()),
            }));
        }
        let first_seen = i64::from_be_bytes(v[1..9].try_into().unwrap_or([0; 8]));
        Ok(Some((
            v[0],
            first_seen,
            String::from_utf8_lossy(&v[9..]).into_owned(),
        )))
    }

    /// Deletes events received before `cutoff_ns`, with their index entries. Returns whether
    /// anything could have been deleted (a cheap check on the oldest block).
    pub fn enforce_retention(&self, cutoff_ns: i64) -> Result<bool, StoreError> {
        let mut it = self.db.raw_iterator_cf(self.cf(CF_BLOCKS));
        it.seek_to_first();
        let oldest = it.key().map(block_key_time);
        drop(it);
        let Some(oldest) = oldest else {
            return Ok(false);
        };
        if oldest >= cutoff_ns {
            return Ok(false);
        }
        let lo = block_key(0, 0);
        let hi = block_key(cutoff_ns, 0);
        let day_lo = 0u32.to_be_bytes();
        // Index entries are partitioned by whole days: keep the cut-off day itself, whose blocks
        // may be partly younger; its stale entries point at deleted blocks and are skipped.
        let day_hi = day_of(cutoff_ns).to_be_bytes();
        let mut wb = rocksdb::WriteBatch::default();
        wb.delete_range_cf(self.cf(CF_EVENTS), lo, hi);
        wb.delete_range_cf(self.cf(CF_BLOCKS), lo, hi);
        for cf in INDEX_CFS {
            wb.delete_range_cf(self.cf(cf), day_lo, day_hi);
        }
        self.retain_detection(&mut wb, cutoff_ns);
        self.db.write_opt(wb, &self.write_options())?;
        for cf in [CF_EVENTS, CF_BLOCKS] {
            self.db
                .compact_range_cf(self.cf(cf), Some(&lo[..]), Some(&hi[..]));
        }
        Ok(true)
    }

    /// Flushes memtables so that a restart replays no WAL.
    pub fn flush(&self) -> Result<(), StoreError> {
        for cf in ALL_CFS {
            self.db.flush_cf(self.cf(cf))?;
        }
        Ok(())
    }
}
