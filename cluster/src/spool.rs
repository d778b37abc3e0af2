//! A sensor's spool: the detection records on their way to the stream, on disk, within a
//! bound (docs/cluster.md, "When JetStream is away").
//!
//! The data plane's thread appends each block's partition messages to the current segment
//! file in one write; the publishing task reads them back in order, publishes them, and moves
//! its acknowledged position forward only over what the stream acknowledged. A segment read
//! and acknowledged to its end, and no longer written, is deleted; the acknowledged position
//! is saved every second, so that a sensor that restarts (or is killed) sends what was not
//! acknowledged, and only that (give or take the last second, which the stream's duplicate
//! window drops: a message keeps its id across restarts). The bytes on disk never pass
//! `cluster.spool_max_bytes`: past it, records are dropped and counted.
//!
//! ```text
//! segment  {number:020}.spool, frames back to back
//! frame    u32 payload length | u32 partition | u32 records | u64 boot | u64 sequence | payload
//! acked    "{segment} {offset}\n", replaced atomically
//! ```

use crate::counters::FleetCounters;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of a frame's header.
const HEADER: usize = 28;
/// A segment is closed and a new one begun past this size.
const SEGMENT_BYTES: u64 = 8 << 20;
/// The largest payload a frame may hold: more than any message the servers take (1 MiB by
/// default); a larger length read back is a damaged segment, not an allocation to make.
const MAX_PAYLOAD: u64 = 16 << 20;
/// The file holding the acknowledged position.
const ACKED: &str = "acked";

/// One message as the spool holds it.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    pub(crate) partition: u32,
    pub(crate) records: u32,
    pub(crate) boot: u64,
    pub(crate) sequence: u64,
    pub(crate) payload: bytes::Bytes,
}

impl Frame {
    /// Bytes it takes in a segment.
    pub(crate) fn len(&self) -> u64 {
        (HEADER + self.payload.len()) as u64
    }
}

/// Where the writer is: what the reader may read up to.
#[derive(Debug, Default)]
pub(crate) struct WritePosition {
    segment: AtomicU64,
    offset: AtomicU64,
}

/// The data plane's end.
pub(crate) struct SpoolWriter {
    dir: PathBuf,
    file: File,
    segment: u64,
    offset: u64,
    buf: Vec<u8>,
    position: Arc<WritePosition>,
    counters: Arc<FleetCounters>,
    max_bytes: u64,
}

/// The publishing task's end.
pub(crate) struct SpoolReader {
    dir: PathBuf,
    segment: u64,
    offset: u64,
    file: Option<File>,
    position: Arc<WritePosition>,
    counters: Arc<FleetCounters>,
}

/// Opens the spool in `dir` (made when missing): what an earlier run left unacknowledged is
/// read first, the writer begins a new segment after it.
pub(crate) fn open(
    dir: &Path,
    max_bytes: u64,
    counters: Arc<FleetCounters>,
) -> std::io::Result<(SpoolWriter, SpoolReader)> {
    std::fs::create_dir_all(dir)?;
    let segments = segments(dir)?;
    let (mut read_segment, mut read_offset) = read_acked(dir).unwrap_or((0, 0));
    if !segments.contains(&read_segment) {
        // Its segment is gone (read to the end and deleted): start at the oldest left.
        read_segment = segments.first().copied().unwrap_or(0);
        read_offset = 0;
    }
    let mut left = 0;
    for &s in &segments {
        let len = std::fs::metadata(segment_path(dir, s))?.len();
        left += match s.cmp(&read_segment) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Equal => len.saturating_sub(read_offset),
            std::cmp::Ordering::Greater => len,
        };
    }
    // Segments before the acknowledged one are done with.
    for &s in segments.iter().filter(|&&s| s < read_segment) {
        let _ = std::fs::remove_file(segment_path(dir, s));
    }
    counters.spool_add(left);
    let segment = segments
        .last()
        .map_or(read_segment, |s| s + 1)
        .max(read_segment + 1);
    let file = create(dir, segment)?;
    let position = Arc::new(WritePosition {
        segment: AtomicU64::new(segment),
        offset: AtomicU64::new(0),
    });
    if left > 0 {
        tracing::info!(
            "cluster: the spool holds {left} bytes of records from before the restart; sending \
             them first"
        );
    }
    let writer = SpoolWriter {
        dir: dir.to_path_buf(),
        file,
        segment,
        offset: 0,
        buf: Vec::with_capacity(1 << 20),
        position: Arc::clone(&position),
        counters: Arc::clone(&counters),
        max_bytes,
    };
    let reader = SpoolReader {
        dir: dir.to_path_buf(),
        segment: if segments.is_empty() {
            segment
        } else {
            read_segment
        },
        offset: if segments.is_empty() { 0 } else { read_offset },
        file: None,
        position,
        counters,
    };
    Ok((writer, reader))
}

