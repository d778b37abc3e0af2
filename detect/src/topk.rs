//! The two top-K lists of a UEBA baseline (templates with LFU weights, sources with Space-Saving
//! counts) in one allocation.
//!
//! Why one block: scoring an observation reads both lists, and with four separate boxes that was
//! four cache misses per observation on top of the map's, the largest cost of UEBA once entities
//! outnumber the cache. One block of 64-bit words is one region to prefetch (see
//! [`TopLists::prefetch`]) and one allocation per entity.
//!
//! Why sources are kept as 32-bit keys: nearly every source is an IPv4 address, and a probe for a
//! source never seen (the common case in an attack, and in a busy baseline) compares against every
//! key, for the network test. As `u128` keys that scan read 16 cache lines at the default cap of
//! 64; as IPv4 addresses it reads 4, four keys per SSE2 compare. IPv6 sources keep their full key
//! in a second block allocated the first time an entity sees one; an IPv6 slot's IPv4 key reads
//! 0, so it can only meet a probe from 0.0.0.0/24, which alone takes the slow path that asks the
//! second block which slots are IPv6 (an IPv4 address is never equal to, nor in the network of, an
//! IPv6 one). The default caps make the block 768 bytes and the second one 1,024, both exact
//! allocator size classes: one word more would cost a size class of 128 bytes more per entity.
//!
//! The layout, for `k` templates and `cap` sources (`cap` keys rounded up to a multiple of 16, so
//! the scan reads whole 64-byte blocks):
//!
//! ```text
//! [0, k)                  template ids
//! then ceil(cap / 16) * 8 IPv4 source keys, two u32 per word (0 in an IPv6 slot)
//! then ceil(k / 2)        template weights, two f32 per word
//! then ceil(cap / 4)      source counts, four u16 per word
//! ```
//!
//! The template ids are scanned a cache line (eight ids) per step, with SSE2 compares of both
//! 32-bit halves; a hit in the first line, the usual case for an entity's regular templates
//! (they took the first slots), costs one step.
//!
//! Lookups go through a [`Probe`] made once per observation and used by both scoring and learning,
//! so each list is scanned once per observation rather than once per question.

use crate::error::Error;
use crate::prefetch::prefetch;
use bincode::de::Decoder;
use bincode::error::DecodeError;
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

/// What learning a template did to the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateChange {
    /// It was known: its weight grew.
    Counted,
    /// It took a free slot.
    Added,
    /// It took the slot of this template, the lightest, which left the list.
    Replaced(u64),
}

/// Top-K templates and sources of one entity.
#[derive(Clone, Debug, Encode)]
pub struct TopLists {
    words: Box<[u64]>,
    /// Full keys of the IPv6 sources, by slot ([`IPV4_SLOT`] in the others): allocated with the
    /// entity's first IPv6 source.
    v6: Option<Box<[u128]>>,
    template_cap: u16,
    source_cap: u16,
    templates: u16,
    sources: u16,
}

/// What an IPv4 slot holds in the block of IPv6 keys: an IPv4-mapped key, which no IPv6 source
/// is.
const IPV4_SLOT: u128 = 0xffff_0000_0000;

/// IPv4 keys compared per step of the source scan: 64 bytes, one cache line's worth.
const BLOCK: usize = 16;

/// Words holding the IPv4 keys of `cap` sources, whole blocks.
#[inline]
fn key_words(cap: usize) -> usize {
    cap.div_ceil(BLOCK) * BLOCK / 2
}

/// Reads the `i`-th u32 of a run of words holding two per word.
#[inline]
fn lane32(words: &[u64], i: usize) -> u32 {
    (words[i / 2] >> (32 * (i & 1))) as u32
}

/// Writes the `i`-th u32 of a run of words holding two per word.
#[inline]
fn set_lane32(words: &mut [u64], i: usize, v: u32) {
    let shift = 32 * (i & 1);
    let w = &mut words[i / 2];
    *w = (*w & !(0xffff_ffffu64 << shift)) | (u64::from(v) << shift);
}

