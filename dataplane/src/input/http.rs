//! HTTP ingest: bodies posted to `POST /api/v1/ingest`, framed into batches by one thread.
//!
//! Request handlers run on the control plane's runtime, many at once; a single ingest thread owns
//! this input's rings so they stay single-producer. Handlers hand it a body over a bounded queue
//! and wait for the count of accepted events; a full queue answers "busy" at once so the API stays
//! responsive under overload (the client retries) instead of queueing without bound.

use super::outlet::Outlet;
use crate::Error;
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_proto::now_ns;

/// What the ingest thread answers for one body (and `POST /ingest` with 202).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "IngestResult")]
pub struct IngestReceipt {
    /// Events accepted (each one will be stored; malformed ones as free text).
    pub accepted: u64,
    /// Of those, cut at `dataplane.max_line_bytes`.
    pub truncated: u64,
}

struct Job {
    body: Vec<u8>,
    reply: Sender<IngestReceipt>,
}

/// The handle the control plane submits bodies through.
#[derive(Clone)]
pub struct HttpIngest {
    jobs: Sender<Job>,
}

impl HttpIngest {
    /// Submits a body (a JSON array of objects, or one JSON object per line) and waits until its
    /// events are in the pipeline. Blocking: call it from a blocking task.
    pub fn submit(&self, body: Vec<u8>) -> Result<IngestReceipt, Error> {
        if first_non_space(&body) == Some(b'[') {
            split_array(&body).map_err(Error::InvalidBody)?;
        }
        let (reply, answer) = bounded(1);
        match self.jobs.try_send(Job { body, reply }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(Error::IngestBusy),
            Err(TrySendError::Disconnected(_)) => return Err(Error::Stopped),
        }
        answer.recv().map_err(|_| Error::Stopped)
    }
}

/// Starts the ingest thread.
pub fn spawn(
    mut outlet: Outlet,
    max_line: usize,
    linger_ms: u64,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(HttpIngest, JoinHandle<()>)> {
    let (tx, rx): (Sender<Job>, Receiver<Job>) = bounded(64);
    let handle = std::thread::Builder::new()
        .name("wp-in-http".into())
        .spawn(move || {
            let mut next = 0usize;
            let workers = outlet.workers().max(1);
            loop {
                match rx.recv_timeout(Duration::from_millis(linger_ms.max(1))) {
                    Ok(job) => {
                        let now = now_ns();
                        next = (next + 1) % workers;
                        let mut receipt = IngestReceipt {
                            accepted: 0,
                            truncated: 0,
                        };
                        let mut push = |line: &[u8]| {
                            let line = trim(line);
                            if line.is_empty() {
                                return;
                            }
                            let truncated = line.len() > max_line;
                            outlet.push_line(
                                next,
                                &line[..line.len().min(max_line)],
                                now,
                                truncated,
                            );
                            receipt.accepted += 1;
                            receipt.truncated += u64::from(truncated);
                        };
                        if first_non_space(&job.body) == Some(b'[') {
                            if let Ok(items) = split_array(&job.body) {
                                for r in items {
                                    push(&job.body[r]);
                                }
                            }
                        } else {
                            for line in job.body.split(|&b| b == b'\n') {
                                push(line);
                            }
                        }
                        outlet.flush_all();
                        let _ = job.reply.send(receipt);
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                }
            }
            outlet.flush_all();
        })?;
    Ok((HttpIngest { jobs: tx }, handle))
}

fn first_non_space(b: &[u8]) -> Option<u8> {
    b.iter().copied().find(|c| !c.is_ascii_whitespace())
}

fn trim(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b
        && first.is_ascii_whitespace()
    {
        b = rest;
    }
    while let [rest @ .., last] = b
        && last.is_ascii_whitespace()
    {
        b = rest;
    }
    b
}

/// Splits a JSON array into the byte ranges of its elements (each must be an object), checking
/// brackets and strings but leaving full validation of each element to the worker.
pub fn split_array(body: &[u8]) -> Result<Vec<std::ops::Range<usize>>, String> {
    let mut out = Vec::new();
    let mut i = body
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .ok_or("empty body")?;
    if body[i] != b'[' {
        return Err("expected a JSON array".into());
    }
    i += 1;
    let mut depth = 0usize;
    let mut in_str = false;
    let mut esc = false;
    let mut start: Option<usize> = None;
    let mut closed = false;
    while i < body.len() {
        let c = body[i];
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' | b'[' => {
                    if depth == 0 {
                        if c != b'{' {
                            return Err(format!("array element at byte {i} is not an object"));
                        }
                        start = Some(i);
                    }
                    depth += 1;
                }
                b'}' | b']' => {
                    if depth == 0 {
                        if c == b']' {
                            closed = true;
                            i += 1;
                            break;
                        }
                        return Err(format!("unbalanced `}}` at byte {i}"));
                    }
                    depth -= 1;
                    if depth == 0
                        && let Some(s) = start.take()
                    {
                        out.push(s..i + 1);
                    }
                }
                b',' if depth == 0 => {}
                c if depth == 0 && !c.is_ascii_whitespace() => {
                    return Err(format!("array element at byte {i} is not an object"));
                }
                _ => {}
            }
        }
        i += 1;
    }
    if !closed {
        return Err("unterminated JSON array".into());
    }
    if body[i..].iter().any(|c| !c.is_ascii_whitespace()) {
        return Err(format!("unexpected data after the array at byte {i}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_split_into_objects() {
        let b = br#" [ {"a":"x]}"}, {"b":{"c":[1,2]}} ] "#;
        let r = split_array(b).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(&b[r[0].clone()], br#"{"a":"x]}"}"#);
        assert_eq!(&b[r[1].clone()], br#"{"b":{"c":[1,2]}}"#);
        assert_eq!(split_array(b"[]").unwrap().len(), 0);
    }

    #[test]
    fn bad_arrays_are_refused_with_a_reason() {
        assert!(split_array(b"[1,2]").unwrap_err().contains("not an object"));
        assert!(
            split_array(b"[{\"a\":1}")
                .unwrap_err()
                .contains("unterminated")
        );
        assert!(
            split_array(b"[{}] x")
                .unwrap_err()
                .contains("after the array")
        );
        assert!(split_array(b"[}]").is_err());
    }
}
