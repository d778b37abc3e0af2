//! The literals a regular expression cannot match without: sets of which every match holds
//! one member, read from the expression's syntax tree. Gates index rules by them (long ones,
//! see the gate module), and a regex is tested only on values holding one of its short ones
//! ([`prefilter`]).

use regex_syntax::hir::{Class, Hir, HirKind};

/// Most members of a run's set, the product of its parts' alternatives (`\.[ "']` is three);
/// past it the run ends.
const MAX_RUN_SET: usize = 16;

/// Most members a regex's prefilter holds: each is a search of the value.
const MAX_PREFILTER: usize = 8;

/// Literals of which every match of `re` holds one, ASCII lower case, deduplicated, chosen
/// among the sets the tree yields: those `usable` accepts, the one with the least `frequency`.
/// `None` when the expression does not parse or no set is usable.
///
/// A concatenation yields the runs of its parts that match one of a few texts (literals,
/// classes of up to four characters: `\.[ "']` yields `. `, `."` and `.'`) and the sets of its
/// other parts; an alternation the union of its branches; a repetition of at least one its
/// body. Members are lower-cased after (the searches fold ASCII case): Unicode case folding is
/// kept, as `(?i)k` is `k`, `K` and the Kelvin sign, two members once lower-cased.
pub(crate) fn of(
    re: &str,
    usable: &dyn Fn(&[Vec<u8>]) -> bool,
    frequency: &dyn Fn(&[Vec<u8>]) -> f64,
) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::Parser::new().parse(re).ok()?;
    let mut set = Walk { usable, frequency }.literals(&hir)?;
    for l in &mut set {
        l.make_ascii_lowercase();
    }
    set.sort();
    set.dedup();
    Some(set)
}

/// Literals of two bytes or more, at most [`MAX_PREFILTER`], one of which is in every value
/// `re` matches, as text: a value without any cannot match, which a search for each (by its
/// rarest byte) tells far sooner than the regex's automaton. SigmaHQ's "Potential Raspberry
/// Robin Dot Ending File" (`\\[a-zA-Z0-9]{1,32}\.[a-zA-Z0-9]{1,6}\.[ "']{1}`) ran on every
/// process record's command line, stopping at each `\` of its paths: it needs `. `, `."` or
/// `.'`, which few hold.
pub(crate) fn prefilter(re: &str) -> Option<Vec<String>> {
    let usable = |set: &[Vec<u8>]| {
        !set.is_empty() && set.len() <= MAX_PREFILTER && set.iter().all(|l| l.len() >= 2)
    };
    let set = of(re, &usable, &rarity)?;
    set.into_iter().map(|l| String::from_utf8(l).ok()).collect()
}

/// How often a value holds one of `set`, roughly: per member the product of its bytes'
/// commonness in log values.
fn rarity(set: &[Vec<u8>]) -> f64 {
    set.iter()
        .map(|l| {
            l.iter()
                .map(|&b| f64::from(crate::folded::BYTE_COMMONNESS[usize::from(b)]) / 256.0)
                .product::<f64>()
        })
        .sum()
}

/// The walk of one tree, with its choice of sets.
struct Walk<'a> {
    usable: &'a dyn Fn(&[Vec<u8>]) -> bool,
    frequency: &'a dyn Fn(&[Vec<u8>]) -> f64,
}

impl Walk<'_> {
    /// See [`of`].
    fn literals(&self, hir: &Hir) -> Option<Vec<Vec<u8>>> {
        let usable = |set: Vec<Vec<u8>>| Some(set).filter(|s| (self.usable)(s));
        match hir.kind() {
            HirKind::Literal(l) => usable(vec![l.0.to_vec()]),
            HirKind::Class(c) => usable(class_members(c)?),
            HirKind::Capture(c) => self.literals(&c.sub),
            HirKind::Repetition(r) if r.min >= 1 => self.literals(&r.sub),
            HirKind::Alternation(branches) => {
                let mut all = Vec::new();
                for b in branches {
                    all.extend(self.literals(b)?);
                }
                usable(all)
            }
            HirKind::Concat(parts) => {
                let mut best: Option<Vec<Vec<u8>>> = None;
                let mut consider = |set: Vec<Vec<u8>>| {
                    let rarer = best
                        .as_ref()
                        .is_none_or(|b| (self.frequency)(&set) < (self.frequency)(b));
                    if (self.usable)(&set) && rarer {
                        best = Some(set);
                    }
                };
                let mut run: Vec<Vec<u8>> = vec![Vec::new()];
                for part in parts {
                    match run_piece(part) {
                        Some(piece) if run.len() * piece.len() <= MAX_RUN_SET => {
                            run = run
                                .iter()
                                .flat_map(|r| piece.iter().map(move |p| [&r[..], p].concat()))
                                .collect();
                        }
                        Some(piece) => {
                            consider(std::mem::replace(&mut run, piece));
                        }
                        None => {
                            consider(std::mem::replace(&mut run, vec![Vec::new()]));
                            if let Some(set) = self.literals(part) {
                                consider(set);
                            }
                        }
                    }
                }
                consider(run);
                best
            }
            _ => None,
        }
    }
}

/// The texts `part` matches when it matches one of a few: a literal, a class of up to four
/// characters (`[Aa]`, `[ "']`), either once. Each is lower-cased and kept once (`[Aa]` is
/// `a`): the searches fold ASCII case.
fn run_piece(part: &Hir) -> Option<Vec<Vec<u8>>> {
    match part.kind() {
        HirKind::Literal(l) => Some(vec![l.0.to_vec()]),
        HirKind::Class(c) => {
            let mut members = class_members(c)?;
            for m in &mut members {
                m.make_ascii_lowercase();
            }
            members.sort();
            members.dedup();
            Some(members)
        }
        HirKind::Repetition(r) if r.min == 1 && r.max == Some(1) => run_piece(&r.sub),
        HirKind::Capture(c) => run_piece(&c.sub),
        _ => None,
    }
}

/// The members of a small class (at most four characters), each as its UTF-8 bytes.
fn class_members(class: &Class) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    match class {
        Class::Unicode(c) => {
            for r in c.ranges() {
                for ch in r.start()..=r.end() {
                    if out.len() == 4 {
                        return None;
                    }
                    out.push(ch.to_string().into_bytes());
                }
            }
        }
        Class::Bytes(c) => {
            for r in c.ranges() {
                for b in r.start()..=r.end() {
                    if out.len() == 4 {
                        return None;
                    }
                    out.push(vec![b]);
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::prefilter;

    #[test]
    fn a_prefilter_takes_the_rarest_short_literals() {
        let robin = r#"\\[a-zA-Z0-9]{1,32}\.[a-zA-Z0-9]{1,6}\.[ "']{1}"#;
        assert_eq!(
            prefilter(robin),
            Some(vec![". ".into(), ".\"".into(), ".'".into()])
        );
        assert_eq!(prefilter(r"net\s+user\s+"), Some(vec!["user".into()]));
        // Unicode folding kept: `(?i)k` is also the Kelvin sign.
        assert_eq!(
            prefilter(r"(?i)-k\s"),
            Some(vec!["-k".into(), "-\u{212a}".into()])
        );
        assert_eq!(prefilter(r"\s[a-f0-9]{64}\s[a-f0-9]{16}"), None);
        assert_eq!(prefilter(r"a|b"), None, "one byte is not worth a search");
        assert_eq!(
            prefilter(r"(?:ab|cd|ef|gh|ij|kl|mn|op|qr)x"),
            None,
            "too many"
        );
        assert_eq!(prefilter(r"x("), None, "does not parse");
    }
}
