//! Sigma matching on one core: the compiled matcher over the load generator's realistic events
//! (syslog and JSON, Linux, web, firewall and Windows), with every bundled rule, and as the rule
//! count grows from 100 to 2,000 with the SigmaHQ subset (`../shared/data/sigmahq-subset`, or
//! `WATCHPOST_SIGMAHQ`; skipped when absent).
//!
//! `cargo bench -p watchpost-benches --bench rules` (the whole SigmaHQ set on Windows events
//! with `WATCHPOST_SIGMAHQ_FULL=<checkout>`: `sigmahq_full_windows` over heap-scattered test
//! events, `sigmahq_full_windows_arena` over the same events laid out as the pipeline holds
//! them). Every iteration starts with the values the engine remembers forgotten.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use watchpost_benches::sigma::{
    ArenaEvents, bundled_rules, evtx_events, plain_events, sigmahq_full_rules, sigmahq_rules,
};
use watchpost_rules::{Mapping, PlainEvent, Rule, RuleSet};

/// One worker batch: stage A matches an event while it is being built, in cache, so the
/// benchmark's events should fit in cache too (8,192 heap-scattered test events measure memory
/// latency instead, about +50%).
const EVENTS: usize = 1024;

/// Matches every event once, the values the engine remembers per thread forgotten first
/// ([`RuleSet::forget_recent`]), so that an iteration gains nothing from having seen the same
/// events in the previous one.
fn run(set: &RuleSet, events: &[PlainEvent], hits: &mut Vec<u32>) -> usize {
    set.forget_recent();
    let mut n = 0;
    for e in events {
        hits.clear();
        set.matches(black_box(e), hits);
        n += hits.len();
    }
    n
}

/// [`run`] over events laid out as the pipeline holds them ([`ArenaEvents`]).
fn run_arena(set: &RuleSet, events: &ArenaEvents, hits: &mut Vec<u32>) -> usize {
    set.forget_recent();
    let mut n = 0;
    for i in 0..events.len() {
        hits.clear();
        set.matches(black_box(&events.view(i)), hits);
        n += hits.len();
    }
    n
}

fn benches(c: &mut Criterion) {
    let events = plain_events(11, EVENTS);
    let mapping = Mapping::bundled();
    let mut hits = Vec::with_capacity(16);
    let mut g = c.benchmark_group("sigma");
    g.throughput(Throughput::Elements(events.len() as u64));
    let bundled = bundled_rules();
    let set = RuleSet::compile(bundled.iter().cloned(), &mapping);
    eprintln!(
        "sigma: {} bundled detection rules, {} matches over {} events",
        set.len(),
        run(&set, &events, &mut hits),
        events.len()
    );
    g.bench_function("bundled_all", |b| b.iter(|| run(&set, &events, &mut hits)));
    let plain = set.clone().without_prefilter();
    g.bench_function("bundled_all_no_prefilter", |b| {
        b.iter(|| run(&plain, &events, &mut hits))
    });

    let mut pool = bundled.clone();
    pool.extend(sigmahq_rules());
    if pool.len() > bundled.len() {
        for n in [100usize, 250, 500, 1000, 2000] {
            // Past the pool's size the rules repeat: the cost of a rule does not depend on its id.
            let rules: Vec<Arc<Rule>> = pool.iter().cycle().take(n).cloned().collect();
            let set = RuleSet::compile(rules, &mapping);
            g.bench_function(format!("rules_{n}"), |b| {
                b.iter(|| run(&set, &events, &mut hits))
            });
        }
    } else {
        eprintln!("sigma: SigmaHQ subset not found; the rule-count curve is skipped");
    }
    g.finish();
    sigmahq_on_windows(c, &mapping, &mut hits);
}

/// The whole SigmaHQ set (a checkout named by `WATCHPOST_SIGMAHQ_FULL`: its `rules`,
/// `rules-emerging-threats` and `rules-threat-hunting`) on Windows events: the records of its
/// `regression_data` exports (attacks among their hosts' ordinary events) and of the `.evtx`
/// files under `WATCHPOST_EVTX`, when set. Skipped without a checkout: CI has none.
fn sigmahq_on_windows(c: &mut Criterion, mapping: &Mapping, hits: &mut Vec<u32>) {
    let Some(root) = std::env::var_os("WATCHPOST_SIGMAHQ_FULL").map(PathBuf::from) else {
        eprintln!("sigma: WATCHPOST_SIGMAHQ_FULL not set; the whole-SigmaHQ bench is skipped");
        return;
    };
    let rules = sigmahq_full_rules(&root);
    let mut events = evtx_events(&root.join("regression_data"));
    if let Some(more) = std::env::var_os("WATCHPOST_EVTX") {
        events.extend(evtx_events(&PathBuf::from(more)));
    }
    let started = std::time::Instant::now();
    let set = RuleSet::compile(rules, mapping);
    eprintln!(
        "sigma: whole SigmaHQ set, {} detection rules compiled in {:.0} ms; {} matches over {} \
         Windows events",
        set.len(),
        started.elapsed().as_secs_f64() * 1e3,
        run(&set, &events, hits),
        events.len()
    );
    let mut g = c.benchmark_group("sigma");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.sample_size(10);
    g.bench_function("sigmahq_full_windows", |b| {
        b.iter(|| run(&set, &events, hits))
    });
    let arena = ArenaEvents::of(&events);
    assert_eq!(
        run_arena(&set, &arena, hits),
        run(&set, &events, hits),
        "the same matches over either layout"
    );
    g.bench_function("sigmahq_full_windows_arena", |b| {
        b.iter(|| run_arena(&set, &arena, hits))
    });
    g.finish();
}

criterion_group!(rules, benches);
criterion_main!(rules);
