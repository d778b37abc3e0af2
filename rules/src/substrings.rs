//! Many ASCII-case-folded substrings found in one read of a value: the automaton of a gate
//! (every literal of a field across a group's rules) and of a rule's item (a `contains` list).
//!
//! The search loops are compiled for a concrete automaton, with no call through a trait object
//! per byte, which `AhoCorasick`'s own searches pay: 20% of matching with the whole SigmaHQ set
//! when gates used them, and 14% when rules' `contains` lists still did.

use crate::folded::eq_lower;
use aho_corasick::Anchored;
use aho_corasick::automaton::Automaton;
use std::ops::ControlFlow;

/// Literals up to which a keyword gate (searching the event's lower-cased text) is a
/// case-sensitive DFA, past them [`Grams`]. DFAs over thousands of literals took the whole
/// SigmaHQ set's load from 0.35 s and 255 MB to 0.54-1.2 s and 380 MB for no gain.
const KEYWORD_DFA_MAX_LITERALS: usize = 200;

/// An automaton over substrings, of a concrete type (see the module's comment).
#[derive(Clone, Debug)]
pub(crate) enum Substrings {
    Dfa(aho_corasick::dfa::DFA),
    Grams(Grams),
}

impl Substrings {
    /// ASCII case folded: a DFA up to [`DFA_MAX_LITERALS`], [`Grams`] past them. `lower`:
    /// the haystacks are in lower case already (a keyword gate's event text), and the DFA
    /// compares exactly, up to [`KEYWORD_DFA_MAX_LITERALS`]: its prefilters (memmem, Teddy)
    /// skip far faster than a case-folding DFA's.
    pub(crate) fn build(patterns: &[&str], lower: bool) -> Option<Substrings> {
        if lower && patterns.len() <= KEYWORD_DFA_MAX_LITERALS {
            return aho_corasick::dfa::Builder::new()
                .build(patterns)
                .ok()
                .map(Substrings::Dfa);
        }
        if patterns.len() > DFA_MAX_LITERALS {
            return Grams::build(patterns).map(Substrings::Grams);
        }
        aho_corasick::dfa::Builder::new()
            .ascii_case_insensitive(true)
            .build(patterns)
            .ok()
            .map(Substrings::Dfa)
    }

    /// Calls `on` with the number of every pattern occurring in `haystack`, overlaps included.
    #[inline]
    pub(crate) fn each(&self, haystack: &[u8], mut on: impl FnMut(usize)) {
        let _ = self.search(haystack, |id| {
            on(id);
            ControlFlow::Continue(())
        });
    }

    /// Whether any pattern occurs in `haystack`: the search stops at the first.
    #[inline]
    pub(crate) fn any(&self, haystack: &[u8]) -> bool {
        self.search(haystack, |_| ControlFlow::Break(())).is_break()
    }

    /// Grams, whose byte-by-byte read of a value costs more than a DFA's prefiltered one.
    #[inline]
    pub(crate) fn is_grams(&self) -> bool {
        matches!(self, Substrings::Grams(_))
    }

    /// Calls `on` with each occurrence until it breaks.
    #[inline]
    fn search(&self, haystack: &[u8], on: impl FnMut(usize) -> ControlFlow<()>) -> ControlFlow<()> {
        match self {
            Substrings::Dfa(a) => occurrences(a, haystack, on),
            Substrings::Grams(g) => g.search(haystack, on),
        }
    }
}

/// Literals up to which a gate or an item finds them with an automaton, past which by their
/// grams ([`Grams`]): with the whole SigmaHQ set, grams for every gate past 16 literals
/// matched Windows records 5-10% faster than DFAs up to 200 literals and contiguous NFAs past
/// them. Once the grams folded case a gram at a time, past 4 rather than 16 took matching
/// from 251.6 M to 249.9 M instructions and its simulated first-level cache misses down by 8%
/// (a case-folding DFA's rows are 256 classes wide; the grams' bitmap of a dozen literals is
/// 128 bytes), and the paired wall clock from 424 k to 471 k events/s (median of 16 rounds).
pub(crate) const DFA_MAX_LITERALS: usize = 4;

