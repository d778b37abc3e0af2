//! Password guessing at internet scale, through `watchpost analyze` (the whole detection stack
//! offline; issue 54, item 1): a patient address that guesses under every burst threshold raises
//! one `persistence` alert, a scanner that tries once and leaves raises none; scanners running a
//! dictionary of names the host does not know are no password spray; and a correlation that
//! fires for many groups folds into one group alert naming them.

use std::path::{Path, PathBuf};
use watchpost_proto::{Alert, AlertType, Config};

const PASSWORD_SPRAYING: &str = "4b7661cd-2f29-4d79-ae5a-4a708f7da51c";
const MIN: i64 = 60;

fn config(dir: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.storage.data_dir = dir.join("data").display().to_string();
    cfg.detection.ioc_dir = dir.join("ioc").display().to_string();
    cfg
}

/// 2027-01-01 00:00 UTC: the lines' year-less stamps (Nov 21 to 24) are read relative to the
/// file's modification time, so it is fixed after them; written now, a run from Nov 20 to 23
/// of any year would put the later lines in the year before.
const MODIFIED_S: u64 = 1_798_761_600;

fn run(cfg: &Config, dir: &Path, lines: &[String]) -> Vec<Alert> {
    let file: PathBuf = dir.join("input.log");
    std::fs::write(&file, lines.concat()).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(MODIFIED_S))
        .unwrap();
    watchpost_dataplane::analyze(cfg, &[file]).unwrap().0
}

/// An RFC 3164 sshd line at `secs` seconds after Nov 21 00:00.
fn sshd(secs: i64, message: &str) -> String {
    let (d, rem) = (21 + secs / 86_400, secs % 86_400);
    format!(
        "<38>Nov {d} {:02}:{:02}:{:02} bastion-01 sshd[{}]: {message}\n",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        1000 + secs % 50_000
    )
}

fn failed(secs: i64, user: &str, from: &str) -> String {
    sshd(
        secs,
        &format!("Failed password for {user} from {from} port 40022 ssh2"),
    )
}

fn persistence(alerts: &[Alert]) -> Vec<&Alert> {
    alerts
        .iter()
        .filter(|a| a.detector == "persistence")
        .collect()
}

/// Scanners: each address tries `root` and five names the host does not know (six accounts,
/// past the spray's five), once, and leaves.
fn scanners(from_secs: i64, count: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..count {
        let t = from_secs + i as i64 * 97;
        let ip = format!("203.0.113.{}", 1 + i % 250);
        lines.push(failed(t, "root", &ip));
        for (k, u) in ["admin", "git", "oracle", "test", "pi"].iter().enumerate() {
            lines.push(sshd(
                t + 1 + k as i64,
                &format!("Failed password for invalid user {u} from {ip} port 4100{k} ssh2"),
            ));
        }
    }
    lines.sort();
    lines
}

#[test]
fn a_patient_guesser_raises_one_persistence_alert_and_a_scanner_that_leaves_raises_none() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    assert_eq!(cfg.detection.persistence_min_periods, 12);
    // One guess about every ten minutes for nine hours, under a background of scanners; a
    // health check that connects and leaves every minute (no account: no guess); and a backup
    // job whose key was revoked, leaving before it logs in every ten minutes (a client that
    // leaves is not a rejected credential).
    let mut lines = scanners(0, 300);
    for k in 0..54 {
        lines.push(failed(k * 10 * MIN + 7, "root", "198.51.100.50"));
        lines.push(sshd(
            k * 10 * MIN + 9,
            "Connection closed by authenticating user backup 10.0.0.7 port 5555 [preauth]",
        ));
    }
    for k in 0..540 {
        lines.push(sshd(
            k * MIN + 30,
            "Connection closed by 10.0.0.5 port 51234 [preauth]",
        ));
    }
    lines.sort_by_key(|l| l[4..19].to_string());
    let alerts = run(&cfg, dir.path(), &lines);
    let found = persistence(&alerts);
    assert_eq!(found.len(), 1, "{found:#?}");
    let a = found[0];
    assert_eq!(a.alert_type, AlertType::Correlation);
    let entity = a.entity.as_ref().expect("about the address");
    assert_eq!(entity.value, "198.51.100.50");
    assert_eq!(a.threshold, 12.0);
    assert_eq!(a.score, 54.0, "every guess fell in a period of its own");
    assert!(a.title.contains("54 ten-minute periods"), "{}", a.title);
    assert!(
        a.related_entities.iter().any(|e| e.value == "root"),
        "{:?}",
        a.related_entities
    );
    // Raised at the twelfth period, about two hours in; the rest folded into it.
    assert_eq!(a.count, 54 - 11);
    assert!(a.attack.iter().any(|m| m.technique_id.starts_with("T1110")));
}

