//! Shared content, set once on the console (docs/cluster.md, "Shared content").
//!
//! Custom rules, the rules' enabled flags and the exceptions live in the key-value bucket
//! [`CONTENT_BUCKET`], one key each:
//!
//! ```text
//! rule.<rule id>          the YAML of a rule uploaded on the console
//! enabled.<rule id>       "1" or "0", for every rule the console holds
//! exception.<uuid>        the exception as JSON (its hit counts left out); deleted: gone
//! ```
//!
//! and the console's indicator files in the object store [`IOC_STORE`], one object per file.
//!
//! The console is the source: it **mirrors** its own content into the bucket and the store
//! (every second it compares what it holds with what they hold and writes the difference), so
//! a change made while the servers were away is shared when they return, and the API's
//! handlers change only the console's own content, as on a node alone. Every other node
//! **follows**: it watches the bucket and the store from their last values on and applies each
//! entry to its own catalogue, exception book and indicator folder (as `fleet.<file>` beside
//! its own files), so a node that was away catches up when it returns. Applying is
//! idempotent (an entry equal to what the node holds changes nothing), which lets a watch
//! start over at any time. The other nodes refuse content changes through their own API: the
//! fleet's content is set once, on the console.
//!
//! Rules are matched on sensors and named on detectors by key, not by number
//! (`watchpost_detect::ContentKeys`), so the order in which nodes receive uploads does not
//! matter.

use crate::ClusterError;
use crate::counters::FleetCounters;
use crate::streams::key_value;
use async_nats::jetstream::{self, kv, object_store};
use futures_util::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use watchpost_dataplane::{Catalog, ExceptionBook};
use watchpost_proto::config::ClusterConfig;
use watchpost_proto::{Exception, Uuid};
use watchpost_rules::Origin;

/// The content bucket.
pub const CONTENT_BUCKET: &str = "wp_content";
/// The indicator files' object store.
pub const IOC_STORE: &str = "wp_ioc";
/// The name a follower gives an indicator file of the fleet in its own folder.
pub const FLEET_IOC_PREFIX: &str = "fleet.";

/// How often the console compares its content with the fleet's.
const MIRROR_EVERY: Duration = Duration::from_secs(1);
/// A follower's watch that brings nothing for this long is made again (a watch whose server
/// died can wait for ever without a word); making it again re-applies the last values, which
/// changes nothing.
const WATCH_STALL: Duration = Duration::from_secs(60);
/// How often a follower asks whether the fleet's content moved past what its watch brought
/// (one stream-info request, no consumer made): a watch can miss its start on a stream whose
/// leader is still being chosen and then wait in silence, and content must not wait a minute
/// for [`WATCH_STALL`]. The listing that follows, made only when something changed, is the
/// truth the watch is checked against.
const CHECK_EVERY: Duration = Duration::from_secs(5);
/// The longest a listing of the indicator store may take before it is given up for this pass.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);
/// The object metadata key of a file's content hash.
const HASH_KEY: &str = "watchpost-hash";

/// What a node's content is: its catalogue, its exceptions and its indicator folder.
#[derive(Clone)]
pub struct ContentParts {
    /// The live Sigma catalogue.
    pub catalog: Arc<Catalog>,
    /// The exception book.
    pub exceptions: Arc<ExceptionBook>,
    /// `detection.ioc_dir`.
    pub ioc_dir: PathBuf,
    /// `detection.ioc_reload_interval_seconds`: how often the console looks at its folder.
    pub ioc_scan: Duration,
}

/// The content bucket: opened, or made with every server's copy.
async fn content_bucket(
    js: &jetstream::Context,
    config: &ClusterConfig,
) -> Result<kv::Store, ClusterError> {
    key_value(
        js,
        kv::Config {
            bucket: CONTENT_BUCKET.into(),
            description: "Watchpost: rules, flags and exceptions set on the console \
                          (docs/cluster.md)"
                .into(),
            history: 1,
            num_replicas: crate::streams::replicas(config),
            storage: jetstream::stream::StorageType::File,
            ..Default::default()
        },
    )
    .await
}

/// The indicator files' store: opened, or made with every server's copy.
async fn ioc_store(
    js: &jetstream::Context,
    config: &ClusterConfig,
) -> Result<object_store::ObjectStore, ClusterError> {
    crate::streams::object_store_named(
        js,
        config,
        IOC_STORE,
        "Watchpost: indicator files set on the console",
    )
    .await
}

