//! Sigma correlation rules (specification v2): `event_count`, `value_count`, `temporal` and
//! `temporal_ordered`, with `group-by`, `timespan`, `aliases`, chaining and `generate`.
//!
//! Evaluation is split the way the data plane is:
//! - a [`Plan`] is compiled with the rule set; for every detection rule a correlation refers to
//!   it holds the [`Tap`]s that turn a matching event into a group key (the hashed values of the
//!   group-by fields) and, for `value_count`, a value key. Stage A reads them off the event in
//!   place, so only small fixed-size [`Hit`]s travel on;
//! - a [`Correlator`] owns the windows of the groups routed to it (groups shard by their key, so
//!   each lives in exactly one worker) and reports each correlation that [`Fired`].
//!
//! Semantics, where the specification leaves room:
//! - Lower bounds only (`gt`, `gte`): a sliding window; the correlation fires on the event that
//!   reaches the bound, and the group starts afresh (the alert layer folds repeats).
//! - Any upper bound, `eq` or `neq`: a tumbling window that opens on the group's first event
//!   and is judged when it closes. A group that saw no event has no window, so "fewer than N"
//!   means "between 1 and N-1".
//! - An event without one of the group-by fields does not take part (as a `GROUP BY` drops
//!   rows with a null key in most back ends).
//! - Group values compare case-insensitively (ASCII), as Sigma values do.
//! - A correlation that refers to another correlation must group by the same fields.

use crate::field::{Field, resolve};
use crate::mapping::Mapping;
use crate::rule::{Body, Correlation, Rule};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use watchpost_proto::EventFields;
use watchpost_proto::addr::is_local_address;

/// Events listed on a fired correlation, at most (the newest are kept).
pub const MAX_EVENTS: usize = 20;
/// Largest count bound held exactly (timestamps per group); larger bounds are refused.
pub const MAX_BOUND: f64 = 4096.0;

/// Most correlations in one chain (a correlation over correlations over ...). Public chains are
/// two or three deep.
pub const MAX_CHAIN_DEPTH: usize = 8;

/// Most hits one event may cause through chained correlations. Without a bound, correlations
/// that each list the one below twice made one event fire two million. Hits past it are
/// dropped and counted with [`Correlator::dropped`].
pub const MAX_CASCADE_HITS: usize = 1024;

/// The four correlation types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Events of the referenced rules per group.
    EventCount,
    /// Distinct values of a field per group.
    ValueCount,
    /// Referenced rules seen per group, in any order.
    Temporal,
    /// Referenced rules seen per group, in their listed order.
    TemporalOrdered,
}

