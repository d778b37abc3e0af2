//! A detector's learned state as one piece of bytes: what a fleet's partition is taken over
//! from (docs/cluster.md, "Nothing acknowledged lost when a detector dies").
//!
//! A stand-alone node saves models and baselines to its own store as separate records, only
//! those that changed. A fleet's detector writes each partition it owns whole to the fleet's
//! object store, so that whichever detector owns the partition next starts from it:
//!
//! ```text
//! format     u8 = SNAPSHOT_FORMAT (2)
//! sources    u64 count, then (u64 source hash, SourceState) each
//! thresholds [Dspot; 4]            (the UEBA thresholds, in UebaType order)
//! baselines  u64 count, then (u64 entity hash, Baseline) each
//! open book  the open alerts and signals, their groups and aliases (format 2 on;
//!            `engine::carry`)
//! ```
//!
//! in bincode's standard configuration, as every stored model. Format 1 (without the open
//! book) is still read. Correlation windows and risk are not in it: replaying the records
//! after the snapshot rebuilds them, and alert ids do not depend on them.

use crate::engine::{Detector, OpenBook, SourceState};
use crate::ueba::Baseline;
use crate::wire::{after_format, read_one};
use crate::{Dspot, Error};
use bincode::Decode;
use watchpost_proto::bincode_config;

/// The format number written first in every snapshot.
pub const SNAPSHOT_FORMAT: u8 = 2;
/// The first format, without the open book: read still (a fleet upgraded detector by
/// detector takes partitions over from the older ones' snapshots).
const SNAPSHOT_FORMAT_1: u8 = 1;

const MODEL: &str = "detector snapshot";

impl Detector {
    /// Appends the whole learned state to `out` (see the module's documentation).
    pub fn snapshot_into(&self, out: &mut Vec<u8>) {
        out.push(SNAPSHOT_FORMAT);
        let config = bincode_config();
        // Encoding into a Vec cannot fail for lack of space, and every field is encodable.
        let _ = bincode::encode_into_std_write(self.sources().count() as u64, &mut *out, config);
        for (h, s) in self.sources() {
            let _ = bincode::encode_into_std_write(h, &mut *out, config);
            let _ = bincode::encode_into_std_write(s, &mut *out, config);
        }
        let _ = bincode::encode_into_std_write(self.ueba().thresholds(), out, config);
        let _ = bincode::encode_into_std_write(self.ueba().len() as u64, out, config);
        self.ueba().for_each(|h, b| {
            let _ = bincode::encode_into_std_write(h, &mut *out, config);
            let _ = bincode::encode_into_std_write(b, &mut *out, config);
        });
        let _ = bincode::encode_into_std_write(self.open_book(), out, config);
    }

    /// Puts back the state `bytes` (made by [`Detector::snapshot_into`]) holds, on top of
    /// what this detector has (a new one, normally). Says how much it read.
    pub fn restore_snapshot(&mut self, bytes: &[u8]) -> Result<Restored, Error> {
        let format = bytes.first().copied();
        let mut rest = if format == Some(SNAPSHOT_FORMAT_1) {
            after_format(bytes, MODEL, SNAPSHOT_FORMAT_1)?
        } else {
            after_format(bytes, MODEL, SNAPSHOT_FORMAT)?
        };
        let sources: u64 = read(&mut rest, "sources")?;
        for _ in 0..sources {
            let h: u64 = read(&mut rest, "source")?;
            let s: SourceState = read(&mut rest, "source")?;
            self.restore_source(h, s);
        }
        let thresholds: [Dspot; 4] = read(&mut rest, "thresholds")?;
        self.ueba_mut().restore_thresholds(thresholds);
        let baselines: u64 = read(&mut rest, "baselines")?;
        for _ in 0..baselines {
            let h: u64 = read(&mut rest, "baseline")?;
            let b: Baseline = read(&mut rest, "baseline")?;
            self.ueba_mut().restore(h, b);
        }
        let mut open_alerts = 0;
        if format == Some(SNAPSHOT_FORMAT) {
            let book: OpenBook = read(&mut rest, "open book")?;
            open_alerts = book.len();
            self.restore_open_book(book).map_err(inconsistent)?;
        }
        if !rest.is_empty() {
            return Err(inconsistent(format!(
                "{} bytes after the last part",
                rest.len()
            )));
        }
        Ok(Restored {
            baselines: baselines as usize,
            open_alerts,
        })
    }
}

/// What [`Detector::restore_snapshot`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restored {
    /// Entity baselines.
    pub baselines: usize,
    /// Open alerts and signals (none from a format 1 snapshot).
    pub open_alerts: usize,
}

/// Reads one `T` of the snapshot off the front of `rest`.
fn read<T: Decode<()>>(rest: &mut &[u8], what: &str) -> Result<T, Error> {
    read_one(rest, MODEL, what)
}

fn inconsistent(detail: String) -> Error {
    Error::Inconsistent {
        model: MODEL,
        detail,
    }
}
