//! A sensor's side of the detection stream: stage A's records, split by partition, published
//! to `wp.detect.<p>` (docs/cluster.md, "The stream between the stages").
//!
//! The data plane's thread hands each block's records to [`SensorLink::publish`], which
//! splits them by partition with the same routing that splits them between stage B workers in
//! one process, encodes each partition's share ([`DetectBatch::encode_into`]) and appends it
//! to the spool on disk in one write, never waiting on the network. One task of the runtime
//! reads the spool back in windows: every message of a window is published before any
//! acknowledgement is awaited (JetStream's asynchronous publishing), and what is not
//! acknowledged is sent again, with the same message id, until it is; the stream drops the
//! repeats. The spool holds at most `cluster.spool_max_bytes`: past it, while the servers are
//! away or slower than the inputs, records are dropped and counted; what it holds when the
//! sensor stops is sent at the next start.

use crate::counters::{FleetCounters, LinkState};
use crate::spool::{Frame, SpoolReader, SpoolWriter};
use crate::streams::{detect_stream, detect_subject};
use async_nats::jetstream::{self, message::PublishMessage};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use watchpost_dataplane::RecordPublisher;
use watchpost_detect::{
    ContentKeys, DetectBatch, IndicatorBook, NameContent, RuleBook, route, route_hits,
};
use watchpost_proto::config::ClusterConfig;

/// Messages published before their acknowledgements are awaited.
const WINDOW: usize = 512;
/// How long an acknowledgement is waited for before the message is sent again.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a stopping sensor waits for its spool to be acknowledged (what is left is sent at
/// the next start).
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How often the acknowledged position is saved.
const SAVE_ACKED: Duration = Duration::from_secs(1);
/// The header naming the sensor (alerts carry it).
pub const SENSOR_HEADER: &str = "Wp-Sensor";

/// The data plane's end of the link (see the module's documentation).
pub struct SensorLink {
    /// One batch per partition, reused: boxed because the routing shared with the in-process
    /// path takes the boxes its rings move.
    #[allow(clippy::vec_box)]
    parts: Vec<Box<DetectBatch>>,
    spool: SpoolWriter,
    /// The keys the records' matches travel by, from the pipeline's content
    /// ([`RecordPublisher::content`]); until it comes, matches travel as unknown content.
    names: Option<ContentKeys>,
    counters: Arc<FleetCounters>,
    boot: u64,
    sequence: u64,
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl SensorLink {
    /// Opens the spool in `spool_dir` and starts the publishing task on the current runtime;
    /// records wait in the spool until the servers answer.
    pub fn start(
        config: &ClusterConfig,
        node: &str,
        spool_dir: &Path,
        counters: Arc<FleetCounters>,
    ) -> Result<SensorLink, crate::ClusterError> {
        crate::connect::server_addrs(config)?;
        let (writer, reader) =
            crate::spool::open(spool_dir, config.spool_max_bytes, Arc::clone(&counters)).map_err(
                |e| crate::ClusterError::Spool {
                    path: spool_dir.display().to_string(),
                    reason: e.to_string(),
                },
            )?;
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        tokio::spawn(send_loop(
            config.clone(),
            node.to_string(),
            reader,
            Arc::clone(&counters),
            Arc::clone(&closed),
        ));
        Ok(SensorLink {
            parts: (0..config.partitions)
                .map(|_| Box::new(DetectBatch::default()))
                .collect(),
            spool: writer,
            names: None,
            counters,
            // Message ids: unique per sensor and start, so a restarted sensor's first records
            // are not taken for repeats of the last ones of its previous run.
            boot: watchpost_proto::now_ns() as u64,
            sequence: 0,
            closed,
        })
    }
}

impl RecordPublisher for SensorLink {
    fn content(&mut self, rules: Arc<dyn RuleBook>, iocs: Arc<dyn IndicatorBook>) {
        self.names = Some(ContentKeys::new(rules, iocs));
    }

    fn publish(&mut self, batch: &DetectBatch) {
        route(batch, &mut self.parts);
        route_hits(&batch.hits, &mut self.parts);
        let c = &self.counters;
        let mut pushed = 0;
        let mut nameless = Nameless;
        let names: &mut dyn NameContent = match &mut self.names {
            Some(n) => n,
            None => &mut nameless,
        };
        for (p, part) in self.parts.iter_mut().enumerate() {
            if part.is_empty() {
                continue;
            }
            let records = (part.records.len() + part.hits.len()) as u32;
            FleetCounters::add(&c.records_queued, u64::from(records));
            self.sequence += 1;
            let pushed_one = self
                .spool
                .push(p as u32, records, self.boot, self.sequence, |buf| {
                    part.encode_into(buf, names)
                });
            part.clear();
            if pushed_one {
                pushed += u64::from(records);
            } else {
                FleetCounters::add(&c.records_dropped, u64::from(records));
            }
        }
        if let Err(e) = self.spool.commit() {
            FleetCounters::add(&c.records_dropped, pushed);
            tracing::error!("cluster: cannot write the spool: {e}; {pushed} records dropped");
        }
    }