impl Kind {
    fn of(s: &str) -> Kind {
        match s {
            "event_count" => Kind::EventCount,
            "value_count" => Kind::ValueCount,
            "temporal" => Kind::Temporal,
            _ => Kind::TemporalOrdered,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Gt,
    Gte,
    Lt,
    Lte,
    Eq,
    Neq,
}

impl Op {
    fn of(s: &str) -> Op {
        match s {
            "gt" => Op::Gt,
            "gte" => Op::Gte,
            "lt" => Op::Lt,
            "lte" => Op::Lte,
            "eq" => Op::Eq,
            _ => Op::Neq,
        }
    }

    fn holds(self, n: f64, bound: f64) -> bool {
        match self {
            Op::Gt => n > bound,
            Op::Gte => n >= bound,
            Op::Lt => n < bound,
            Op::Lte => n <= bound,
            Op::Eq => n == bound,
            Op::Neq => n != bound,
        }
    }
}

/// One compiled correlation.
#[derive(Clone, Debug)]
pub struct CompiledCorrelation {
    /// The rule.
    pub rule: Arc<Rule>,
    /// Its type.
    pub kind: Kind,
    /// Window, ns.
    pub timespan_ns: i64,
    bounds: Vec<(Op, f64)>,
    /// Sliding (lower bounds only): the count at which it fires.
    need: Option<usize>,
    /// Referenced rules, in order.
    inputs: usize,
    /// Correlations that refer to this one: (correlation, slot).
    dependants: Vec<(u32, u8)>,
    /// Referred to by a correlation without `generate: true`: it feeds that correlation and
    /// raises no alert of its own.
    pub suppressed: bool,
}

impl CompiledCorrelation {
    /// Judged when its window closes (an upper bound), not on the event that completes it.
    pub fn is_tumbling(&self) -> bool {
        self.need.is_none()
    }
}

/// How one correlation reads an event matched by one of its rules.
#[derive(Clone, Debug)]
pub struct Tap {
    /// Correlation number.
    pub corr: u32,
    /// Position of the rule in the correlation's `rules`.
    pub slot: u8,
    group: Vec<(String, Field)>,
    value: Option<Field>,
}

impl Tap {
    /// The group key and, for `value_count`, the value key of `event`; `None` when a group-by field
    /// (or the counted field) is missing.
    ///
    /// A local address (loopback, unspecified) or Windows' `-` for "none" is no group value
    /// either: a logon at a workstation's console says `127.0.0.1`, and forty workstations' users
    /// mistyping their passwords are neither one address spraying forty hosts nor forty sources
    /// guessing from the network. The correlations that group by an address (spraying, guessing)
    /// are about network sources; the host's own failures still add to its risk as signals.
    pub fn keys<E: EventFields>(&self, event: &E) -> Option<(u64, u64)> {
        let mut h = Fold::new();
        for (_, f) in &self.group {
            let v = f
                .get(event)
                .filter(|v| !v.is_empty() && !is_local_address(v))?;
            h.add(v);
        }
        let value = match &self.value {
            Some(f) => {
                let mut v = Fold::new();
                v.add(f.get(event).filter(|v| !v.is_empty())?);
                v.finish()
            }
            None => 0,
        };
        Some((h.finish(), value))
    }

    /// Writes `name=value, ...` of the group into `buf` (cut on a character boundary when it
    /// does not fit); returns the bytes written. For alert titles.
    pub fn group_text<E: EventFields>(&self, event: &E, buf: &mut [u8]) -> usize {
        let mut n = 0;
        let mut put = |s: &str, n: &mut usize| {
            let room = buf.len() - *n;
            let mut take = s.len().min(room);
            while !s.is_char_boundary(take) {
                take -= 1;
            }
            buf[*n..*n + take].copy_from_slice(&s.as_bytes()[..take]);
            *n += take;
        };
        for (i, (name, f)) in self.group.iter().enumerate() {
            if i > 0 {
                put(", ", &mut n);
            }
            put(name, &mut n);
            put("=", &mut n);
            put(f.get(event).unwrap_or(""), &mut n);
        }
        n
    }

    /// Calls `f` with each group-by field's name and the event's value of it, in the order of
    /// `group-by`, until it returns true. Where the alert's entity comes from: the value an
    /// analyst pivots on is the one the correlation counted by.
    pub fn group_values<E: EventFields>(&self, event: &E, f: &mut dyn FnMut(&str, &str) -> bool) {
        for (name, field) in &self.group {
            if let Some(v) = field.get(event).filter(|v| !v.is_empty())
                && f(name, v)
            {
                return;
            }
        }
    }
}

/// A case-insensitive 64-bit hash of a sequence of values, computed without allocating.
struct Fold(u64);

impl Fold {
    fn new() -> Fold {
        Fold(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, s: &str) {
        for b in s.bytes() {
            self.0 = (self.0 ^ u64::from(b.to_ascii_lowercase())).wrapping_mul(0x100_0000_01b3);
        }
        // A separator no UTF-8 text contains, so ("ab","c") and ("a","bc") differ.
        self.0 = (self.0 ^ 0xff).wrapping_mul(0x100_0000_01b3);
    }

    fn finish(&self) -> u64 {
        let mut k = self.0;
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
}

/// Correlations compiled against the numbering of a rule set.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    corrs: Vec<CompiledCorrelation>,
    /// Taps by detection rule number.
    taps: Vec<Vec<Tap>>,
    /// Detection rules referred to without `generate: true`, by number.
    suppressed: Vec<bool>,
    errors: Vec<(String, CorrelationError)>,
}

/// What a reference in `rules` points at.
#[derive(Clone, Copy, Debug)]
enum Target {
    Detection(u32),
    Correlation(u32),
}

impl Plan {
    /// Compiles the enabled `correlations` against `detections` (in rule-set numbering) with
    /// `mapping`. A correlation that cannot be evaluated (an unknown rule, a cycle, chained
    /// correlations grouping differently) is left out and reported by [`Plan::errors`].
    pub fn compile(
        detections: &[Arc<Rule>],
        correlations: &[Arc<Rule>],
        mapping: &Mapping,
    ) -> Plan {
        let mut plan = Plan {
            taps: vec![Vec::new(); detections.len()],
            suppressed: vec![false; detections.len()],
            ..Plan::default()
        };
        let find = |name: &str| -> Option<Target> {
            let by_id = |r: &Arc<Rule>| r.id == name;
            let by_name = |r: &Arc<Rule>| r.name.as_deref() == Some(name);
            detections
                .iter()
                .position(by_id)
                .map(|i| Target::Detection(i as u32))
                .or_else(|| {
                    correlations
                        .iter()
                        .position(by_id)
                        .map(|i| Target::Correlation(i as u32))
                })
                .or_else(|| {
                    detections
                        .iter()
                        .position(by_name)
                        .map(|i| Target::Detection(i as u32))
                })
                .or_else(|| {
                    correlations
                        .iter()
                        .position(by_name)
                        .map(|i| Target::Correlation(i as u32))
                })
        };
        // Resolve every correlation's references first; compile those whose whole chain
        // resolves and is acyclic.
        let defs: Vec<Option<&Correlation>> = correlations
            .iter()
            .map(|r| match &r.body {
                Body::Correlation(c) => Some(c),
                Body::Detection { .. } => None,
            })
            .collect();
        let mut targets: Vec<Result<Vec<Target>, CorrelationError>> = Vec::new();
        for def in &defs {
            let Some(c) = def else {
                targets.push(Err(CorrelationError::NotCorrelation));
                continue;
            };
            targets.push(
                c.rules
                    .iter()
                    .map(|name| {
                        find(name).ok_or_else(|| CorrelationError::UnknownRule(name.clone()))
                    })
                    .collect(),
            );
        }
        let mut ok = vec![true; correlations.len()];
        for (i, checked) in check_chains(&targets, &defs).into_iter().enumerate() {
            if let Err(e) = checked {
                ok[i] = false;
                plan.errors.push((correlations[i].id.clone(), e));
            }
        }
        // Numbering of the plan: only the correlations kept, in order.
        let mut number = vec![None; correlations.len()];
        for (i, rule) in correlations.iter().enumerate() {
            if !ok[i] {
                continue;
            }
            let Some(c) = defs[i] else { continue };
            let n = plan.corrs.len() as u32;
            number[i] = Some(n);
            let kind = Kind::of(&c.kind);
            let bounds: Vec<(Op, f64)> = c.condition.iter().map(|(o, v)| (Op::of(o), *v)).collect();
            let lower_only = bounds.iter().all(|(o, _)| matches!(o, Op::Gt | Op::Gte));
            let need = if bounds.is_empty() {
                // temporal types without a condition: every referenced rule.
                Some(c.rules.len())
            } else if lower_only {
                let need = bounds
                    .iter()
                    .map(|&(o, v)| match o {
                        Op::Gt => v.floor() as usize + 1,
                        _ => v.ceil().max(0.0) as usize,
                    })
                    .max()
                    .unwrap_or(1)
                    .max(1);
                Some(need)
            } else {
                None
            };
            if bounds.iter().any(|(_, v)| *v > MAX_BOUND) {
                plan.errors
                    .push((rule.id.clone(), CorrelationError::BoundTooLarge));
                number[i] = None;
                continue;
            }
            plan.corrs.push(CompiledCorrelation {
                rule: rule.clone(),
                kind,
                timespan_ns: (c.timespan_s as i64).saturating_mul(1_000_000_000),
                bounds,
                need,
                inputs: c.rules.len(),
                dependants: Vec::new(),
                suppressed: false,
            });
        }
        for (i, def) in defs.iter().enumerate() {
            let (Some(n), Some(c), Ok(ts)) = (number[i], def, &targets[i]) else {
                continue;
            };
            for (slot, (t, name)) in ts.iter().zip(&c.rules).enumerate() {
                match *t {
                    Target::Detection(d) => {
                        let rule = &detections[d as usize];
                        let field_of = |g: &str| -> String {
                            c.aliases
                                .iter()
                                .find(|(alias, _)| alias == g)
                                .and_then(|(_, per)| {
                                    per.iter()
                                        .find(|(r, _)| {
                                            r == name
                                                || *r == rule.id
                                                || rule.name.as_deref() == Some(r)
                                        })
                                        .map(|(_, f)| f.clone())
                                })
                                .unwrap_or_else(|| g.to_string())
                        };
                        let group = c
                            .group_by
                            .iter()
                            .map(|g| (g.clone(), resolve(mapping, &field_of(g))))
                            .collect();
                        let value = c.field.as_deref().map(|f| resolve(mapping, &field_of(f)));
                        plan.taps[d as usize].push(Tap {
                            corr: n,
                            slot: slot as u8,
                            group,
                            value,
                        });
                        if !c.generate {
                            plan.suppressed[d as usize] = true;
                        }
                    }
                    Target::Correlation(j) => {
                        if let Some(m) = number[j as usize] {
                            plan.corrs[m as usize].dependants.push((n, slot as u8));
                            if !c.generate {
                                plan.corrs[m as usize].suppressed = true;
                            }
                        }
                    }
                }
            }
        }
        plan
    }

    /// Compiled correlations, by number.
    pub fn correlations(&self) -> &[CompiledCorrelation] {
        &self.corrs
    }

    /// Correlation number `index`.
    pub fn correlation(&self, index: u32) -> Option<&CompiledCorrelation> {
        self.corrs.get(index as usize)
    }

    /// How the correlations read events matched by detection rule `rule`.
    #[inline]
    pub fn taps(&self, rule: u32) -> &[Tap] {
        self.taps.get(rule as usize).map_or(&[], Vec::as_slice)
    }

    /// Whether detection rule `rule` only feeds correlations (`generate` not set).
    pub fn is_suppressed(&self, rule: u32) -> bool {
        self.suppressed.get(rule as usize).copied().unwrap_or(false)
    }

    /// Correlations left out, with why: (rule id, message).
    pub fn errors(&self) -> &[(String, CorrelationError)] {
        &self.errors
    }

    /// No correlation to evaluate.
    pub fn is_empty(&self) -> bool {
        self.corrs.is_empty()
    }
}

/// Why a correlation rule is left out of the plan (it loads, and is listed as not evaluated).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorrelationError {
    /// The rule is in the correlation list but is not a correlation.
    #[error("not a correlation rule")]
    NotCorrelation,
    /// A name in `rules:` matches no rule's id or name.
    #[error("no rule has id or name `{0}`")]
    UnknownRule(String),
    /// Correlations refer to each other in a loop.
    #[error("correlations refer to each other in a cycle")]
    Cycle,
    /// A chained correlation groups by other fields.
    #[error("it chains a correlation that groups by {theirs:?}, not by its own {ours:?}")]
    GroupByMismatch {
        /// The chained correlation's `group-by`.
        theirs: Vec<String>,
        /// This one's.
        ours: Vec<String>,
    },
    /// The chain is deeper than the most correlations one chain may hold (8).
    #[error("it chains {0} correlations deep; at most {MAX_CHAIN_DEPTH}")]
    TooDeep(usize),
    /// A count bound over the largest one supported.
    #[error("count bounds above {MAX_BOUND} are not supported")]
    BoundTooLarge,
}

/// What the walk over the chains knows of a correlation.
#[derive(Clone)]
enum Mark {
    Unseen,
    /// On the walk's current path: meeting it again closes a cycle.
    Open,
    /// Checked: its height (correlations in its longest chain, itself included) or why not.
    Done(Result<usize, CorrelationError>),
}

/// For each correlation, whether its chain holds: every reference resolves, no cycle, every
/// chained correlation groups by the same fields, and no chain is over [`MAX_CHAIN_DEPTH`]
/// correlations deep. One walk with an explicit stack and each correlation checked once: a
/// recursive walk that checked shared links again for every path through them took minutes for
/// five correlations listing each other a hundred times, and overflowed the stack on long chains.
fn check_chains(
    targets: &[Result<Vec<Target>, CorrelationError>],
    defs: &[Option<&Correlation>],
) -> Vec<Result<(), CorrelationError>> {
    let mut mark = vec![Mark::Unseen; targets.len()];
    for root in 0..targets.len() {
        if !matches!(mark[root], Mark::Unseen) {
            continue;
        }
        mark[root] = Mark::Open;
        // (correlation, how many of its targets were looked at)
        let mut path = vec![(root, 0usize)];
        while let Some(top) = path.last_mut() {
            let i = top.0;
            let ts = match &targets[i] {
                Ok(ts) => ts,
                Err(e) => {
                    mark[i] = Mark::Done(Err(e.clone()));
                    path.pop();
                    continue;
                }
            };
            let unseen = ts[top.1..].iter().position(|t| {
                matches!(*t, Target::Correlation(j) if matches!(mark[j as usize], Mark::Unseen))
            });
            if let Some(k) = unseen {
                top.1 += k + 1;
                let Target::Correlation(j) = ts[top.1 - 1] else {
                    continue;
                };
                mark[j as usize] = Mark::Open;
                path.push((j as usize, 0));
                continue;
            }
            mark[i] = Mark::Done(chain_of(i, ts, defs, &mark));
            path.pop();
        }
    }
    mark.into_iter()
        .map(|m| match m {
            Mark::Done(r) => r.map(|_| ()),
            _ => Err(CorrelationError::Cycle),
        })
        .collect()
}

/// Correlation `i`'s height, once every correlation it targets (`ts`) is checked or open.
fn chain_of(
    i: usize,
    ts: &[Target],
    defs: &[Option<&Correlation>],
    mark: &[Mark],
) -> Result<usize, CorrelationError> {
    let mut height = 1;
    for t in ts {
        let Target::Correlation(j) = *t else {
            continue;
        };
        let j = j as usize;
        let (Some(a), Some(b)) = (defs[i], defs[j]) else {
            continue;
        };
        if a.group_by != b.group_by {
            return Err(CorrelationError::GroupByMismatch {
                theirs: b.group_by.clone(),
                ours: a.group_by.clone(),
            });
        }
        match &mark[j] {
            Mark::Done(Ok(h)) => height = height.max(h + 1),
            Mark::Done(Err(e)) => return Err(e.clone()),
            Mark::Open | Mark::Unseen => {
                return Err(CorrelationError::Cycle);
            }
        }
    }
    if height > MAX_CHAIN_DEPTH {
        return Err(CorrelationError::TooDeep(height));
    }
    Ok(height)
}

/// A referenced rule matched an event of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit<R> {
    /// Correlation number.
    pub corr: u32,
    /// Position of the matched rule in the correlation's `rules`.
    pub slot: u8,
    /// Group key ([`Tap::keys`]).
    pub group: u64,
    /// Value key (`value_count`), else 0.
    pub value: u64,
    /// Event time, ns.
    pub ts_ns: i64,
    /// The event, as the caller names events.
    pub event: R,
}

/// Up to `MAX_EVENTS` values, oldest first; pushing onto a full one drops the oldest. Fixed
/// size and `Copy`: windows and fires hold their events without allocating.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Joined<R> {
    items: [R; MAX_EVENTS],
    len: u8,
}

