//! File tail: glob patterns, rotation, truncation, and offsets that survive restarts.
//!
//! Each file's offset travels in the batch with its lines and is committed in the same RocksDB
//! write batch as those lines (see `store`), so after a crash or restart the tail resumes exactly
//! after the last stored line: nothing lost, nothing repeated. Files are identified by device and
//! inode: a path whose inode changed was rotated (the old file is read to its end first); a file
//! smaller than its offset was truncated (read again from the start).
//!
//! A Windows event log export (`.evtx`) is not a text log: it is read whole, record by record,
//! each record one flat JSON event (`crate::evtx`), and its offset counts records instead of
//! bytes. An export that changes (a longer one saved over it) is read again past the records
//! already taken.

use super::framing::{Framer, Framing};
use super::outlet::Outlet;
use super::registry::{Bound, Delivery, Input, Running, Start};
use crate::Error;
use crate::stats::Stats;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{ErrorKind, Seek, SeekFrom};
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_normalize::Format;
use watchpost_proto::config::InputsConfig;
use watchpost_proto::{Config, InputId, hash64, now_ns};
use watchpost_store::{Checkpoint, Store};

/// Settings of the file input.
pub struct FileSettings {
    /// Glob patterns.
    pub patterns: Vec<String>,
    /// Read files never seen before from the start (`true`) or the end.
    pub from_beginning: bool,
    /// Poll interval.
    pub poll: Duration,
    /// Longest line kept whole.
    pub max_line: usize,
}

struct Tailed {
    path: String,
    path_key: u64,
    file: File,
    dev: u64,
    ino: u64,
    /// Offset of the first byte the framer has not consumed.
    base: u64,
    framer: Framer,
    shard: usize,
    /// An event log export: its size and modification time when last read (`None` for a text
    /// log). `base` then counts the records taken.
    evtx: Option<(u64, i64)>,
}

impl Tailed {
    fn offset(&self) -> u64 {
        if self.evtx.is_some() {
            return self.base;
        }
        self.base + self.framer.consumed()
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            path_key: self.path_key,
            path: self.path.clone(),
            dev: self.dev,
            ino: self.ino,
            offset: self.offset(),
        }
    }
}

/// Starts the file input.
pub fn spawn(
    settings: FileSettings,
    outlet: Outlet,
    store: Arc<Store>,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("wp-in-file".into())
        .spawn(move || run(settings, outlet, &store, &stats, &stop))
}

fn run(s: FileSettings, mut outlet: Outlet, store: &Store, stats: &Stats, stop: &AtomicBool) {
    let counters = stats.input(watchpost_proto::InputId::File);
    counters.up.store(true, Ordering::Relaxed);
    let mut tailed: BTreeMap<String, Tailed> = BTreeMap::new();
    let mut next_shard = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let mut present = Vec::new();
        for pattern in &s.patterns {
            match glob::glob(pattern) {
                Ok(paths) => present.extend(paths.flatten().filter(|p| p.is_file())),
                Err(e) => tracing::warn!("inputs.file.paths: bad pattern {pattern}: {e}"),
            }
        }
        for p in &present {
            let key = p.to_string_lossy().into_owned();
            if !tailed.contains_key(&key)
                && let Some(t) = open(p, &key, store, s.from_beginning, s.max_line, next_shard)
            {
                next_shard += 1;
                tailed.insert(key, t);
            }
        }
        let mut gone = Vec::new();
        for (key, t) in tailed.iter_mut() {
            if t.evtx.is_some() {
                match std::fs::metadata(&t.path) {
                    Ok(m) => read_export(t, &m, &mut outlet, stop, s.max_line),
                    Err(_) => gone.push(key.clone()),
                }
                outlet.checkpoint(t.shard, t.checkpoint());
                continue;
            }
            read_available(t, &mut outlet, stop);
            match std::fs::metadata(&t.path) {
                Ok(m) if m.dev() != t.dev || m.ino() != t.ino => {
                    // Rotated: the old file is fully read above; continue with the new one.
                    finish_partial(t, &mut outlet);
                    match File::open(&t.path) {
                        Ok(f) => {
                            t.file = f;
                            t.dev = m.dev();
                            t.ino = m.ino();
                            t.base = 0;
                            t.framer = Framer::new(Framing::Newline, s.max_line);
                            read_available(t, &mut outlet, stop);
                        }
                        Err(_) => gone.push(key.clone()),
                    }
                }
                Ok(m) if m.len() < t.offset() => {
                    // Truncated in place: start over.
                    if t.file.seek(SeekFrom::Start(0)).is_ok() {
                        t.base = 0;
                        t.framer = Framer::new(Framing::Newline, s.max_line);
                        read_available(t, &mut outlet, stop);
                    }
                }
                Ok(_) => {}
                Err(_) => {
                    finish_partial(t, &mut outlet);
                    gone.push(key.clone());
                }
            }
            outlet.checkpoint(t.shard, t.checkpoint());
        }
        for k in gone {
            tailed.remove(&k);
        }
        outlet.flush_all();
        sleep_unless_stopped(s.poll, stop);
    }
    // Stop: no more reading (a large file read from its beginning would hold the stop for as
    // long as it takes). The checkpoint is the offset after the last line pushed, so the next
    // start reads on from there and nothing is lost.
    for t in tailed.values_mut() {
        outlet.checkpoint(t.shard, t.checkpoint());
    }
    outlet.flush_all();
}

