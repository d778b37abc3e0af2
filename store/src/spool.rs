//! The ingest spool: what an acknowledging input (HTTP, RELP) has accepted but the pipeline has not
//! stored yet, kept in RocksDB so that an acknowledgement survives a crash.
//!
//! An input writes each request's lines here, one record per request, before it answers 2xx;
//! RocksDB has them in its write-ahead log once the write returns, which a killed process cannot
//! lose (a power cut can, unless `storage.sync_writes` is on). The lines then travel the
//! pipeline as any others, and the block that carries a request's last line deletes its record
//! in the same write batch as its events ([`SpoolMark`]): a record is either pending or its events
//! are stored, never both, so a restart replays exactly what was lost and nothing twice. A
//! request cut over two blocks records how many of its lines are stored, and a replay skips them.
//!
//! | key                    | value                                   |
//! |------------------------|-----------------------------------------|
//! | sequence (8, BE)       | the request, encoded by its input       |
//! | sequence (8, BE) + `p` | lines of it already stored (u32, LE)    |

use crate::{Store, StoreError};
use rocksdb::{Direction, IteratorMode, WriteBatch};

pub(crate) const CF_SPOOL: &str = "spool";

/// Progress of one spooled request, carried by the block that holds its lines so that it becomes
/// durable with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpoolMark {
    /// The request's sequence number.
    pub seq: u64,
    /// Its lines up to and including this block.
    pub lines_done: u32,
    /// This block holds its last line: the record goes.
    pub complete: bool,
}

/// A request the pipeline had not stored when the service last stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpooledRequest {
    /// Its sequence number.
    pub seq: u64,
    /// The record as its input wrote it.
    pub record: Vec<u8>,
    /// Lines of it already stored.
    pub lines_done: u32,
}

fn progress_key(seq: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[..8].copy_from_slice(&seq.to_be_bytes());
    k[8] = b'p';
    k
}

impl Store {
    /// A fresh spool sequence number.
    pub fn take_spool_seq(&self) -> u64 {
        self.next_spool_seq
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Writes requests (sequence number, record) in one write batch: when this returns `Ok`,
    /// they survive a crash of the process. One call per group of requests is the group commit
    /// that keeps acknowledged ingest fast.
    pub fn spool(&self, requests: &[(u64, &[u8])]) -> Result<(), StoreError> {
        self.check_write_fault()?;
        let mut wb = WriteBatch::default();
        for (seq, record) in requests {
            wb.put_cf(self.cf(CF_SPOOL), seq.to_be_bytes(), record);
        }
        self.db().write_opt(wb, &self.write_options())?;
        Ok(())
    }

    /// Every request still pending, in the order they were spooled.
    pub fn spooled(&self) -> Result<Vec<SpooledRequest>, StoreError> {
        let mut out: Vec<SpooledRequest> = Vec::new();
        let iter = self.db().iterator_cf(
            self.cf(CF_SPOOL),
            IteratorMode::From(&[], Direction::Forward),
        );
        for item in iter {
            let (key, value) = self.counted(item.map_err(StoreError::from))?;
            let Some(seq) = key
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
            else {
                return self.counted(Err(StoreError::Decode {
                    what: "spool key",
                    reason: format!("{} bytes, fewer than 8", key.len()),
                }));
            };
            if key.len() == 8 {
                out.push(SpooledRequest {
                    seq,
                    record: value.to_vec(),
                    lines_done: 0,
                });
                continue;
            }
            // A progress key sorts right after its record's key.
            let done = value
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes);
            match (out.last_mut(), done) {
                (Some(last), Some(done)) if last.seq == seq => last.lines_done = done,
                // Progress of a request whose record is gone: the deletion of both was one
                // batch, so this is damage; the request itself is not lost by skipping it.
                _ => tracing::warn!("spool: stray progress record for request {seq}"),
            }
        }
        Ok(out)
    }

    /// The sequence number after the last spooled request, 0 when none is pending.
    pub(crate) fn last_spool_seq(&self) -> Option<u64> {
        let mut it = self.db().raw_iterator_cf(self.cf(CF_SPOOL));
        it.seek_to_last();
        it.key()?
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    }
}

/// Adds a block's spool progress to its write batch.
pub(crate) fn add_marks(store: &Store, wb: &mut WriteBatch, marks: &[SpoolMark]) {
    let cf = store.cf(CF_SPOOL);
    for m in marks {
        if m.complete {
            wb.delete_cf(cf, m.seq.to_be_bytes());
            wb.delete_cf(cf, progress_key(m.seq));
        } else {
            wb.put_cf(cf, progress_key(m.seq), m.lines_done.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CommitScratch;
    use crate::EncodedBlock;

    fn store(dir: &std::path::Path) -> Store {
        Store::open(dir, &watchpost_proto::config::StorageConfig::default()).unwrap()
    }

    #[test]
    fn a_spooled_request_is_pending_until_its_last_block_commits() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let (a, b) = (s.take_spool_seq(), s.take_spool_seq());
        s.spool(&[(a, b"first"), (b, b"second")]).unwrap();
        let mut block = Box::new(EncodedBlock::default());
        block.spool.push(SpoolMark {
            seq: a,
            lines_done: 3,
            complete: true,
        });
        block.spool.push(SpoolMark {
            seq: b,
            lines_done: 2,
            complete: false,
        });
        s.commit_blocks(&mut [block], &mut CommitScratch::default())
            .unwrap();
        let pending = s.spooled().unwrap();
        assert_eq!(
            pending,
            vec![SpooledRequest {
                seq: b,
                record: b"second".to_vec(),
                lines_done: 2
            }]
        );
    }

    #[test]
    fn sequence_numbers_continue_after_a_restart_with_requests_pending() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = store(dir.path());
            for _ in 0..5 {
                let seq = s.take_spool_seq();
                s.spool(&[(seq, b"x")]).unwrap();
            }
        }
        let s = store(dir.path());
        assert_eq!(s.take_spool_seq(), 5);
        assert_eq!(s.spooled().unwrap().len(), 5);
    }
}
