//! The control plane's side of HTTP ingest: the handle a request hands its body to, and what it
//! gets back. The ingest thread ([`super::http`]) owns the other end of the queue.

use super::body::CheckedBody;
use crate::Error;
use crossbeam_channel::{Sender, TrySendError, bounded};
use std::sync::Arc;
use watchpost_store::StoreError;

/// What the ingest thread answers for one body (and `POST /ingest` with 202).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "IngestResult")]
pub struct IngestReceipt {
    /// Events accepted: in the store's write-ahead log, so each one will be stored (malformed
    /// ones as free text) even if the service is killed now.
    pub accepted: u64,
    /// Of those, cut at `dataplane.max_line_bytes`.
    pub truncated: u64,
}

/// The ingest thread's answer to one body: its receipt, or why the store did not take it (one
/// failed write answers every request of its group, so the cause is shared).
pub(super) type Answer = Result<IngestReceipt, Arc<StoreError>>;

/// One body and where its answer goes.
pub(super) struct Job {
    pub(super) body: CheckedBody,
    pub(super) reply: Sender<Answer>,
}

/// The handle the control plane submits bodies through.
#[derive(Clone)]
pub struct HttpIngest {
    pub(super) jobs: Sender<Job>,
}

impl HttpIngest {
    /// Submits a body (a JSON array of objects, or one JSON object per line) and waits until its
    /// events are durable: in the store's write-ahead log, on their way to the workers.
    /// Blocking: call it from a blocking task.
    pub fn submit(&self, body: Vec<u8>) -> Result<IngestReceipt, Error> {
        self.submit_checked(CheckedBody::new(body).map_err(Error::InvalidBody)?)
    }

    /// [`HttpIngest::submit`] for a body already counted and checked.
    pub fn submit_checked(&self, body: CheckedBody) -> Result<IngestReceipt, Error> {
        let (reply, answer) = bounded(1);
        match self.jobs.try_send(Job { body, reply }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(Error::IngestBusy),
            Err(TrySendError::Disconnected(_)) => return Err(Error::Stopped),
        }
        answer
            .recv()
            .map_err(|_| Error::Stopped)?
            .map_err(Error::NotDurable)
    }
}
