//! Every bundled Sigma rule (`rules/sigma/`) is complete and does what its tests say: each rule
//! file has a `.tests.jsonl` beside it with events it must match and near misses it must not, and
//! each event goes through the real normaliser and stage A's in-place matching.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use watchpost_normalize::LineMatcher;
use watchpost_rules::{Body, Mapping, RuleSet, load_file, rule_files};

fn bundled() -> PathBuf {
    PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
    )
    .join("../rules/sigma")
}

fn cases(path: &Path) -> Vec<(bool, String, usize)> {
    let tests = path.with_extension("tests.jsonl");
    let text =
        std::fs::read_to_string(&tests).unwrap_or_else(|e| panic!("{}: {e}", tests.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let v: serde_json::Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", tests.display(), i + 1));
            let want = v["match"].as_bool().expect("`match` true or false");
            let line = match (&v["event"], &v["line"]) {
                (serde_json::Value::Object(_), _) => v["event"].to_string(),
                (_, serde_json::Value::String(s)) => s.clone(),
                _ => panic!("{}:{}: needs `event` or `line`", tests.display(), i + 1),
            };
            (want, line, i + 1)
        })
        .collect()
}

/// Runs each case of a correlation rule's `.tests.jsonl` (`{"match": bool, "lines": [...]}`,
/// lines as text or event objects) through `watchpost analyze`, the whole detection stack.
fn correlation_cases(
    path: &Path,
    id: &str,
    cfg: &watchpost_proto::Config,
    problems: &mut Vec<String>,
) {
    let tests = path.with_extension("tests.jsonl");
    let Ok(text) = std::fs::read_to_string(&tests) else {
        problems.push(format!("{}: missing", tests.display()));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut yes, mut no) = (false, false);
    for (n, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let want = v["match"].as_bool().expect("`match` true or false");
        let lines: Vec<String> = v["lines"]
            .as_array()
            .expect("`lines`")
            .iter()
            .map(|x| match x {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let file = dir.path().join(format!("case{n}.log"));
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let (alerts, _) = watchpost_dataplane::analyze(cfg, &[file]).unwrap();
        let got = alerts
            .iter()
            .any(|a| a.alert_type == watchpost_proto::AlertType::Correlation && a.detector == id);
        if got != want {
            problems.push(format!(
                "{}: case {}: expected {}, got {}",
                tests.display(),
                n + 1,
                if want { "an alert" } else { "none" },
                if got { "one" } else { "none" }
            ));
        }
        yes |= want;
        no |= !want;
    }
    if !(yes && no) {
        problems.push(format!(
            "{}: needs a firing and a non-firing case",
            tests.display()
        ));
    }
}

#[test]
fn bundled_rules_are_complete_and_pass_their_tests() {
    let files = rule_files(&[bundled()]).unwrap();
    let mapping = Mapping::bundled();
    // Every level that can alert does here: the cases test each rule's logic, not which levels
    // are signals (docs/risk.md; `tests/risk.rs` covers that).
    let mut cfg = watchpost_proto::Config::default();
    cfg.detection.sigma_alert_min_level = "low".into();
    let mut problems = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for f in &files {
        let rule = match load_file(f).rule {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!("{}: {e}", f.display()));
                continue;
            }
        };
        let name = f.display();
        if !ids.insert(rule.id.clone()) {
            problems.push(format!("{name}: duplicate id {}", rule.id));
        }
        if !rule.warnings.is_empty() {
            problems.push(format!("{name}: {:?}", rule.warnings));
        }
        if rule.level.is_none() || rule.falsepositives.is_empty() || rule.description.is_none() {
            problems.push(format!(
                "{name}: needs level, description and falsepositives"
            ));
        }
        let tactic = rule
            .tags
            .iter()
            .any(|t| t.starts_with("attack.") && !t[7..].starts_with('t'));
        let technique = rule.tags.iter().any(|t| {
            t.strip_prefix("attack.t")
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        });
        if !(tactic && technique) {
            problems.push(format!("{name}: needs an ATT&CK tactic and technique tag"));
        }
        if !matches!(rule.body, Body::Detection { .. }) {
            // Building blocks (informational) are exercised by the correlations that chain
            // them; the others carry sequences of events they must and must not fire on.
            if rule.level != Some(watchpost_rules::Level::Informational) {
                correlation_cases(f, &rule.id, &cfg, &mut problems);
            }
            continue;
        }
        let set = Arc::new(RuleSet::compile([Arc::new(rule)], &mapping));
        if !set.is_mapped(0) {
            problems.push(format!("{name}: logsource not mapped"));
            continue;
        }
        let mut m = LineMatcher::new(set, &cfg).unwrap();
        let cs = cases(f);
        if !cs.iter().any(|c| c.0) || !cs.iter().any(|c| !c.0) {
            problems.push(format!(
                "{name}: needs a matching and a non-matching test event"
            ));
        }
        for (want, line, n) in cs {
            let got = !m.matches(line.as_bytes()).is_empty();
            if got != want {
                problems.push(format!(
                    "{name}: test line {n}: expected {}, got {}",
                    if want { "a match" } else { "no match" },
                    if got { "a match" } else { "none" }
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        files.len() >= 100,
        "{} bundled rules, want at least 100",
        files.len()
    );
}
