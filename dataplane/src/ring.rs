//! Bounded single-producer single-consumer rings between data-plane stages.
//!
//! Each ring connects exactly one producer thread to one consumer thread, and carries batches, not
//! events, so its cost is paid once per ~1000 events. The slots are crossbeam's array channel: a
//! lock-free bounded ring (compare-and-swap on head and tail, no mutex) whose blocking `send` is
//! what backpressure needs: a full ring parks the producer, and a parked TCP or file reader stops
//! reading, so senders slow down instead of data being lost. The producer/consumer split is
//! enforced by the types: [`Producer`] and [`Consumer`] are not `Clone`.

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};

/// The sending end; exactly one per ring.
pub struct Producer<T> {
    tx: Sender<T>,
}

/// The receiving end; exactly one per ring.
pub struct Consumer<T> {
    rx: Receiver<T>,
}

/// Creates a ring of `capacity` slots.
pub fn ring<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let (tx, rx) = bounded(capacity.max(1));
    (Producer { tx }, Consumer { rx })
}

/// The consumer is gone; the item comes back.
#[derive(Debug)]
pub struct Closed<T>(pub T);

impl<T> Producer<T> {
    /// Waits for a free slot (backpressure). Fails only when the consumer has stopped.
    pub fn push(&self, item: T) -> Result<(), Closed<T>> {
        self.tx.send(item).map_err(|e| Closed(e.0))
    }

    /// Pushes without waiting; `Err` carries the item back when the ring is full or closed.
    pub fn try_push(&self, item: T) -> Result<(), T> {
        self.tx.try_send(item).map_err(|e| match e {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        })
    }

    /// Items waiting in the ring.
    #[cfg(test)]
    pub fn depth(&self) -> usize {
        self.tx.len()
    }
}

/// What a wait on a consumer gave.
pub enum Pop<T> {
    /// An item.
    Item(T),
    /// Nothing arrived in time.
    Empty,
    /// The producer has stopped and the ring is drained.
    Closed,
}

impl<T> Consumer<T> {
    /// Takes an item if one is waiting.
    pub fn try_pop(&self) -> Pop<T> {
        match self.rx.try_recv() {
            Ok(v) => Pop::Item(v),
            Err(TryRecvError::Empty) => Pop::Empty,
            Err(TryRecvError::Disconnected) => Pop::Closed,
        }
    }

    /// Waits up to `timeout` for an item.
    #[cfg(test)]
    pub fn pop_timeout(&self, timeout: std::time::Duration) -> Pop<T> {
        use crossbeam_channel::RecvTimeoutError;
        match self.rx.recv_timeout(timeout) {
            Ok(v) => Pop::Item(v),
            Err(RecvTimeoutError::Timeout) => Pop::Empty,
            Err(RecvTimeoutError::Disconnected) => Pop::Closed,
        }
    }

    /// The channel, for `crossbeam_channel::Select` over several rings.
    pub(crate) fn receiver(&self) -> &Receiver<T> {
        &self.rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn full_ring_refuses_without_waiting_and_closes_when_producer_drops() {
        let (p, c) = ring(2);
        p.push(1).unwrap();
        p.push(2).unwrap();
        assert_eq!(p.try_push(3), Err(3));
        assert_eq!(p.depth(), 2);
        drop(p);
        assert!(matches!(c.try_pop(), Pop::Item(1)));
        assert!(matches!(c.try_pop(), Pop::Item(2)));
        assert!(matches!(c.try_pop(), Pop::Closed));
    }

    #[test]
    fn push_waits_for_the_consumer() {
        let (p, c) = ring(1);
        p.push(0u32).unwrap();
        let t = std::thread::spawn(move || {
            for i in 1..1000u32 {
                p.push(i).unwrap();
            }
        });
        let mut next = 0;
        loop {
            match c.pop_timeout(Duration::from_secs(5)) {
                Pop::Item(v) => {
                    assert_eq!(v, next, "order is kept");
                    next += 1;
                }
                Pop::Closed => break,
                Pop::Empty => panic!("producer stalled"),
            }
        }
        t.join().unwrap();
        assert_eq!(next, 1000);
    }
}