/// Reads the `i`-th u16 of a run of words holding four per word.
#[inline]
fn lane16(words: &[u64], i: usize) -> u16 {
    (words[i / 4] >> (16 * (i & 3))) as u16
}

/// Writes the `i`-th u16 of a run of words holding four per word.
#[inline]
fn set_lane16(words: &mut [u64], i: usize, v: u16) {
    let shift = 16 * (i & 3);
    let w = &mut words[i / 4];
    *w = (*w & !(0xffffu64 << shift)) | (u64::from(v) << shift);
}

/// The address of an IPv4-mapped key (`::ffff:a.b.c.d`), the form every IPv4 source takes.
#[inline]
fn ipv4_of(key: u128) -> Option<u32> {
    (key >> 32 == 0xffff).then_some(key as u32)
}

/// Compares the 16 IPv4 keys of one block (eight words) with `addr`: bit `j` of the first mask is
/// set when key `j` equals it, of the second when key `j` is in its /24.
#[cfg(target_arch = "x86_64")]
#[inline]
fn compare_block(block: &[u64], addr: u32) -> (u16, u16) {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_castsi128_ps, _mm_cmpeq_epi32, _mm_loadu_si128,
        _mm_movemask_ps, _mm_set1_epi32,
    };
    let block = &block[..BLOCK / 2];
    let (mut exact, mut net) = (0u32, 0u32);
    // SAFETY: SSE2 is part of the x86-64 baseline, so these intrinsics exist on every CPU this
    // runs on. `block` has eight words, so the two loaded at `2q` (16 bytes) are inside it, and an
    // unaligned load has no alignment requirement.
    unsafe {
        let want = _mm_set1_epi32(addr as i32);
        let net_mask = _mm_set1_epi32(!0xff);
        let want_net = _mm_and_si128(want, net_mask);
        for q in 0..BLOCK / 4 {
            let keys = _mm_loadu_si128(block.as_ptr().add(2 * q).cast::<__m128i>());
            let e = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(keys, want)));
            let n = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(
                _mm_and_si128(keys, net_mask),
                want_net,
            )));
            exact |= (e as u32) << (4 * q);
            net |= (n as u32) << (4 * q);
        }
    }
    (exact as u16, net as u16)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn compare_block(block: &[u64], addr: u32) -> (u16, u16) {
    compare_block_scalar(block, addr)
}

/// [`compare_block`] one key at a time: the version for other targets, and the reference the
/// SSE2 one is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn compare_block_scalar(block: &[u64], addr: u32) -> (u16, u16) {
    let (mut exact, mut net) = (0u16, 0u16);
    for j in 0..BLOCK {
        let k = lane32(block, j);
        exact |= u16::from(k == addr) << j;
        net |= u16::from((k ^ addr) < 0x100) << j;
    }
    (exact, net)
}

/// Template ids compared per step of the template scan: 64 bytes, one cache line's worth.
const ID_BLOCK: usize = 8;

/// Compares up to eight template ids with `id`: bit `j` is set when id `j` equals it. SSE2 has
/// no 64-bit equality, so both 32-bit halves are compared and each half's result is ANDed with
/// its neighbour's.
#[cfg(target_arch = "x86_64")]
#[inline]
fn compare_ids(ids: &[u64; ID_BLOCK], id: u64) -> u8 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_castsi128_pd, _mm_cmpeq_epi32, _mm_loadu_si128,
        _mm_movemask_pd, _mm_set1_epi64x, _mm_shuffle_epi32,
    };
    let mut mask = 0u32;
    // SAFETY: SSE2 is part of the x86-64 baseline. Each load reads words `2q` and `2q + 1` of an
    // eight-word array, and an unaligned load has no alignment requirement.
    unsafe {
        let want = _mm_set1_epi64x(id as i64);
        for q in 0..ID_BLOCK / 2 {
            let two = _mm_loadu_si128(ids.as_ptr().add(2 * q).cast::<__m128i>());
            let halves = _mm_cmpeq_epi32(two, want);
            // Swap the halves of each 64-bit lane (0b10_11_00_01) and AND: a lane is all ones
            // only when both of its halves matched.
            let both = _mm_and_si128(halves, _mm_shuffle_epi32::<0b1011_0001>(halves));
            mask |= (_mm_movemask_pd(_mm_castsi128_pd(both)) as u32) << (2 * q);
        }
    }
    mask as u8
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn compare_ids(ids: &[u64; ID_BLOCK], id: u64) -> u8 {
    compare_ids_scalar(ids, id)
}

