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
    /// Adds a message to the block being written; false (and nothing added) when the spool is
    /// full.
    pub(crate) fn push(&mut self, frame: &Frame) -> bool {
        let len = frame.len();
        let held = self.counters.spool_bytes.load(Ordering::Relaxed) + self.buf.len() as u64;
        if held + len > self.max_bytes {
            return false;
        }
        self.buf
            .extend_from_slice(&(frame.payload.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&frame.partition.to_le_bytes());
        self.buf.extend_from_slice(&frame.records.to_le_bytes());
        self.buf.extend_from_slice(&frame.boot.to_le_bytes());
        self.buf.extend_from_slice(&frame.sequence.to_le_bytes());
        self.buf.extend_from_slice(&frame.payload);
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
                    // The end of a closed segment: on to the next.
                    self.file = None;
                    self.segment += 1;
                    self.offset = 0;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let word =
                |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().unwrap_or([0; 4]));
            let long =
                |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or([0; 8]));
            let mut payload = vec![0u8; word(0) as usize];
            file.read_exact(&mut payload)?;
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

    fn frame(sequence: u64, len: usize) -> Frame {
        Frame {
            partition: (sequence % 7) as u32,
            records: 3,
            boot: 42,
            sequence,
            payload: vec![sequence as u8; len].into(),
        }
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
            assert!(w.push(&frame(s, 300_000)));
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
        assert!(w.push(&frame(41, 10)));
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
        assert!(w.push(&frame(1, 500)));
        assert!(
            !w.push(&frame(2, 500)),
            "past the bound, with what the block holds"
        );
        w.commit().unwrap();
        assert_eq!(counters.spool_bytes.load(Ordering::Relaxed), 528);
        assert!(!w.push(&frame(3, 500)));
        assert!(w.push(&frame(4, 400)));
    }
}
