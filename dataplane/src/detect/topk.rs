//! The two top-K lists of a UEBA baseline (templates with LFU weights, sources with Space-Saving
//! counts) in one allocation.
//!
//! Why one block: scoring an observation reads both lists, and with four separate boxes that was
//! four cache misses per observation on top of the map's, the largest cost of UEBA once entities
//! outnumber the cache. One block of 64-bit words is one region to prefetch (see
//! [`TopLists::prefetch`]) and one allocation per entity. The layout, for `k` templates and `cap`
//! sources:
//!
//! ```text
//! [0, k)                 template ids
//! [k, k + 2 cap)         sources, as (low, high) word pairs of the u128 key
//! then ceil(k / 2)       template weights, two f32 per word
//! then ceil(cap / 2)     source counts, two u32 per word
//! ```
//!
//! Lookups go through a [`Probe`] made once per observation and used by both scoring and learning,
//! so each list is scanned once per observation rather than once per question.

use super::prefetch::prefetch;
use bincode::{Decode, Encode};

/// What one observation finds in the lists (before it is learned).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// Slot of the template, when known.
    pub template: Option<u16>,
    /// Slot of the source, when known.
    pub source: Option<u16>,
    /// An address of the source's network is known.
    pub same_network: bool,
}

/// Top-K templates and sources of one entity.
#[derive(Clone, Debug, Encode, Decode)]
pub struct TopLists {
    words: Box<[u64]>,
    template_cap: u16,
    source_cap: u16,
    templates: u16,
    sources: u16,
}

/// Reads the `i`-th u32 of a run of words holding two per word.
#[inline]
fn half(words: &[u64], i: usize) -> u32 {
    (words[i / 2] >> (32 * (i & 1))) as u32
}

/// Writes the `i`-th u32 of a run of words holding two per word.
#[inline]
fn set_half(words: &mut [u64], i: usize, v: u32) {
    let shift = 32 * (i & 1);
    let w = &mut words[i / 2];
    *w = (*w & !(0xffff_ffffu64 << shift)) | (u64::from(v) << shift);
}

impl TopLists {
    /// Empty lists with room for `template_cap` templates and `source_cap` sources (each at least 1,
    /// at most 65,535).
    pub fn new(template_cap: usize, source_cap: usize) -> TopLists {
        let k = template_cap.clamp(1, usize::from(u16::MAX));
        let cap = source_cap.clamp(1, usize::from(u16::MAX));
        TopLists {
            words: vec![0; k + 2 * cap + k.div_ceil(2) + cap.div_ceil(2)].into_boxed_slice(),
            template_cap: k as u16,
            source_cap: cap as u16,
            templates: 0,
            sources: 0,
        }
    }

    #[inline]
    fn source_at(&self) -> usize {
        usize::from(self.template_cap)
    }

    #[inline]
    fn weights_at(&self) -> usize {
        self.source_at() + 2 * usize::from(self.source_cap)
    }

    #[inline]
    fn counts_at(&self) -> usize {
        self.weights_at() + usize::from(self.template_cap).div_ceil(2)
    }

    /// Asks the CPU to start loading the lists' hot words (the templates, the start of the sources,
    /// the weights) so that the misses of several entities overlap instead of queueing.
    #[inline]
    pub fn prefetch(&self) {
        let p = self.words.as_ptr();
        // Templates (a 32-slot list is four lines), then every source in use (eight per two
        // lines), then the weights and counts.
        let templates = usize::from(self.templates);
        for at in (0..templates).step_by(8) {
            prefetch(p.wrapping_add(at));
        }
        let sources = self.source_at();
        for at in (0..2 * usize::from(self.sources)).step_by(8) {
            prefetch(p.wrapping_add(sources + at));
        }
        prefetch(p.wrapping_add(self.weights_at()));
        prefetch(p.wrapping_add(self.counts_at()));
    }

