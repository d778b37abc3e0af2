//! ASCII-case-folded substring search without allocation, and the byte frequencies of log
//! values it and other searches pick rare bytes by.

/// How common a byte is in log values (higher: more common), for the searches here, the
/// caseless pairs and the regex prefilters to pick a needle's rarest bytes by: letters by
/// their frequency in English, then path and command line punctuation; other bytes are rare.
pub(crate) const BYTE_COMMONNESS: [u8; 256] = {
    let mut rank = [20u8; 256];
    let letters = b"etaoinsrhldcumfpgwybvkxjqz";
    let mut i = 0;
    while i < letters.len() {
        let common = 200 - 4 * i as u8;
        rank[letters[i] as usize] = common;
        rank[letters[i].to_ascii_uppercase() as usize] = common;
        i += 1;
    }
    let mut digit = b'0';
    while digit <= b'9' {
        rank[digit as usize] = 150;
        digit += 1;
    }
    rank[b'\\' as usize] = 230;
    rank[b' ' as usize] = 220;
    rank[b'.' as usize] = 210;
    rank[b'-' as usize] = 170;
    rank[b'/' as usize] = 160;
    rank[b':' as usize] = 140;
    rank[b'_' as usize] = 140;
    rank[b',' as usize] = 120;
    rank[b'=' as usize] = 110;
    rank[b'"' as usize] = 100;
    rank[b'{' as usize] = 90;
    rank[b'}' as usize] = 90;
    rank
};

/// Each ASCII capital of eight bytes in lower case, the other bytes as they are.
#[inline]
pub(crate) fn lower_case_word(word: u64) -> u64 {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low7 = word & !HIGH;
    // The high bit of each byte: its low seven bits are at least `A`, above `Z`.
    let from_a = low7.wrapping_add(0x3f3f_3f3f_3f3f_3f3f);
    let past_z = low7.wrapping_add(0x2525_2525_2525_2525);
    let capitals = from_a & !past_z & !word & HIGH;
    word | (capitals >> 2)
}

/// Whether `value` is `lower` (in ASCII lower case) with ASCII case folded: what
/// `value.eq_ignore_ascii_case(lower)` says, eight bytes at a time ([`lower_case_word`]) where
/// it lower-cases both sides a byte at a time. The bytes past the last whole word are
/// compared as the last eight, overlapping the word before them; under eight bytes, the first
/// and last four.
#[inline]
pub(crate) fn eq_lower(value: &[u8], lower: &[u8]) -> bool {
    if value.len() != lower.len() {
        return false;
    }
    let word = |bytes: &[u8; 8]| u64::from_le_bytes(*bytes);
    match (value.last_chunk::<8>(), lower.last_chunk::<8>()) {
        (Some(value_tail), Some(lower_tail)) => {
            value
                .chunks_exact(8)
                .zip(lower.chunks_exact(8))
                .all(|(v, l)| {
                    v.first_chunk::<8>()
                        .zip(l.first_chunk::<8>())
                        .is_some_and(|(v, l)| lower_case_word(word(v)) == word(l))
                })
                && lower_case_word(word(value_tail)) == word(lower_tail)
        }
        _ => match (
            value.first_chunk::<4>().zip(value.last_chunk::<4>()),
            lower.first_chunk::<4>().zip(lower.last_chunk::<4>()),
        ) {
            (Some((value_head, value_tail)), Some((lower_head, lower_tail))) => {
                let halves = |head: &[u8; 4], tail: &[u8; 4]| {
                    u64::from(u32::from_le_bytes(*head))
                        | (u64::from(u32::from_le_bytes(*tail)) << 32)
                };
                lower_case_word(halves(value_head, value_tail)) == halves(lower_head, lower_tail)
            }
            _ => value.eq_ignore_ascii_case(lower),
        },
    }
}