impl<R: Copy + Default> Default for Joined<R> {
    fn default() -> Joined<R> {
        Joined {
            items: [R::default(); MAX_EVENTS],
            len: 0,
        }
    }
}

impl<R: Copy + Default> Joined<R> {
    /// Appends `item`, dropping the oldest when full.
    pub fn push(&mut self, item: R) {
        if self.len as usize == MAX_EVENTS {
            self.items.copy_within(1.., 0);
            self.items[MAX_EVENTS - 1] = item;
        } else {
            self.items[self.len as usize] = item;
            self.len += 1;
        }
    }

    /// The values, oldest first.
    pub fn as_slice(&self) -> &[R] {
        &self.items[..self.len as usize]
    }

    /// The values, oldest first, to reorder.
    pub fn as_mut_slice(&mut self) -> &mut [R] {
        &mut self.items[..self.len as usize]
    }

    /// Empties it.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// A correlation whose condition held for a group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fired<R> {
    /// Correlation number.
    pub corr: u32,
    /// Group key.
    pub group: u64,
    /// Time of the earliest event joined, ns.
    pub first_ns: i64,
    /// Time of the event that completed it (or the window's end), ns.
    pub last_ns: i64,
    /// The measure the condition read: events, distinct values or distinct rules.
    pub measure: u64,
    /// The events joined, oldest first (at most `MAX_EVENTS`).
    pub events: Joined<R>,
}