    /// Looks `template` and `source` up: one pass over each list.
    #[inline]
    pub fn probe(&self, template: u64, source: Option<u128>) -> Probe {
        let n = usize::from(self.templates);
        let template = self.words[..n]
            .iter()
            .position(|&t| t == template)
            .map(|i| i as u16);
        let (source, same_network) = match source {
            None => (None, false),
            Some(s) => self.probe_source(s),
        };
        Probe {
            template,
            source,
            same_network,
        }
    }

    fn probe_source(&self, s: u128) -> (Option<u16>, bool) {
        let n = usize::from(self.sources);
        let at = self.source_at();
        let keys = &self.words[at..at + 2 * n];
        let (lo, hi) = (s as u64, (s >> 64) as u64);
        // The network test as masks on the two words, so the loop has no branch but its exit:
        // an IPv4-mapped key keeps all but its last byte, an IPv6 key its top 48 bits.
        let net = network_of(s);
        let (mask_lo, mask_hi) = if s >> 32 == 0xffff {
            (!0xffu64, u64::MAX)
        } else {
            (0, !0xffff_u64)
        };
        let (net_lo, net_hi) = (net as u64, (net >> 64) as u64);
        // An IPv6 network whose top 48 bits are zero (`::/48`: loopback, IPv4-compatible) would
        // match every IPv4-mapped key under those masks; it takes the exact path instead.
        let exact_networks = net == 0;
        let mut same_network = false;
        for (i, pair) in keys.chunks_exact(2).enumerate() {
            if pair[0] == lo && pair[1] == hi {
                return (Some(i as u16), true);
            }
            same_network |= if exact_networks {
                network_of(u128::from(pair[0]) | (u128::from(pair[1]) << 64)) == net
            } else {
                (pair[0] & mask_lo) == net_lo && (pair[1] & mask_hi) == net_hi
            };
        }
        (None, same_network)
    }

    /// Templates known.
    pub fn template_len(&self) -> usize {
        usize::from(self.templates)
    }

    /// Sources known.
    pub fn source_len(&self) -> usize {
        usize::from(self.sources)
    }

    /// Template id in slot `i`.
    pub fn template(&self, i: usize) -> u64 {
        self.words[i]
    }

    /// LFU weight of the template in slot `i`.
    #[inline]
    pub fn weight(&self, i: usize) -> f32 {
        f32::from_bits(half(&self.words[self.weights_at()..], i))
    }

    fn set_weight(&mut self, i: usize, w: f32) {
        let at = self.weights_at();
        set_half(&mut self.words[at..], i, w.to_bits());
    }

    /// Source in slot `i`.
    pub fn source(&self, i: usize) -> u128 {
        let at = self.source_at() + 2 * i;
        u128::from(self.words[at]) | (u128::from(self.words[at + 1]) << 64)
    }

    fn set_source(&mut self, i: usize, s: u128) {
        let at = self.source_at() + 2 * i;
        self.words[at] = s as u64;
        self.words[at + 1] = (s >> 64) as u64;
    }

    /// Space-Saving count of the source in slot `i`.
    pub fn count(&self, i: usize) -> u32 {
        half(&self.words[self.counts_at()..], i)
    }

    fn set_count(&mut self, i: usize, c: u32) {
        let at = self.counts_at();
        set_half(&mut self.words[at..], i, c);
    }

    /// Learns a template as `probe` found it: its weight grows by one, or it takes a free slot, or
    /// (LFU, the Space-Saving rule) it replaces the lightest and inherits its weight plus one, so
    /// a burst of new templates cannot push out the regular ones. True when it was not known.
    pub fn learn_template(&mut self, t: u64, probe: &Probe) -> bool {
        if let Some(i) = probe.template {
            let i = usize::from(i);
            self.set_weight(i, self.weight(i) + 1.0);
            return false;
        }
        let n = usize::from(self.templates);
        if n < usize::from(self.template_cap) {
            self.words[n] = t;
            self.set_weight(n, 1.0);
            self.templates += 1;
        } else {
            let i = (0..n)
                .min_by(|&a, &b| self.weight(a).total_cmp(&self.weight(b)))
                .unwrap_or(0);
            self.words[i] = t;
            self.set_weight(i, self.weight(i) + 1.0);
        }
        true
    }

