//! The whole SigmaHQ set matched over Windows records in the pipeline's layout, one call per
//! event that is never inlined, so that callgrind can count the instructions of matching
//! alone. Wall-clock rounds on a shared VM vary by up to 30%, more than most changes to the
//! engine gain; instruction counts do not vary. `benches/scripts/sigma_instructions.sh` runs it
//! under valgrind:
//!
//! ```sh
//! WATCHPOST_SIGMAHQ_FULL=/tmp/sigmahq WATCHPOST_EVTX=/tmp/evtx-attack \
//!     benches/scripts/sigma_instructions.sh 2
//! ```

use std::path::PathBuf;
use watchpost_benches::sigma::{ArenaEvents, evtx_events, sigmahq_full_rules};
use watchpost_rules::{EventFields, Mapping, RuleSet};

/// The call callgrind counts (`--toggle-collect=*match_one*`).
#[inline(never)]
fn match_one<E: EventFields>(set: &RuleSet, event: &E, hits: &mut Vec<u32>) {
    set.matches(event, hits);
}

fn main() {
    let Some(root) = std::env::var_os("WATCHPOST_SIGMAHQ_FULL").map(PathBuf::from) else {
        eprintln!("WATCHPOST_SIGMAHQ_FULL must name a SigmaHQ checkout");
        std::process::exit(2);
    };
    let passes: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 2,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("passes: {e}");
            std::process::exit(2);
        }
    };
    let mut events = evtx_events(&root.join("regression_data"));
    if let Some(more) = std::env::var_os("WATCHPOST_EVTX") {
        events.extend(evtx_events(&PathBuf::from(more)));
    }
    let set = RuleSet::compile(sigmahq_full_rules(&root), &Mapping::bundled());
    let arena = ArenaEvents::of(&events);
    let mut hits = Vec::new();
    // Builds what is built at first sight (gates, joined matchers) before counting starts.
    let mut matches = 0;
    for event in &events {
        hits.clear();
        set.matches(event, &mut hits);
        matches += hits.len();
    }
    for _ in 0..passes {
        // What fresh traffic would find, as the benches do.
        set.forget_recent();
        for index in 0..arena.len() {
            hits.clear();
            match_one(&set, &arena.view(index), &mut hits);
        }
    }
    println!(
        "{} rules, {} events, {matches} matches, {passes} passes counted",
        set.len(),
        events.len()
    );
}