/// The window state of one group of one correlation. Sliding windows are reset in place when
/// they fire, so a busy group reuses its buffers.
#[derive(Clone, Debug)]
enum Window<R> {
    /// `event_count`, sliding: times of the latest `need` events.
    Count { times: VecDeque<i64> },
    /// `value_count`, sliding: the latest `need` distinct values and when each was last seen.
    Values { values: Vec<(u64, i64)> },
    /// `temporal`, sliding: when each referenced rule was last seen, and by which event.
    Temporal { last: Vec<Option<(i64, R)>> },
    /// `temporal_ordered`: per step, the latest start of a chain that reached it.
    Ordered {
        steps: Vec<Option<(i64, Joined<R>)>>,
    },
    /// Any upper bound: a tumbling window judged when it closes.
    Tumbling {
        start: i64,
        events: u64,
        values: Vec<u64>,
        rules: u64,
    },
}

impl<R> Window<R> {
    fn reset(&mut self) {
        match self {
            Window::Count { times } => times.clear(),
            Window::Values { values } => values.clear(),
            Window::Temporal { last } => last.iter_mut().for_each(|s| *s = None),
            Window::Ordered { steps } => steps.iter_mut().for_each(|s| *s = None),
            Window::Tumbling { .. } => {}
        }
    }
}

struct Group<R> {
    window: Window<R>,
    /// The latest events with their times, for the alert.
    recent: Joined<(i64, R)>,
    last_ns: i64,
}