fn segment_path(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("{segment:020}.spool"))
}

fn create(dir: &Path, segment: u64) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(segment_path(dir, segment))
}

/// The segments in `dir`, oldest first.
fn segments(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some(n) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".spool"))
            .and_then(|n| n.parse().ok())
        {
            found.push(n);
        }
    }
    found.sort_unstable();
    Ok(found)
}

fn read_acked(dir: &Path) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(dir.join(ACKED)).ok()?;
    let mut parts = text.split_whitespace().map(str::parse::<u64>);
    Some((parts.next()?.ok()?, parts.next()?.ok()?))
}

impl SpoolWriter {
    /// Adds a message to the block being written, its payload appended by `encode` straight
    /// into the block (no buffer of its own); false, and nothing added, when the spool is full.
    pub(crate) fn push(
        &mut self,
        partition: u32,
        records: u32,
        boot: u64,
        sequence: u64,
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> bool {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; HEADER]);
        encode(&mut self.buf);
        let len = (self.buf.len() - start) as u64;
        let held = self.counters.spool_bytes.load(Ordering::Relaxed) + start as u64;
        if held + len > self.max_bytes || len - HEADER as u64 > MAX_PAYLOAD {
            self.buf.truncate(start);
            return false;
        }
        let header = &mut self.buf[start..start + HEADER];
        header[0..4].copy_from_slice(&((len as usize - HEADER) as u32).to_le_bytes());
        header[4..8].copy_from_slice(&partition.to_le_bytes());
        header[8..12].copy_from_slice(&records.to_le_bytes());
        header[12..20].copy_from_slice(&boot.to_le_bytes());
        header[20..28].copy_from_slice(&sequence.to_le_bytes());
        true
    }

    /// Writes the block's messages in one write, and lets the reader see them. A write that
    /// fails drops them (counted by the caller) and is reported.
    pub(crate) fn commit(&mut self) -> Result<(), std::io::Error> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let written = self.file.write_all(&self.buf);
        let len = self.buf.len() as u64;
        self.buf.clear();
        written?;
        self.offset += len;
        self.counters.spool_add(len);
        self.position.offset.store(self.offset, Ordering::Release);
        if self.offset >= SEGMENT_BYTES {
            self.segment += 1;
            self.file = create(&self.dir, self.segment)?;
            self.offset = 0;
            // The reader reads the old segment to its end, then moves on.
            self.position.offset.store(0, Ordering::Release);
            self.position.segment.store(self.segment, Ordering::Release);
        }
        Ok(())
    }
}

