//! A detector's learned state as one piece of bytes: what a fleet's partition is taken over
//! from (docs/cluster.md, "Nothing acknowledged lost when a detector dies").
//!
//! A stand-alone node saves models and baselines to its own store as separate records, only
//! those that changed. A fleet's detector writes each partition it owns whole to the fleet's
//! object store, so that whichever detector owns the partition next starts from it:
//!
//! ```text
//! format     u8 = SNAPSHOT_FORMAT (1)
//! sources    u64 count, then (u64 source hash, SourceState) each
//! thresholds [Dspot; 4]            (the UEBA thresholds, in UebaType order)
//! baselines  u64 count, then (u64 entity hash, Baseline) each
//! ```
//!
//! in bincode's standard configuration, as every stored model. What is not learned (open
//! alerts and their cooldowns, correlation windows, risk) is not in it: replaying the records
//! after the snapshot rebuilds what matters of it, and alert ids do not depend on it.

use crate::engine::{Detector, SourceState};
use crate::ueba::Baseline;
use crate::wire::{after_format, read_one};
use crate::{Dspot, Error};
use bincode::Decode;
use watchpost_proto::bincode_config;

/// The format number written first in every snapshot.
pub const SNAPSHOT_FORMAT: u8 = 1;

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
    }

    /// Puts back the state `bytes` (made by [`Detector::snapshot_into`]) holds, on top of
    /// what this detector has (a new one, normally). Returns how many baselines it read.
    pub fn restore_snapshot(&mut self, bytes: &[u8]) -> Result<usize, Error> {
        let mut rest = after_format(bytes, MODEL, SNAPSHOT_FORMAT)?;
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
        if !rest.is_empty() {
            return Err(inconsistent(format!(
                "{} bytes after the last baseline",
                rest.len()
            )));
        }
        Ok(baselines as usize)
    }
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
