//! The notification outbox: alerts waiting to be sent on the notification channels, kept in
//! RocksDB so that an alert raised is sent even if the process stops or a receiver is down
//! (docs/notifications.md).
//!
//! Two steps, each one write batch:
//!
//! 1. Stage B writes a new alert and its `n` entry together ([`Store::put_new_alert`]): an
//!    alert is never stored without being queued, whatever stops the process after.
//! 2. The notifier hands each `n` entry to the channels whose filters take it: it deletes the
//!    entry and writes one `c` entry per channel in the same batch ([`Store::outbox_fan_out`]).
//!    A channel's entry is deleted only once its receiver has acknowledged the message
//!    ([`Store::outbox_done`]), so delivery is at least once.
//!
//! | key                                  | value |
//! |--------------------------------------|-------|
//! | `n` + alert key (16)                 | empty |
//! | `c` + channel id (8, BE) + alert key | empty |
//!
//! Alert keys are UUIDv7, so a channel's entries come in the order the alerts were raised.

use crate::{Store, StoreError};
use rocksdb::WriteBatch;
use std::sync::atomic::Ordering;
use watchpost_proto::{Alert, Uuid};

pub(crate) const CF_OUTBOX: &str = "outbox";

const NEW: u8 = b'n';

/// Deletions after which the outbox is compacted. A queue deletes every entry it writes, and
/// RocksDB keeps a tombstone per deletion until a compaction drops it: every scan from the
/// start of a queue steps over them, so a busy outbox left alone gets slower to read.
const COMPACT_EVERY: u64 = 50_000;
const CHANNEL: u8 = b'c';

fn new_key(alert: &[u8; 16]) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = NEW;
    k[1..].copy_from_slice(alert);
    k
}

fn channel_prefix(channel: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = CHANNEL;
    k[1..].copy_from_slice(&channel.to_be_bytes());
    k
}

fn channel_key(channel: u64, alert: &[u8; 16]) -> [u8; 25] {
    let mut k = [0u8; 25];
    k[..9].copy_from_slice(&channel_prefix(channel));
    k[9..].copy_from_slice(alert);
    k
}

/// The alert id of a 16-byte alert key.
pub fn alert_id(key: &[u8; 16]) -> String {
    Uuid::from_bytes(*key).to_string()
}

impl Store {
    /// Turns queueing of new alerts on or off: on while any notification channel is
    /// configured, so that a service with none keeps no outbox.
    pub fn set_outbox(&self, on: bool) {
        self.outbox_on.store(on, Ordering::Relaxed);
    }

    /// Whether new alerts are queued.
    pub fn outbox_on(&self) -> bool {
        self.outbox_on.load(Ordering::Relaxed)
    }

    /// Writes a new alert, its entity index entries and, while the outbox is on, its outbox
    /// entry, in one batch.
    pub fn put_new_alert(&self, alert: &Alert) -> Result<(), StoreError> {
        let queue = self.outbox_on();
        self.put_record_with(crate::detection::ALERTS, alert, |wb, key| {
            if queue {
                wb.put_cf(self.cf(CF_OUTBOX), new_key(key), []);
            }
        })
    }

    /// Up to `limit` new alerts not yet handed to the channels, oldest first.
    pub fn outbox_new(&self, limit: usize) -> Result<Vec<[u8; 16]>, StoreError> {
        self.outbox_scan(&[NEW], limit)
    }

    /// Hands new alert `alert` to `channels` (their ids): one entry per channel, the new entry
    /// deleted, in one batch. An empty `channels` only deletes it (no channel takes it).
    pub fn outbox_fan_out(&self, alert: &[u8; 16], channels: &[u64]) -> Result<(), StoreError> {
        self.check_write_fault()?;
        let mut wb = WriteBatch::default();
        let cf = self.cf(CF_OUTBOX);
        wb.delete_cf(cf, new_key(alert));
        for &c in channels {
            wb.put_cf(cf, channel_key(c, alert), []);
        }
        self.db().write_opt(wb, &self.write_options())?;
        self.outbox_deleted(1);
        Ok(())
    }

    /// Up to `limit` alerts waiting for `channel`, oldest first.
    pub fn outbox_pending(&self, channel: u64, limit: usize) -> Result<Vec<[u8; 16]>, StoreError> {
        self.outbox_scan(&channel_prefix(channel), limit)
    }

    /// Removes delivered (or discarded) alerts from `channel`'s queue.
    pub fn outbox_done(&self, channel: u64, alerts: &[[u8; 16]]) -> Result<(), StoreError> {
        self.check_write_fault()?;
        let mut wb = WriteBatch::default();
        let cf = self.cf(CF_OUTBOX);
        for a in alerts {
            wb.delete_cf(cf, channel_key(channel, a));
        }
        self.db().write_opt(wb, &self.write_options())?;
        self.outbox_deleted(alerts.len() as u64);
        Ok(())
    }

