//! The live indicator set: the files of `detection.ioc_dir` loaded into an [`IocSet`], reloaded
//! when they change.
//!
//! Like the Sigma catalogue it is versioned: a reload builds a whole new set beside the old one
//! and swaps an `Arc`, and a stage A worker checks the version once per batch (one atomic load),
//! so matching never waits on a reload and takes no lock per event. A match travels to stage B as
//! (version, indicator number); the feed keeps the previous set too, so a match made just before
//! a swap is still named by the set that made it.
//!
//! Change detection polls the folder every `detection.ioc_reload_interval_seconds` and compares
//! each file's name, size and modification time: no inotify dependency, works on every
//! filesystem, and a feed dropped in by `rsync` or a cron job is picked up within the interval.

use crate::Error;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};
use watchpost_proto::now_ns;
use watchpost_rules::{FileStats, IocError, IocKind, IocSet};

/// What a folder looked like: (name, size, modification time) per file, sorted.
type Fingerprint = Vec<(String, u64, Option<SystemTime>)>;

struct State {
    version: u64,
    current: Arc<IocSet>,
    previous: Option<(u64, Arc<IocSet>)>,
    files: Vec<FileStats>,
    errors: Vec<IocError>,
    fingerprint: Fingerprint,
    loaded_ns: i64,
}

/// The indicator set and the folder it comes from.
pub struct IocFeed {
    dir: PathBuf,
    state: RwLock<State>,
    version: AtomicU64,
}

/// What `/ioc` reports about the loaded set.
#[derive(Clone, Debug, serde::Serialize, schemars::JsonSchema)]
pub struct IocStatus {
    /// The folder read.
    pub dir: String,
    /// Bumped on every reload.
    pub version: u64,
    /// When the set was loaded, ns.
    pub loaded_ns: i64,
    /// Indicators loaded.
    pub indicators: usize,
    /// Indicators by kind.
    pub by_kind: std::collections::BTreeMap<&'static str, usize>,
    /// Per file: format, added, duplicates, skipped, errors.
    pub files: Vec<FileStats>,
    /// Entries that could not be used (at most 100 per file).
    pub errors: Vec<IocError>,
}

impl IocFeed {
    /// Loads the folder of `cfg`; with `create`, makes it when missing (the live service), else
    /// a missing folder is an empty set (offline tools).
    pub fn open(cfg: &watchpost_proto::Config, create: bool) -> Result<IocFeed, Error> {
        let dir = cfg.ioc_dir();
        if !dir.is_dir() {
            if create {
                std::fs::create_dir_all(&dir).map_err(|source| Error::Content {
                    context: format!("detection.ioc_dir: cannot create {}", dir.display()),
                    source,
                })?;
            } else {
                return Ok(IocFeed::empty(dir));
            }
        }
        let feed = IocFeed::empty(dir);
        feed.reload();
        Ok(feed)
    }

