//! What an acknowledging input (HTTP, RELP) writes to the store's ingest spool before it answers,
//! and how the lines of a spooled request go on into the pipeline, now or after a restart.
//!
//! The rule (docs/guarantees.md): a request is acknowledged only once its lines are in RocksDB's
//! write-ahead log. The spool record holds the lines as the input framed them, so a replay
//! after a crash feeds the workers exactly what the first attempt did, with the original receive
//! time; the marks that travel with the lines delete the record in the same write batch as the
//! events (see `watchpost_store::SpoolMark`), so nothing is stored twice.
//!
//! A record: `[1][input id][received ns, i64 LE][lines, u32 LE]`, then per line
//! `[length, u32 LE][truncated, 0 or 1][bytes]`.

use super::outlet::Outlet;
use std::sync::Arc;
use watchpost_proto::InputId;
use watchpost_store::{SpoolMark, SpooledRequest, Store, StoreError};

const RECORD_VERSION: u8 = 1;
const HEADER: usize = 1 + 1 + 8 + 4;

/// One request's lines, encoded as the spool keeps them. The buffer is reused request after
/// request by its input.
#[derive(Debug, Default)]
pub(crate) struct SpoolRecord {
    bytes: Vec<u8>,
    lines: u32,
}

impl SpoolRecord {
    /// Starts a record for a request of `input` received at `received_ns`.
    pub(crate) fn begin(&mut self, input: InputId, received_ns: i64) {
        self.bytes.clear();
        self.bytes.push(RECORD_VERSION);
        self.bytes.push(input as u8);
        self.bytes.extend_from_slice(&received_ns.to_le_bytes());
        self.bytes.extend_from_slice(&0u32.to_le_bytes());
        self.lines = 0;
    }

    /// Adds a framed line (already cut at `dataplane.max_line_bytes`).
    pub(crate) fn push(&mut self, line: &[u8], truncated: bool) {
        self.bytes
            .extend_from_slice(&(line.len() as u32).to_le_bytes());
        self.bytes.push(u8::from(truncated));
        self.bytes.extend_from_slice(line);
        self.lines += 1;
        self.bytes[10..14].copy_from_slice(&self.lines.to_le_bytes());
    }

    /// Lines so far.
    pub(crate) fn lines(&self) -> u32 {
        self.lines
    }

    /// The encoded record.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Why a spooled record does not read: kept in the spool as evidence, logged, never fed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RecordError {
    /// Shorter than the header (its length).
    #[error("{0} bytes, shorter than a header")]
    Short(usize),
    /// Written by a layout this version does not read.
    #[error("layout {0} (this version reads {RECORD_VERSION})")]
    Layout(u8),
    /// An input number this version does not know.
    #[error("unknown input {0}")]
    Input(u8),
    /// Cut short at line `line` of the `lines` its header counts.
    #[error("line {line} of {lines}: record ends early")]
    EndsEarly {
        /// The first line missing, from 0.
        line: u32,
        /// The lines the header counts.
        lines: u32,
    },
}

/// A decoded record: which input took it, when, and its lines.
#[derive(Debug)]
pub(crate) struct Decoded<'a> {
    pub input: InputId,
    pub received_ns: i64,
    pub lines: u32,
    rest: &'a [u8],
}