    /// Each channel id with entries, and how many it has: read at start, so that a channel's
    /// count survives a restart and the queues of channels no longer configured are found.
    pub fn outbox_channels(&self) -> Result<Vec<(u64, u64)>, StoreError> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut it = self.db().raw_iterator_cf(self.cf(CF_OUTBOX));
        it.seek([CHANNEL]);
        while let Some(key) = it.key() {
            if key.first() != Some(&CHANNEL) {
                break;
            }
            let Some(id) = key
                .get(1..9)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
            else {
                break;
            };
            match out.last_mut() {
                Some((last, n)) if *last == id => *n += 1,
                _ => out.push((id, 1)),
            }
            it.next();
        }
        self.counted(it.status().map_err(StoreError::from))?;
        Ok(out)
    }

    /// Deletes every entry of `channel` (a channel removed from the configuration).
    pub fn outbox_purge(&self, channel: u64) -> Result<(), StoreError> {
        self.check_write_fault()?;
        let mut wb = WriteBatch::default();
        let lo = channel_prefix(channel).to_vec();
        let hi = match channel.checked_add(1) {
            Some(next) => channel_prefix(next).to_vec(),
            None => vec![CHANNEL + 1],
        };
        wb.delete_range_cf(self.cf(CF_OUTBOX), lo, hi);
        self.db().write_opt(wb, &self.write_options())?;
        Ok(())
    }

    /// Counts deletions and compacts the outbox every [`COMPACT_EVERY`] of them (a small
    /// family: milliseconds).
    fn outbox_deleted(&self, n: u64) {
        let before = self.outbox_deletes.fetch_add(n, Ordering::Relaxed);
        if (before + n) / COMPACT_EVERY > before / COMPACT_EVERY {
            self.db()
                .compact_range_cf(self.cf(CF_OUTBOX), None::<&[u8]>, None::<&[u8]>);
        }
    }

    fn outbox_scan(&self, prefix: &[u8], limit: usize) -> Result<Vec<[u8; 16]>, StoreError> {
        let mut out = Vec::new();
        let mut it = self.db().raw_iterator_cf(self.cf(CF_OUTBOX));
        it.seek(prefix);
        while out.len() < limit
            && let Some(key) = it.key()
        {
            if !key.starts_with(prefix) {
                break;
            }
            match key[prefix.len()..].try_into() {
                Ok(alert) => out.push(alert),
                Err(_) => {
                    return self.counted(Err(StoreError::Decode {
                        what: "outbox key",
                        reason: format!(
                            "{} bytes after its prefix, not 16",
                            key.len() - prefix.len()
                        ),
                    }));
                }
            }
            it.next();
        }
        self.counted(it.status().map_err(StoreError::from))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(id: &str) -> Alert {
        serde_json::from_value(serde_json::json!({
            "id": id, "type": "sigma", "severity": 4, "title": "t", "detector": "d",
            "dedup_key": "k", "first_seen_ns": 0, "last_seen_ns": 0, "count": 1, "source": "s",
            "entity": null, "score": 0.0, "threshold": 0.0, "contributions": {}, "attack": [],
            "contributing_events": [], "related_entities": []
        }))
        .unwrap()
    }

    const A: &str = "0190f5a1-0000-7000-8000-000000000001";
    const B: &str = "0190f5a1-0000-7000-8000-000000000002";

    #[test]
    fn a_new_alert_is_queued_with_its_record_only_while_the_outbox_is_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Default::default()).unwrap();
        store.put_new_alert(&alert(A)).unwrap();
        assert!(store.outbox_new(10).unwrap().is_empty());
        store.set_outbox(true);
        store.put_new_alert(&alert(B)).unwrap();
        let queued = store.outbox_new(10).unwrap();
        assert_eq!(queued.len(), 1);
        assert_eq!(alert_id(&queued[0]), B);
        assert!(store.alert(B).unwrap().is_some());
    }

    #[test]
    fn fan_out_moves_an_alert_to_each_channel_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path(), &Default::default()).unwrap();
            store.set_outbox(true);
            store.put_new_alert(&alert(A)).unwrap();
            store.put_new_alert(&alert(B)).unwrap();
            for key in store.outbox_new(10).unwrap() {
                store.outbox_fan_out(&key, &[7, u64::MAX]).unwrap();
            }
            assert!(store.outbox_new(10).unwrap().is_empty());
            let first = store.outbox_pending(7, 1).unwrap();
            store.outbox_done(7, &first).unwrap();
        }
        let store = Store::open(dir.path(), &Default::default()).unwrap();
        let left: Vec<String> = store
            .outbox_pending(7, 10)
            .unwrap()
            .iter()
            .map(alert_id)
            .collect();
        assert_eq!(left, [B]);
        assert_eq!(store.outbox_channels().unwrap(), [(7, 1), (u64::MAX, 2)]);
        store.outbox_purge(u64::MAX).unwrap();
        store.outbox_purge(7).unwrap();
        assert!(store.outbox_channels().unwrap().is_empty());
    }
}