    fn empty(dir: PathBuf) -> IocFeed {
        IocFeed {
            dir,
            state: RwLock::new(State {
                version: 1,
                current: Arc::new(IocSet::new()),
                previous: None,
                files: Vec::new(),
                errors: Vec::new(),
                fingerprint: Vec::new(),
                loaded_ns: 0,
            }),
            version: AtomicU64::new(1),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        // Every change builds the new state before swapping it in: a poisoned lock holds a
        // whole state and is safe to keep reading.
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Bumped on every reload.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The current set and its version.
    pub fn current(&self) -> (u64, Arc<IocSet>) {
        let s = self.read();
        (s.version, s.current.clone())
    }

    /// The set of `version`, if it is the current or the previous one.
    pub fn get(&self, version: u64) -> Option<Arc<IocSet>> {
        let s = self.read();
        if s.version == version {
            return Some(s.current.clone());
        }
        s.previous
            .as_ref()
            .filter(|(v, _)| *v == version)
            .map(|(_, set)| set.clone())
    }

    /// Reloads when a file was added, removed or changed since the last load; says whether it
    /// did.
    pub fn reload_if_changed(&self) -> bool {
        let now = fingerprint(&self.dir);
        if now == self.read().fingerprint {
            return false;
        }
        self.reload();
        true
    }

    /// Loads the folder and swaps the new set in.
    pub fn reload(&self) {
        let print = fingerprint(&self.dir);
        let started = std::time::Instant::now();
        let mut load = IocSet::load_dir(&self.dir, SystemTime::now());
        load.set.shrink_to_fit();
        for e in load.errors.iter().take(20) {
            tracing::warn!("ioc {e}");
        }
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        let old = std::mem::replace(&mut s.current, Arc::new(load.set));
        s.previous = Some((s.version, old));
        s.version += 1;
        s.files = load.files;
        s.errors = load.errors;
        s.fingerprint = print;
        s.loaded_ns = now_ns();
        self.version.store(s.version, Ordering::Release);
        tracing::info!(
            "ioc: {} indicator(s) from {} file(s) in {} ({} ms)",
            s.current.len(),
            s.files.len(),
            self.dir.display(),
            started.elapsed().as_millis()
        );
    }

    /// What is loaded.
    pub fn status(&self) -> IocStatus {
        let s = self.read();
        IocStatus {
            dir: self.dir.display().to_string(),
            version: s.version,
            loaded_ns: s.loaded_ns,
            indicators: s.current.len(),
            by_kind: IocKind::ALL
                .iter()
                .map(|k| (k.as_str(), s.current.count(*k)))
                .collect(),
            files: s.files.clone(),
            errors: s.errors.clone(),
        }
    }

    /// Polls the folder every `interval` until `stop` is set.
    pub fn spawn_watcher(
        self: Arc<Self>,
        interval: Duration,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("wp-ioc".into())
            .spawn(move || {
                let tick = Duration::from_millis(200).min(interval);
                let mut waited = Duration::ZERO;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    waited += tick;
                    if waited >= interval {
                        waited = Duration::ZERO;
                        self.reload_if_changed();
                    }
                }
            })
    }
}

fn fingerprint(dir: &Path) -> Fingerprint {
    let mut out: Fingerprint = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| {
                    let m = e.metadata().ok()?;
                    m.is_file().then(|| {
                        (
                            e.file_name().to_string_lossy().into_owned(),
                            m.len(),
                            m.modified().ok(),
                        )
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Stage B names the indicators stage A reports through the feed.
impl watchpost_detect::IndicatorBook for IocFeed {
    fn indicators(&self, version: u64) -> Option<Arc<IocSet>> {
        self.get(version)
    }
    fn latest(&self) -> (u64, Arc<IocSet>) {
        self.current()
    }
    fn latest_version(&self) -> u64 {
        self.version()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_folder_reloads_and_the_previous_set_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = watchpost_proto::Config::default();
        cfg.detection.ioc_dir = dir.path().display().to_string();
        let feed = IocFeed::open(&cfg, true).unwrap();
        let (v1, set) = feed.current();
        assert!(set.is_empty());
        assert!(!feed.reload_if_changed(), "nothing changed");
        std::fs::write(dir.path().join("bad.txt"), "198.51.100.7\nevil.example\n").unwrap();
        assert!(feed.reload_if_changed());
        let (v2, set) = feed.current();
        assert!(v2 > v1);
        assert_eq!(set.len(), 2);
        assert!(feed.get(v1).is_some(), "previous set kept");
        assert!(set.match_domain("www.evil.example").is_some());
        let st = feed.status();
        assert_eq!((st.indicators, st.by_kind["domain"]), (2, 1));
        std::fs::remove_file(dir.path().join("bad.txt")).unwrap();
        assert!(feed.reload_if_changed());
        assert!(feed.current().1.is_empty());
        assert!(feed.get(v1).is_none(), "only one previous set is kept");
    }
}