fn open(
    path: &PathBuf,
    key: &str,
    store: &Store,
    from_beginning: bool,
    max_line: usize,
    shard: usize,
) -> Option<Tailed> {
    let mut file = File::open(path).ok()?;
    let m = file.metadata().ok()?;
    let path_key = hash64(key.as_bytes());
    // Where reading stopped is unknown when the checkpoint cannot be read: the file waits for
    // the next scan rather than be read again from the start or skipped to its end. (The store
    // counts and logs the failure.)
    let export = crate::evtx::is_evtx(path);
    let start = match store.checkpoint(path_key).ok()? {
        // An export's offset counts records: any count may follow (it is checked on reading).
        Some(cp) if export && cp.dev == m.dev() && cp.ino == m.ino() => cp.offset,
        Some(cp) if cp.dev == m.dev() && cp.ino == m.ino() && cp.offset <= m.len() => cp.offset,
        Some(_) => 0, // replaced while we were down: all of it is new
        // An export is a whole: one that appears is read, whatever `from_beginning` says.
        None if from_beginning || export => 0,
        None => m.len(),
    };
    if !export {
        file.seek(SeekFrom::Start(start)).ok()?;
    }
    Some(Tailed {
        path: key.to_string(),
        path_key,
        file,
        dev: m.dev(),
        ino: m.ino(),
        base: start,
        framer: Framer::new(Framing::Newline, max_line),
        shard,
        // Never read yet: no size and time match, so the first scan reads it.
        evtx: export.then_some((u64::MAX, 0)),
    })
}

/// Reads an event log export again when it changed since the last read (size or modification
/// time), pushing the records past those already taken (`t.base` of them). A stop ends the read between records;
/// the offset then says where to go on.
fn read_export(
    t: &mut Tailed,
    m: &std::fs::Metadata,
    outlet: &mut Outlet,
    stop: &AtomicBool,
    max_line: usize,
) {
    let seen = (m.len(), m.mtime());
    if t.evtx == Some(seen) {
        return;
    }
    if m.dev() != t.dev || m.ino() != t.ino {
        // Another export saved under the name: all of it is new.
        t.dev = m.dev();
        t.ino = m.ino();
        t.base = 0;
    }
    let mut text = Vec::new();
    match crate::evtx::evtx_lines(std::path::Path::new(&t.path), &mut text) {
        Ok(read) => {
            if read.bad_records > 0 {
                tracing::warn!(
                    "file input: {}: {} records could not be read",
                    t.path,
                    read.bad_records
                );
            }
        }
        Err(e) => {
            // Half written (an export being copied in): tried again when it changes.
            tracing::warn!("file input: {}: not a readable event log yet: {e}", t.path);
            t.evtx = Some(seen);
            return;
        }
    }
    let now = now_ns();
    for line in text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .skip(t.base as usize)
    {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        // Cut and flagged past `dataplane.max_line_bytes`, as any input's lines are.
        let cut = line.len() > max_line;
        outlet.push_line(t.shard, &line[..line.len().min(max_line)], now, cut);
        t.base += 1;
    }
    t.evtx = Some(seen);
}

/// Reads what the file holds past the framer, until its end or a stop (checked once per read
/// call).
fn read_available(t: &mut Tailed, outlet: &mut Outlet, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match t.framer.read_from(&mut t.file) {
            Ok(0) => return,
            Ok(_) => {
                let now = now_ns();
                while let Some(f) = t.framer.next_frame() {
                    outlet.push_line(t.shard, &t.framer.buffer()[f.range], now, f.truncated);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!("file input: {}: {e}", t.path);
                return;
            }
        }
    }
}

/// A rotated or deleted file's last line may lack its newline: it is complete now.
fn finish_partial(t: &mut Tailed, outlet: &mut Outlet) {
    if let Some(f) = t.framer.finish() {
        outlet.push_line(t.shard, &t.framer.buffer()[f.range], now_ns(), f.truncated);
    }
}

fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) {
    let step = Duration::from_millis(10);
    let mut left = d;
    while !left.is_zero() && !stop.load(Ordering::Relaxed) {
        let s = left.min(step);
        std::thread::sleep(s);
        left -= s;
    }
}

/// The file tail in the registry.
pub(crate) struct FileTail;

impl Input for FileTail {
    fn id(&self) -> InputId {
        InputId::File
    }

    fn delivery(&self) -> Delivery {
        Delivery::Checkpointed
    }

    fn enabled(&self, inputs: &InputsConfig) -> bool {
        inputs.file.enabled
    }

    fn format(&self, inputs: &InputsConfig) -> Format {
        match inputs.file.format.as_str() {
            "json" => Format::Json,
            "syslog" => Format::Syslog,
            _ => Format::Auto,
        }
    }

    fn bind(&self, _: &Config) -> Result<Box<dyn Bound>, Error> {
        // Nothing to bind: the patterns are globbed again at every poll.
        Ok(Box::new(BoundFileTail))
    }
}

struct BoundFileTail;

impl Bound for BoundFileTail {
    fn local_addr(&self) -> Option<SocketAddr> {
        None
    }

    fn start(self: Box<Self>, with: Start<'_>) -> Result<Running, Error> {
        let c = &with.cfg.inputs.file;
        let settings = FileSettings {
            patterns: c.paths.clone(),
            from_beginning: c.start_at == "beginning",
            poll: Duration::from_millis(c.poll_interval_ms),
            max_line: with.cfg.dataplane.max_line_bytes as usize,
        };
        spawn(
            settings,
            with.outlet,
            Arc::clone(with.store),
            Arc::clone(with.stats),
            Arc::clone(with.stop),
        )
        .map(Running::thread)
        .map_err(Error::Thread)
    }
}