/// Many literals found by one rare four-byte gram of each, in the manner of Wu-Manber: a
/// value is read a byte at a time, the gram ending at each byte hashed into a bitmap, and only
/// where a bit is set are the literals with that gram compared. With thousands of literals
/// (8,835 for the command line with the whole SigmaHQ set) an automaton's states spread over
/// megabytes and every byte of a value costs a cache miss (22 ns per byte of a command line);
/// the bitmap takes 16 bits per literal and most bytes stop at it. Literals under four bytes
/// go to a small automaton beside it.
#[derive(Clone, Debug)]
pub(crate) struct Grams {
    /// One bit per hash of a gram ([`Grams::hash`]).
    bits: Vec<u64>,
    /// Per word of `bits`: the bits set in the words before it, so that the entries of a set
    /// bit are found without a search ([`Grams::probe`]).
    ranks: Vec<u32>,
    /// `32 - log2(bits)`: the hash's top bits index the bitmap.
    shift: u32,
    /// Where each set bit's entries start in `entries`, by the bit's rank, and one past the
    /// last.
    starts: Vec<u32>,
    /// Per literal of four bytes or more, by its gram's hash: (folded gram, literal, bytes of
    /// the literal up to the gram's end).
    entries: Vec<(u32, u32, u32)>,
    /// The literals, ASCII lower case, by pattern number.
    literals: Vec<Box<[u8]>>,
    /// The literals under four bytes (by their own numbers, mapped through `short_ids`).
    short: Option<aho_corasick::dfa::DFA>,
    short_ids: Vec<u32>,
    /// The bitmap is read eight grams at a time ([`Grams::scan_avx2`]): the CPU has AVX2,
    /// found when the grams were built.
    avx2: bool,
}

impl Grams {
    /// Bits per literal in the bitmap: about one probe in 16 finds a bit set by another gram.
    const BITS_PER_LITERAL: usize = 16;

    fn build(patterns: &[&str]) -> Option<Grams> {
        let literals: Vec<Box<[u8]>> = patterns
            .iter()
            .map(|p| p.to_ascii_lowercase().into_bytes().into_boxed_slice())
            .collect();
        // How many literals hold each gram: a literal is found by its least shared one, so
        // that a gram common in values (`.exe`) stops few of them.
        let mut shared: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
        for l in literals.iter().filter(|l| l.len() >= 4) {
            let mut grams: Vec<u32> = l.windows(4).map(Grams::pack).collect();
            grams.sort_unstable();
            grams.dedup();
            for g in grams {
                *shared.entry(g).or_default() += 1;
            }
        }
        let size = (literals.len() * Grams::BITS_PER_LITERAL)
            .next_power_of_two()
            .clamp(1 << 10, 1 << 22);
        let shift = 32 - size.trailing_zeros();
        let mut entries: Vec<(usize, u32, u32, u32)> = Vec::with_capacity(literals.len());
        let mut short_ids = Vec::new();
        let mut short_patterns = Vec::new();
        for (id, l) in literals.iter().enumerate() {
            if l.len() < 4 {
                short_ids.push(id as u32);
                short_patterns.push(&l[..]);
                continue;
            }
            let (end, gram) = l
                .windows(4)
                .enumerate()
                .map(|(at, g)| (at + 4, Grams::pack(g)))
                .min_by_key(|(end, gram)| (shared[gram], Grams::commonness(&l[end - 4..*end])))?;
            entries.push((Grams::hash(gram, shift), gram, id as u32, end as u32));
        }
        entries.sort_unstable();
        let mut bits = vec![0u64; size / 64];
        for &(h, ..) in &entries {
            bits[h / 64] |= 1 << (h % 64);
        }
        let mut ranks = Vec::with_capacity(bits.len());
        let mut rank = 0u32;
        for w in &bits {
            ranks.push(rank);
            rank += w.count_ones();
        }
        let mut starts = Vec::with_capacity(rank as usize + 1);
        for (i, e) in entries.iter().enumerate() {
            if i == 0 || entries[i - 1].0 != e.0 {
                starts.push(i as u32);
            }
        }
        starts.push(entries.len() as u32);
        let short = if short_patterns.is_empty() {
            None
        } else {
            Some(
                aho_corasick::dfa::Builder::new()
                    .ascii_case_insensitive(true)
                    .build(&short_patterns)
                    .ok()?,
            )
        };
        Some(Grams {
            bits,
            ranks,
            shift,
            starts,
            entries: entries
                .into_iter()
                .map(|(_, g, id, end)| (g, id, end))
                .collect(),
            literals,
            short,
            short_ids,
            avx2: avx2_detected(),
        })
    }