impl SpoolReader {
    /// Reads up to `max` frames after the last one read into `out`; none when the writer has
    /// written nothing more.
    pub(crate) fn read(
        &mut self,
        max: usize,
        out: &mut Vec<(Frame, (u64, u64))>,
    ) -> std::io::Result<()> {
        while out.len() < max {
            let writing = self.position.segment.load(Ordering::Acquire);
            let limit = if self.segment == writing {
                Some(self.position.offset.load(Ordering::Acquire))
            } else {
                None // a closed segment: to its end
            };
            if limit.is_some_and(|l| self.offset >= l) {
                return Ok(());
            }
            let file = match &mut self.file {
                Some(f) => f,
                None => {
                    let mut f = match File::open(segment_path(&self.dir, self.segment)) {
                        Ok(f) => f,
                        Err(e)
                            if e.kind() == std::io::ErrorKind::NotFound
                                && self.segment < writing =>
                        {
                            self.segment += 1;
                            self.offset = 0;
                            continue;
                        }
                        Err(e) => return Err(e),
                    };
                    f.seek(SeekFrom::Start(self.offset))?;
                    self.file.insert(f)
                }
            };
            let mut header = [0u8; HEADER];
            match file.read_exact(&mut header) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && limit.is_none() => {
                    // The end of a closed segment (or a header cut short by a crash: what is
                    // left of it is skipped the same way).
                    self.skip_rest(limit);
                    continue;
                }
                Err(e) => return Err(e),
            }
            let word =
                |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().unwrap_or([0; 4]));
            let long =
                |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or([0; 8]));
            let length = u64::from(word(0));
            let mut payload = vec![0u8; length.min(MAX_PAYLOAD) as usize];
            let read = if length > MAX_PAYLOAD {
                Err(std::io::ErrorKind::InvalidData.into())
            } else {
                file.read_exact(&mut payload)
            };
            if let Err(e) = read {
                if e.kind() != std::io::ErrorKind::UnexpectedEof
                    && e.kind() != std::io::ErrorKind::InvalidData
                {
                    return Err(e);
                }
                // A frame cut short or a length no writer wrote: the segment is damaged past
                // here (a crash of the host mid-write). What follows in it is lost, said and
                // counted off the spool, and reading goes on with the next segment.
                tracing::error!(
                    "cluster: the spool's segment {} is damaged at byte {}: the rest of it is \
                     skipped",
                    self.segment,
                    self.offset
                );
                self.skip_rest(limit);
                continue;
            }
            let frame = Frame {
                partition: word(4),
                records: word(8),
                boot: long(12),
                sequence: long(20),
                payload: payload.into(),
            };
            self.offset += frame.len();
            out.push((frame, (self.segment, self.offset)));
        }
        Ok(())
    }

    /// Leaves the segment being read: a closed one for the next (its bytes past the offset off
    /// the spool's count), the one being written up to what was written.
    fn skip_rest(&mut self, limit: Option<u64>) {
        let end = match limit {
            Some(l) => l,
            None => std::fs::metadata(segment_path(&self.dir, self.segment))
                .map_or(self.offset, |m| m.len()),
        };
        self.counters.spool_sub(end.saturating_sub(self.offset));
        self.file = None;
        match limit {
            Some(l) => self.offset = l,
            None => {
                self.segment += 1;
                self.offset = 0;
            }
        }
    }

    /// Whether everything written has been read.
    pub(crate) fn caught_up(&self) -> bool {
        self.segment == self.position.segment.load(Ordering::Acquire)
            && self.offset >= self.position.offset.load(Ordering::Acquire)
    }

    /// The stream acknowledged everything up to `position` (a frame's end): its bytes leave
    /// the spool's count, and segments read past are deleted.
    pub(crate) fn acknowledged(
        &mut self,
        bytes: u64,
        position: (u64, u64),
        acked: &mut (u64, u64),
    ) {
        self.counters.spool_sub(bytes);
        for s in acked.0..position.0 {
            let _ = std::fs::remove_file(segment_path(&self.dir, s));
        }
        *acked = position;
    }

    /// Saves the acknowledged position (replacing the file in one rename).
    pub(crate) fn save_acked(&self, acked: (u64, u64)) -> std::io::Result<()> {
        let tmp = self.dir.join(format!("{ACKED}.tmp"));
        std::fs::write(&tmp, format!("{} {}\n", acked.0, acked.1))?;
        std::fs::rename(tmp, self.dir.join(ACKED))
    }

    /// Where reading starts: the acknowledged position at open.
    pub(crate) fn start(&self) -> (u64, u64) {
        (self.segment, self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes a message of `len` bytes, numbered `sequence`.
    fn push(w: &mut SpoolWriter, sequence: u64, len: usize) -> bool {
        let payload = vec![sequence as u8; len];
        w.push((sequence % 7) as u32, 3, 42, sequence, |buf| {
            buf.extend_from_slice(&payload)
        })
    }

    fn read_all(reader: &mut SpoolReader) -> Vec<(Frame, (u64, u64))> {
        let mut out = Vec::new();
        reader.read(usize::MAX, &mut out).unwrap();
        out
    }

    #[test]
    fn frames_come_back_in_order_across_segments_and_a_restart_resumes_after_the_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(FleetCounters::default());
        let (mut w, mut r) = open(dir.path(), 1 << 30, Arc::clone(&counters)).unwrap();
        // Enough to close a segment (8 MiB) and begin the next.
        for s in 1..=40 {
            assert!(push(&mut w, s, 300_000));
            w.commit().unwrap();
        }
        let got = read_all(&mut r);
        assert_eq!(got.len(), 40);
        assert!(got.iter().map(|(f, _)| f.sequence).eq(1..=40));
        assert_eq!(got[7].0.payload.len(), 300_000);
        assert_eq!(got[7].0.partition, 1);
        assert!(got.last().unwrap().1.0 > got[0].1.0, "two segments");
        assert!(r.caught_up());
        // The first 30 acknowledged and saved; the process stops.
        let bytes: u64 = got[..30].iter().map(|(f, _)| f.len()).sum();
        let mut acked = r.start();
        r.acknowledged(bytes, got[29].1, &mut acked);
        r.save_acked(acked).unwrap();
        drop((w, r));

        let counters = Arc::new(FleetCounters::default());
        let (mut w, mut r) = open(dir.path(), 1 << 30, Arc::clone(&counters)).unwrap();
        let left: u64 = got[30..].iter().map(|(f, _)| f.len()).sum();
        assert_eq!(counters.spool_bytes.load(Ordering::Relaxed), left);
        assert!(push(&mut w, 41, 10));
        w.commit().unwrap();
        let again = read_all(&mut r);
        assert!(
            again.iter().map(|(f, _)| f.sequence).eq(31..=41),
            "{:?}",
            again.iter().map(|(f, _)| f.sequence).collect::<Vec<_>>()
        );
        assert_eq!(
            again[0].0.boot, 42,
            "a message keeps its id across restarts"
        );
    }

    #[test]
    fn a_full_spool_refuses_and_counts_on_the_callers_side() {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(FleetCounters::default());
        let (mut w, _r) = open(dir.path(), 1_000, Arc::clone(&counters)).unwrap();
        assert!(push(&mut w, 1, 500));
        assert!(
            !push(&mut w, 2, 500),
            "past the bound, with what the block holds"
        );
        w.commit().unwrap();
        assert_eq!(counters.spool_bytes.load(Ordering::Relaxed), 528);
        assert!(!push(&mut w, 3, 500));
        assert!(push(&mut w, 4, 400));
    }

    #[test]
    fn a_segment_cut_short_by_a_crash_is_skipped_with_its_bytes_off_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(FleetCounters::default());
        let (mut w, _r) = open(dir.path(), 1 << 30, Arc::clone(&counters)).unwrap();
        for s in 1..=3 {
            assert!(push(&mut w, s, 1_000));
            w.commit().unwrap();
        }
        drop(w);
        // The host died mid-write: the last frame is cut, and a length no writer wrote follows
        // in a segment of its own.
        let first = segments(dir.path()).unwrap()[0];
        let path = segment_path(dir.path(), first);
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 10)
            .unwrap();
        let mut garbage = vec![0xff; HEADER];
        garbage.extend_from_slice(&[1; 64]);
        std::fs::write(segment_path(dir.path(), first + 1), garbage).unwrap();

        let counters = Arc::new(FleetCounters::default());
        let (mut w, mut r) = open(dir.path(), 1 << 30, Arc::clone(&counters)).unwrap();
        assert!(push(&mut w, 4, 100));
        w.commit().unwrap();
        let got = read_all(&mut r);
        assert!(
            got.iter().map(|(f, _)| f.sequence).eq([1, 2, 4]),
            "{:?}",
            got.iter().map(|(f, _)| f.sequence).collect::<Vec<_>>()
        );
        let held: u64 = got.iter().map(|(f, _)| f.len()).sum();
        assert_eq!(counters.spool_bytes.load(Ordering::Relaxed), held);
    }
}