/// [`compare_ids`] one id at a time: the version for other targets, and the reference the SSE2
/// one is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn compare_ids_scalar(ids: &[u64; ID_BLOCK], id: u64) -> u8 {
    let mut mask = 0u8;
    for (j, &t) in ids.iter().enumerate() {
        mask |= u8::from(t == id) << j;
    }
    mask
}

impl TopLists {
    /// Empty lists with room for `template_cap` templates and `source_cap` sources (each at least 1,
    /// at most 65,535).
    pub fn new(template_cap: usize, source_cap: usize) -> TopLists {
        let k = template_cap.clamp(1, usize::from(u16::MAX));
        let cap = source_cap.clamp(1, usize::from(u16::MAX));
        TopLists {
            words: vec![0; Self::words_for(k, cap)].into_boxed_slice(),
            v6: None,
            template_cap: k as u16,
            source_cap: cap as u16,
            templates: 0,
            sources: 0,
        }
    }

    /// Length of the block for `k` templates and `cap` sources.
    fn words_for(k: usize, cap: usize) -> usize {
        k + key_words(cap) + k.div_ceil(2) + cap.div_ceil(4)
    }

    #[inline]
    fn keys_at(&self) -> usize {
        usize::from(self.template_cap)
    }

    #[inline]
    fn weights_at(&self) -> usize {
        self.keys_at() + key_words(usize::from(self.source_cap))
    }

    #[inline]
    fn counts_at(&self) -> usize {
        self.weights_at() + usize::from(self.template_cap).div_ceil(2)
    }

    /// Slot `i` holds an IPv6 source.
    #[inline]
    fn is_v6(&self, i: usize) -> bool {
        self.v6
            .as_ref()
            .is_some_and(|full| ipv4_of(full[i]).is_none())
    }

    /// Asks the CPU to start loading the lists' hot words (the templates and IPv4 keys in use, the
    /// weights and counts) so that the misses of several entities overlap instead of queueing.
    #[inline]
    pub fn prefetch(&self) {
        let p = self.words.as_ptr();
        let lines = |from: usize, words: usize| {
            for line in 0..words.div_ceil(8) {
                prefetch(p.wrapping_add(from + 8 * line));
            }
        };
        // Templates (a 32-slot list is four lines), then the IPv4 keys in use (sixteen per line),
        // then the weights and counts.
        let sources = usize::from(self.sources);
        lines(0, usize::from(self.templates));
        lines(self.keys_at(), sources.div_ceil(2));
        prefetch(p.wrapping_add(self.weights_at()));
        // The counts in use (four per word): none for an entity without sources, such as an
        // address, whose lists hold templates only.
        lines(self.counts_at(), sources.div_ceil(4));
    }

    /// Looks `template` and `source` up: one pass over each list.
    #[inline]
    pub fn probe(&self, template: u64, source: Option<u128>) -> Probe {
        let template = self.find_template(template);
        let (source, same_network) = match source.map(|s| (s, ipv4_of(s))) {
            None => (None, false),
            Some((_, Some(addr))) => self.probe_v4(addr),
            Some((s, None)) => self.probe_v6(s),
        };
        Probe {
            template,
            source,
            same_network,
        }
    }

