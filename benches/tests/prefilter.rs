//! The rule prefilter only skips rules that cannot match: over realistic traffic, every rule set
//! (the bundled rules, plus the SigmaHQ subset when it is beside the checkout) reports exactly
//! the same matches with the prefilter as without it.

use std::sync::Arc;
use watchpost_benches::sigma::{bundled_rules, plain_events, sigmahq_rules};
use watchpost_rules::{Mapping, Rule, RuleSet};

#[test]
fn the_prefilter_changes_no_match() {
    let events = plain_events(5, 6000);
    let mut rules: Vec<Arc<Rule>> = bundled_rules();
    rules.extend(sigmahq_rules());
    let fast = RuleSet::compile(rules.iter().cloned(), &Mapping::bundled());
    let slow = fast.clone().without_prefilter();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut matched = 0;
    for (i, e) in events.iter().enumerate() {
        a.clear();
        b.clear();
        fast.matches(e, &mut a);
        slow.matches(e, &mut b);
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "event {i}: {e:?}");
        matched += a.len();
    }
    assert!(
        matched > 100,
        "the traffic exercises the rules: {matched} matches"
    );
}
