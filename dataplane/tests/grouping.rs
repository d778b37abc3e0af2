//! Alert grouping, through `watchpost analyze` (the whole detection stack offline): a Sigma rule
//! that fires for many entities folds into one group alert past
//! `detection.alert_group_after_entities`, and an indicator seen with many entities is one alert
//! that names them, and accounts guessed from one address are one alert.

use std::path::{Path, PathBuf};
use watchpost_proto::{Alert, AlertType, Config};

const INVALID_USER_RULE: &str = "dcec6854-a593-491f-9a9c-59c065d2aca7";

/// `count` sshd "Invalid user" lines, each from its own user and address, one a minute.
fn sweep(count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "<38>Nov 21 10:{:02}:01 edge-01 sshd[{}]: Invalid user scan{i} from 198.51.100.{} port 4{i:04}\n",
                i % 60,
                2000 + i,
                i + 1
            )
        })
        .collect()
}

fn config(dir: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.storage.data_dir = dir.join("data").display().to_string();
    cfg.detection.ioc_dir = dir.join("ioc").display().to_string();
    // The rule these sweeps match is low, a signal by default (docs/risk.md): grouping is about
    // rules that alert.
    cfg.detection.sigma_alert_min_level = "low".into();
    cfg
}

fn run(cfg: &Config, dir: &Path, lines: &str) -> Vec<Alert> {
    let file: PathBuf = dir.join("input.log");
    std::fs::write(&file, lines).unwrap();
    watchpost_dataplane::analyze(cfg, &[file]).unwrap().0
}

fn of_rule<'a>(alerts: &'a [Alert], rule: &str) -> Vec<&'a Alert> {
    alerts
        .iter()
        .filter(|a| a.alert_type == AlertType::Sigma && a.detector == rule)
        .collect()
}

#[test]
fn a_rule_firing_for_many_entities_folds_into_one_group_alert() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    assert_eq!(cfg.detection.alert_group_after_entities, 3);
    let alerts = run(&cfg, dir.path(), &sweep(12));
    let rule = of_rule(&alerts, INVALID_USER_RULE);
    let (group, single): (Vec<&Alert>, Vec<&Alert>) = rule.iter().partition(|a| a.entity_count > 0);
    assert_eq!(single.len(), 3, "{rule:#?}");
    assert!(single.iter().all(|a| a.entity.is_some() && a.count == 1));
    assert_eq!(group.len(), 1, "{rule:#?}");
    let group = group[0];
    assert_eq!(group.entity_count, 9);
    assert_eq!(group.count, 9);
    // Issue 50, item 4: a group alert names its first entity (a feed, a search and a stream
    // frame all show one) and says in its title how many it stands for, never "many" for one.
    let first = group
        .entity
        .as_ref()
        .expect("a group alert names its first entity");
    assert!(group.title.ends_with("(9 entities)"), "{}", group.title);
    assert!(
        group
            .dedup_key
            .starts_with(&format!("sigma:{INVALID_USER_RULE}:group:"))
    );
    // The nine entities it stands for are named (with no duplicate): the first as its entity,
    // the others among the related; none of the three alerted on alone.
    let listed: std::collections::HashSet<_> = group
        .related_entities
        .iter()
        .filter(|e| e.kind == first.kind)
        .map(|e| e.uuid)
        .chain([first.uuid])
        .collect();
    assert_eq!(listed.len(), 9);
    for a in &single {
        assert!(!listed.contains(&a.entity.as_ref().unwrap().uuid));
    }
}

#[test]
fn an_entity_alerted_on_alone_keeps_its_repeats_on_its_own_alert() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let mut lines = sweep(6);
    // The first user again, inside its cooldown (five minutes), after the group formed.
    lines.push_str(
        "<38>Nov 21 10:04:30 edge-01 sshd[2999]: Invalid user scan0 from 198.51.100.1 port 40999\n",
    );
    let alerts = run(&cfg, dir.path(), &lines);
    let rule = of_rule(&alerts, INVALID_USER_RULE);
    let group: Vec<_> = rule.iter().filter(|a| a.entity_count > 0).collect();
    assert_eq!(group.len(), 1);
    assert_eq!(group[0].entity_count, 3);
    assert!(
        group[0].title.ends_with("(3 entities)"),
        "{}",
        group[0].title
    );
    let first = rule
        .iter()
        .find(|a| a.entity_count == 0 && a.count == 2)
        .unwrap_or_else(|| panic!("the first user's alert holds its repeat: {rule:#?}"));
    assert!(first.entity.is_some());
}