    /// The slot of `template`: the ids in use eight per step, then the few past the last whole
    /// block one at a time.
    #[inline]
    fn find_template(&self, template: u64) -> Option<u16> {
        let n = usize::from(self.templates);
        let ids = &self.words[..n];
        let mut blocks = ids.chunks_exact(ID_BLOCK);
        for (b, block) in blocks.by_ref().enumerate() {
            let block: &[u64; ID_BLOCK] = block.try_into().ok()?;
            let hit = compare_ids(block, template);
            if hit != 0 {
                return Some((b * ID_BLOCK + hit.trailing_zeros() as usize) as u16);
            }
        }
        let rest = blocks.remainder();
        let first = n - rest.len();
        rest.iter()
            .position(|&t| t == template)
            .map(|i| (first + i) as u16)
    }

    /// An IPv4 source against the IPv4 slots: a block of sixteen keys per step.
    #[inline]
    fn probe_v4(&self, addr: u32) -> (Option<u16>, bool) {
        let n = usize::from(self.sources);
        let keys = &self.words[self.keys_at()..self.weights_at()];
        // IPv6 slots read 0: only a probe in 0.0.0.0/24 could match one, and must skip them.
        let skip_v6 = addr >> 8 == 0 && self.v6.is_some();
        let mut same_network = false;
        for (b, block) in keys
            .chunks_exact(BLOCK / 2)
            .take(n.div_ceil(BLOCK))
            .enumerate()
        {
            let first = b * BLOCK;
            let in_use = if n - first >= BLOCK {
                u16::MAX
            } else {
                (1u16 << (n - first)) - 1
            };
            let mut v4 = in_use;
            if skip_v6 {
                for j in (0..BLOCK.min(n - first)).filter(|&j| self.is_v6(first + j)) {
                    v4 &= !(1 << j);
                }
            }
            let (exact, net) = compare_block(block, addr);
            let exact = exact & v4;
            if exact != 0 {
                return (Some((first + exact.trailing_zeros() as usize) as u16), true);
            }
            same_network |= net & v4 != 0;
        }
        (None, same_network)
    }

