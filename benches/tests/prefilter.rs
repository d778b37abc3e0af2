//! The rule index (logsource shapes, per-field literal automata, exact values) only skips rules
//! that cannot match: over realistic traffic, every rule set (the bundled rules, plus the
//! SigmaHQ subset when it is beside the checkout) reports exactly the same matches with the
//! index as without it. With a whole SigmaHQ checkout (`WATCHPOST_SIGMAHQ_FULL`), the same holds
//! for all of its rules on Windows events: its regression exports, and the `.evtx` files under
//! `WATCHPOST_EVTX` when set. Each event is also matched as the pipeline holds it (the store's
//! in-place `EventView` over an arena), with the same result.

use std::path::PathBuf;
use std::sync::Arc;
use watchpost_benches::sigma::{
    ArenaEvents, bundled_rules, evtx_events, plain_events, sigmahq_full_rules, sigmahq_rules,
};
use watchpost_rules::{Mapping, PlainEvent, Rule, RuleSet};

/// Matches of `events` with the index and without it, and with the index over the events as
/// the pipeline holds them, compared event by event; the total.
fn same_matches(rules: Vec<Arc<Rule>>, events: &[PlainEvent]) -> usize {
    let fast = RuleSet::compile(rules, &Mapping::bundled());
    let slow = fast.clone().without_prefilter();
    let arena = ArenaEvents::of(events);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    let mut matched = 0;
    for (i, e) in events.iter().enumerate() {
        a.clear();
        b.clear();
        c.clear();
        fast.matches(e, &mut a);
        slow.matches(e, &mut b);
        fast.matches(&arena.view(i), &mut c);
        assert_eq!(a, b, "event {i}: {e:?}");
        assert_eq!(a, c, "event {i} in place: {e:?}");
        matched += a.len();
    }
    matched
}

#[test]
fn the_prefilter_changes_no_match() {
    let events = plain_events(5, 6000);
    let mut rules: Vec<Arc<Rule>> = bundled_rules();
    rules.extend(sigmahq_rules());
    let matched = same_matches(rules, &events);
    assert!(
        matched > 100,
        "the traffic exercises the rules: {matched} matches"
    );
}

#[test]
fn the_index_changes_no_match_with_the_whole_sigmahq_set_on_windows_events() {
    let Some(root) = std::env::var_os("WATCHPOST_SIGMAHQ_FULL").map(PathBuf::from) else {
        eprintln!("WATCHPOST_SIGMAHQ_FULL not set: the whole-SigmaHQ check is skipped");
        return;
    };
    let mut events = evtx_events(&root.join("regression_data"));
    if let Some(more) = std::env::var_os("WATCHPOST_EVTX") {
        events.extend(evtx_events(&PathBuf::from(more)));
    }
    events.extend(plain_events(7, 4000));
    let rules = sigmahq_full_rules(&root);
    assert!(rules.len() > 3000, "{} rules", rules.len());
    let matched = same_matches(rules, &events);
    eprintln!(
        "{matched} matches over {} events, the same both ways",
        events.len()
    );
    assert!(matched > 200, "{matched} matches");
}
