//! The exception book: the operators' exceptions, persisted in the store and compiled for the
//! stage B workers.
//!
//! Like the Sigma catalogue, a change compiles a new [`ExceptionSet`] and bumps
//! [`ExceptionBook::version`]; a stage B worker checks the version once per batch (one relaxed
//! atomic load) and takes the new set. Hit counters live outside the compiled sets, one per
//! exception for its whole life, so a recompile loses no count; they are written back to the
//! store with the models (`detection.model_save_interval_seconds`) and at shutdown.

use crate::error::Error;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use watchpost_detect::{ExceptionHits, ExceptionSet};
use watchpost_proto::{Exception, ExceptionDraft, ExceptionPatch, ExceptionProblem, Uuid};
use watchpost_store::{Store, StoreError};

/// Most exceptions kept: each is checked wherever an alert would be raised for its detector, so
/// the bound keeps that check short; far above what a team maintains by hand.
pub const MAX_EXCEPTIONS: usize = 10_000;

/// Why an exception change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExceptionError {
    /// The body breaks a rule (a 422 naming the field).
    #[error("{0}")]
    Invalid(#[from] ExceptionProblem),
    /// [`MAX_EXCEPTIONS`] are kept already.
    #[error("{MAX_EXCEPTIONS} exceptions are kept already; delete one first")]
    Full,
    /// The store failed (a 500).
    #[error("{0}")]
    Store(#[from] StoreError),
}

struct State {
    list: Vec<Exception>,
    set: Arc<ExceptionSet>,
}

/// The exceptions and their compiled set.
pub struct ExceptionBook {
    store: Option<Arc<Store>>,
    state: RwLock<State>,
    version: AtomicU64,
    hits: RwLock<HashMap<Uuid, Arc<ExceptionHits>>>,
    /// Each exception's hits as last written, so a save writes only what changed.
    saved_hits: RwLock<HashMap<Uuid, u64>>,
    next_id: AtomicU64,
    /// Hits of deleted exceptions since start, so that the total never goes down (it is a
    /// Prometheus counter).
    retired_hits: AtomicU64,
}

impl ExceptionBook {
    /// The book of the exceptions saved in `store` (none without one: `watchpost analyze`).
    pub fn load(store: Option<Arc<Store>>) -> Result<ExceptionBook, Error> {
        let list = match &store {
            Some(s) => s.exceptions()?,
            None => Vec::new(),
        };
        let book = ExceptionBook::empty(store);
        *book.saved_hits.write().unwrap_or_else(|p| p.into_inner()) =
            list.iter().map(|e| (e.id, e.hits)).collect();
        // Every exception's counter, disabled ones too: their saved hits stay in the totals.
        for e in &list {
            book.hits_of(e);
        }
        book.install(list);
        Ok(book)
    }

    /// The book of `list`, kept in memory only (`watchpost analyze --exceptions`).
    pub fn in_memory(list: Vec<Exception>) -> ExceptionBook {
        let book = ExceptionBook::empty(None);
        book.install(list);
        book
    }

    fn empty(store: Option<Arc<Store>>) -> ExceptionBook {
        ExceptionBook {
            store,
            state: RwLock::new(State {
                list: Vec::new(),
                set: Arc::new(ExceptionSet::default()),
            }),
            version: AtomicU64::new(1),
            hits: RwLock::new(HashMap::new()),
            saved_hits: RwLock::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            retired_hits: AtomicU64::new(0),
        }
    }

    /// The version of the compiled set; it changes with every change of the book.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The version with its compiled set.
    pub fn current(&self) -> (u64, Arc<ExceptionSet>) {
        let s = self.state.read().unwrap_or_else(|p| p.into_inner());
        (self.version(), Arc::clone(&s.set))
    }

    /// Every exception with its hits so far, oldest first.
    pub fn list(&self) -> Vec<Exception> {
        let list = self
            .state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .list
            .clone();
        list.into_iter().map(|e| self.with_hits(e)).collect()
    }

    /// One exception with its hits.
    pub fn get(&self, id: Uuid) -> Option<Exception> {
        let s = self.state.read().unwrap_or_else(|p| p.into_inner());
        let e = s.list.iter().find(|e| e.id == id).cloned();
        drop(s);
        e.map(|e| self.with_hits(e))
    }

    /// Total hits of every exception, deleted ones included: the events suppressed by
    /// exceptions (in `/stats` and `/metrics`).
    pub fn total_hits(&self) -> u64 {
        let hits = self.hits.read().unwrap_or_else(|p| p.into_inner());
        hits.values().map(|h| h.count()).sum::<u64>() + self.retired_hits.load(Ordering::Relaxed)
    }

    /// Adds an exception from `draft`, saved before it applies.
    pub fn create(&self, draft: ExceptionDraft, now_ns: i64) -> Result<Exception, ExceptionError> {
        let e = Exception::create(draft, self.new_id(now_ns), now_ns)?;
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        if s.list.len() >= MAX_EXCEPTIONS {
            return Err(ExceptionError::Full);
        }
        if let Some(store) = &self.store {
            store.put_exception(&e)?;
        }
        let mut list = s.list.clone();
        list.push(e.clone());
        self.compile_into(&mut s, list);
        Ok(e)
    }

    /// Changes an exception; `None` when there is none with `id`.
    pub fn update(
        &self,
        id: Uuid,
        patch: ExceptionPatch,
        now_ns: i64,
    ) -> Result<Option<Exception>, ExceptionError> {
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        let Some(at) = s.list.iter().position(|e| e.id == id) else {
            return Ok(None);
        };
        let changed = self.with_hits(s.list[at].clone()).patched(patch, now_ns)?;
        if let Some(store) = &self.store {
            store.put_exception(&changed)?;
        }
        let mut list = s.list.clone();
        list[at] = changed.clone();
        self.compile_into(&mut s, list);
        Ok(Some(changed))
    }

    /// Sets an exception as another node made it (a fleet's console, docs/cluster.md): added,
    /// or replacing the one with its id, with the hits counted here kept. False when this
    /// node already held exactly that exception.
    pub fn put(&self, e: Exception) -> Result<bool, ExceptionError> {
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        let at = s.list.iter().position(|x| x.id == e.id);
        let same = |x: &Exception| Exception {
            hits: 0,
            last_hit_ns: None,
            ..x.clone()
        };
        if at.is_some_and(|i| same(&s.list[i]) == same(&e)) {
            return Ok(false);
        }
        if at.is_none() && s.list.len() >= MAX_EXCEPTIONS {
            return Err(ExceptionError::Full);
        }
        let e = match at {
            Some(i) => Exception {
                hits: s.list[i].hits,
                last_hit_ns: s.list[i].last_hit_ns,
                ..e
            },
            None => Exception {
                hits: 0,
                last_hit_ns: None,
                ..e
            },
        };
        let e = self.with_hits(e);
        if let Some(store) = &self.store {
            store.put_exception(&e)?;
        }
        let mut list = s.list.clone();
        match at {
            Some(i) => list[i] = e,
            None => list.push(e),
        }
        self.compile_into(&mut s, list);
        Ok(true)
    }

    /// Removes an exception; false when there is none with `id`.
    pub fn delete(&self, id: Uuid) -> Result<bool, ExceptionError> {
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        if !s.list.iter().any(|e| e.id == id) {
            return Ok(false);
        }
        if let Some(store) = &self.store {
            store.delete_exception(id)?;
        }
        let list: Vec<Exception> = s.list.iter().filter(|e| e.id != id).cloned().collect();
        self.compile_into(&mut s, list);
        if let Some(h) = self
            .hits
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
        {
            self.retired_hits.fetch_add(h.count(), Ordering::Relaxed);
        }
        Ok(true)
    }

    /// Writes the hits that changed since the last save to the store.
    pub fn save_hits(&self) -> Result<usize, StoreError> {
        let Some(store) = &self.store else {
            return Ok(0);
        };
        let list = self.list();
        let mut saved = self.saved_hits.write().unwrap_or_else(|p| p.into_inner());
        let mut written = 0;
        for e in list {
            if saved.get(&e.id) != Some(&e.hits) {
                // Still in the book (a delete in between would otherwise bring it back).
                let s = self.state.read().unwrap_or_else(|p| p.into_inner());
                if s.list.iter().any(|x| x.id == e.id) {
                    store.put_exception(&e)?;
                    written += 1;
                }
                saved.insert(e.id, e.hits);
            }
        }
        Ok(written)
    }

    fn with_hits(&self, mut e: Exception) -> Exception {
        if let Some(h) = self
            .hits
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&e.id)
        {
            e.hits = h.count();
            e.last_hit_ns = h.last_ns();
        }
        e
    }

    fn hits_of(&self, e: &Exception) -> Arc<ExceptionHits> {
        let mut hits = self.hits.write().unwrap_or_else(|p| p.into_inner());
        Arc::clone(
            hits.entry(e.id)
                .or_insert_with(|| Arc::new(ExceptionHits::new(e.hits, e.last_hit_ns))),
        )
    }

    fn install(&self, list: Vec<Exception>) {
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        self.compile_into(&mut s, list);
    }

    /// Compiles `list` and publishes it under a new version (while holding the state's lock, so
    /// a version always names the set that was installed with it).
    fn compile_into(&self, s: &mut State, list: Vec<Exception>) {
        s.set = Arc::new(ExceptionSet::compile(&list, |e| self.hits_of(e)));
        s.list = list;
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// A time-ordered id (UUIDv7 layout): the creation millisecond, then bits that differ per
    /// process and per call.
    fn new_id(&self, now_ns: i64) -> Uuid {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let salt = watchpost_proto::fmix64(
            (now_ns as u64) ^ u64::from(std::process::id()).rotate_left(32) ^ n,
        );
        let ms = (now_ns.max(0) / 1_000_000) as u64;
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
        b[6..14].copy_from_slice(&salt.to_be_bytes());
        b[14..].copy_from_slice(&(n as u16).to_be_bytes());
        b[6] = 0x70 | (b[6] & 0x0f);
        b[8] = 0x80 | (b[8] & 0x3f);
        Uuid::from_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(json: serde_json::Value) -> ExceptionDraft {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn changes_survive_a_reopen_and_bump_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = watchpost_proto::Config::default();
        let open = || Arc::new(Store::open(dir.path(), &cfg.storage).unwrap());
        let book = ExceptionBook::load(Some(open())).unwrap();
        let v0 = book.version();
        let e = book
            .create(
                draft(serde_json::json!({"detector": "ioc:*", "reason": "feed noise", "author": "ana"})),
                1_000_000_000,
            )
            .unwrap();
        assert_eq!(e.id.get_version_num(), 7);
        assert!(book.version() > v0);
        assert_eq!(book.current().1.len(), 1);
        let patch: ExceptionPatch =
            serde_json::from_value(serde_json::json!({"enabled": false})).unwrap();
        let off = book.update(e.id, patch, 2_000_000_000).unwrap().unwrap();
        assert!(!off.enabled && book.current().1.is_empty());
        drop(book);
        let book = ExceptionBook::load(Some(open())).unwrap();
        assert_eq!(book.list(), vec![off.clone()]);
        assert!(book.delete(e.id).unwrap());
        assert!(!book.delete(e.id).unwrap());
        drop(book);
        assert!(ExceptionBook::load(Some(open())).unwrap().list().is_empty());
    }

    #[test]
    fn a_refused_draft_changes_nothing() {
        let book = ExceptionBook::in_memory(Vec::new());
        let v = book.version();
        let err = book
            .create(draft(serde_json::json!({"reason": "r", "author": "a"})), 1)
            .unwrap_err();
        assert!(
            matches!(err, ExceptionError::Invalid(ref p) if p.field == "detector"),
            "{err}"
        );
        assert_eq!(book.version(), v);
        assert!(book.list().is_empty());
    }
}