#[test]
fn forty_accounts_guessed_from_one_address_are_one_alert() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let lines: String = (0..40)
        .map(|i| {
            format!(
                "<38>Nov 21 10:{:02}:{:02} edge-01 sshd[{}]: Invalid user guess{i} from 203.0.113.50 port 4{i:04}\n",
                i / 10,
                i % 60,
                5000 + i
            )
        })
        .collect();
    let alerts = run(&cfg, dir.path(), &lines);
    let rule = of_rule(&alerts, INVALID_USER_RULE);
    assert_eq!(rule.len(), 1, "{rule:#?}");
    let alert = rule[0];
    assert_eq!(alert.count, 40);
    assert_eq!(alert.entity_count, 40);
    let address = alert
        .related_entities
        .iter()
        .filter(|e| e.kind == watchpost_proto::EntityKind::Ip)
        .count();
    let users = alert
        .entity
        .iter()
        .chain(&alert.related_entities)
        .filter(|e| e.kind == watchpost_proto::EntityKind::User)
        .count();
    assert_eq!((address, users), (1, 40), "{alert:#?}");
}

#[test]
fn with_grouping_off_every_entity_has_its_own_alert() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.detection.alert_group_after_entities = 0;
    let alerts = run(&cfg, dir.path(), &sweep(12));
    let rule = of_rule(&alerts, INVALID_USER_RULE);
    assert_eq!(rule.len(), 12);
    assert!(
        rule.iter()
            .all(|a| a.entity_count == 0 && a.entity.is_some())
    );
}

#[test]
fn a_new_window_alerts_on_entities_alone_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.detection.alert_group_window_seconds = 600;
    // Five entities in the first ten minutes, five more after it.
    let lines: String = (0..10)
        .map(|i| {
            let minute = if i < 5 { i } else { 20 + i };
            format!(
                "<38>Nov 21 10:{minute:02}:01 edge-01 sshd[{}]: Invalid user w{i} from 198.51.100.{} port 40000\n",
                3000 + i,
                i + 1
            )
        })
        .collect();
    let alerts = run(&cfg, dir.path(), &lines);
    let rule = of_rule(&alerts, INVALID_USER_RULE);
    let single = rule.iter().filter(|a| a.entity_count == 0).count();
    let groups: Vec<u64> = rule
        .iter()
        .filter(|a| a.entity_count > 0)
        .map(|a| a.entity_count)
        .collect();
    assert_eq!(single, 6, "{rule:#?}");
    assert_eq!(groups, vec![2, 2], "{rule:#?}");
}

#[test]
fn an_indicator_seen_with_ten_users_is_one_alert_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    std::fs::create_dir_all(dir.path().join("ioc")).unwrap();
    std::fs::write(dir.path().join("ioc/feed.txt"), "203.0.113.66\n").unwrap();
    let lines: String = (0..10)
        .map(|i| {
            format!(
                "<38>Nov 21 11:{i:02}:01 vpn-01 sshd[{}]: Accepted password for user{i} from 203.0.113.66 port 5{i:04} ssh2\n",
                4000 + i
            )
        })
        .collect();
    let ioc = |alerts: &[Alert]| -> Vec<Alert> {
        alerts
            .iter()
            .filter(|a| a.alert_type == AlertType::Ioc)
            .cloned()
            .collect()
    };
    let alerts = ioc(&run(&cfg, dir.path(), &lines));
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0].count, 10);
    // Every entity of the ten events is named once: the ten users, the address, the host.
    let named: Vec<_> = alerts[0]
        .entity
        .iter()
        .chain(&alerts[0].related_entities)
        .collect();
    let users = named
        .iter()
        .filter(|e| e.kind == watchpost_proto::EntityKind::User)
        .count();
    assert_eq!(users, 10, "{alerts:#?}");
    assert_eq!(alerts[0].entity_count, named.len() as u64, "{alerts:#?}");

    // Per indicator and entity: the alert's entity here is the listed address itself (the
    // events' first scored entity), so the ten events are still one alert, but it names only
    // the first event's entities and counts none.
    cfg.detection.ioc_alert_per_indicator = false;
    let alerts = ioc(&run(&cfg, dir.path(), &lines));
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].entity_count, 0);
    let users = alerts[0]
        .entity
        .iter()
        .chain(&alerts[0].related_entities)
        .filter(|e| e.kind == watchpost_proto::EntityKind::User)
        .count();
    assert_eq!(users, 1, "{alerts:#?}");
}