/// The correlation windows one worker owns.
pub struct Correlator<R> {
    plan: Arc<Plan>,
    groups: HashMap<(u32, u64), Group<R>>,
    max_groups: usize,
    dropped: u64,
    stack: Vec<Hit<R>>,
}

impl<R: Copy + Default> Correlator<R> {
    /// Windows for `plan`, holding at most `max_groups` groups at once (a hit for a new group
    /// beyond that is dropped and counted).
    pub fn new(plan: Arc<Plan>, max_groups: usize) -> Correlator<R> {
        Correlator {
            plan,
            groups: HashMap::new(),
            max_groups,
            dropped: 0,
            stack: Vec::new(),
        }
    }

    /// The plan evaluated.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// Groups held.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// No group held.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Whether a window of `corr` is open for `group`.
    pub fn contains(&self, corr: u32, group: u64) -> bool {
        self.groups.contains_key(&(corr, group))
    }

    /// Hits dropped because the group table was full, or because one event's chained
    /// correlations went past `MAX_CASCADE_HITS`.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Adds `hit`; correlations it completes (and those they complete in turn, for chains) are
    /// appended to `out`. Allocates nothing once its groups exist.
    pub fn observe(&mut self, hit: Hit<R>, out: &mut Vec<Fired<R>>) {
        self.stack.clear();
        self.stack.push(hit);
        let mut budget = MAX_CASCADE_HITS;
        while let Some(h) = self.stack.pop() {
            if budget == 0 {
                self.dropped += 1 + self.stack.len() as u64;
                self.stack.clear();
                break;
            }
            budget -= 1;
            let before = out.len();
            self.one(h, out);
            for f in &out[before..] {
                let Some(c) = self.plan.correlation(f.corr) else {
                    continue;
                };
                let Some(&event) = f.events.as_slice().last() else {
                    continue;
                };
                for &(dep, slot) in &c.dependants {
                    self.stack.push(Hit {
                        corr: dep,
                        slot,
                        group: f.group,
                        value: 0,
                        ts_ns: f.last_ns,
                        event,
                    });
                }
            }
        }
    }

    fn one(&mut self, h: Hit<R>, out: &mut Vec<Fired<R>>) {
        let Some(c) = self.plan.corrs.get(h.corr as usize) else {
            return;
        };
        let key = (h.corr, h.group);
        if !self.groups.contains_key(&key) && self.groups.len() >= self.max_groups {
            self.dropped += 1;
            return;
        }
        let group = self.groups.entry(key).or_insert_with(|| Group {
            window: new_window(c, h.ts_ns),
            recent: Joined::default(),
            last_ns: h.ts_ns,
        });
        group.last_ns = group.last_ns.max(h.ts_ns);
        group.recent.push((h.ts_ns, h.event));
        let horizon = h.ts_ns.saturating_sub(c.timespan_ns);
        let need = c.need.unwrap_or(usize::MAX);
        let fired: Option<(u64, i64, Option<Joined<R>>)> = match &mut group.window {
            Window::Count { times } => {
                times.push_back(h.ts_ns);
                while times.front().is_some_and(|&t| t < horizon) || times.len() > need {
                    times.pop_front();
                }
                (times.len() >= need).then(|| (times.len() as u64, times[0], None))
            }
            Window::Values { values } => {
                match values.iter_mut().find(|(v, _)| *v == h.value) {
                    Some(e) => e.1 = e.1.max(h.ts_ns),
                    None => values.push((h.value, h.ts_ns)),
                }
                values.retain(|&(_, t)| t >= horizon);
                if values.len() > need {
                    // Keep the most recently seen: enough to tell whether `need` are in the window.
                    values.sort_unstable_by_key(|&(_, t)| std::cmp::Reverse(t));
                    values.truncate(need);
                }
                let first = values.iter().map(|&(_, t)| t).min().unwrap_or(h.ts_ns);
                (values.len() >= need).then_some((values.len() as u64, first, None))
            }
            Window::Temporal { last } => {
                if let Some(s) = last.get_mut(h.slot as usize) {
                    *s = Some((h.ts_ns, h.event));
                }
                let live = last.iter().flatten().filter(|(t, _)| *t >= horizon).count();
                (live >= need).then(|| {
                    let mut seen: Joined<(i64, R)> = Joined::default();
                    for &(t, r) in last.iter().flatten().filter(|(t, _)| *t >= horizon) {
                        seen.push((t, r));
                    }
                    seen.as_mut_slice().sort_by_key(|(t, _)| *t);
                    let first = seen.as_slice().first().map_or(h.ts_ns, |e| e.0);
                    let mut ev = Joined::default();
                    for &(_, r) in seen.as_slice() {
                        ev.push(r);
                    }
                    (live as u64, first, Some(ev))
                })
            }
            Window::Ordered { steps } => {
                let j = h.slot as usize;
                let reached = if j == 0 {
                    let mut ev = Joined::default();
                    ev.push(h.event);
                    Some((h.ts_ns, ev))
                } else {
                    steps
                        .get(j - 1)
                        .and_then(|s| *s)
                        .filter(|(start, _)| *start >= horizon)
                        .map(|(start, mut ev)| {
                            ev.push(h.event);
                            (start, ev)
                        })
                };
                if let (Some(r), Some(slot)) = (reached, steps.get_mut(j)) {
                    // The latest start leaves the most time for the steps still to come.
                    if slot.as_ref().is_none_or(|(s, _)| r.0 >= *s) {
                        *slot = Some(r);
                    }
                }
                let done = need.min(steps.len()).max(1) - 1;
                steps
                    .get(done)
                    .and_then(|s| *s)
                    .filter(|(start, _)| *start >= horizon && j == done)
                    .map(|(start, ev)| ((done + 1) as u64, start, Some(ev)))
            }
            Window::Tumbling {
                events,
                values,
                rules,
                ..
            } => {
                *events += 1;
                if c.kind == Kind::ValueCount
                    && !values.contains(&h.value)
                    && values.len() <= MAX_BOUND as usize
                {
                    values.push(h.value);
                }
                *rules |= 1u64 << (h.slot.min(63));
                None
            }
        };
        if let Some((measure, first_ns, events)) = fired {
            let events = events.unwrap_or_else(|| {
                let mut ev = Joined::default();
                for &(t, r) in group.recent.as_slice() {
                    if t >= first_ns {
                        ev.push(r);
                    }
                }
                ev
            });
            out.push(Fired {
                corr: h.corr,
                group: h.group,
                first_ns,
                last_ns: h.ts_ns,
                measure,
                events,
            });
            // Start afresh: the next alert needs a whole new set of events. The buffers stay.
            group.window.reset();
            group.recent.clear();
        }
    }