/// The bucket's keys and values the console's content calls for.
fn desired(parts: &ContentParts) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in parts.catalog.all() {
        if e.origin == Origin::Custom {
            out.insert(format!("rule.{}", e.rule.id), e.yaml.clone().into_bytes());
        }
        let flag = if e.enabled() { b"1" } else { b"0" };
        out.insert(format!("enabled.{}", e.rule.id), flag.to_vec());
    }
    for x in parts.exceptions.list() {
        let shared = Exception {
            hits: 0,
            last_hit_ns: None,
            ..x
        };
        if let Ok(json) = serde_json::to_vec(&shared) {
            out.insert(format!("exception.{}", shared.id), json);
        }
    }
    out
}

/// Applies one entry of the bucket to a follower's content; true when it changed something.
fn apply(parts: &ContentParts, key: &str, value: Option<&[u8]>) -> Result<bool, String> {
    if let Some(id) = key.strip_prefix("rule.") {
        let Some(yaml) = value else {
            // Uploads are not deleted (no API does); a deleted key changes nothing here.
            return Ok(false);
        };
        let yaml = std::str::from_utf8(yaml).map_err(|_| format!("{key}: not UTF-8"))?;
        if parts.catalog.find(id).is_some_and(|e| e.yaml == yaml) {
            return Ok(false);
        }
        parts
            .catalog
            .upload(yaml)
            .map(|_| true)
            .map_err(|e| format!("{key}: {e}"))
    } else if let Some(id) = key.strip_prefix("enabled.") {
        let Some(flag) = value else { return Ok(false) };
        let on = flag == b"1";
        match parts.catalog.find(id) {
            Some(e) if e.enabled() == on => Ok(false),
            Some(_) => parts
                .catalog
                .set_enabled(id, on)
                .map(|_| true)
                .map_err(|e| format!("{key}: {e}")),
            // A rule this node does not hold (a rule folder only the console has): nothing
            // to switch.
            None => Ok(false),
        }
    } else if let Some(id) = key.strip_prefix("exception.") {
        let id = Uuid::parse_str(id).map_err(|_| format!("{key}: not an exception id"))?;
        match value {
            Some(json) => {
                let e: Exception =
                    serde_json::from_slice(json).map_err(|e| format!("{key}: {e}"))?;
                if e.id != id {
                    return Err(format!("{key}: holds exception {}", e.id));
                }
                parts.exceptions.put(e).map_err(|e| format!("{key}: {e}"))
            }
            None => parts
                .exceptions
                .delete(id)
                .map_err(|e| format!("{key}: {e}")),
        }
    } else {
        Err(format!("{key}: not a key of the fleet's content"))
    }
}

/// Starts sharing content (on the current runtime): a console mirrors its content into the
/// fleet's, any other node follows the fleet's.
pub(crate) fn start(
    config: ClusterConfig,
    node: String,
    console: bool,
    parts: ContentParts,
    counters: Arc<FleetCounters>,
) {
    tokio::spawn(async move {
        let Some(client) = crate::connect::client_for(&config, &node, "content").await else {
            return;
        };
        let js = jetstream::new(client);
        if console {
            tokio::spawn(mirror_files(
                js.clone(),
                config.clone(),
                parts.clone(),
                Arc::clone(&counters),
            ));
            mirror(js, config, parts, counters).await;
        } else {
            tokio::spawn(follow_files(
                js.clone(),
                config.clone(),
                parts.clone(),
                Arc::clone(&counters),
            ));
            follow(js, config, parts, counters).await;
        }
    });
}

