//! The detection crate's one error type.
//!
//! Detection itself cannot fail: every score is defined for every event. What can fail is reading
//! a saved model back (the baselines and forests the writer keeps in RocksDB): one written by
//! another layout, or damaged, must be refused with a reason rather than indexed out of bounds.
//! Decoding goes through bincode, so the error leaves this crate as a `DecodeError` carrying
//! this text, and the store reports it as a decode failure of that record.

use bincode::error::DecodeError;

/// Why a saved model cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Saved by a build with another layout of this model.
    #[error("{model}: saved in another layout ({found:#x}, this one is {expected:#x})")]
    Layout {
        /// Which model.
        model: &'static str,
        /// The layout byte read.
        found: u8,
        /// This build's layout byte.
        expected: u8,
    },
    /// Decoded, but its parts contradict each other or its settings.
    #[error("{model}: {detail}")]
    Inconsistent {
        /// Which model.
        model: &'static str,
        /// What does not fit, in words.
        detail: String,
    },
}

impl From<Error> for DecodeError {
    fn from(error: Error) -> DecodeError {
        DecodeError::OtherString(error.to_string())
    }
}