    /// An IPv6 source against the IPv6 slots, by their full keys.
    fn probe_v6(&self, s: u128) -> (Option<u16>, bool) {
        let Some(full) = &self.v6 else {
            return (None, false);
        };
        let net = network_of(s);
        let mut same_network = false;
        for (i, &key) in full[..usize::from(self.sources)].iter().enumerate() {
            if key == s {
                return (Some(i as u16), true);
            }
            same_network |= ipv4_of(key).is_none() && network_of(key) == net;
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

    /// Template id in slot `index`.
    pub fn template(&self, index: usize) -> u64 {
        self.words[index]
    }

    /// LFU weight of the template in slot `index`.
    #[inline]
    pub fn weight(&self, index: usize) -> f32 {
        f32::from_bits(lane32(&self.words[self.weights_at()..], index))
    }

    fn set_weight(&mut self, i: usize, w: f32) {
        let at = self.weights_at();
        set_lane32(&mut self.words[at..], i, w.to_bits());
    }

    /// Source in slot `index`.
    pub fn source(&self, index: usize) -> u128 {
        match self.v6.as_ref().map(|full| full[index]) {
            Some(key) if ipv4_of(key).is_none() => key,
            _ => IPV4_SLOT | u128::from(lane32(&self.words[self.keys_at()..], index)),
        }
    }

    fn set_source(&mut self, i: usize, s: u128) {
        let at = self.keys_at();
        let addr = ipv4_of(s);
        set_lane32(&mut self.words[at..], i, addr.unwrap_or(0));
        match (addr, &mut self.v6) {
            (Some(_), Some(full)) => full[i] = IPV4_SLOT,
            (Some(_), None) => {}
            (None, v6) => {
                let cap = usize::from(self.source_cap);
                v6.get_or_insert_with(|| vec![IPV4_SLOT; cap].into_boxed_slice())[i] = s;
            }
        }
    }

    /// Space-Saving count of the source in slot `index`.
    pub fn count(&self, index: usize) -> u32 {
        u32::from(lane16(&self.words[self.counts_at()..], index))
    }

    fn set_count(&mut self, i: usize, c: u16) {
        let at = self.counts_at();
        set_lane16(&mut self.words[at..], i, c);
    }

    /// Adds one to the count of slot `i`. Counts are 16-bit: when one would overflow, every count
    /// is halved first, which keeps their order (all the top-K needs) and lets recent sources
    /// catch up with ones that were frequent long ago.
    fn bump_count(&mut self, i: usize) {
        if lane16(&self.words[self.counts_at()..], i) == u16::MAX {
            for j in 0..usize::from(self.sources) {
                let c = lane16(&self.words[self.counts_at()..], j);
                self.set_count(j, c / 2);
            }
        }
        let c = lane16(&self.words[self.counts_at()..], i);
        self.set_count(i, c + 1);
    }

    /// Learns a template as `probe` found it: its weight grows by one, or it takes a free slot, or
    /// (LFU, the Space-Saving rule) it replaces the lightest and inherits its weight plus one, so
    /// a burst of new templates cannot push out the regular ones.
    pub fn learn_template(&mut self, template: u64, probe: &Probe) -> TemplateChange {
        if let Some(i) = probe.template {
            let i = usize::from(i);
            self.set_weight(i, self.weight(i) + 1.0);
            return TemplateChange::Counted;
        }
        let n = usize::from(self.templates);
        if n < usize::from(self.template_cap) {
            self.words[n] = template;
            self.set_weight(n, 1.0);
            self.templates += 1;
            TemplateChange::Added
        } else {
            let i = (0..n)
                .min_by(|&a, &b| self.weight(a).total_cmp(&self.weight(b)))
                .unwrap_or(0);
            let old = self.words[i];
            self.words[i] = template;
            self.set_weight(i, self.weight(i) + 1.0);
            TemplateChange::Replaced(old)
        }
    }

    /// Halves every template weight (the LFU decay that keeps weights bounded).
    pub fn halve_weights(&mut self) {
        for i in 0..usize::from(self.templates) {
            self.set_weight(i, self.weight(i) * 0.5);
        }
    }

    /// Learns a source as `probe` found it (Space-Saving top-K, Metwally et al. 2005): a known
    /// one counts one more, a new one takes a free slot or replaces the least counted and inherits
    /// its count plus one.
    pub fn learn_source(&mut self, source: u128, probe: &Probe) {
        let i = match probe.source {
            Some(i) => usize::from(i),
            None => {
                let n = usize::from(self.sources);
                let i = if n < usize::from(self.source_cap) {
                    self.sources += 1;
                    self.set_count(n, 0);
                    n
                } else {
                    (0..n).min_by_key(|&i| self.count(i)).unwrap_or(0)
                };
                self.set_source(i, source);
                i
            }
        };
        self.bump_count(i);
    }

    /// Why these lists cannot be used, if they cannot: a saved baseline is decoded into this, and
    /// one saved with another layout must be refused rather than read at the wrong offsets.
    fn check(&self) -> Result<(), Error> {
        let inconsistent = |detail: String| Error::Inconsistent {
            model: "top-K lists",
            detail,
        };
        let (k, cap) = (usize::from(self.template_cap), usize::from(self.source_cap));
        if k == 0
            || cap == 0
            || self.templates > self.template_cap
            || self.sources > self.source_cap
        {
            return Err(inconsistent(format!(
                "{}/{} templates and {}/{} sources",
                self.templates, k, self.sources, cap
            )));
        }
        if self.words.len() != Self::words_for(k, cap) {
            return Err(inconsistent(format!(
                "{} words where this layout has {}",
                self.words.len(),
                Self::words_for(k, cap)
            )));
        }
        match &self.v6 {
            Some(full) if full.len() != cap => Err(inconsistent(format!(
                "{} IPv6 keys for {cap} slots",
                full.len()
            ))),
            _ => Ok(()),
        }
    }
}

impl<C> Decode<C> for TopLists {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        let lists = TopLists {
            words: Decode::decode(d)?,
            v6: Decode::decode(d)?,
            template_cap: Decode::decode(d)?,
            source_cap: Decode::decode(d)?,
            templates: Decode::decode(d)?,
            sources: Decode::decode(d)?,
        };
        lists.check()?;
        Ok(lists)
    }
}

bincode::impl_borrow_decode!(TopLists);

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
    use crate::rng::SplitMix64;

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
        assert_eq!(l.learn_template(10, &p), TemplateChange::Replaced(8));
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
        // The IPv6 key left its slot: neither it nor its network is found any more.
        let p = l.probe(0, Some(b));
        assert_eq!((p.source, p.same_network), (None, false));
    }

    /// The same Space-Saving list kept as plain `(key, count)` pairs and probed by brute force.
    struct Model {
        cap: usize,
        slots: Vec<(u128, u32)>,
    }

    impl Model {
        fn probe(&self, s: u128) -> (Option<u16>, bool) {
            if let Some(i) = self.slots.iter().position(|&(k, _)| k == s) {
                return (Some(i as u16), true);
            }
            let net = network_of(s);
            let same = self.slots.iter().any(|&(k, _)| {
                (ipv4_of(k).is_some() == ipv4_of(s).is_some()) && network_of(k) == net
            });
            (None, same)
        }

        fn learn(&mut self, s: u128, found: Option<u16>) {
            let i = match found {
                Some(i) => usize::from(i),
                None if self.slots.len() < self.cap => {
                    self.slots.push((s, 0));
                    self.slots.len() - 1
                }
                None => {
                    let min = self.slots.iter().map(|&(_, c)| c).min().unwrap_or(0);
                    let i = self.slots.iter().position(|&(_, c)| c == min).unwrap_or(0);
                    self.slots[i].0 = s;
                    i
                }
            };
            if self.slots[i].1 == u32::from(u16::MAX) {
                for slot in &mut self.slots {
                    slot.1 /= 2;
                }
            }
            self.slots[i].1 += 1;
        }
    }

    #[test]
    fn sources_match_a_brute_force_model_across_blocks_and_families() {
        let mut rng = SplitMix64::new(7);
        // Caps around the 16-key block and the 64-slot bitmap word.
        for cap in [1, 5, 16, 17, 64, 65, 100] {
            let mut l = TopLists::new(4, cap);
            let mut m = Model {
                cap,
                slots: Vec::new(),
            };
            for _ in 0..20_000 {
                // A few networks of each family, so exact hits, network hits and misses all
                // happen; one IPv4 network sits at 0.0.0.0/24, where unused keys read 0.
                let host = u128::from(rng.below(6));
                let s = match rng.below(5) {
                    0 => {
                        0x2001_0db8_0000_0000_0000_0000_0000_0000
                            | (u128::from(rng.below(3)) << 80)
                            | host
                    }
                    1 => 0xffff_0000_0000 | host,
                    2 => host,
                    _ => 0xffff_0a00_0000 | (u128::from(rng.below(40)) << 8) | host,
                };
                let got = l.probe(0, Some(s));
                assert_eq!(
                    (got.source, got.same_network),
                    m.probe(s),
                    "cap {cap}, {s:#x}"
                );
                l.learn_source(s, &got);
                m.learn(s, got.source);
                assert_eq!(l.source_len(), m.slots.len());
            }
            for (i, &(k, c)) in m.slots.iter().enumerate() {
                assert_eq!((l.source(i), l.count(i)), (k, c), "cap {cap}, slot {i}");
            }
        }
    }

    #[test]
    fn counts_halve_before_they_overflow() {
        let mut l = TopLists::new(1, 2);
        let (a, b) = (0xffff_0a00_0001u128, 0xffff_0a00_0002u128);
        for _ in 0..3 {
            let p = l.probe(0, Some(b));
            l.learn_source(b, &p);
        }
        for _ in 0..u32::from(u16::MAX) + 1 {
            let p = l.probe(0, Some(a));
            l.learn_source(a, &p);
        }
        assert_eq!((l.count(0), l.count(1)), (1, u32::from(u16::MAX) / 2 + 1));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_sse2_block_compare_matches_the_scalar_one() {
        let mut rng = SplitMix64::new(3);
        for _ in 0..10_000 {
            let block: Vec<u64> = (0..BLOCK / 2)
                .map(|_| {
                    (rng.below(4) << 32 | rng.below(4) << 40) | rng.below(3) << 8 | rng.below(3)
                })
                .collect();
            let addr = (rng.below(3) << 8 | rng.below(3)) as u32;
            assert_eq!(
                compare_block(&block, addr),
                compare_block_scalar(&block, addr)
            );
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_sse2_id_compare_matches_the_scalar_one() {
        let mut rng = SplitMix64::new(4);
        for _ in 0..10_000 {
            // Ids that agree in one half but not the other must not match.
            let ids: [u64; ID_BLOCK] = std::array::from_fn(|_| rng.below(3) << 32 | rng.below(3));
            let id = rng.below(3) << 32 | rng.below(3);
            assert_eq!(compare_ids(&ids, id), compare_ids_scalar(&ids, id));
        }
    }

    #[test]
    fn a_template_is_found_in_any_slot_of_any_list_length() {
        for k in [1, 7, 8, 9, 16, 31, 32, 33] {
            let mut l = TopLists::new(k, 4);
            let ids: Vec<u64> = (0..k as u64).map(|i| (i + 1) << 33 | (i * 7)).collect();
            for &t in &ids {
                let p = l.probe(t, None);
                assert_eq!(p.template, None, "k {k}: {t:#x} before it is learned");
                l.learn_template(t, &p);
            }
            for (i, &t) in ids.iter().enumerate() {
                assert_eq!(l.probe(t, None).template, Some(i as u16), "k {k}");
            }
            // Same low half as a known id, another high half.
            assert_eq!(l.probe(ids[0] ^ (1 << 40), None).template, None);
        }
    }

    #[test]
    fn lists_survive_encoding_and_other_layouts_are_refused() {
        let cfg = watchpost_proto::bincode_config();
        let mut l = TopLists::new(32, 64);
        for s in [
            0xffff_0a00_0001u128,
            0x2001_0db8_0000_0000_0000_0000_0000_0001,
        ] {
            let p = l.probe(9, Some(s));
            l.learn_source(s, &p);
            l.learn_template(9, &p);
        }
        let bytes = bincode::encode_to_vec(&l, cfg).unwrap();
        let (back, _): (TopLists, _) = bincode::decode_from_slice(&bytes, cfg).unwrap();
        assert_eq!(back.source(1), l.source(1));
        assert_eq!((back.template(0), back.weight(0)), (9, 2.0));
        // The layout before IPv4 keys (u128 keys, u32 counts, no IPv6 block) does not decode,
        // and a block of the wrong length is refused by name rather than read at wrong offsets.
        let old = (
            vec![0u64; 32 + 128 + 16 + 32].into_boxed_slice(),
            32u16,
            64u16,
            0u16,
            0u16,
        );
        let bytes = bincode::encode_to_vec(&old, cfg).unwrap();
        assert!(bincode::decode_from_slice::<TopLists, _>(&bytes, cfg).is_err());
        let wrong = (old.0, None::<Box<[u128]>>, 32u16, 64u16, 0u16, 0u16);
        let bytes = bincode::encode_to_vec(&wrong, cfg).unwrap();
        let err = bincode::decode_from_slice::<TopLists, _>(&bytes, cfg).unwrap_err();
        assert!(
            err.to_string()
                .contains("208 words where this layout has 96"),
            "{err}"
        );
    }
}