#[test]
fn a_brute_forcer_that_returns_for_days_is_one_alert_and_off_means_none() {
    let dir = tempfile::tempdir().unwrap();
    // Three days of a guess every ten minutes: the alert stays open while the address keeps
    // coming (a day after its latest failure), not one a day.
    let lines: Vec<String> = (0..3 * 144)
        .map(|k| failed(k * 10 * MIN, "root", "198.51.100.60"))
        .collect();
    let cfg = config(dir.path());
    let alerts = run(&cfg, dir.path(), &lines);
    assert_eq!(persistence(&alerts).len(), 1, "{:#?}", persistence(&alerts));
    let mut off = config(dir.path());
    off.detection.persistence_min_periods = 0;
    let alerts = run(&off, dir.path(), &lines);
    assert!(persistence(&alerts).is_empty());
}

#[test]
fn a_dictionary_of_names_the_host_does_not_know_is_no_password_spray() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    // Forty scanners, each trying root and three names the host does not know, then a real
    // spray: one password on eight of the organisation's accounts.
    let mut lines = scanners(0, 40);
    for (k, u) in [
        "anna", "ben", "carla", "dev", "elif", "femi", "greta", "hugo",
    ]
    .iter()
    .enumerate()
    {
        lines.push(failed(5000 + k as i64 * 20, u, "198.51.100.99"));
    }
    let alerts = run(&cfg, dir.path(), &lines);
    let spray: Vec<&Alert> = alerts
        .iter()
        .filter(|a| a.detector == PASSWORD_SPRAYING)
        .collect();
    assert_eq!(spray.len(), 1, "{spray:#?}");
    assert_eq!(
        spray[0].entity.as_ref().map(|e| e.value.as_str()),
        Some("198.51.100.99")
    );
}

#[test]
fn a_correlation_firing_for_many_groups_folds_into_one_group_alert_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    assert_eq!(cfg.detection.alert_group_after_entities, 3);
    // Seven addresses, each spraying five real account names, within the hour; two hours
    // later the fifth (folded into the group alert) sprays again.
    let mut lines = Vec::new();
    for s in 0..7i64 {
        let ip = format!("198.51.100.{}", 10 + s);
        for (k, u) in ["anna", "ben", "carla", "dev", "elif"].iter().enumerate() {
            lines.push(failed(s * 300 + k as i64 * 5, u, &ip));
        }
    }
    for (k, u) in ["fred", "gina", "hal", "ida", "jo"].iter().enumerate() {
        lines.push(failed(2 * 3600 + k as i64 * 5, u, "198.51.100.14"));
    }
    let alerts = run(&cfg, dir.path(), &lines);
    let spray: Vec<&Alert> = alerts
        .iter()
        .filter(|a| a.detector == PASSWORD_SPRAYING)
        .collect();
    let (group, single): (Vec<&Alert>, Vec<&Alert>) =
        spray.iter().partition(|a| a.entity_count > 0);
    assert_eq!(single.len(), 3, "{spray:#?}");
    assert_eq!(group.len(), 1, "{spray:#?}");
    let g = group[0];
    assert_eq!(g.entity_count, 4, "{g:#?}");
    // The member's re-fire joined the group alert, not an alert of its own.
    assert_eq!(g.count, 5, "{g:#?}");
    assert!(g.title.ends_with("(4 entities)"), "{}", g.title);
    assert_eq!(
        g.dedup_key,
        format!("correlation:{PASSWORD_SPRAYING}:group")
    );
    // Every address it stands for is named: the first as its entity, the others related.
    let mut named: Vec<&str> = g
        .entity
        .iter()
        .chain(&g.related_entities)
        .filter(|e| e.value.starts_with("198.51.100."))
        .map(|e| e.value.as_str())
        .collect();
    named.sort();
    named.dedup();
    assert_eq!(
        named,
        [
            "198.51.100.13",
            "198.51.100.14",
            "198.51.100.15",
            "198.51.100.16"
        ]
    );
}
