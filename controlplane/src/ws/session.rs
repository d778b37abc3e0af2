//! One client: filter, frame, queue (oldest dropped first), and a writer task that drains the
//! queue to the socket at whatever pace the client reads.

use super::filter::Filter;
use super::{Hub, HubMsg};
use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, broadcast};
use tokio::time::Instant;

/// Frames waiting for the socket, and their bytes.
#[derive(Default)]
struct Waiting {
    frames: VecDeque<Message>,
    bytes: usize,
}

/// Bytes a frame holds in a queue.
fn frame_bytes(m: &Message) -> usize {
    match m {
        Message::Text(t) => t.len(),
        Message::Binary(b) => b.len(),
        _ => 0,
    }
}

/// Frames waiting for the socket, bounded in frames and in bytes.
struct Queue {
    frames: Mutex<Waiting>,
    max: usize,
    max_bytes: usize,
    ready: Notify,
    closed: AtomicBool,
    /// Dropped since the last status frame that reported it.
    dropped: AtomicU64,
    dropped_total: AtomicU64,
}

impl Queue {
    /// Adds a frame, dropping the oldest while the queue is full in frames or in bytes.
    fn push(&self, hub: &Hub, m: Message) {
        let size = frame_bytes(&m);
        let mut q = self.frames.lock().unwrap_or_else(|p| p.into_inner());
        while !q.frames.is_empty()
            && (q.frames.len() >= self.max || q.bytes + size > self.max_bytes)
        {
            if let Some(old) = q.frames.pop_front() {
                q.bytes -= frame_bytes(&old);
            }
            self.dropped.fetch_add(1, Ordering::Relaxed);
            self.dropped_total.fetch_add(1, Ordering::Relaxed);
            hub.counters.frames_dropped.fetch_add(1, Ordering::Relaxed);
        }
        q.bytes += size;
        q.frames.push_back(m);
        drop(q);
        self.ready.notify_one();
    }

    fn pop(&self) -> Option<Message> {
        let mut q = self.frames.lock().unwrap_or_else(|p| p.into_inner());
        let m = q.frames.pop_front()?;
        q.bytes -= frame_bytes(&m);
        Some(m)
    }

    /// Frames and bytes waiting.
    fn len(&self) -> (usize, usize) {
        let q = self.frames.lock().unwrap_or_else(|p| p.into_inner());
        (q.frames.len(), q.bytes)
    }
}

/// Frames of `kind` holding `items` (JSON texts) under `key`, each at most `max_bytes` where the
/// items allow (one item larger than that goes alone), with `extra` fields (`"matched":3,` or
/// empty) in each.
fn chunked(kind: &str, key: &str, extra: &str, items: &[String], max_bytes: usize) -> Vec<String> {
    let head = format!("{{\"type\":\"{kind}\",{extra}\"{key}\":[");
    let mut frames = Vec::new();
    let mut frame = head.clone();
    let mut count = 0;
    for item in items {
        if count > 0 && frame.len() + 1 + item.len() + 2 > max_bytes {
            frame.push_str("]}");
            frames.push(std::mem::replace(&mut frame, head.clone()));
            count = 0;
        }
        if count > 0 {
            frame.push(',');
        }
        frame.push_str(item);
        count += 1;
    }
    if count > 0 {
        frame.push_str("]}");
        frames.push(frame);
    }
    frames
}

fn text(v: &Value) -> Message {
    Message::Text(v.to_string().into())
}

/// One item of a batch frame as JSON text.
fn json_text(item: &impl serde::Serialize) -> String {
    serde_json::to_string(item).unwrap_or_else(|_| "null".into())
}

/// Runs one connection until the client leaves.
pub async fn run(socket: WebSocket, hub: Arc<Hub>, mut rx: broadcast::Receiver<Arc<HubMsg>>) {
    let (mut sink, mut stream) = socket.split();
    let queue = Arc::new(Queue {
        frames: Mutex::new(Waiting::default()),
        max: hub.config.queue_maxlen,
        max_bytes: hub.config.queue_max_bytes,
        ready: Notify::new(),
        closed: AtomicBool::new(false),
        dropped: AtomicU64::new(0),
        dropped_total: AtomicU64::new(0),
    });
    let writer = {
        let queue = Arc::clone(&queue);
        let hub = Arc::clone(&hub);
        tokio::spawn(async move {
            loop {
                let Some(m) = queue.pop() else {
                    if queue.closed.load(Ordering::Relaxed) {
                        break;
                    }
                    queue.ready.notified().await;
                    continue;
                };
                let close = matches!(m, Message::Close(_));
                if sink.send(m).await.is_err() || close {
                    break;
                }
                hub.counters.frames_sent.fetch_add(1, Ordering::Relaxed);
            }
            queue.closed.store(true, Ordering::Relaxed);
        })
    };

    let mut s = Session {
        hub: Arc::clone(&hub),
        queue: Arc::clone(&queue),
        filter: Filter::default(),
        pending_filter: None,
        last_filter_at: None,
        updates: BTreeMap::new(),
        lagged: 0,
        missed_alerts: 0,
        skipped_events: 0,
    };
    s.status("hello");
    let mut status = tokio::time::interval_at(
        Instant::now() + hub.config.status_every,
        hub.config.status_every,
    );
    loop {
        let filter_due = s.filter_due();
        tokio::select! {
            msg = rx.recv() => match msg {
                Ok(m) => s.hub_msg(&m),
                Err(broadcast::error::RecvError::Lagged(n)) => s.lagged += n,
                Err(broadcast::error::RecvError::Closed) => break,
            },
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(t))) => s.client_frame(t.as_str()),
                Some(Ok(Message::Binary(_))) => s.error("invalid_frame", "frames are JSON text"),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {} // ping and pong are answered by the protocol layer
            },
            _ = status.tick() => s.status("periodic"),
            _ = tokio::time::sleep_until(filter_due.unwrap_or_else(far_future)), if filter_due.is_some() => {
                s.apply_pending();
            }
        }
        if queue.closed.load(Ordering::Relaxed) {
            break;
        }
    }
    queue.closed.store(true, Ordering::Relaxed);
    queue.ready.notify_one();
    let _ = writer.await;
}