/// ASCII-case-insensitive substring search without allocation. Candidates are found by the
/// needle's rarest byte (in either case) with `memchr`'s vector search, then compared whole:
/// looking for the first byte instead, a byte at a time, stopped at every `\` of a path for
/// the many needles that start with one (a tenth of matching went to such tests, callgrind).
#[inline]
pub(crate) fn contains_folded(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if n.is_empty() {
        return true;
    }
    if n.len() > h.len() {
        return false;
    }
    let Some((rare, &byte)) = n
        .iter()
        .enumerate()
        .min_by_key(|&(_, b)| BYTE_COMMONNESS[usize::from(*b)])
    else {
        return true;
    };
    let (lower, upper) = (byte.to_ascii_lowercase(), byte.to_ascii_uppercase());
    // The rare byte of a match sits in `h[rare..last]`.
    let last = h.len() - (n.len() - 1 - rare);
    let mut from = rare;
    while from < last {
        let window = &h[from..last];
        let found = if lower == upper {
            memchr::memchr(lower, window)
        } else {
            memchr::memchr2(lower, upper, window)
        };
        let Some(at) = found.map(|p| from + p) else {
            return false;
        };
        let start = at - rare;
        if h[start..start + n.len()].eq_ignore_ascii_case(n) {
            return true;
        }
        from = at + 1;
    }
    false
}

/// Several needles searched ASCII case folded, in one pass where they share their first bytes
/// (a regex's prefilter `. `, `."` and `.'` share the `.`): by the rarest shared byte, each
/// needle compared where it is found. Needles sharing none are searched one by one.
#[derive(Clone, Debug)]
pub(crate) struct AnyFolded {
    /// ASCII lower case.
    needles: Box<[Box<str>]>,
    /// The place of the rarest byte among those every needle starts with.
    anchor: Option<usize>,
}

impl AnyFolded {
    /// The search for `needles`, of which there is at least one (none would refuse every
    /// value).
    pub(crate) fn new(needles: &[String]) -> AnyFolded {
        debug_assert!(!needles.is_empty());
        let needles: Box<[Box<str>]> = needles
            .iter()
            .map(|n| n.to_ascii_lowercase().into_boxed_str())
            .collect();
        let shared = needles.first().map_or(0, |first| {
            let first = first.as_bytes();
            (0..first.len())
                .take_while(|&i| {
                    needles
                        .iter()
                        .all(|n| n.as_bytes().get(i) == Some(&first[i]))
                })
                .count()
        });
        let anchor =
            (0..shared).min_by_key(|&i| BYTE_COMMONNESS[usize::from(needles[0].as_bytes()[i])]);
        AnyFolded { needles, anchor }
    }