#[test]
fn an_indicator_its_feed_is_unsure_of_is_a_signal_a_sure_one_alerts() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    std::fs::create_dir_all(dir.path().join("ioc")).unwrap();
    std::fs::write(
        dir.path().join("ioc/feed.csv"),
        "indicator,confidence,description\n203.0.113.20,20,scanner list\n203.0.113.90,90,c2\n203.0.113.99,,no score\n",
    )
    .unwrap();
    let lines: String = [20, 90, 99]
        .iter()
        .enumerate()
        .map(|(i, last)| {
            format!(
                "<38>Nov 21 11:0{i}:01 vpn-01 sshd[{}]: Accepted password for user{i} from 203.0.113.{last} port 5{i:04} ssh2\n",
                4000 + i
            )
        })
        .collect();
    let file = dir.path().join("input.log");
    std::fs::write(&file, &lines).unwrap();
    let analyse =
        |cfg: &Config| watchpost_dataplane::analyze(cfg, std::slice::from_ref(&file)).unwrap();
    let (alerts, summary) = analyse(&cfg);
    let mut ioc: Vec<&str> = alerts
        .iter()
        .filter(|a| a.alert_type == AlertType::Ioc)
        .map(|a| a.title.as_str())
        .collect();
    ioc.sort_unstable();
    // The sure indicator and the one without a confidence alert; the unsure one does not.
    assert_eq!(
        ioc,
        [
            "IOC match: ipv4 203.0.113.90 (c2)",
            "IOC match: ipv4 203.0.113.99 (no score)"
        ]
    );
    // It is a signal instead: the same run with every match alerting has one signal fewer.
    cfg.detection.ioc_alert_min_confidence = 0;
    let (alerts, every) = analyse(&cfg);
    assert_eq!(
        alerts
            .iter()
            .filter(|a| a.alert_type == AlertType::Ioc)
            .count(),
        3
    );
    assert_eq!(summary.signals, every.signals + 1);
}

/// Signals group like alerts, and a grouped account adds its risk once per window even when its
/// repeats come in a later batch (offline, every batch ends with a flush, as every second does
/// live): the address gathering the accounts' risk counts each account once.
#[test]
fn a_grouped_signal_remembers_its_accounts_across_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    // The defaults: the invalid-user rule is low, a signal.
    cfg.detection.sigma_alert_min_level = "medium".into();
    // An address's guesses hold two guesses' worth of risk, about 28 (docs/risk.md, "Failed
    // logons are one behaviour"): the risk alert whose contributions this test reads needs a
    // threshold under that. What it counts is unchanged: each account's signal once.
    cfg.detection.risk_threshold = 25.0;
    let attempt = |i: usize, second: u32| {
        format!(
            "<38>Nov 21 12:00:{second:02} edge-01 sshd[{}]: Invalid user acct{i} from 203.0.113.66 port 4{i:04}\n",
            6000 + second
        )
    };
    // Six accounts (three signals of their own, three in the rule's group signal), a blank line
    // (which ends the batch), then two of the grouped accounts again.
    let mut lines: String = (0..6).map(|i| attempt(i, i as u32)).collect();
    lines.push('\n');
    lines.push_str(&attempt(3, 10));
    lines.push_str(&attempt(4, 11));
    let alerts = run(&cfg, dir.path(), &lines);
    let risk: Vec<&Alert> = alerts.iter().filter(|a| a.detector == "risk").collect();
    assert_eq!(risk.len(), 1, "{alerts:#?}");
    let by_rule: Vec<(&String, &f64)> = risk[0].contributions.iter().collect();
    assert_eq!(by_rule.len(), 1, "{risk:#?}");
    assert_eq!(
        by_rule[0].0, "SSH Login Attempt for Non-Existent User (×6)",
        "six accounts, six additions: {risk:#?}"
    );
}
