//! A group of rules sharing the shapes of their logsource: the rules evaluated on every event,
//! and the gates ([`super::gate`]) that pick the rest by the literals an event holds, built at
//! the group's first event.

use super::gate::{self, Gate, Key};
use std::collections::BTreeMap;

/// The rules whose logsources give one set of shapes: an event of any of those shapes is
/// tested against them, once however many of the shapes hold.
#[derive(Debug, Default)]
pub(super) struct Group {
    /// Rules with no necessary literal, ascending: evaluated on every such event.
    pub(super) always: Vec<u32>,
    /// Each place's literals with the rules that need them, from which the gates are built at
    /// the group's first event and then dropped. Building every automaton at load was most of
    /// the compile time with the whole SigmaHQ set, for groups a sensor may never see (cloud
    /// logs on a Windows collector).
    pub(super) pending: std::sync::Mutex<Vec<(Option<usize>, Literals)>>,
    /// The gates, once built.
    pub(super) built: std::sync::OnceLock<Gates>,
}

/// A group's automata and the rules evaluated on every event, once its gates are built.
#[derive(Clone, Debug, Default)]
pub(super) struct Gates {
    /// Rules evaluated on every such event, ascending: those with no necessary literal, and
    /// those whose automaton could not be built.
    pub(super) ungated: Vec<u32>,
    /// One index per field over the literals the other rules need there: only the rules
    /// whose literal an event holds are evaluated (see [`super::gate`]).
    pub(super) gates: Vec<Gate>,
    /// How each gate reads the event, by gate.
    pub(super) reads: Vec<GateRead>,
    /// A rule is both ungated and under a gate (its automaton elsewhere could not be built):
    /// an event's rules to evaluate must then be put in order and each kept once. Otherwise
    /// the gates admit each rule once and none is ungated, and the sort is saved (a Sysmon
    /// process record's dozen rules: 0.3% of matching's instructions, callgrind).
    pub(super) overlap: bool,
}

/// How a gate reads an event, kept apart from the gate: a group's loop learns from these
/// alone whether the event holds a gate's field, and reaches the gate (hundreds of bytes, its
/// automaton inline) only when it does. A Security record's group has 64 gates with the whole
/// SigmaHQ set, most of whose fields the record lacks: reading each gate's field from the gate
/// took a first-level cache miss per gate (two passes over the 958 Security 5145 records of
/// the benchmark's corpus: 300 k read misses, 56 k once apart; callgrind).
#[derive(Clone, Copy, Debug)]
pub(super) enum GateRead {
    /// A field's value and hash, looked up in the gate's [`GateMemo`](super::gate::GateMemo) first
    /// ([`Gate::worth_remembering`]).
    Remembered(usize),
    /// A field's value and hash: the gate looks whole values up ([`Gate::has_equals`]).
    Hashed(usize),
    /// A field's value, searched for substrings only.
    Bytes(usize),
    /// The event's values: a keyword gate.
    Values,
}

impl GateRead {
    /// The field read; `None` for the event's values.
    pub(super) fn field(self) -> Option<usize> {
        match self {
            GateRead::Remembered(field) | GateRead::Hashed(field) | GateRead::Bytes(field) => {
                Some(field)
            }
            GateRead::Values => None,
        }
    }

    pub(super) fn of(gate: &Gate) -> GateRead {
        match gate.field {
            Some(field) if gate.worth_remembering() => GateRead::Remembered(field),
            Some(field) if gate.has_equals() => GateRead::Hashed(field),
            Some(field) => GateRead::Bytes(field),
            None => GateRead::Values,
        }
    }
}

impl Clone for Group {
    fn clone(&self) -> Group {
        Group {
            always: self.always.clone(),
            pending: std::sync::Mutex::new(
                self.pending
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .clone(),
            ),
            built: self.built.clone(),
        }
    }
}

impl Group {
    /// The group's gates, built at the first call (by one thread; others wait for it).
    pub(super) fn gates(&self) -> &Gates {
        self.built.get_or_init(|| {
            let pending = std::mem::take(
                &mut *self
                    .pending
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            );
            let mut built = Gates {
                ungated: self.always.clone(),
                gates: Vec::new(),
                reads: Vec::new(),
                overlap: false,
            };
            for (field, literals) in pending {
                match Gate::build(field, &literals) {
                    Some(gate) => built.gates.push(gate),
                    // Without the automaton its rules are evaluated on every event: slower,
                    // never wrong.
                    None => built.ungated.extend(
                        literals
                            .iter()
                            .flat_map(|(_, r)| r.iter().map(|&t| gate::rule_of(t))),
                    ),
                }
            }
            // A rule gated in one place and not in another (no automaton) is ungated.
            built.ungated.sort_unstable();
            built.ungated.dedup();
            let ungated = &built.ungated;
            built
                .gates
                .retain(|g| !g.rules().all(|r| ungated.binary_search(&r).is_ok()));
            built.overlap = built
                .gates
                .iter()
                .any(|g| g.rules().any(|r| ungated.binary_search(&r).is_ok()));
            // The keyword gate last: it may be skipped for what the others found (see
            // [`Gate::can_admit`]).
            built.gates.sort_by_key(|g| g.field.is_none());
            built.reads = built.gates.iter().map(GateRead::of).collect();
            built
        })
    }
}

/// A group's literals while the set is compiled: by place (a field's number, `None` for any
/// value), by literal, the rules that need it (ordered maps: the
/// automata, and so the matches, come out the same on every load).
pub(super) type Needs = BTreeMap<Option<usize>, BTreeMap<Key, Vec<u32>>>;

/// One place's literals of a group, each with the rules that need it.
pub(super) type Literals = Vec<(Key, Vec<u32>)>;