    /// A gram's bytes, its first in the highest place (as [`Grams::search`] rolls them in),
    /// each with its `0x20` bit set ([`Grams::fold`]).
    #[inline]
    fn pack(gram: &[u8]) -> u32 {
        Grams::fold(gram.iter().fold(0u32, |g, &b| (g << 8) | u32::from(b)))
    }

    /// A gram with the `0x20` bit of each byte set: an ASCII letter's two cases become one
    /// (its lower case) with one `or` per gram, where lower-casing each byte of a value took
    /// four instructions (2% of matching with the whole SigmaHQ set, callgrind). Some other
    /// bytes meet too (`\` and `|`, `[` and `{`, a tab and `)`): their grams share a bit and an
    /// entry, and the comparison of the literal itself, in ASCII case folding, tells them
    /// apart.
    #[inline]
    fn fold(gram: u32) -> u32 {
        gram | Grams::FOLD
    }

    /// The bits [`Grams::fold`] sets; [`Grams::scan_avx2`] sets them in eight grams at once.
    const FOLD: u32 = 0x2020_2020;

    #[inline]
    fn hash(gram: u32, shift: u32) -> usize {
        (gram.wrapping_mul(Grams::MULTIPLIER) >> shift) as usize
    }

    /// [`Grams::hash`]'s multiplier, which [`Grams::scan_avx2`] multiplies eight grams by.
    const MULTIPLIER: u32 = 0x9e37_79b1;

    /// How common a gram's bytes are in log values, to break ties: letters, path separators,
    /// dots and spaces are everywhere; digits and other punctuation less so.
    fn commonness(gram: &[u8]) -> u32 {
        gram.iter()
            .map(|b| match b {
                b'a'..=b'z' | b'\\' | b'.' | b' ' | b'/' => 2,
                b'0'..=b'9' | b'-' | b'_' | b':' => 1,
                _ => 0,
            })
            .sum()
    }

