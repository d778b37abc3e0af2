//! Real-world rules load as they are: every file of the SigmaHQ subset (`../shared/data/sigmahq-
//! subset`, 1,491 rules, test data only) parses, validates, maps onto a logsource and compiles.
//! The folder is outside the repository; `SIGMAHQ_RULES` points elsewhere when it is not beside
//! the checkout, and the test says plainly when it found none.

use std::path::PathBuf;
use std::sync::Arc;
use watchpost_rules::{Mapping, RuleSet, load_file, rule_files};

fn corpus() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("SIGMAHQ_RULES").map(PathBuf::from),
        Some(
            PathBuf::from(
                std::env::var("CARGO_MANIFEST_DIR")
                    .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
            )
            .join("../../shared/data/sigmahq-subset/rules"),
        ),
        Some(PathBuf::from("/work/shared/data/sigmahq-subset/rules")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_dir())
}

#[test]
fn every_sigmahq_rule_of_the_subset_loads_and_compiles() {
    let Some(dir) = corpus() else {
        eprintln!("SigmaHQ subset not found (set SIGMAHQ_RULES): nothing to check");
        return;
    };
    let files = rule_files(&[dir]).unwrap();
    assert!(files.len() >= 1000, "only {} files", files.len());
    let mapping = Mapping::bundled();
    let mut rules = Vec::new();
    let mut failures = Vec::new();
    for f in &files {
        match load_file(f).rule {
            Ok(r) => {
                if mapping.shapes(&r.logsource).is_none() {
                    failures.push(format!("{}: logsource not mapped", f.display()));
                }
                rules.push(Arc::new(r));
            }
            Err(e) => failures.push(format!("{}: {e}", f.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The bound on an upload's regular expressions leaves every public rule far inside it.
    let (most, rule) = rules
        .iter()
        .map(|r| (r.regex_values(), r.id.clone()))
        .max()
        .unwrap();
    eprintln!("most `re` values in one SigmaHQ rule: {most} ({rule})");
    assert!(
        most * 10 <= watchpost_rules::MAX_UPLOAD_REGEX_VALUES,
        "{rule} compiles to {most} regular expressions"
    );
    let set = RuleSet::compile(rules, &mapping);
    assert_eq!(set.len(), files.len());
}
