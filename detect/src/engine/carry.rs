//! The open-alert book carried across a fleet's takeover, in a partition's snapshot
//! (`crate::snapshot`).
//!
//! A partition's next owner replays the records after its snapshot. Without the alerts that
//! were open at the snapshot, an attack whose records straddle that position is seen from its
//! next record on and raises a second alert (another triggering event, so another id, which
//! the alert stream does not drop). With them, the next record folds into the alert the old
//! owner raised, under its id, with the count the old owner gave its later states (so their
//! message ids, id and count, are the ones the stream has seen, and repeats are dropped).
//!
//! Alerts travel as their JSON (the API's shape: `Alert` skips empty fields, which bincode's
//! serde mode cannot read back); the tables beside them as plain numbers. Correlation windows
//! and risk are not carried: they are rebuilt by the records the new owner replays.

use super::Detector;
use super::book::{GroupWindow, OpenAlert};
use bincode::{Decode, Encode};

/// One open alert or signal.
#[derive(Encode, Decode)]
struct CarriedAlert {
    key: u64,
    json: Vec<u8>,
    until_ns: i64,
    dirty: bool,
    group_title: Option<String>,
}

/// What a snapshot carries of the book.
#[derive(Encode, Decode, Default)]
pub(crate) struct OpenBook {
    open: Vec<CarriedAlert>,
    signals: Vec<CarriedAlert>,
    /// (rule and source key, alerted, until)
    groups: Vec<(u64, u32, i64)>,
    members: Vec<(u64, Vec<u64>)>,
    alias: Vec<(u64, u64)>,
    actors: Vec<(u128, u64)>,
    now_ns: i64,
}

impl OpenBook {
    /// Open alerts and signals carried.
    pub(crate) fn len(&self) -> usize {
        self.open.len() + self.signals.len()
    }
}

/// `None` only if the alert cannot be written as JSON, which its shape rules out (string keys,
/// plain values): the API writes every alert the same way.
fn carried(key: u64, o: &OpenAlert) -> Option<CarriedAlert> {
    Some(CarriedAlert {
        key,
        json: serde_json::to_vec(&o.alert).ok()?,
        until_ns: o.until_ns,
        dirty: o.dirty,
        group_title: o.group_title.clone(),
    })
}

fn reopened(c: CarriedAlert) -> Result<(u64, OpenAlert), String> {
    let alert = serde_json::from_slice(&c.json).map_err(|e| format!("open alert: {e}"))?;
    Ok((
        c.key,
        OpenAlert {
            alert,
            until_ns: c.until_ns,
            dirty: c.dirty,
            group_title: c.group_title,
        },
    ))
}

impl Detector {
    /// The open alerts and signals, their groups, members and aliases, and the clock.
    pub(crate) fn open_book(&self) -> OpenBook {
        OpenBook {
            open: self
                .open
                .iter()
                .filter_map(|(&k, o)| carried(k, o))
                .collect(),
            signals: self
                .signals
                .iter()
                .filter_map(|(&k, o)| carried(k, o))
                .collect(),
            groups: self
                .groups
                .iter()
                .map(|(&k, g)| (k, g.alerted, g.until_ns))
                .collect(),
            members: self
                .members
                .iter()
                .map(|(&k, m)| (k, m.iter().copied().collect()))
                .collect(),
            alias: self.alias.iter().map(|(&k, &v)| (k, v)).collect(),
            actors: self.actors.iter().map(|(&k, &v)| (k, v)).collect(),
            now_ns: self.now_ns,
        }
    }

    /// Puts back a carried book (on a new detector, before its first record).
    pub(crate) fn restore_open_book(&mut self, book: OpenBook) -> Result<(), String> {
        for c in book.open {
            let (k, o) = reopened(c)?;
            self.open.insert(k, o);
        }
        for c in book.signals {
            let (k, o) = reopened(c)?;
            self.signals.insert(k, o);
        }
        for (k, alerted, until_ns) in book.groups {
            self.groups.insert(k, GroupWindow { alerted, until_ns });
        }
        for (k, members) in book.members {
            self.members.insert(k, members.into_iter().collect());
        }
        self.alias.extend(book.alias);
        self.actors.extend(book.actors);
        self.now_ns = self.now_ns.max(book.now_ns);
        Ok(())
    }
}
