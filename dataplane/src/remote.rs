//! Stage B elsewhere: a fleet's sensor hands its records to a [`RecordPublisher`] instead of
//! scoring them (docs/cluster.md).
//!
//! The stage A workers do not change: they route records to the stage B worker ring as on a
//! stand-alone node, here to one thread that passes each block's records to the publisher
//! (which splits them by the fleet's partitions and sends them to the stream). The control
//! plane's questions to stage B (feedback, a live baseline) have no answer on a sensor: the
//! detectors own that state.

use crate::ring::Pop;
use crate::stage::{Control, DetectInput};
use crate::stats::Stats;
use crossbeam_channel::{Receiver, Select};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_detect::DetectBatch;
use watchpost_proto::now_ns;

/// Takes stage A's records to a stage B in other processes.
pub trait RecordPublisher: Send + 'static {
    /// The pipeline's live content, handed over once before the first records: what the
    /// records' rule and indicator numbers count into, for a publisher that must name them to
    /// another host (`watchpost_detect::ContentKeys`).
    fn content(
        &mut self,
        rules: Arc<dyn watchpost_detect::RuleBook>,
        iocs: Arc<dyn watchpost_detect::IndicatorBook>,
    ) {
        let _ = (rules, iocs);
    }
    /// One block's records, every part of every record marked owned (they are not split
    /// here). Called on the data plane's thread: it must not wait on the network; a publisher
    /// that cannot keep up holds records within its bound and counts what it drops past it.
    fn publish(&mut self, batch: &DetectBatch);
    /// No records for a while (about a quarter of a second): a chance to hand over what is
    /// buffered.
    fn idle(&mut self) {}
    /// The last records were handed over (the pipeline stops): hand over what is buffered.
    fn close(&mut self) {}
}

/// Where stage B runs for this pipeline.
pub enum StageB {
    /// Here: the stage B workers score every record (a stand-alone node).
    Local,
    /// Elsewhere: records go to the publisher (a fleet's sensor), nothing is scored here.
    Remote(Box<dyn RecordPublisher>),
}

/// Starts the thread that hands records to `publisher`; it ends when every ring is closed and
/// drained, after the publisher's `close`.
pub(crate) fn spawn_publisher(
    inputs: Vec<DetectInput>,
    control: Receiver<Control>,
    mut publisher: Box<dyn RecordPublisher>,
    stats: Arc<Stats>,
) -> std::io::Result<JoinHandle<()>> {
    stats.detect_alive[0].store(true, Ordering::Relaxed);
    let alive = Arc::clone(&stats);
    std::thread::Builder::new()
        .name("wp-publish".into())
        .spawn(move || {
            run(&inputs, &control, publisher.as_mut(), &stats);
            publisher.close();
            stats.detect_alive[0].store(false, Ordering::Relaxed);
        })
        .inspect_err(|_| alive.detect_alive[0].store(false, Ordering::Relaxed))
}

fn run(
    inputs: &[DetectInput],
    control: &Receiver<Control>,
    publisher: &mut dyn RecordPublisher,
    stats: &Stats,
) {
    let mut sel = Select::new();
    for inp in inputs {
        sel.recv(inp.ring.receiver());
    }
    let control_slot = sel.recv(control);
    let mut open = inputs.len();
    while open > 0 {
        stats.detect_heartbeat_ns[0].store(now_ns(), Ordering::Relaxed);
        let Ok(slot) = sel.ready_timeout(Duration::from_millis(250)) else {
            publisher.idle();
            continue;
        };
        if slot == control_slot {
            match control.try_recv() {
                // Nothing of stage B's state is here: the question has no answer.
                Ok(Control::Feedback { reply, .. }) => drop(reply.send(None)),
                Ok(Control::Baseline { reply, .. }) => drop(reply.send(None)),
                Err(crossbeam_channel::TryRecvError::Empty) => {}
                Err(crossbeam_channel::TryRecvError::Disconnected) => sel.remove(control_slot),
            }
            continue;
        }
        let inp = &inputs[slot];
        match inp.ring.try_pop() {
            Pop::Item(mut batch) => {
                publisher.publish(&batch);
                batch.clear();
                let _ = inp.returns.try_send(batch);
            }
            Pop::Empty => {}
            Pop::Closed => {
                sel.remove(slot);
                open -= 1;
            }
        }
    }
}