impl<'a> Decoded<'a> {
    /// Reads a record's header; the lines are read lazily by [`Decoded::each_line`].
    pub(crate) fn read(record: &'a [u8]) -> Result<Decoded<'a>, RecordError> {
        if record.len() < HEADER {
            return Err(RecordError::Short(record.len()));
        }
        if record[0] != RECORD_VERSION {
            return Err(RecordError::Layout(record[0]));
        }
        let input = InputId::ALL
            .iter()
            .copied()
            .find(|i| *i as u8 == record[1])
            .ok_or(RecordError::Input(record[1]))?;
        let mut ns = [0u8; 8];
        ns.copy_from_slice(&record[2..10]);
        let mut n = [0u8; 4];
        n.copy_from_slice(&record[10..14]);
        Ok(Decoded {
            input,
            received_ns: i64::from_le_bytes(ns),
            lines: u32::from_le_bytes(n),
            rest: &record[HEADER..],
        })
    }

    /// Calls `each` with every line and its truncated flag, in order; a record cut short ends
    /// with an error after the lines it does hold.
    pub(crate) fn each_line(&self, mut each: impl FnMut(&[u8], bool)) -> Result<(), RecordError> {
        let mut rest = self.rest;
        let early = |line| RecordError::EndsEarly {
            line,
            lines: self.lines,
        };
        for i in 0..self.lines {
            let Some((len, tail)) = rest.split_first_chunk::<4>() else {
                return Err(early(i));
            };
            let len = u32::from_le_bytes(*len) as usize;
            let Some((&flag, tail)) = tail.split_first() else {
                return Err(early(i));
            };
            if tail.len() < len {
                return Err(early(i));
            }
            each(&tail[..len], flag == 1);
            rest = &tail[len..];
        }
        Ok(())
    }
}

/// Feeds a spooled request's lines to `worker`, from line `skip` on (those before are stored),
/// each followed by its mark so the request leaves the spool with the block of its last line.
pub(crate) fn feed(
    outlet: &mut Outlet,
    worker: usize,
    seq: u64,
    record: &Decoded<'_>,
    skip: u32,
) -> Result<(), RecordError> {
    let total = record.lines;
    let mut at = 0u32;
    record.each_line(|line, truncated| {
        at += 1;
        if at <= skip {
            return;
        }
        outlet.push_line(worker, line, record.received_ns, truncated);
        outlet.mark(
            worker,
            SpoolMark {
                seq,
                lines_done: at,
                complete: at == total,
            },
        );
    })
}

/// Replays what `input` had spooled and not stored when the service stopped. Requests go to the
/// workers in turn, as live ones do. A record that does not decode is logged and left in place
/// (it is evidence, and nothing else reads it); one cut short feeds the lines it holds.
pub(crate) fn replay(outlet: &mut Outlet, input: InputId, pending: &[SpooledRequest]) -> u64 {
    let mut replayed = 0;
    for (i, request) in pending.iter().enumerate() {
        let decoded = match Decoded::read(&request.record) {
            Ok(d) if d.input == input => d,
            Ok(_) => continue,
            Err(e) => {
                tracing::error!("spool: request {} does not decode: {e}", request.seq);
                continue;
            }
        };
        if let Err(e) = feed(outlet, i, request.seq, &decoded, request.lines_done) {
            tracing::error!("spool: request {}: {e}", request.seq);
        }
        replayed += 1;
    }
    outlet.flush_all();
    replayed
}

/// Spools a group of requests in one write (the group commit): `Ok` means every one of them
/// survives a crash from now on. Each gets a sequence number from the store.
pub(crate) fn commit(
    store: &Arc<Store>,
    records: &[&SpoolRecord],
    seqs: &mut Vec<u64>,
) -> Result<(), StoreError> {
    seqs.clear();
    let mut batch: Vec<(u64, &[u8])> = Vec::with_capacity(records.len());
    for r in records {
        let seq = store.take_spool_seq();
        seqs.push(seq);
        batch.push((seq, r.as_bytes()));
    }
    store.spool(&batch)
}

/// The input a spooled record came from, if it decodes.
pub(crate) fn input_of(record: &[u8]) -> Option<InputId> {
    Decoded::read(record).ok().map(|d| d.input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_gives_back_its_lines_flags_and_receive_time() {
        let mut r = SpoolRecord::default();
        r.begin(InputId::Http, 42);
        r.push(b"{\"a\":1}", false);
        r.push(b"", false);
        r.push(b"cut", true);
        let d = Decoded::read(r.as_bytes()).unwrap();
        assert_eq!((d.input, d.received_ns, d.lines), (InputId::Http, 42, 3));
        let mut got = Vec::new();
        d.each_line(|l, t| got.push((l.to_vec(), t))).unwrap();
        assert_eq!(
            got,
            vec![
                (b"{\"a\":1}".to_vec(), false),
                (Vec::new(), false),
                (b"cut".to_vec(), true)
            ]
        );
    }

    /// What a crash leaves: three acknowledged requests in the spool, the second half stored
    /// (its progress says 150 of 200 lines). The next start stores the rest, each line once,
    /// with the receive time of the first attempt.
    #[test]
    fn a_restart_stores_what_the_spool_holds_and_skips_what_was_stored() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = watchpost_proto::Config::default();
        cfg.storage.data_dir = dir.path().to_string_lossy().into_owned();
        cfg.inputs.syslog_udp.enabled = false;
        cfg.inputs.syslog_tcp.enabled = false;
        cfg.inputs.json_tcp.enabled = false;
        cfg.dataplane.pin_workers = false;
        cfg.dataplane.batch_linger_ms = 5;
        let received = 1_700_000_000_000_000_000;
        {
            let store = Store::open(dir.path(), &cfg.storage).unwrap();
            let mut record = SpoolRecord::default();
            for k in 0..3u32 {
                record.begin(InputId::Http, received);
                for i in 0..200 {
                    record.push(
                        format!("{{\"message\":\"r{k} line {i}\"}}").as_bytes(),
                        false,
                    );
                }
                let seq = store.take_spool_seq();
                store.spool(&[(seq, record.as_bytes())]).unwrap();
                if k == 1 {
                    let mut block = Box::new(watchpost_store::EncodedBlock::default());
                    block.spool.push(SpoolMark {
                        seq,
                        lines_done: 150,
                        complete: false,
                    });
                    store
                        .commit_blocks(&mut [block], &mut watchpost_store::CommitScratch::default())
                        .unwrap();
                }
            }
        }
        let p = crate::Pipeline::start(&cfg).unwrap();
        let t = std::time::Instant::now();
        while p.stats().snapshot().stored_total < 450 {
            assert!(t.elapsed().as_secs() < 20, "{:?}", p.stats().snapshot());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(p.stats().snapshot().spool.replayed, 3);
        let store = p.store();
        p.shutdown();
        let mut seen = Vec::new();
        store
            .scan_events(i64::MIN, i64::MAX, u64::MAX, |_, e| {
                assert_eq!(e.received_ns, received, "the first attempt's receive time");
                seen.push(e.message);
                true
            })
            .unwrap();
        seen.sort_unstable();
        let before = seen.len();
        seen.dedup();
        assert_eq!((before, seen.len()), (450, 450), "none twice");
        assert!(seen.iter().filter(|m| m.starts_with("r1 ")).all(|m| {
            let i: u32 = m.rsplit(' ').next().unwrap().parse().unwrap();
            i >= 150
        }));
        assert!(store.spooled().unwrap().is_empty());
    }

    #[test]
    fn a_damaged_record_is_an_error_not_a_panic() {
        let mut r = SpoolRecord::default();
        r.begin(InputId::Http, 1);
        r.push(b"0123456789", false);
        let bytes = r.as_bytes();
        for cut in 0..bytes.len() {
            match Decoded::read(&bytes[..cut]) {
                Err(_) => {}
                Ok(d) => assert!(d.each_line(|_, _| {}).is_err(), "cut at {cut}"),
            }
        }
        let mut wrong = bytes.to_vec();
        wrong[0] = 9;
        assert_eq!(Decoded::read(&wrong).unwrap_err(), RecordError::Layout(9));
        wrong[0] = 1;
        wrong[1] = 200;
        assert_eq!(Decoded::read(&wrong).unwrap_err(), RecordError::Input(200));
    }
}