    /// Calls `on` with the number of every literal occurring in `haystack` (once per
    /// occurrence) until it breaks.
    #[inline]
    fn search(
        &self,
        haystack: &[u8],
        mut on: impl FnMut(usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if let Some(short) = &self.short {
            occurrences(short, haystack, |i| on(self.short_ids[i] as usize))?;
        }
        // Literals all under four bytes have no grams: the small automaton was the search.
        if haystack.len() < 4 || self.entries.is_empty() {
            return ControlFlow::Continue(());
        }
        #[cfg(target_arch = "x86_64")]
        let from = if self.avx2 {
            // SAFETY: `avx2` is set only where the CPU was found to have AVX2.
            unsafe { self.scan_avx2(haystack, &mut on)? }
        } else {
            3
        };
        #[cfg(not(target_arch = "x86_64"))]
        let from = 3;
        self.scan(haystack, from, &mut on)
    }

    /// [`Grams::search`]'s read of the grams ending at byte `from` (at least 3) and after it,
    /// a byte at a time.
    #[inline]
    fn scan(
        &self,
        haystack: &[u8],
        from: usize,
        on: &mut impl FnMut(usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let Some((head, rest)) = haystack.get(from - 3..).and_then(|h| h.split_at_checked(3))
        else {
            return ControlFlow::Continue(());
        };
        let mut gram = head.iter().fold(0u32, |g, &b| (g << 8) | u32::from(b));
        // By iterator, not index: no bounds check per byte of the value.
        for (i, &byte) in rest.iter().enumerate() {
            gram = (gram << 8) | u32::from(byte);
            let folded = Grams::fold(gram);
            let h = Grams::hash(folded, self.shift);
            if self.bit(h) {
                self.probe_bit(folded, h, from + i, haystack, on)?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Whether bit `h` of the bitmap is set.
    #[inline(always)]
    fn bit(&self, h: usize) -> bool {
        (self.bits[h / 64] >> (h % 64)) & 1 != 0
    }

    /// [`Grams::probe`] of set bit `h`, for the gram `folded` ending at byte `at`.
    #[inline(always)]
    fn probe_bit(
        &self,
        folded: u32,
        h: usize,
        at: usize,
        haystack: &[u8],
        on: &mut impl FnMut(usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let below = self.bits[h / 64] & ((1u64 << (h % 64)) - 1);
        let rank = self.ranks[h / 64] + below.count_ones();
        self.probe(folded, rank as usize, at, haystack, on)
    }

    /// The grams of `haystack` eight at a time, from the one ending at byte 3 while sixteen
    /// bytes remain to load; gives the end of the first gram left for [`Grams::scan`]. Per
    /// eight grams: one load, one shuffle to lay the eight grams out (each byte's `0x20` bit set
    /// as [`Grams::fold`] does), one multiply and shift for their hashes ([`Grams::hash`]), one
    /// gather of their bitmap words, and a mask of the bits set; each set bit is probed in
    /// order as [`Grams::scan`] would. A byte at a time, reading the bitmap was most of the
    /// grams' cost: a Sysmon process record's command line is a few hundred bytes, read by
    /// the gates of every field that holds one.
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn scan_avx2(
        &self,
        haystack: &[u8],
        on: &mut impl FnMut(usize) -> ControlFlow<()>,
    ) -> ControlFlow<(), usize> {
        use std::arch::x86_64::{
            __m128i, _mm_cvtsi32_si128, _mm_loadu_si128, _mm256_and_si256,
            _mm256_broadcastsi128_si256, _mm256_castsi256_ps, _mm256_i32gather_epi32,
            _mm256_movemask_ps, _mm256_mullo_epi32, _mm256_or_si256, _mm256_set1_epi32,
            _mm256_setr_epi8, _mm256_shuffle_epi8, _mm256_sllv_epi32, _mm256_srl_epi32,
            _mm256_srli_epi32, _mm256_sub_epi32,
        };
        // Lane k (0..8) of the shuffle takes the gram ending at byte k + 3 of the sixteen
        // loaded, first byte highest, as `scan` rolls them in; each 128-bit half shuffles its
        // own copy of the sixteen bytes.
        let lay_out = _mm256_setr_epi8(
            3, 2, 1, 0, 4, 3, 2, 1, 5, 4, 3, 2, 6, 5, 4, 3, //
            7, 6, 5, 4, 8, 7, 6, 5, 9, 8, 7, 6, 10, 9, 8, 7,
        );
        let fold = _mm256_set1_epi32(Grams::FOLD as i32);
        let multiplier = _mm256_set1_epi32(Grams::MULTIPLIER as i32);
        let shift = _mm_cvtsi32_si128(self.shift as i32);
        let low_five = _mm256_set1_epi32(31);
        // What makes every gathered word lie in `bits` (see the loop's SAFETY).
        debug_assert_eq!(self.bits.len() * 64, 1usize << (32 - self.shift));
        let words = self.bits.as_ptr().cast::<i32>();
        let mut end = 3;
        while end + 13 <= haystack.len() {
            // SAFETY: bytes `end - 3..end + 13` lie in `haystack` (the loop's condition); an
            // unaligned load needs no alignment. Each hash is under the bitmap's size in bits
            // (`shift` keeps its top bits), so word `hash / 32` lies in `bits` (read as twice
            // as many little-endian 32-bit words).
            let mask = unsafe {
                let sixteen = _mm_loadu_si128(haystack.as_ptr().add(end - 3).cast::<__m128i>());
                let grams = _mm256_or_si256(
                    _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(sixteen), lay_out),
                    fold,
                );
                let hashes = _mm256_srl_epi32(_mm256_mullo_epi32(grams, multiplier), shift);
                let bitmap = _mm256_i32gather_epi32::<4>(words, _mm256_srli_epi32::<5>(hashes));
                // Each lane's bit moved to the top, where the mask reads it.
                let top = _mm256_sllv_epi32(
                    bitmap,
                    _mm256_sub_epi32(low_five, _mm256_and_si256(hashes, low_five)),
                );
                _mm256_movemask_ps(_mm256_castsi256_ps(top)) as u32
            };
            let mut lanes = mask;
            while lanes != 0 {
                let at = end + lanes.trailing_zeros() as usize;
                lanes &= lanes - 1;
                let folded = Grams::pack(&haystack[at - 3..=at]);
                self.probe_bit(folded, Grams::hash(folded, self.shift), at, haystack, on)?;
            }
            end += 8;
        }
        ControlFlow::Continue(end)
    }

    /// The literals of the bit of rank `rank` whose folded gram is `gram`, ending at byte `at` of
    /// `haystack`, that sit there.
    #[inline(never)]
    fn probe(
        &self,
        gram: u32,
        rank: usize,
        at: usize,
        haystack: &[u8],
        on: &mut impl FnMut(usize) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let span = self.starts[rank] as usize..self.starts[rank + 1] as usize;
        for &(g, id, end) in &self.entries[span] {
            if g != gram {
                continue;
            }
            let literal = &self.literals[id as usize];
            let Some(start) = (at + 1).checked_sub(end as usize) else {
                continue;
            };
            if haystack
                .get(start..start + literal.len())
                .is_some_and(|s| eq_lower(s, literal))
            {
                on(id as usize)?;
            }
        }
        ControlFlow::Continue(())
    }
}

/// Whether this CPU has AVX2, for [`Grams::scan_avx2`].
fn avx2_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Every pattern occurrence of `automaton` (built for standard, overlapping matches) in
/// `haystack`, until `on` breaks. No pattern is empty, so the start state is never a match. In the start state
/// the automaton's prefilter (a SIMD search for a few literals, rare bytes for more) skips to
/// the next place a match can start, as `AhoCorasick`'s own searches do.
#[inline]
fn occurrences<A: Automaton>(
    automaton: &A,
    haystack: &[u8],
    mut on: impl FnMut(usize) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let done = ControlFlow::Continue(());
    let Ok(mut sid) = automaton.start_state(Anchored::No) else {
        return done;
    };
    let mut skips = Skips::default();
    let prefilter = automaton.prefilter();
    // Where the prefilter is taken up again after a stretch it did not pay for.
    let mut paused_until = 0;
    let mut at = 0;
    if let Some(pre) = prefilter {
        match pre
            .find_in(haystack, aho_corasick::Span::from(0..haystack.len()))
            .into_option()
        {
            None => return done,
            Some(i) => at = i,
        }
    }
    while at < haystack.len() {
        sid = automaton.next_state(Anchored::No, sid, haystack[at]);
        if automaton.is_special(sid) {
            if automaton.is_dead(sid) {
                return done;
            }
            if automaton.is_match(sid) {
                for i in 0..automaton.match_len(sid) {
                    on(automaton.match_pattern(sid, i).as_usize())?;
                }
            } else if let Some(pre) = prefilter.filter(|_| at >= paused_until) {
                // Back in the start state: skip to the next candidate.
                let span = aho_corasick::Span::from(at + 1..haystack.len());
                match pre.find_in(haystack, span).into_option() {
                    None => return done,
                    Some(i) => {
                        if skips.record(i - at - 1) {
                            paused_until = i + Skips::PAUSE;
                            skips = Skips::default();
                        }
                        at = i;
                        continue;
                    }
                }
            }
        }
        at += 1;
    }
    done
}

/// How far a haystack's prefilter calls have skipped. In a value the rare bytes fill (hex
/// digits of `Hashes` against its hash literals) each call skips a byte or none and costs more
/// than the automaton's step: 2.0 us against 1.0 us per Sysmon `Hashes` value. After
/// [`Skips::TRIED`] calls that skipped under [`Skips::WORTH`] bytes on average, the next
/// [`Skips::PAUSE`] bytes are stepped through, as `aho-corasick`'s own searches give up an
/// ineffective prefilter; then it is tried again, since a keyword gate's haystack is a whole
/// event's text, whose other values it may skip well.
#[derive(Default)]
struct Skips {
    calls: u32,
    skipped: usize,
}

impl Skips {
    const TRIED: u32 = 8;
    const WORTH: usize = 4;
    const PAUSE: usize = 256;

    /// Records a call that skipped `bytes`; true when the prefilter is not worth its calls.
    #[inline]
    fn record(&mut self, bytes: usize) -> bool {
        self.calls += 1;
        self.skipped += bytes;
        self.calls >= Skips::TRIED && self.skipped < Skips::WORTH * self.calls as usize
    }
}

#[cfg(test)]
mod tests {
    use super::{DFA_MAX_LITERALS, Grams, Substrings};
    use crate::test_support::Words;
    use std::ops::ControlFlow;

    /// A Sysmon `Hashes` value is hex digits throughout, the bytes a hash literal's prefilter
    /// looks for: the DFA's scan gives the prefilter up part way and must still find every
    /// literal, before and after that point; the gram index must find them too.
    #[test]
    fn literals_in_a_value_the_prefilter_cannot_skip_are_all_found() {
        let md5 = "md5=0f343b0931126a20f133d67c2b018a3b";
        let imphash = "imphash=f34d5f2d4577ed6d9ceec516c1f5a744";
        let value = format!(
            "SHA1=0A1B2C3D4E5F60718293A4B5C6D7E8F901234567,{},SHA256=\
             9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08,{}",
            md5.to_uppercase(),
            imphash.to_uppercase()
        );
        // 4 patterns: a DFA with a prefilter of hex digits; 5 (the first count past
        // `DFA_MAX_LITERALS`) and 650: grams.
        for others in [2, 3, 648] {
            let mut patterns: Vec<String> = (0..others).map(|i| format!("sha1={i:040x}")).collect();
            patterns.push(md5.to_string());
            patterns.push(imphash.to_string());
            let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
            let substrings = Substrings::build(&refs, false).unwrap();
            assert_eq!(
                matches!(substrings, Substrings::Grams(_)),
                refs.len() > DFA_MAX_LITERALS
            );
            let mut found = Vec::new();
            substrings.each(value.as_bytes(), |id| found.push(id));
            assert_eq!(found, vec![others, others + 1], "{others} others");
        }
    }

    /// The gram index finds what a case-folding automaton finds over the same literals: each
    /// at every place (a value's first and last bytes, overlapping others), in any case, short
    /// literals and a two-byte Cyrillic letter among them.
    #[test]
    fn grams_find_every_literal_an_automaton_finds() {
        // `\` and `|`, `[` and `{`, `@` and a backquote differ only in the `0x20` bit, which
        // the grams' folding sets: each such pair is met, besides the letters' two cases.
        let mut words = Words::new(
            0x2545_f491_4f6c_dd1d,
            "abcdeABCDE\\.- 019\u{436}\u{416}|[{@`",
        );
        let mut patterns: Vec<String> = (0..300)
            .map(|i| words.word(3 + i % 7).to_lowercase())
            .filter(|w| w.len() >= 3)
            .collect();
        patterns.push("\u{436}".to_string());
        patterns.sort();
        patterns.dedup();
        let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
        let grams = Substrings::build(&refs, false).unwrap();
        assert!(matches!(grams, Substrings::Grams(_)));
        let automaton = aho_corasick::dfa::Builder::new()
            .ascii_case_insensitive(true)
            .build(&refs)
            .unwrap();
        let mut hits = 0;
        for _ in 0..3000 {
            let len = words.below(60);
            let value = words.word(len);
            let (mut want, mut got) = (Vec::new(), Vec::new());
            let _ = super::occurrences(&automaton, value.as_bytes(), |id| {
                want.push(id);
                ControlFlow::Continue(())
            });
            grams.each(value.as_bytes(), |id| got.push(id));
            want.sort_unstable();
            want.dedup();
            got.sort_unstable();
            got.dedup();
            assert_eq!(got, want, "{value:?}");
            hits += want.len();
        }
        assert!(hits > 1000, "the values hold literals: {hits}");
    }

    /// Eight grams at a time (AVX2, where the CPU has it) find what one at a time finds, in the
    /// same order: at every place in values of every length around the sixteen bytes a load
    /// takes and the eight grams a step reads, and in bitmaps of every size the grams choose.
    #[test]
    fn grams_read_eight_at_a_time_find_what_one_at_a_time_finds() {
        let mut words = Words::new(0x9c1d_77a0_31f5_e2b4, "abcAB\\.|{");
        for count in [5, 60, 2000] {
            let patterns: Vec<String> = (0..count)
                .map(|i| words.word(4 + i % 5).to_lowercase())
                .collect();
            let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
            let Substrings::Grams(fast) = Substrings::build(&refs, false).unwrap() else {
                panic!("{count} literals make grams");
            };
            let plain = Grams {
                avx2: false,
                ..fast.clone()
            };
            let mut hits = 0;
            for len in 0..120 {
                for _ in 0..20 {
                    let value = words.word(len);
                    let (mut want, mut got) = (Vec::new(), Vec::new());
                    let _ = plain.search(value.as_bytes(), |id| {
                        want.push(id);
                        ControlFlow::Continue(())
                    });
                    let _ = fast.search(value.as_bytes(), |id| {
                        got.push(id);
                        ControlFlow::Continue(())
                    });
                    assert_eq!(got, want, "{count} literals, {value:?}");
                    hits += want.len();
                }
            }
            assert!(hits > 20, "{count} literals: the values hold some ({hits})");
        }
    }

    /// Grams over literals all under four bytes have no grams to roll: the small automaton
    /// beside them finds every literal, in any case, and the search stops there.
    #[test]
    fn grams_of_short_literals_alone_find_them_all() {
        let patterns = ["abc", "bcd", "cde", "xyz", "^^"];
        let substrings = Substrings::build(&patterns, false).unwrap();
        assert!(matches!(substrings, Substrings::Grams(_)));
        for (value, want) in [
            ("zzABCzz", vec![0]),
            ("xyzCDE", vec![2, 3]),
            ("ABCDE p^^ing", vec![0, 1, 2, 4]),
            ("ab", vec![]),
            ("nothing here", vec![]),
        ] {
            let mut found = Vec::new();
            substrings.each(value.as_bytes(), |id| found.push(id));
            found.sort_unstable();
            assert_eq!(found, want, "{value}");
            assert_eq!(
                substrings.any(value.as_bytes()),
                !want.is_empty(),
                "{value}"
            );
        }
    }

    /// `any` answers as the full search does, whether the first occurrence is a short literal
    /// (the grams' small automaton), a long one, or none.
    #[test]
    fn any_stops_at_the_first_occurrence_and_agrees_with_each() {
        let many: Vec<String> = (0..40).map(|i| format!("\\tool{i:02}.exe")).collect();
        let mut patterns: Vec<&str> = many.iter().map(String::as_str).collect();
        patterns.push("^^");
        for substrings in [
            Substrings::build(&patterns, false).unwrap(),
            Substrings::build(&patterns[..3], false).unwrap(),
        ] {
            for value in [
                "c:\\x\\TOOL01.EXE -a",
                "cmd /c p^^ing",
                "notepad.exe",
                "",
                "\\tool0",
            ] {
                let mut all = Vec::new();
                substrings.each(value.as_bytes(), |id| all.push(id));
                assert_eq!(
                    substrings.any(value.as_bytes()),
                    !all.is_empty(),
                    "{value:?}"
                );
            }
        }
    }
}