    /// Closes the windows that ended before `now_ns`: tumbling windows are judged (fired ones
    /// go to `out`), idle sliding ones are dropped.
    pub fn sweep(&mut self, now_ns: i64, out: &mut Vec<Fired<R>>) {
        let plan = &self.plan;
        self.groups.retain(|&(corr, group), g| {
            let Some(c) = plan.corrs.get(corr as usize) else {
                return false;
            };
            match &g.window {
                Window::Tumbling {
                    start,
                    events,
                    values,
                    rules,
                } => {
                    let end = start.saturating_add(c.timespan_ns);
                    if now_ns < end {
                        return true;
                    }
                    let measure = match c.kind {
                        Kind::EventCount => *events,
                        Kind::ValueCount => values.len() as u64,
                        _ => u64::from(rules.count_ones()),
                    };
                    if c.bounds.iter().all(|&(o, b)| o.holds(measure as f64, b)) {
                        let mut ev = Joined::default();
                        for &(_, r) in g.recent.as_slice() {
                            ev.push(r);
                        }
                        out.push(Fired {
                            corr,
                            group,
                            first_ns: *start,
                            last_ns: g.last_ns,
                            measure,
                            events: ev,
                        });
                    }
                    false
                }
                _ => g.last_ns >= now_ns.saturating_sub(c.timespan_ns),
            }
        });
    }
}