fn far_future() -> Instant {
    Instant::now() + std::time::Duration::from_secs(86_400)
}

struct Session {
    hub: Arc<Hub>,
    queue: Arc<Queue>,
    filter: Filter,
    /// A filter received inside the throttle interval, applied when it ends (the latest wins).
    pending_filter: Option<Filter>,
    last_filter_at: Option<Instant>,
    /// Alert updates of this tick, by id (latest state), sent as one `alert_batch`.
    updates: BTreeMap<String, Arc<watchpost_proto::Alert>>,
    /// Hub messages this session was too slow to receive.
    lagged: u64,
    missed_alerts: u64,
    skipped_events: u64,
}

impl Session {
    fn push(&self, v: &Value) {
        self.queue.push(&self.hub, text(v));
    }

    fn push_all(&self, frames: Vec<String>) {
        for f in frames {
            self.queue.push(&self.hub, Message::Text(f.into()));
        }
    }

    fn frame_max(&self) -> usize {
        self.hub.config.frame_max_bytes
    }

    fn hub_msg(&mut self, m: &HubMsg) {
        match m {
            HubMsg::Alerts { changes, missed } => {
                self.missed_alerts += missed;
                for c in changes.iter().filter(|c| self.filter.alert(&c.alert)) {
                    if c.new {
                        self.push(&json!({"type": "alert", "alert": &*c.alert}));
                    } else {
                        self.updates
                            .insert(c.alert.id.clone(), Arc::clone(&c.alert));
                    }
                }
            }
            HubMsg::Events { events, skipped } => {
                self.skipped_events += skipped;
                self.flush(events);
            }
        }
    }

    /// The tick's frames: its events (one `event`, or a `batch` of the newest
    /// `ws_batch_max_events` with the number that matched), then the coalesced alert updates;
    /// then a `status` frame when frames were dropped since the last one.
    fn flush(&mut self, events: &[watchpost_proto::Event]) {
        let matched: Vec<&watchpost_proto::Event> =
            events.iter().filter(|e| self.filter.event(e)).collect();
        match matched.len() {
            0 => {}
            1 => self.push(&json!({"type": "event", "event": matched[0]})),
            n => {
                let keep = &matched[n.saturating_sub(self.hub.config.batch_max_events)..];
                let items: Vec<String> = keep.iter().map(json_text).collect();
                let extra = format!("\"matched\":{n},");
                self.push_all(chunked("batch", "events", &extra, &items, self.frame_max()));
            }
        }
        if !self.updates.is_empty() {
            let items: Vec<String> = self.updates.values().map(|a| json_text(&**a)).collect();
            self.push_all(chunked(
                "alert_batch",
                "alerts",
                "",
                &items,
                self.frame_max(),
            ));
            self.updates.clear();
        }
        if self.queue.dropped.load(Ordering::Relaxed) > 0 || self.lagged > 0 {
            self.status("dropped");
        }
    }

    fn status(&mut self, reason: &str) {
        let dropped =
            self.queue.dropped.swap(0, Ordering::Relaxed) + std::mem::take(&mut self.lagged);
        let v = json!({
            "type": "status",
            "reason": reason,
            "dropped": dropped,
            "dropped_total": self.queue.dropped_total.load(Ordering::Relaxed),
            "queued": self.queue.len().0,
            "queued_bytes": self.queue.len().1,
            "queue_max": self.hub.config.queue_maxlen,
            "queue_max_bytes": self.hub.config.queue_max_bytes,
            "filter": &self.filter,
            "events_skipped": self.skipped_events,
            "alerts_missed": self.missed_alerts,
            "connections": self.hub.connections.load(Ordering::Relaxed),
            "max_connections": self.hub.config.max_connections,
            "tick_interval_s": self.hub.config.tick.as_secs_f64(),
            "ts_ns": watchpost_proto::now_ns(),
        });
        self.push(&v);
    }

    fn error(&self, code: &str, message: &str) {
        self.hub
            .counters
            .invalid_frames
            .fetch_add(1, Ordering::Relaxed);
        self.push(&json!({"type": "error", "error": code, "message": message}));
    }

    fn client_frame(&mut self, t: &str) {
        match Filter::parse(t) {
            Err(e) => self.error("invalid_filter", &e.to_string()),
            Ok(f) => {
                let now = Instant::now();
                let wait = self.hub.config.filter_min_interval;
                match self.last_filter_at {
                    Some(at) if now < at + wait => {
                        self.hub
                            .counters
                            .filters_throttled
                            .fetch_add(1, Ordering::Relaxed);
                        self.pending_filter = Some(f);
                    }
                    _ => self.apply(f, now),
                }
            }
        }
    }

    fn filter_due(&self) -> Option<Instant> {
        self.pending_filter.as_ref()?;
        Some(self.last_filter_at? + self.hub.config.filter_min_interval)
    }

    fn apply_pending(&mut self) {
        if let Some(f) = self.pending_filter.take() {
            self.apply(f, Instant::now());
        }
    }

    fn apply(&mut self, f: Filter, now: Instant) {
        self.filter = f;
        self.last_filter_at = Some(now);
        self.hub
            .counters
            .filters_applied
            .fetch_add(1, Ordering::Relaxed);
        self.status("filter");
    }
}
