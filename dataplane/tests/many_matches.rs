//! Every rule an event matches alerts, however many: the matches travel beside the detection
//! records instead of in a fixed array of four. Past `detection.sigma_max_matches_per_event` the
//! most severe go on and the rest are counted, in `watchpost analyze`'s summary as in `/stats`.

use std::path::Path;
use watchpost_proto::{AlertType, Config};

const LEVELS: [&str; 6] = ["medium", "high", "critical", "medium", "high", "medium"];

/// Six rules, each matching the same line, at the levels of [`LEVELS`]; their ids end in 1-6.
fn rules(dir: &Path) -> String {
    let rules = dir.join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    for (i, level) in LEVELS.iter().enumerate() {
        std::fs::write(
            rules.join(format!("r{i}.yml")),
            format!(
                "title: Many matches {i}\nid: 6d0c7b4e-1f2a-4c3b-9d8e-00000000000{}\nstatus: test\nlevel: {level}\nlogsource:\n  product: linux\ndetection:\n  keywords:\n    - 'canary-multi'\n  condition: keywords\n",
                i + 1
            ),
        )
        .unwrap();
    }
    rules.display().to_string()
}

fn analyze(dir: &Path, max: u32) -> (Vec<(String, String)>, watchpost_dataplane::Summary) {
    let mut cfg = Config::default();
    cfg.storage.data_dir = dir.join("data").display().to_string();
    cfg.detection.ioc_dir = dir.join("ioc").display().to_string();
    cfg.detection.sigma_rules_dirs = vec![rules(dir)];
    cfg.detection.sigma_max_matches_per_event = max;
    let file = dir.join("input.log");
    std::fs::write(
        &file,
        "<38>Nov 21 10:00:01 db-01 app[7]: canary-multi seen on the wire\n",
    )
    .unwrap();
    let (alerts, summary) = watchpost_dataplane::analyze(&cfg, &[file]).unwrap();
    let mut fired: Vec<(String, String)> = alerts
        .iter()
        .filter(|a| a.alert_type == AlertType::Sigma && a.title.starts_with("Many matches"))
        .map(|a| {
            let i: usize = a.detector[a.detector.len() - 1..].parse().unwrap();
            (a.detector.clone(), LEVELS[i - 1].to_string())
        })
        .collect();
    fired.sort();
    (fired, summary)
}

#[test]
fn an_event_matching_six_rules_raises_six_alerts() {
    let dir = tempfile::tempdir().unwrap();
    let (fired, summary) = analyze(dir.path(), 64);
    assert_eq!(fired.len(), 6, "{fired:?}");
    assert_eq!(summary.sigma_matches, 6);
    assert_eq!(summary.sigma_dropped, 0);
}

#[test]
fn past_the_bound_the_most_severe_matches_alert_and_the_rest_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (fired, summary) = analyze(dir.path(), 2);
    let levels: Vec<&str> = fired.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(fired.len(), 2, "{fired:?}");
    assert!(levels.contains(&"critical"), "{fired:?}");
    assert!(levels.contains(&"high"), "{fired:?}");
    assert_eq!((summary.sigma_matches, summary.sigma_dropped), (6, 4));
}
