//! A few literals found, ASCII case folded, in an event's text as it lies in memory: each by
//! two of its bytes that have no case, with `memchr`'s vector search for a pair of bytes at a
//! fixed distance.
//!
//! A keyword gate otherwise copies every value of the event into one lower-case text and
//! searches that: SigmaHQ's "NotPetya Ransomware Activity" (`\perfc.dat` in any value) made
//! that text for every process record, 4,400 instructions of a Sysmon record's 48,000
//! (callgrind). Its `\` and `.`, six bytes apart, are searched in the data plane's arena
//! instead, 32 bytes at a step, and the rare places holding both are compared whole.

use memchr::arch::all::packedpair::{Finder as AnyFinder, Pair};

use crate::folded::BYTE_COMMONNESS;

/// Most literals a gate searches this way: each is a pass over the text.
pub(crate) const MAX_LITERALS: usize = 4;

/// The literals of one keyword gate, each with its pair of caseless bytes.
#[derive(Clone, Debug)]
pub(crate) struct CaselessPairs {
    /// (literal in ASCII lower case, its finder), by the gate's literal number.
    literals: Vec<(Box<[u8]>, PairFinder)>,
}

impl CaselessPairs {
    /// `None` when there are more than [`MAX_LITERALS`] literals or one has fewer than two
    /// bytes without case: the gate then searches the lower-case text.
    pub(crate) fn build(literals: &[&str]) -> Option<CaselessPairs> {
        if literals.is_empty() || literals.len() > MAX_LITERALS {
            return None;
        }
        let literals = literals
            .iter()
            .map(|l| {
                let lower: Box<[u8]> = l.to_ascii_lowercase().into_bytes().into();
                let finder = PairFinder::new(&lower)?;
                Some((lower, finder))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(CaselessPairs { literals })
    }

    /// Calls `on` once with the number of each literal found in `text`.
    pub(crate) fn each_in(&self, text: &[u8], mut on: impl FnMut(usize)) {
        for (id, (literal, finder)) in self.literals.iter().enumerate() {
            let mut from = 0;
            while text.len() - from >= literal.len() {
                let Some(at) = finder.candidate(&text[from..]) else {
                    break;
                };
                let start = from + at;
                if text
                    .get(start..start + literal.len())
                    .is_some_and(|bytes| bytes.eq_ignore_ascii_case(literal))
                {
                    on(id);
                    break;
                }
                from = start + 1;
            }
        }
    }
}

/// Where a literal may start: its two chosen bytes at their distance.
#[derive(Clone, Copy, Debug)]
struct PairFinder {
    any: AnyFinder,
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::packedpair::Finder>,
}

impl PairFinder {
    /// The finder of `literal` by its two rarest caseless bytes (not ASCII letters: a letter
    /// would need both its cases), among the first 256; `None` if it has fewer than two.
    fn new(literal: &[u8]) -> Option<PairFinder> {
        let mut caseless: Vec<(u8, u8)> = literal
            .iter()
            .take(usize::from(u8::MAX) + 1)
            .enumerate()
            .filter(|(_, b)| !b.is_ascii_alphabetic())
            .map(|(at, &b)| (BYTE_COMMONNESS[usize::from(b)], at as u8))
            .collect();
        caseless.sort_unstable();
        let (&(_, first), &(_, second)) = (caseless.first()?, caseless.get(1)?);
        let pair = Pair::with_indices(literal, first, second)?;
        Some(PairFinder {
            any: AnyFinder::with_pair(literal, pair)?,
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::x86_64::avx2::packedpair::Finder::with_pair(literal, pair),
        })
    }

    /// The first place in `text` where the literal may start.
    #[inline]
    fn candidate(&self, text: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = &self.avx2
            && text.len() >= avx2.min_haystack_len()
        {
            return avx2.find_prefilter(text);
        }
        self.any.find_prefilter(text)
    }
}

#[cfg(test)]
mod tests {
    use super::CaselessPairs;

    /// The literals found in `text`.
    fn found(pairs: &CaselessPairs, text: &str) -> Vec<usize> {
        let mut ids = Vec::new();
        pairs.each_in(text.as_bytes(), |id| ids.push(id));
        ids
    }

    #[test]
    fn a_literal_is_found_in_any_case_at_any_place() {
        let pairs = CaselessPairs::build(&[r"\perfc.dat"]).unwrap();
        for text in [
            r"C:\Windows\perfc.dat",
            r"C:\WINDOWS\PERFC.DAT,#1",
            // Past the vector loop's reach and in its tail alike.
            &format!("{}\\PerfC.Dat{}", "x".repeat(100), "y".repeat(3)),
            &format!("{}\\perfc.dat", "\\lsass.exe ".repeat(20)),
        ] {
            assert_eq!(found(&pairs, text), [0], "{text}");
        }
        for text in [r"C:\Windows\perfc.da", r"\lsass.exe", r"\perfd.dat", ""] {
            assert!(found(&pairs, text).is_empty(), "{text}");
        }
    }

    #[test]
    fn each_literal_is_reported_once_by_its_number() {
        let pairs = CaselessPairs::build(&["a.b:", r"\x.y"]).unwrap();
        assert_eq!(found(&pairs, r"A.B: a.b: \X.Y"), [0, 1]);
        assert_eq!(found(&pairs, r"\x.y"), [1]);
    }

    #[test]
    fn literals_without_two_caseless_bytes_or_too_many_are_refused() {
        assert!(CaselessPairs::build(&["mimikatz"]).is_none());
        assert!(CaselessPairs::build(&[r"\perfc.dat", "perfc.dat"]).is_none());
        assert!(CaselessPairs::build(&["a.b:"; 5]).is_none());
        assert!(CaselessPairs::build(&[]).is_none());
    }
}
