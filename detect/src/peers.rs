//! Who uses a host, on a board every stage B worker of a process reads.
//!
//! A person's first visit to a host is judged against the people who use that host ("Servers
//! are not people", docs/detection.md): a colleague's application server is little news for an
//! on-call admin, a VPN gateway none, and a database no person ever used is. The host's
//! baseline counts its people, but it lives with the worker that owns the host's name hash,
//! while the person's lives with the worker that owns the person's. So the host's worker
//! publishes what it knows here, and the person's worker reads it.
//!
//! One 64-bit word per slot, direct-mapped by the host's hash with a 24-bit tag: written only by
//! the host's own worker (so a plain store, no compare-and-swap) and only when what it says
//! changes (a new person, the host turning into a crowd), read only at a person's first visit
//! to a host. No lock, and no shared write per event. A host whose slot another host took is
//! unknown to the readers (they judge as if the host had no board), and each such displacement
//! is counted. In a fleet each detector node has its own board, holding the hosts of its own
//! partitions (docs/detection.md).

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots of a board: 65,536 words, 512 KiB. A sensor's hosts are a small part of its entities
/// (thousands where accounts and addresses run to hundreds of thousands).
pub const PEER_BOARD_SLOTS: usize = 1 << 16;

/// What a host's worker says about the people who use it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostPeers {
    /// People (user accounts) who came to it, undercounted past two dozen or so (its filter
    /// fills up; by then the host is a crowd).
    pub people: u16,
    /// Past two dozen clients or people (the novelty filters' bound): a VPN gateway, a portal,
    /// a file server.
    pub crowd: bool,
    /// Hour (since the epoch) from which its people have been counted: when the host was first
    /// seen, or when a baseline saved before the count was read back.
    pub since_hour: u32,
}

impl HostPeers {
    /// Whether the count covers at least `span_ns` before `now_ns`: only then does "no person"
    /// mean no person came, rather than that nobody counted.
    pub fn counted_for(&self, span_ns: i64, now_ns: i64) -> bool {
        i64::from(self.since_hour)
            .saturating_mul(crate::time::NS_PER_HOUR)
            .saturating_add(span_ns)
            <= now_ns
    }
}

/// Bits of the since-hour field (to the year 2926).
const SINCE_BITS: u32 = 23;

/// The board (see the module's documentation).
#[derive(Debug)]
pub struct PeerBoard {
    slots: Box<[AtomicU64]>,
    displaced: AtomicU64,
}

impl Default for PeerBoard {
    fn default() -> Self {
        PeerBoard::new(PEER_BOARD_SLOTS)
    }
}

impl PeerBoard {
    /// A board of `slots` words (rounded up to a power of two, at least one).
    pub fn new(slots: usize) -> PeerBoard {
        let n = slots.max(1).next_power_of_two();
        PeerBoard {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            displaced: AtomicU64::new(0),
        }
    }

    /// The host's slot and tag (never 0, so an empty word matches no host).
    #[inline]
    fn place(&self, host: u64) -> (usize, u64) {
        let mixed = watchpost_proto::fmix64(host ^ 0x7065_6572_735f_6264);
        let at = (mixed as usize) & (self.slots.len() - 1);
        (at, (mixed >> 40) | 1)
    }

    /// Publishes what `host`'s worker knows of it.
    pub fn publish(&self, host: u64, peers: HostPeers) {
        let (at, tag) = self.place(host);
        let since = u64::from(peers.since_hour).min((1 << SINCE_BITS) - 1);
        let word = (tag << 40)
            | (u64::from(peers.people) << 24)
            | (u64::from(peers.crowd) << SINCE_BITS)
            | since;
        let old = self.slots[at].swap(word, Ordering::Relaxed);
        if old != 0 && old >> 40 != tag {
            self.displaced.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// What `host`'s worker published, if its slot still holds it.
    pub fn read(&self, host: u64) -> Option<HostPeers> {
        let (at, tag) = self.place(host);
        let word = self.slots[at].load(Ordering::Relaxed);
        (word >> 40 == tag).then_some(HostPeers {
            people: (word >> 24) as u16,
            crowd: (word >> SINCE_BITS) & 1 == 1,
            since_hour: (word & ((1 << SINCE_BITS) - 1)) as u32,
        })
    }

    /// Hosts whose slot another host took since the start.
    pub fn displaced(&self) -> u64 {
        self.displaced.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_host_reads_back_and_an_unknown_one_does_not() {
        let board = PeerBoard::new(1024);
        let peers = HostPeers {
            people: 12,
            crowd: false,
            since_hour: 498_000,
        };
        board.publish(42, peers);
        assert_eq!(board.read(42), Some(peers));
        assert_eq!(board.read(43), None);
        let crowd = HostPeers {
            crowd: true,
            ..peers
        };
        board.publish(42, crowd);
        assert_eq!(board.read(42), Some(crowd));
        assert_eq!(board.displaced(), 0);
    }

    #[test]
    fn a_host_that_takes_another_ones_slot_is_counted_and_the_other_reads_unknown() {
        let board = PeerBoard::new(1);
        board.publish(1, HostPeers::default());
        board.publish(2, HostPeers::default());
        assert_eq!(board.read(1), None);
        assert!(board.read(2).is_some());
        assert_eq!(board.displaced(), 1);
    }

    #[test]
    fn a_count_begun_within_the_span_does_not_yet_vouch_for_no_person() {
        let hour = crate::time::NS_PER_HOUR;
        let peers = HostPeers {
            people: 0,
            crowd: false,
            since_hour: 100,
        };
        assert!(!peers.counted_for(24 * hour, 110 * hour));
        assert!(peers.counted_for(24 * hour, 124 * hour));
    }
}