    /// Whether `hay` holds one of the needles.
    pub(crate) fn any_in(&self, hay: &str) -> bool {
        let h = hay.as_bytes();
        let Some(anchor) = self.anchor else {
            return self.needles.iter().any(|n| contains_folded(hay, n));
        };
        let byte = self.needles[0].as_bytes()[anchor];
        let (lower, upper) = (byte, byte.to_ascii_uppercase());
        let mut from = anchor;
        while from < h.len() {
            let window = &h[from..];
            let found = if lower == upper {
                memchr::memchr(lower, window)
            } else {
                memchr::memchr2(lower, upper, window)
            };
            let Some(at) = found.map(|p| from + p) else {
                return false;
            };
            let start = at - anchor;
            if self.needles.iter().any(|n| {
                h.get(start..start + n.len())
                    .is_some_and(|there| there.eq_ignore_ascii_case(n.as_bytes()))
            }) {
                return true;
            }
            from = at + 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::{AnyFolded, contains_folded, eq_lower};
    use crate::test_support::Words;

    /// The plain answer the searches here are checked against.
    fn lower_cased_contains(hay: &str, needle: &str) -> bool {
        hay.to_ascii_lowercase()
            .contains(&needle.to_ascii_lowercase())
    }

    #[test]
    fn contains_folded_finds_every_case() {
        assert!(contains_folded("xxAbCxx", "abc"));
        assert!(contains_folded("abc", "abc"));
        assert!(!contains_folded("ab", "abc"));
        assert!(contains_folded("aaab", "aab"));
    }

    /// The search by the rarest byte finds what lower-casing both and searching finds: needles
    /// whose rare byte is first, last, a letter in either case or punctuation, at a value's
    /// either end, overlapping near misses.
    #[test]
    fn contains_folded_agrees_with_a_lower_cased_search() {
        let mut words = Words::new(0x9e37_79b9_7f4a_7c15, "aAbBzZqQ\\ .:-x0");
        let mut found = 0;
        for _ in 0..20_000 {
            let (hay_len, needle_len) = (words.below(24), 1 + words.below(4));
            let (hay, needle) = (words.word(hay_len), words.word(needle_len));
            let want = lower_cased_contains(&hay, &needle);
            assert_eq!(
                contains_folded(&hay, &needle),
                want,
                "{needle:?} in {hay:?}"
            );
            found += usize::from(want);
        }
        assert!(found > 1000, "the needles are found often enough: {found}");
        assert!(contains_folded("x", ""));
    }

    /// The comparison a word at a time says what a byte at a time says, at every length
    /// around a word's (under four bytes, four to eight, past eight with a tail), with the
    /// bytes beside the capitals (`@`, `[`, `` ` ``, `{`) and a two-byte character whose first
    /// byte's low seven bits are a capital's (`é`: `C3 A9`).
    #[test]
    fn a_word_at_a_time_equals_a_byte_at_a_time() {
        let mut words = Words::new(0x5851_f42d_4c95_7f2d, "aAzZ@[`{é\\x");
        let (mut equal, mut tested) = (0, 0);
        for _ in 0..40_000 {
            let len = words.below(20);
            let value = words.word(len);
            let mut lower = value.to_ascii_lowercase().into_bytes();
            match words.below(4) {
                0 => lower = words.word(len).to_ascii_lowercase().into_bytes(),
                1 if !lower.is_empty() => {
                    let at = words.below(lower.len());
                    lower[at] ^= 1 << words.below(8);
                }
                _ => {}
            }
            let want = value.as_bytes().eq_ignore_ascii_case(&lower);
            if lower == lower.to_ascii_lowercase() {
                assert_eq!(
                    eq_lower(value.as_bytes(), &lower),
                    want,
                    "{value:?} {lower:?}"
                );
                tested += 1;
                equal += usize::from(want);
            }
        }
        assert!(
            equal > 10_000 && tested - equal > 10_000,
            "{equal} of {tested}"
        );
        assert!(!eq_lower(b"abc", b"abcd") && eq_lower(b"", b""));
    }

    /// One pass by a shared byte finds what a search per needle finds.
    #[test]
    fn any_of_several_needles_agrees_with_a_search_for_each() {
        let mut words = Words::new(0x2545_f491_4f6c_dd1d, "aAbB. \"'x");
        let mut found = 0;
        for _ in 0..20_000 {
            let (hay_len, shared_len) = (words.below(16), words.below(3));
            let (hay, shared) = (words.word(hay_len), words.word(shared_len));
            let mut needles = Vec::new();
            for _ in 0..1 + words.below(3) {
                let rest_len = words.below(3);
                let needle = format!("{shared}{}", words.word(rest_len));
                if !needle.is_empty() {
                    needles.push(needle);
                }
            }
            if needles.is_empty() {
                continue;
            }
            let want = needles.iter().any(|n| lower_cased_contains(&hay, n));
            assert_eq!(
                AnyFolded::new(&needles).any_in(&hay),
                want,
                "{needles:?} in {hay:?}"
            );
            found += usize::from(want);
        }
        assert!(found > 1000, "the needles are found often enough: {found}");
    }
}