fn new_window<R: Copy>(c: &CompiledCorrelation, ts_ns: i64) -> Window<R> {
    if c.need.is_none() {
        return Window::Tumbling {
            start: ts_ns,
            events: 0,
            values: Vec::new(),
            rules: 0,
        };
    }
    match c.kind {
        Kind::EventCount => Window::Count {
            times: VecDeque::with_capacity(c.need.unwrap_or(1).min(64)),
        },
        Kind::ValueCount => Window::Values {
            values: Vec::with_capacity(c.need.unwrap_or(1).min(64) + 1),
        },
        Kind::Temporal => Window::Temporal {
            last: vec![None; c.inputs],
        },
        Kind::TemporalOrdered => Window::Ordered {
            steps: vec![None; c.inputs],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::parse_rule;
    use watchpost_proto::PlainEvent;

    const S: i64 = 1_000_000_000;

    fn rule(y: &str) -> Arc<Rule> {
        Arc::new(parse_rule(y).unwrap())
    }

    fn detection(id: &str, name: &str) -> Arc<Rule> {
        rule(&format!(
            "title: {name}\nid: {id}\nname: {name}\nlogsource: {{product: linux, service: sshd}}\ndetection:\n  kw: ['{name}']\n  condition: kw\n"
        ))
    }

    fn plan(dets: &[Arc<Rule>], corrs: &[&str]) -> Arc<Plan> {
        let corrs: Vec<Arc<Rule>> = corrs.iter().map(|y| rule(y)).collect();
        let p = Plan::compile(dets, &corrs, &Mapping::bundled());
        assert!(p.errors().is_empty(), "{:?}", p.errors());
        Arc::new(p)
    }

    fn event(attrs: &[(&str, &str)]) -> PlainEvent {
        PlainEvent {
            attributes: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..PlainEvent::default()
        }
    }

    /// Feeds (slot rule number, event, second) through the plan's taps; returns the fires.
    fn run(p: &Arc<Plan>, feed: &[(u32, PlainEvent, i64)]) -> Vec<Fired<usize>> {
        let mut c = Correlator::new(p.clone(), 1000);
        let mut out = Vec::new();
        for (i, (rule, e, sec)) in feed.iter().enumerate() {
            for tap in p.taps(*rule) {
                if let Some((group, value)) = tap.keys(e) {
                    c.observe(
                        Hit {
                            corr: tap.corr,
                            slot: tap.slot,
                            group,
                            value,
                            ts_ns: sec * S,
                            event: i,
                        },
                        &mut out,
                    );
                }
            }
        }
        out
    }

    const BRUTE: &str = "title: Brute force\nid: bf\nname: brute\ncorrelation:\n  type: event_count\n  rules: [failed]\n  group-by: [SourceIp]\n  timespan: 1m\n  condition: {gte: 3}\n";

    #[test]
    fn event_count_fires_on_the_event_reaching_the_bound_within_the_window() {
        let dets = [detection("f1", "failed")];
        let p = plan(&dets, &[BRUTE]);
        let a = event(&[("SourceIp", "10.0.0.1")]);
        let b = event(&[("SourceIp", "10.0.0.2")]);
        // 10.0.0.1: two, then a gap past the window, then three close together.
        let feed = [
            (0, a.clone(), 0),
            (0, a.clone(), 10),
            (0, b.clone(), 11),
            (0, a.clone(), 100),
            (0, b.clone(), 101),
            (0, a.clone(), 110),
            (0, a.clone(), 120),
            (0, event(&[]), 121),
        ];
        let fired = run(&p, &feed);
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!(fired[0].events.as_slice(), [3, 5, 6]);
        assert_eq!(fired[0].measure, 3);
        assert_eq!((fired[0].first_ns, fired[0].last_ns), (100 * S, 120 * S));
        assert!(p.is_suppressed(0), "generate defaults to false");
    }

    #[test]
    fn group_values_compare_without_case_and_missing_fields_do_not_join() {
        let dets = [detection("f1", "failed")];
        let p = plan(
            &dets,
            &[&BRUTE.replace("[SourceIp]", "[TargetUserName, SourceIp]")],
        );
        let e = |u: &str| event(&[("TargetUserName", u), ("SourceIp", "10.0.0.1")]);
        let fired = run(
            &p,
            &[
                (0, e("Admin"), 0),
                (0, e("ADMIN"), 1),
                (0, event(&[("SourceIp", "10.0.0.1")]), 2),
                (0, e("admin"), 3),
            ],
        );
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].events.as_slice(), [0, 1, 3]);
        let mut buf = [0u8; 64];
        let n = p.taps(0)[0].group_text(&e("alice"), &mut buf);
        assert_eq!(&buf[..n], b"TargetUserName=alice, SourceIp=10.0.0.1");
    }

    #[test]
    fn value_count_counts_distinct_values_in_the_window() {
        let dets = [detection("f1", "failed")];
        let p = plan(
            &dets,
            &[
                "title: Spray\nid: sp\ncorrelation:\n  type: value_count\n  rules: [failed]\n  group-by: [SourceIp]\n  timespan: 1m\n  condition: {field: TargetUserName, gt: 2}\n",
            ],
        );
        let e = |u: &str, t| {
            (
                0u32,
                event(&[("TargetUserName", u), ("SourceIp", "10.9.9.9")]),
                t,
            )
        };
        // The same user over and over is not spraying; three distinct in a minute is.
        let fired = run(
            &p,
            &[
                e("a", 0),
                e("a", 1),
                e("a", 2),
                e("b", 3),
                e("a", 4),
                e("c", 70),
            ],
        );
        assert!(
            fired.is_empty(),
            "a and b fell out of the window: {fired:?}"
        );
        let fired = run(&p, &[e("a", 0), e("b", 1), e("b", 2), e("c", 3)]);
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].measure, 3);
    }

    #[test]
    fn temporal_needs_every_rule_in_any_order_and_ordered_needs_the_order() {
        let dets = [detection("d1", "recon"), detection("d2", "exfil")];
        let tmpl = "title: T\nid: t\ncorrelation:\n  type: KIND\n  rules: [recon, exfil]\n  group-by: [User]\n  timespan: 10m\n";
        let e = |u: &str| event(&[("User", u)]);
        let any = plan(&dets, &[&tmpl.replace("KIND", "temporal")]);
        let ord = plan(&dets, &[&tmpl.replace("KIND", "temporal_ordered")]);
        let reversed = [(1, e("bob"), 0), (0, e("bob"), 60)];
        assert_eq!(run(&any, &reversed).len(), 1);
        assert!(run(&ord, &reversed).is_empty(), "exfil before recon");
        let in_order = [(0, e("bob"), 0), (1, e("eve"), 30), (1, e("bob"), 60)];
        let fired = run(&ord, &in_order);
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].events.as_slice(), [0, 2]);
        let too_late = [(0, e("bob"), 0), (1, e("bob"), 601)];
        assert!(run(&ord, &too_late).is_empty());
    }

    #[test]
    fn chained_correlations_and_aliases() {
        let dets = [detection("f1", "failed"), detection("s1", "success")];
        let then = "title: Brute then success\nid: bts\ngenerate: true\ncorrelation:\n  type: temporal_ordered\n  rules: [brute, success]\n  group-by: [SourceIp]\n  timespan: 10m\n";
        let p = plan(&dets, &[BRUTE, then]);
        assert!(
            !p.correlations()[0].suppressed,
            "generate: true on the chain"
        );
        assert!(!p.is_suppressed(1));
        let a = event(&[("SourceIp", "10.0.0.1")]);
        let feed = [
            (1, a.clone(), 0),
            (0, a.clone(), 1),
            (0, a.clone(), 2),
            (0, a.clone(), 3),
            (1, a.clone(), 4),
        ];
        let fired = run(&p, &feed);
        let corrs: Vec<u32> = fired.iter().map(|f| f.corr).collect();
        assert_eq!(
            corrs,
            vec![0, 1],
            "brute force, then the chain on the success"
        );
        assert_eq!(fired[1].events.as_slice(), [3, 4]);

        let aliased = "title: A\nid: al\ncorrelation:\n  type: temporal\n  rules: [failed, success]\n  group-by: [peer]\n  timespan: 1m\n  aliases:\n    peer:\n      failed: SourceIp\n      success: DestinationIp\n";
        let p = plan(&dets, &[aliased]);
        let fired = run(
            &p,
            &[
                (0, event(&[("SourceIp", "10.1.1.1")]), 0),
                (1, event(&[("DestinationIp", "10.1.1.1")]), 5),
            ],
        );
        assert_eq!(fired.len(), 1);
    }

    #[test]
    fn upper_bounds_are_judged_when_the_window_closes() {
        let dets = [detection("f1", "failed")];
        let p = plan(&dets, &[&BRUTE.replace("{gte: 3}", "{gt: 1, lt: 3}")]);
        let a = event(&[("SourceIp", "10.0.0.1")]);
        let b = event(&[("SourceIp", "10.0.0.2")]);
        let mut c = Correlator::new(p.clone(), 100);
        let mut out = Vec::new();
        for (i, (e, t)) in [(&a, 0), (&a, 5), (&b, 6), (&b, 7), (&b, 8)]
            .into_iter()
            .enumerate()
        {
            let (group, value) = p.taps(0)[0].keys(e).unwrap();
            c.observe(
                Hit {
                    corr: 0,
                    slot: 0,
                    group,
                    value,
                    ts_ns: t * S,
                    event: i,
                },
                &mut out,
            );
        }
        assert!(out.is_empty());
        c.sweep(30 * S, &mut out);
        assert!(out.is_empty(), "windows still open");
        c.sweep(61 * S, &mut out);
        assert_eq!(out.len(), 1, "two events pass, three do not: {out:?}");
        assert_eq!(out[0].events.as_slice(), [0, 1]);
        c.sweep(70 * S, &mut out);
        assert_eq!(out.len(), 1, "10.0.0.2 saw three");
        assert!(c.is_empty());
    }

    #[test]
    fn bad_references_and_cycles_are_reported_not_evaluated() {
        let dets = [detection("f1", "failed")];
        let corrs: Vec<Arc<Rule>> = [
            "title: X\nid: x\ncorrelation:\n  type: event_count\n  rules: [nothing]\n  timespan: 1m\n  condition: {gte: 2}\n",
            "title: Y\nid: y\nname: y\ncorrelation:\n  type: temporal\n  rules: [z, failed]\n  timespan: 1m\n",
            "title: Z\nid: z\nname: z\ncorrelation:\n  type: temporal\n  rules: [y, failed]\n  timespan: 1m\n",
            "title: W\nid: w\ncorrelation:\n  type: temporal\n  rules: [brute]\n  group-by: [User]\n  timespan: 1m\n",
            BRUTE,
        ]
        .iter()
        .map(|y| rule(y))
        .collect();
        let p = Plan::compile(&dets, &corrs, &Mapping::bundled());
        let ids: Vec<&str> = p.errors().iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, vec!["x", "y", "z", "w"]);
        assert_eq!(p.correlations().len(), 1);
        assert!(p.errors()[3].1.to_string().contains("groups by"));
    }

    /// `levels` levels of `width` correlations, each counting every correlation of the level
    /// below (the lowest, `failed`) and firing on every hit.
    fn ladder(levels: usize, width: usize) -> Vec<Arc<Rule>> {
        let mut out = Vec::new();
        for level in 0..levels {
            for k in 0..width {
                let below: Vec<String> = if level == 0 {
                    vec!["failed".into()]
                } else {
                    (0..width).map(|b| format!("c{}_{b}", level - 1)).collect()
                };
                out.push(rule(&format!(
                    "title: C\nid: c{level}_{k}\nname: c{level}_{k}\ncorrelation:\n  type: event_count\n  rules: [{}]\n  timespan: 1m\n  condition: {{gte: 1}}\n",
                    below.join(", ")
                )));
            }
        }
        out
    }

    #[test]
    fn chains_are_checked_once_per_correlation_and_bounded_in_depth() {
        let dets = [detection("f1", "failed")];
        // Eight levels of twelve, each listing all twelve below: 12^8 (430 million) paths, which
        // a walk along every path would take many minutes over; each link is checked once.
        let p = Plan::compile(&dets, &ladder(MAX_CHAIN_DEPTH, 12), &Mapping::bundled());
        assert!(p.errors().is_empty(), "{:?}", p.errors());
        assert_eq!(p.correlations().len(), 96);
        // One level more: the top level is refused, with the depth in the reason.
        let p = Plan::compile(&dets, &ladder(MAX_CHAIN_DEPTH + 1, 2), &Mapping::bundled());
        assert_eq!(p.errors().len(), 2, "{:?}", p.errors());
        assert!(
            p.errors()[0].1.to_string().contains("9 correlations deep"),
            "{:?}",
            p.errors()
        );
        assert_eq!(p.correlations().len(), 2 * MAX_CHAIN_DEPTH);
    }

    #[test]
    fn one_event_causes_a_bounded_number_of_chained_hits_and_the_rest_are_counted() {
        let dets = [detection("f1", "failed")];
        // Every correlation fires on every hit: one hit on the lowest level would cascade into
        // 1 + 4 + 16 + ... + 4^7 = 21,845 hits.
        let p = Arc::new(Plan::compile(&dets, &ladder(8, 4), &Mapping::bundled()));
        assert!(p.errors().is_empty(), "{:?}", p.errors());
        let mut c = Correlator::new(p.clone(), 100_000);
        let mut out = Vec::new();
        let taps = p.taps(0);
        assert_eq!(taps.len(), 4);
        c.observe(
            Hit {
                corr: taps[0].corr,
                slot: taps[0].slot,
                group: 0,
                value: 0,
                ts_ns: 0,
                event: 0usize,
            },
            &mut out,
        );
        assert_eq!(out.len(), MAX_CASCADE_HITS, "each hit taken fires once");
        assert!(c.dropped() > 0, "the hits left are counted");
    }

    #[test]
    fn a_full_group_table_drops_and_counts() {
        let dets = [detection("f1", "failed")];
        let p = plan(&dets, &[BRUTE]);
        let mut c = Correlator::new(p, 2);
        let mut out = Vec::new();
        for g in 0..5u64 {
            c.observe(
                Hit {
                    corr: 0,
                    slot: 0,
                    group: g,
                    value: 0,
                    ts_ns: 0,
                    event: 0usize,
                },
                &mut out,
            );
        }
        assert_eq!((c.len(), c.dropped()), (2, 3));
        c.sweep(120 * S, &mut out);
        assert!(c.is_empty(), "idle windows are dropped");
    }
}
