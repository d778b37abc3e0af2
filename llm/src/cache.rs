//! A small per-process cache with a time to live and least-recently-used eviction, for the LLM's
//! answers (explanations, hunts, rule drafts), which are slow and costly to make again.
//!
//! Sizes are hundreds of entries, so eviction scans for the oldest use rather than keeping an
//! ordered list: simpler, and no slower at that size than the lock it runs under.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// An entry and when it expires.
#[derive(Clone, Debug)]
pub struct Cached<V> {
    /// The value.
    pub value: V,
    /// When it stops being returned.
    pub expires: Instant,
}

/// Values by key, each for `ttl`, at most `capacity` of them.
#[derive(Debug)]
pub struct TtlCache<V> {
    inner: Mutex<HashMap<String, (Cached<V>, u64)>>,
    uses: std::sync::atomic::AtomicU64,
    capacity: usize,
    ttl: Duration,
}

impl<V: Clone> TtlCache<V> {
    /// An empty cache.
    pub fn new(capacity: usize, ttl: Duration) -> TtlCache<V> {
        TtlCache {
            inner: Mutex::new(HashMap::new()),
            uses: Default::default(),
            capacity: capacity.max(1),
            ttl,
        }
    }

    fn tick(&self) -> u64 {
        self.uses.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The live entry of `key`, if any (an expired one is dropped).
    pub fn get(&self, key: &str) -> Option<Cached<V>> {
        let tick = self.tick();
        let mut m = self.inner.lock().ok()?;
        match m.get_mut(key) {
            Some((c, _)) if c.expires <= Instant::now() => {
                m.remove(key);
                None
            }
            Some((c, used)) => {
                *used = tick;
                Some(c.clone())
            }
            None => None,
        }
    }

    /// Stores `value` under `key` for the cache's time to live; returns the entry.
    pub fn put(&self, key: &str, value: V) -> Cached<V> {
        let tick = self.tick();
        let entry = Cached {
            value,
            expires: Instant::now() + self.ttl,
        };
        if let Ok(mut m) = self.inner.lock() {
            let now = Instant::now();
            m.retain(|_, (c, _)| c.expires > now);
            while m.len() >= self.capacity && !m.contains_key(key) {
                let Some(oldest) = m
                    .iter()
                    .min_by_key(|(_, (_, u))| *u)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                m.remove(&oldest);
            }
            m.insert(key.to_string(), (entry.clone(), tick));
        }
        entry
    }

    /// Whether `key` has a live entry; neither copies it nor counts as a use.
    pub fn contains(&self, key: &str) -> bool {
        self.inner
            .lock()
            .map(|m| m.get(key).is_some_and(|(c, _)| c.expires > Instant::now()))
            .unwrap_or(false)
    }

    /// Drops `key`; true when it was there.
    pub fn remove(&self, key: &str) -> bool {
        self.inner
            .lock()
            .map(|mut m| m.remove(key).is_some())
            .unwrap_or(false)
    }

    /// Entries held (expired ones included until touched).
    pub fn len(&self) -> usize {
        self.inner.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_goes_first_and_entries_expire() {
        let c = TtlCache::new(2, Duration::from_secs(60));
        c.put("a", 1);
        c.put("b", 2);
        assert_eq!(c.get("a").map(|e| e.value), Some(1));
        c.put("c", 3);
        assert!(c.get("b").is_none(), "b was the least recently used");
        assert_eq!(c.get("a").map(|e| e.value), Some(1));
        assert!(c.contains("a") && !c.contains("b"));
        assert!(c.remove("a") && !c.remove("a"));
        let short = TtlCache::new(4, Duration::from_millis(1));
        short.put("x", 1);
        std::thread::sleep(Duration::from_millis(5));
        assert!(short.get("x").is_none());
        assert_eq!(short.len(), 0);
    }
}
