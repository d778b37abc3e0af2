//! A key-value bucket's live entries, kept up to date by one watcher.
//!
//! Listing a bucket (`keys`) makes a consumer on the servers each time, a change to the
//! cluster's metadata that every server applies: at one listing per node and heartbeat, a
//! fleet of a hundred nodes would make twenty a second, and the servers' metadata layer
//! would spend its time on them (seen here as slow recoveries after a server's loss). One
//! watcher per bucket and node sees every change as it happens instead.
//!
//! An entry that ages out of its bucket (`max_age`) reaches the watcher as a purge: the fleet's
//! buckets are made with delete markers (`limit_markers`, nats-server 2.11 or later), so the
//! view needs no clock of its own, and a host whose clock is off (or a test running a week
//! ahead under libfaketime) sees the same live entries as the servers.

use async_nats::jetstream::kv;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// See the module's documentation. Dropping it stops the watcher.
pub(crate) struct KvView {
    entries: Arc<Mutex<HashMap<String, kv::Entry>>>,
    task: tokio::task::JoinHandle<()>,
}

impl KvView {
    /// Starts watching `bucket` (on the current runtime). A watch that brings nothing for
    /// `stall` is made again: the bucket changes at least that often (every node renews its
    /// entry), and a watch whose server died can wait for ever without a word.
    pub(crate) fn start(bucket: kv::Store, stall: Duration) -> KvView {
        let entries = Arc::new(Mutex::new(HashMap::new()));
        let task = tokio::spawn(watch(bucket, Arc::clone(&entries), stall));
        KvView { entries, task }
    }

    /// The entries holding a value, by key.
    pub(crate) fn live(&self) -> Vec<kv::Entry> {
        self.live_within(None)
    }

    /// [`KvView::live`] for a bucket whose entries age out after `max_age`: an entry written
    /// more than `max_age` before the newest one is left out even while its marker has not
    /// come. The servers' own clock decides (an entry's time is the server's), so a host whose
    /// clock is off still agrees with them. Why the marker is not trusted alone: a node killed
    /// while the stream's leader moved (a server killed too) stayed in the fleet test's node
    /// list long after its entry's age, its marker never seen.
    pub(crate) fn live_within(&self, max_age: Option<Duration>) -> Vec<kv::Entry> {
        live_of(
            &self.entries.lock().unwrap_or_else(|e| e.into_inner()),
            max_age,
        )
    }
}

/// The entries of `entries` holding a value and, with `max_age`, written at most that long
/// before the newest one (see [`KvView::live_within`]), by key.
fn live_of(entries: &HashMap<String, kv::Entry>, max_age: Option<Duration>) -> Vec<kv::Entry> {
    let newest = entries.values().map(|e| e.created).max();
    let fresh = |e: &kv::Entry| match (max_age, newest) {
        (Some(age), Some(newest)) => newest - e.created <= age,
        _ => true,
    };
    let mut live: Vec<kv::Entry> = entries
        .values()
        .filter(|e| e.operation == kv::Operation::Put && fresh(e))
        .cloned()
        .collect();
    live.sort_by(|a, b| a.key.cmp(&b.key));
    live
}

impl Drop for KvView {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Follows the bucket from the last value of every key on; starts over (from the last values
/// again, the map cleared) when the watch ends or fails, as it can while the bucket's leader
/// moves.
async fn watch(
    bucket: kv::Store,
    entries: Arc<Mutex<HashMap<String, kv::Entry>>>,
    stall: Duration,
) {
    loop {
        match bucket.watch_with_history(">").await {
            Ok(mut watch) => {
                entries.lock().unwrap_or_else(|e| e.into_inner()).clear();
                while let Ok(Some(entry)) = tokio::time::timeout(stall, watch.next()).await {
                    match entry {
                        Ok(entry) => {
                            let mut map = entries.lock().unwrap_or_else(|e| e.into_inner());
                            match entry.operation {
                                kv::Operation::Put => {
                                    map.insert(entry.key.clone(), entry);
                                }
                                kv::Operation::Delete | kv::Operation::Purge => {
                                    map.remove(&entry.key);
                                }
                            }
                        }
                        Err(e) => {
                            tracing::debug!("cluster: watching {}: {e}", bucket.name);
                            break;
                        }
                    }
                }
            }
            Err(e) => tracing::debug!("cluster: cannot watch {}: {e}", bucket.name),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, seconds: u64, operation: kv::Operation) -> (String, kv::Entry) {
        let at = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds);
        let entry = kv::Entry {
            bucket: "wp_nodes".into(),
            key: key.into(),
            value: "{}".into(),
            revision: seconds,
            delta: 0,
            created: at.into(),
            operation,
            seen_current: true,
        };
        (key.to_string(), entry)
    }

    #[test]
    fn an_entry_older_than_the_age_before_the_newest_is_not_live_even_without_its_marker() {
        let entries: HashMap<String, kv::Entry> = [
            entry("console", 100, kv::Operation::Put),
            entry("det-2", 99, kv::Operation::Put),
            // Killed 40 s ago; its marker never came.
            entry("det-1", 60, kv::Operation::Put),
            entry("det-3", 100, kv::Operation::Delete),
        ]
        .into_iter()
        .collect();
        let names = |max_age| -> Vec<String> {
            live_of(&entries, max_age)
                .into_iter()
                .map(|e| e.key)
                .collect()
        };
        assert_eq!(names(Some(Duration::from_secs(3))), ["console", "det-2"]);
        // A bucket whose entries do not age (the content): every value is live.
        assert_eq!(names(None), ["console", "det-1", "det-2"]);
    }
}
