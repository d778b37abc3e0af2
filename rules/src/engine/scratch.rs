//! The per-thread state one match uses, reused so that matching allocates nothing once grown:
//! the shape memo, the field slots and layouts, the gates' memos and the event's text.

use super::RuleSet;
use super::gate::{GateMemo, push_lower_case};
use super::layout::Layouts;
use super::shape::ShapeMemo;
use super::values::FieldSlots;
use watchpost_proto::EventFields;

std::thread_local! {
    /// One event's matching state, reused so that matching allocates nothing once grown.
    pub(super) static SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch {
            memo: ShapeMemo {
                set: 0,
                slots: Vec::new(),
                unkept: Vec::new(),
            },
            fields: FieldSlots {
                epoch: 0,
                slots: Vec::new(),
                layouts: Layouts {
                    set: 0,
                    slots: Vec::new(),
                    keys: Vec::new(),
                    key: 0,
                    touched: Vec::new(),
                },
            },
            work: GroupWork {
                seen: Vec::new(),
                found: Vec::new(),
                text: EventText {
                    bytes: Vec::new(),
                    ready: false,
                },
                recent: GateMemos { set: 0, by_group: Vec::new() },
            },
        })
    };
}

/// Reusable state of [`RuleSet::matches`].
pub(super) struct Scratch {
    /// The groups chosen per combination of shape-field values.
    pub(super) memo: ShapeMemo,
    /// Where the event's fields sit.
    pub(super) fields: FieldSlots,
    pub(super) work: GroupWork,
}

/// Reusable state of [`RuleSet::match_group`].
pub(super) struct GroupWork {
    /// Two bits per rule, one per clause (both for a rule of one clause): marked by the gates,
    /// cleared at each event (see [`RuleSet::matches`]).
    pub(super) seen: Vec<u64>,
    /// The rules of the current group to evaluate.
    pub(super) found: Vec<u32>,
    /// The event's values in one text, for keyword searches.
    pub(super) text: EventText,
    /// The literals of values the gates read lately.
    pub(super) recent: GateMemos,
}

/// A thread's [`GateMemo`]s for one set, by group and gate, made as its events reach them.
pub(super) struct GateMemos {
    /// The set they belong to ([`RuleSet::id`]).
    pub(super) set: u64,
    pub(super) by_group: Vec<Vec<GateMemo>>,
}

impl GateMemos {
    /// The memos of group `group`'s `gates`, forgotten first when they are another set's
    /// (their room kept: a thread may match with two sets in turn).
    pub(super) fn of(&mut self, set: &RuleSet, group: u32, gates: usize) -> &mut [GateMemo] {
        if self.set != set.id {
            for memo in self.by_group.iter_mut().flatten() {
                memo.forget();
            }
            self.set = set.id;
        }
        if self.by_group.len() < set.groups.len() {
            self.by_group.resize_with(set.groups.len(), Vec::new);
        }
        let memos = &mut self.by_group[group as usize];
        if memos.len() < gates {
            memos.resize_with(gates, GateMemo::default);
        }
        memos
    }
}

/// An event's values (source, host, message, attributes) in one text, ASCII lower case, each
/// ended by a NUL, made at the first keyword gate an event meets: a gate then searches one text
/// with a case-sensitive automaton over its lower-case literals, not each of a Windows record's
/// two dozen values with a case-folding one (a keyword rule of the process logsource cost 0.5
/// us per Sysmon record that way). No such literal holds a NUL (a gate whose literals do
/// searches value by value: [`Gate::spans_values`](super::gate::Gate::spans_values)), so none matches across two values.
/// Values shorter than the set's shortest keyword literal are left out (a Sysmon record's
/// ids, levels and flags: 1.5% of matching with the whole SigmaHQ set, callgrind). Where the
/// event lies in one text already, a gate of a few literals searches that instead
/// ([`Gate::mark_in_values_text`](super::gate::Gate::mark_in_values_text)).
#[derive(Default)]
pub(super) struct EventText {
    pub(super) bytes: Vec<u8>,
    /// `bytes` holds the current event's values.
    pub(super) ready: bool,
}

impl EventText {
    /// The text of the event's values of `min_len` bytes or more (the same for every gate of
    /// a set, so that it is made once per event).
    pub(super) fn of<E: EventFields>(&mut self, event: &E, min_len: usize) -> &[u8] {
        if !self.ready {
            self.bytes.clear();
            // Each value copied, then lower-cased eight bytes at a time: a byte at a time, the
            // copy and case took 8% of matching with the whole SigmaHQ set (callgrind).
            let mut push = |v: &str| {
                if v.len() < min_len {
                    return false;
                }
                push_lower_case(&mut self.bytes, v.as_bytes());
                self.bytes.push(0);
                false
            };
            push(event.source());
            push(event.host());
            event.any_value(&mut push);
            self.ready = true;
        }
        &self.bytes
    }
}