    /// Halves every template weight (the LFU decay that keeps weights bounded).
    pub fn halve_weights(&mut self) {
        for i in 0..usize::from(self.templates) {
            self.set_weight(i, self.weight(i) * 0.5);
        }
    }

    /// Learns a source as `probe` found it (Space-Saving top-K, Metwally et al. 2005).
    pub fn learn_source(&mut self, s: u128, probe: &Probe) {
        if let Some(i) = probe.source {
            let i = usize::from(i);
            self.set_count(i, self.count(i).saturating_add(1));
            return;
        }
        let n = usize::from(self.sources);
        if n < usize::from(self.source_cap) {
            self.set_source(n, s);
            self.set_count(n, 1);
            self.sources += 1;
        } else {
            let i = (0..n).min_by_key(|&i| self.count(i)).unwrap_or(0);
            self.set_source(i, s);
            self.set_count(i, self.count(i).saturating_add(1));
        }
    }
}

/// The network of an address: /24 for IPv4 (mapped), /48 for IPv6.
#[inline]
pub fn network_of(addr: u128) -> u128 {
    // `::ffff:a.b.c.d`: the top 96 bits are 0xffff.
    if addr >> 32 == 0xffff {
        addr & !0xff
    } else {
        addr & !((1u128 << 80) - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_count_and_evict_the_lightest() {
        let mut l = TopLists::new(3, 2);
        for t in [7, 7, 7, 8, 9, 9] {
            let p = l.probe(t, None);
            l.learn_template(t, &p);
        }
        assert_eq!(l.template_len(), 3);
        assert_eq!((l.template(0), l.weight(0)), (7, 3.0));
        // Template 8 (weight 1) is the lightest: 10 takes its slot and inherits 1 + 1.
        let p = l.probe(10, None);
        assert_eq!(p.template, None);
        assert!(l.learn_template(10, &p));
        assert_eq!((l.template(1), l.weight(1)), (10, 2.0));
        l.halve_weights();
        assert_eq!(l.weight(0), 1.5);
    }

    #[test]
    fn sources_keep_full_keys_and_networks() {
        let mut l = TopLists::new(1, 2);
        let a = 0xffff_0a01_0203u128;
        let b = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
        for s in [a, a, b] {
            let p = l.probe(0, Some(s));
            l.learn_source(s, &p);
        }
        assert_eq!((l.source(0), l.count(0)), (a, 2));
        assert_eq!((l.source(1), l.count(1)), (b, 1));
        let p = l.probe(0, Some(0xffff_0a01_0299));
        assert_eq!((p.source, p.same_network), (None, true));
        let p = l.probe(0, Some(0xffff_c000_0201));
        assert_eq!((p.source, p.same_network), (None, false));
        // IPv6: the same /48, another /48, and the all-zero /48 against IPv4-mapped keys.
        let p = l.probe(0, Some(0x2001_0db8_0000_ffff_0000_0000_0000_0009));
        assert_eq!((p.source, p.same_network), (None, true));
        let p = l.probe(0, Some(0x2001_0db8_0001_0000_0000_0000_0000_0001));
        assert_eq!((p.source, p.same_network), (None, false));
        assert!(!l.probe(0, Some(1)).same_network);
        // Full: the least counted (b) is replaced and the newcomer inherits its count plus one.
        let c = 0xffff_c000_0201u128;
        l.learn_source(c, &p);
        assert_eq!((l.source(1), l.count(1)), (c, 2));
        assert_eq!(l.probe(0, Some(a)).source, Some(0));
    }
}