    fn close(&mut self) {
        let deadline = Instant::now() + CLOSE_WAIT;
        while self.counters.spool_bytes.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.closed.store(true, Ordering::Relaxed);
        let left = self.counters.spool_bytes.load(Ordering::Relaxed);
        if left > 0 {
            tracing::warn!(
                "cluster: stopping with {left} bytes of detection records not yet acknowledged \
                 by the stream: they stay in the spool and are sent at the next start"
            );
        }
    }
}

/// Names no content: the matches of records published before the pipeline's content was
/// handed over (none, as the pipeline starts) travel as unknown, and detectors count them.
struct Nameless;

impl NameContent for Nameless {
    fn rule(&mut self, _: u32) -> u64 {
        0
    }
    fn correlation(&mut self, _: u64, _: u32) -> u64 {
        0
    }
    fn indicator(&mut self, _: u32, _: u32) -> u64 {
        0
    }
}

/// Connects, opens the stream, then sends the spool in windows, for as long as the process
/// runs.
async fn send_loop(
    config: ClusterConfig,
    node: String,
    mut spool: SpoolReader,
    counters: Arc<FleetCounters>,
    closed: Arc<std::sync::atomic::AtomicBool>,
) {
    let pause = Duration::from_secs(1);
    let Some(client) = crate::connect::client_for(&config, &node, "sensor link").await else {
        return;
    };
    let js = jetstream::ContextBuilder::new()
        .ack_timeout(ACK_TIMEOUT)
        .build(client);
    while let Err(e) = detect_stream(&js, &config).await {
        tracing::warn!("cluster: sensor link: {e}");
        tokio::time::sleep(pause).await;
    }
    counters.set_link(LinkState::Connected);
    let subjects: Vec<String> = (0..config.partitions).map(detect_subject).collect();
    let mut window = Vec::with_capacity(WINDOW);
    // The bytes and the spool position the window read covers, acknowledged when all of it is.
    let mut covers = (0u64, (0u64, 0u64));
    let mut acked = spool.start();
    let mut saved = acked;
    let mut last_save = Instant::now();
    let mut backoff = Duration::from_millis(100);
    loop {
        if last_save.elapsed() >= SAVE_ACKED && saved != acked {
            last_save = Instant::now();
            match spool.save_acked(acked) {
                Ok(()) => saved = acked,
                Err(e) => tracing::warn!("cluster: cannot save the spool's position: {e}"),
            }
        }
        if window.is_empty() {
            if let Err(e) = spool.read(WINDOW, &mut window) {
                tracing::error!("cluster: cannot read the spool: {e}");
                tokio::time::sleep(pause).await;
                continue;
            }
            covers = (
                window.iter().map(|(f, _)| f.len()).sum(),
                window.last().map(|(_, end)| *end).unwrap_or(acked),
            );
            if window.is_empty() {
                if closed.load(Ordering::Relaxed) {
                    let _ = spool.save_acked(acked);
                }
                if counters.link() == LinkState::Draining {
                    counters.set_link(LinkState::Connected);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        }
        let outcome = send_window(&js, &node, &subjects, &mut window, &counters).await;
        match outcome {
            Ok(()) => {
                spool.acknowledged(covers.0, covers.1, &mut acked);
                backoff = Duration::from_millis(100);
                if counters.link() == LinkState::Spooling {
                    tracing::info!(
                        "cluster: the detection stream acknowledges again; sending what waited"
                    );
                    counters.set_link(LinkState::Draining);
                } else if counters.link() == LinkState::Draining && spool.caught_up() {
                    counters.set_link(LinkState::Connected);
                }
            }
            Err(e) => {
                if counters.link() != LinkState::Spooling {
                    tracing::warn!(
                        "cluster: the detection stream does not acknowledge ({e}); records wait \
                         in the spool (at most cluster.spool_max_bytes)"
                    );
                }
                counters.set_link(LinkState::Spooling);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// Publishes the window's messages, then awaits their acknowledgements. The acknowledged ones
/// leave the window; the first error is returned when any was not (they are sent again).
async fn send_window(
    js: &jetstream::Context,
    node: &str,
    subjects: &[String],
    window: &mut Vec<(Frame, (u64, u64))>,
    counters: &FleetCounters,
) -> Result<(), String> {
    let mut acks = Vec::with_capacity(window.len());
    for (f, _) in window.iter() {
        // A message spooled by a run with more partitions than the stream has now has no
        // subject: it is dropped, counted and said, not sent to a partition that does not own it.
        let Some(subject) = subjects.get(f.partition as usize) else {
            acks.push(None);
            continue;
        };
        let publish = PublishMessage::build()
            .payload(f.payload.clone())
            .message_id(format!("{node}.{}.{}", f.boot, f.sequence))
            .header(SENSOR_HEADER, node);
        acks.push(Some(js.send_publish(subject.clone(), publish).await));
    }
    let mut first_error = None;
    let mut done = vec![false; window.len()];
    for (i, ack) in acks.into_iter().enumerate() {
        let acked = match ack {
            None => {
                let f = &window[i].0;
                tracing::error!(
                    "cluster: a spooled message names partition {} of a stream with {}: its {} \
                     records are dropped",
                    f.partition,
                    subjects.len(),
                    f.records
                );
                FleetCounters::add(&counters.records_dropped, u64::from(f.records));
                done[i] = true;
                continue;
            }
            Some(Ok(future)) => future.await.map(|_| ()).map_err(|e| e.to_string()),
            Some(Err(e)) => Err(e.to_string()),
        };
        match acked {
            Ok(()) => {
                done[i] = true;
                let f = &window[i].0;
                FleetCounters::add(&counters.records_published, u64::from(f.records));
                FleetCounters::add(&counters.messages_published, 1);
            }
            Err(e) => {
                FleetCounters::add(&counters.publish_failures, 1);
                first_error.get_or_insert(e);
            }
        }
    }
    let mut i = 0;
    window.retain(|_| {
        let keep = !done[i];
        i += 1;
        keep
    });
    first_error.map_or(Ok(()), Err)
}