/// Opens something of the servers', trying again every second until it opens.
async fn opened<T, F: std::future::Future<Output = Result<T, ClusterError>>>(
    what: &str,
    counters: &FleetCounters,
    mut open: impl FnMut() -> F,
) -> T {
    loop {
        match open().await {
            Ok(v) => return v,
            Err(e) => {
                counters.content_failed(format!("{what}: {e}"));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// The console: its content into the bucket, for ever.
async fn mirror(
    js: jetstream::Context,
    config: ClusterConfig,
    parts: ContentParts,
    counters: Arc<FleetCounters>,
) {
    let bucket = opened(CONTENT_BUCKET, &counters, || content_bucket(&js, &config)).await;
    let view = crate::view::KvView::start(bucket.clone(), WATCH_STALL);
    let mut tick = tokio::time::interval(MIRROR_EVERY);
    loop {
        tick.tick().await;
        let mut fleet: HashMap<String, (u64, Vec<u8>)> = view
            .live()
            .into_iter()
            .map(|e| (e.key, (e.revision, e.value.to_vec())))
            .collect();
        if let Some(r) = fleet.values().map(|(r, _)| *r).max() {
            counters.content_at(r);
        }
        let errors = counters
            .content_errors
            .load(std::sync::atomic::Ordering::Relaxed);
        for (key, value) in desired(&parts) {
            match fleet.remove(&key) {
                Some((_, v)) if v == value => continue,
                Some(_) => {}
                // Not in the view (yet: it fills from its watch after a start): asked for
                // directly, so that a restarted console does not write again what the fleet
                // already holds.
                None => {
                    if let Ok(Some(e)) = bucket.entry(&key).await
                        && e.operation == kv::Operation::Put
                        && e.value.as_ref() == value.as_slice()
                    {
                        continue;
                    }
                }
            }
            match bucket.put(&key, value.into()).await {
                Ok(revision) => counters.content_changed(revision),
                Err(e) => counters.content_failed(format!("{key}: {e}")),
            }
        }
        // What the console no longer holds (a deleted exception): gone for the fleet too.
        for key in fleet.into_keys() {
            match bucket.delete(&key).await {
                Ok(()) => counters.content_changed(0),
                Err(e) => counters.content_failed(format!("{key}: {e}")),
            }
        }
        if counters
            .content_errors
            .load(std::sync::atomic::Ordering::Relaxed)
            == errors
        {
            counters.content_in_sync();
        }
    }
}

/// Any other node: the bucket's entries applied as they come, from the last values on. Every
/// [`CHECK_EVERY`] the bucket's last revision is compared with the last one the watch
/// brought; a watch that stays behind for two checks in a row is made again.
async fn follow(
    js: jetstream::Context,
    config: ClusterConfig,
    parts: ContentParts,
    counters: Arc<FleetCounters>,
) {
    let bucket = opened(CONTENT_BUCKET, &counters, || content_bucket(&js, &config)).await;
    let mut check = tokio::time::interval(CHECK_EVERY);
    loop {
        let mut watch = match bucket.watch_with_history(">").await {
            Ok(w) => w,
            Err(e) => {
                counters.content_failed(format!("watching {CONTENT_BUCKET}: {e}"));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let (mut seen, mut behind) = (0u64, 0u32);
        let mut quiet = tokio::time::Instant::now();
        loop {
            tokio::select! {
                entry = watch.next() => {
                    let Some(Ok(entry)) = entry else { break };
                    seen = seen.max(entry.revision);
                    quiet = tokio::time::Instant::now();
                    follow_entry(&parts, &counters, entry).await;
                }
                _ = check.tick() => {
                    let last = bucket.stream.get_info().await.map(|i| i.state.last_sequence);
                    behind = match last {
                        Ok(last) if last > seen => behind + 1,
                        _ => 0,
                    };
                    if behind >= 2 || quiet.elapsed() >= WATCH_STALL {
                        tracing::warn!(
                            "cluster: the watch of {CONTENT_BUCKET} stayed at revision {seen}; \
                             watching again"
                        );
                        break;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Applies one entry of the bucket, off the runtime (the catalogue compiles and the book
/// writes to the store), and counts what it did.
async fn follow_entry(parts: &ContentParts, counters: &FleetCounters, entry: kv::Entry) {
    let value = (entry.operation == kv::Operation::Put).then(|| entry.value.clone());
    let parts = parts.clone();
    let key = entry.key.clone();
    let applied = tokio::task::spawn_blocking(move || apply(&parts, &key, value.as_deref())).await;
    match applied {
        Ok(Ok(true)) => counters.content_changed(entry.revision),
        Ok(Ok(false)) => counters.content_at(entry.revision),
        Ok(Err(e)) => counters.content_failed(e),
        Err(e) => counters.content_failed(e.to_string()),
    }
}

/// An indicator file of the console's folder: its size and time (to notice a change without
/// reading it) and its content's hash (what the fleet's copy is compared by).
#[derive(Clone, PartialEq)]
struct FileSeen {
    size: u64,
    modified: Option<SystemTime>,
    hash: String,
}

/// Whether `name` is a file of the console's own indicator folder to share: not hidden, not
/// a half-written one, not one a follower wrote.
fn shared_name(name: &str) -> bool {
    !name.starts_with('.') && !name.starts_with(FLEET_IOC_PREFIX) && !name.ends_with(".tmp")
}

/// The files of the console's folder, read again only when their size or time changed.
fn scan_folder(dir: &Path, seen: &mut BTreeMap<String, FileSeen>) -> std::io::Result<()> {
    let mut now = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let meta = entry.metadata()?;
        if !meta.is_file() || !shared_name(&name) {
            continue;
        }
        let (size, modified) = (meta.len(), meta.modified().ok());
        let file = match seen.get(&name) {
            Some(f) if f.size == size && f.modified == modified => f.clone(),
            _ => FileSeen {
                size,
                modified,
                hash: content_hash(&std::fs::read(entry.path())?),
            },
        };
        now.insert(name, file);
    }
    *seen = now;
    Ok(())
}

fn content_hash(bytes: &[u8]) -> String {
    format!(
        "{:016x}{:08x}",
        watchpost_proto::hash64(bytes),
        bytes.len() as u32
    )
}

/// The console: its indicator files into the store, for ever.
async fn mirror_files(
    js: jetstream::Context,
    config: ClusterConfig,
    parts: ContentParts,
    counters: Arc<FleetCounters>,
) {
    let store = opened(IOC_STORE, &counters, || ioc_store(&js, &config)).await;
    let mut seen = BTreeMap::new();
    let mut tick = tokio::time::interval(parts.ioc_scan.max(MIRROR_EVERY));
    loop {
        tick.tick().await;
        if let Err(e) = scan_folder(&parts.ioc_dir, &mut seen) {
            counters.content_failed(format!("{}: {e}", parts.ioc_dir.display()));
            continue;
        }
        let mut fleet: HashMap<String, String> = match listing(&store).await {
            Ok(files) => files
                .into_iter()
                .map(|info| {
                    let hash = info.metadata.get(HASH_KEY).cloned().unwrap_or_default();
                    (info.name, hash)
                })
                .collect(),
            Err(e) => {
                counters.content_failed(e);
                continue;
            }
        };
        for (name, file) in &seen {
            if fleet.remove(name).is_some_and(|h| h == file.hash) {
                continue;
            }
            let bytes = match tokio::fs::read(parts.ioc_dir.join(name)).await {
                Ok(b) => b,
                Err(e) => {
                    counters.content_failed(format!("{name}: {e}"));
                    continue;
                }
            };
            let meta = object_store::ObjectMetadata {
                name: name.clone(),
                metadata: HashMap::from([(HASH_KEY.to_string(), content_hash(&bytes))]),
                ..Default::default()
            };
            match store.put(meta, &mut bytes.as_slice()).await {
                Ok(_) => counters.content_changed(0),
                Err(e) => counters.content_failed(format!("{name}: {e}")),
            }
        }
        for name in fleet.into_keys() {
            match store.delete(&name).await {
                Ok(()) => counters.content_changed(0),
                Err(e) => counters.content_failed(format!("{name}: {e}")),
            }
        }
    }
}

/// The store's files (its deleted ones left out), within [`LIST_TIMEOUT`]: a listing is a
/// consumer on the servers, and one made while the stream's leader moves can wait in silence.
async fn listing(
    store: &object_store::ObjectStore,
) -> Result<Vec<object_store::ObjectInfo>, String> {
    let list = async {
        let mut list = store.list().await.map_err(|e| e.to_string())?;
        let mut files = Vec::new();
        while let Some(info) = list.next().await {
            files.push(info.map_err(|e| e.to_string())?);
        }
        Ok::<_, String>(files)
    };
    match tokio::time::timeout(LIST_TIMEOUT, list).await {
        Ok(Ok(files)) => Ok(files),
        Ok(Err(e)) => Err(format!("listing {IOC_STORE}: {e}")),
        Err(_) => Err(format!(
            "listing {IOC_STORE}: no answer within {LIST_TIMEOUT:?}"
        )),
    }
}

/// Any other node: the store's files written into its folder as `fleet.<name>`, and removed
/// when the console removes them. The watch brings changes as they happen; every
/// [`CHECK_EVERY`] the store's stream is asked whether anything was written since the last
/// listing, and when it was, the listing is compared with the folder (so a change the watch
/// missed waits seconds, not for ever).
async fn follow_files(
    js: jetstream::Context,
    config: ClusterConfig,
    parts: ContentParts,
    counters: Arc<FleetCounters>,
) {
    let store = opened(IOC_STORE, &counters, || ioc_store(&js, &config)).await;
    let stream = opened(IOC_STORE, &counters, || async {
        js.get_stream(format!("OBJ_{IOC_STORE}"))
            .await
            .map_err(|e| ClusterError::Bucket {
                bucket: format!("OBJ_{IOC_STORE}"),
                reason: e.to_string(),
            })
    })
    .await;
    let mut check = tokio::time::interval(CHECK_EVERY);
    let mut listed_at = None;
    let mut watch = None;
    loop {
        if watch.is_none() {
            match store.watch_with_history().await {
                Ok(w) => watch = Some(w),
                Err(e) => counters.content_failed(format!("watching {IOC_STORE}: {e}")),
            }
        }
        tokio::select! {
            info = async { watch.as_mut()?.next().await }, if watch.is_some() => {
                match info {
                    Some(Ok(info)) => follow_one(&store, &parts.ioc_dir, &info, &counters).await,
                    _ => watch = None,
                }
            }
            _ = check.tick() => {
                let Ok(last) = stream.get_info().await.map(|i| i.state.last_sequence) else {
                    continue;
                };
                if listed_at == Some(last) {
                    continue;
                }
                match reconcile_files(&store, &parts.ioc_dir, &counters).await {
                    Ok(()) => listed_at = Some(last),
                    Err(e) => counters.content_failed(e),
                }
            }
        }
    }
}

/// Brings one file up to the store's `info` and counts what it did.
async fn follow_one(
    store: &object_store::ObjectStore,
    dir: &Path,
    info: &object_store::ObjectInfo,
    counters: &FleetCounters,
) {
    match follow_file(store, dir, info).await {
        Ok(true) => counters.content_changed(0),
        Ok(false) => {}
        Err(e) => counters.content_failed(format!("{}: {e}", info.name)),
    }
}

/// The folder's `fleet.` files brought up to the store's listing: each listed file followed,
/// each copy of a file the store no longer holds removed.
async fn reconcile_files(
    store: &object_store::ObjectStore,
    dir: &Path,
    counters: &FleetCounters,
) -> Result<(), String> {
    let files = listing(store).await?;
    for info in &files {
        follow_one(store, dir, info, counters).await;
    }
    let mut folder = tokio::fs::read_dir(dir)
        .await
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    while let Ok(Some(entry)) = folder.next_entry().await {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let Some(shared) = name.strip_prefix(FLEET_IOC_PREFIX) else {
            continue;
        };
        if !files.iter().any(|f| f.name == shared) {
            match tokio::fs::remove_file(entry.path()).await {
                Ok(()) => counters.content_changed(0),
                Err(e) => counters.content_failed(format!("{name}: {e}")),
            }
        }
    }
    Ok(())
}

/// Brings the local copy of one file of the fleet's store up to `info`; true when it changed.
async fn follow_file(
    store: &object_store::ObjectStore,
    dir: &Path,
    info: &object_store::ObjectInfo,
) -> Result<bool, String> {
    if info.name.contains('/') || info.name.contains('\\') || !shared_name(&info.name) {
        return Err("not a file name this node writes".into());
    }
    let path = dir.join(format!("{FLEET_IOC_PREFIX}{}", info.name));
    if info.deleted {
        return match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.to_string()),
        };
    }
    let want = info.metadata.get(HASH_KEY);
    if let Ok(local) = tokio::fs::read(&path).await
        && want == Some(&content_hash(&local))
    {
        return Ok(false);
    }
    let mut object = store.get(&info.name).await.map_err(|e| e.to_string())?;
    let mut bytes = Vec::with_capacity(info.size);
    tokio::io::AsyncReadExt::read_to_end(&mut object, &mut bytes)
        .await
        .map_err(|e| e.to_string())?;
    // Written aside then renamed: the folder's watcher never reads half a file.
    let tmp = dir.join(format!(".{FLEET_IOC_PREFIX}{}.tmp", info.name));
    tokio::fs::write(&tmp, &bytes)
        .await
        .map_err(|e| e.to_string())?;
    tokio::fs::rename(&tmp, &path)
        .await
        .map_err(|e| e.to_string())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_shares_its_own_files_only() {
        assert!(shared_name("abuse.txt"));
        assert!(!shared_name("fleet.abuse.txt"));
        assert!(!shared_name(".fleet.abuse.txt.tmp"));
        assert!(!shared_name(".hidden"));
    }
}
