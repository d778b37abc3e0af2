//! Local addresses and the entity of a correlation alert, through `watchpost analyze` (the whole
//! detection stack offline), on Windows logons as the load generator writes them (issue 50,
//! items 2 and 3):
//!
//! - `127.0.0.1`, `::1` and `-` in the `IpAddress` of a logon on many workstations are each
//!   machine talking to itself, not one address acting on all of them: no "Password Spraying
//!   (SourceIp=127.0.0.1)", no "Password Guessing Followed by a Successful Login" across hosts,
//!   no entity `ip:127.0.0.1` (nor a risk alert on it);
//! - nor are six accounts failing at one workstation's console a spray: spraying and guessing
//!   are about network sources, and a console logon has none (the failures stay signals);
//! - a correlation alert is about the value it grouped by: a spray from an internet address
//!   names that address, not the first account it tried.

use std::path::{Path, PathBuf};
use watchpost_proto::{Alert, AlertType, Config, EntityKind};

const SPRAYING: &str = "4b7661cd-2f29-4d79-ae5a-4a708f7da51c";
const GUESS_THEN_LOGIN: &str = "70822c4b-a19a-474f-a736-679fcf298072";

fn config(dir: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.storage.data_dir = dir.join("data").display().to_string();
    cfg.detection.ioc_dir = dir.join("ioc").display().to_string();
    cfg
}

fn run(dir: &Path, lines: &[String]) -> Vec<Alert> {
    let file: PathBuf = dir.join("security.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    watchpost_dataplane::analyze(&config(dir), &[file])
        .unwrap()
        .0
}

/// A Security 4625 (failed logon, bad password) or 4624 (success) record.
fn logon(second: u32, event_id: u32, host: &str, user: &str, address: &str) -> String {
    let status = if event_id == 4625 {
        r#","Status":"0xc000006d","SubStatus":"0xC000006A""#
    } else {
        ""
    };
    format!(
        r#"{{"TimeCreated":"2026-11-21T10:{:02}:{:02}Z","Channel":"Security","EventID":{event_id},"Computer":"{host}","TargetUserName":"{user}","TargetDomainName":"CORP","LogonType":2,"IpAddress":"{address}","WorkstationName":"-"{status}}}"#,
        second / 60,
        second % 60
    )
}

fn names_local_address(a: &Alert) -> bool {
    a.entity.iter().chain(&a.related_entities).any(|e| {
        e.kind == EntityKind::Ip && ["127.0.0.1", "::1", "0.0.0.0"].contains(&e.value.as_str())
    })
}

#[test]
fn local_addresses_on_many_hosts_are_no_attacker() {
    let dir = tempfile::tempdir().unwrap();
    // Forty workstations, each with its user's mistyped passwords then a login, through the
    // local logon path (127.0.0.1, ::1 or `-`), within ten minutes.
    let mut lines = Vec::new();
    for ws in 0..40u32 {
        let host = format!("ws-{ws:02}.corp.example");
        let user = format!("user{ws:02}");
        let address = ["127.0.0.1", "::1", "-"][ws as usize % 3];
        for k in 0..3 {
            lines.push(logon(ws * 12 + k, 4625, &host, &user, address));
        }
        lines.push(logon(ws * 12 + 5, 4624, &host, &user, address));
    }
    let alerts = run(dir.path(), &lines);
    let correlations: Vec<&Alert> = alerts
        .iter()
        .filter(|a| a.alert_type == AlertType::Correlation)
        .collect();
    assert!(
        !correlations
            .iter()
            .any(|a| a.detector == SPRAYING || a.detector == GUESS_THEN_LOGIN),
        "{correlations:#?}"
    );
    assert!(
        !alerts.iter().any(names_local_address),
        "an alert names a local address: {alerts:#?}"
    );
}

#[test]
fn accounts_failing_at_one_console_are_no_spray() {
    let dir = tempfile::tempdir().unwrap();
    // Six accounts tried at one shared desktop, by `127.0.0.1`, six more by `-`; then the same
    // from a network address, which is a spray.
    let mut lines: Vec<String> = (0..12)
        .map(|i| {
            let address = if i < 6 { "127.0.0.1" } else { "-" };
            logon(
                i,
                4625,
                "ws-07.corp.example",
                &format!("user{}", i % 6),
                address,
            )
        })
        .collect();
    lines.extend((0..6).map(|i| {
        logon(
            30 + i,
            4625,
            "ws-07.corp.example",
            &format!("user{i}"),
            "10.20.1.99",
        )
    }));
    let alerts = run(dir.path(), &lines);
    let spray: Vec<&Alert> = alerts.iter().filter(|a| a.detector == SPRAYING).collect();
    assert_eq!(spray.len(), 1, "{alerts:#?}");
    assert!(
        spray[0].title.contains("SourceIp=10.20.1.99"),
        "{}",
        spray[0].title
    );
    assert!(!alerts.iter().any(names_local_address), "{alerts:#?}");
}

#[test]
fn a_correlation_alert_is_about_the_value_it_grouped_by() {
    let dir = tempfile::tempdir().unwrap();
    // An internet address spraying six accounts on a domain controller (the load generator's
    // shape), and the same over sshd as text.
    let mut lines: Vec<String> = (0..6)
        .map(|i| {
            logon(
                i,
                4625,
                "dc-01.corp.example",
                &format!("user{i}"),
                "57.33.191.205",
            )
        })
        .collect();
    for i in 0..6 {
        lines.push(format!(
            "<86>Nov 21 10:20:{i:02} bastion sshd[30{i}]: Failed password for hadoop{i} from 203.0.113.77 port 5100{i} ssh2"
        ));
    }
    let alerts = run(dir.path(), &lines);
    let spray: Vec<&Alert> = alerts.iter().filter(|a| a.detector == SPRAYING).collect();
    assert_eq!(spray.len(), 2, "{alerts:#?}");
    for (a, address) in spray.iter().zip(["57.33.191.205", "203.0.113.77"]) {
        let entity = a.entity.as_ref().expect("a spray names its address");
        assert_eq!(entity.kind, EntityKind::Ip, "{a:#?}");
        assert_eq!(
            entity.uuid,
            watchpost_proto::entity_uuid_of(EntityKind::Ip, address).unwrap(),
            "{a:#?}"
        );
        assert!(a.title.contains(address), "{}", a.title);
        assert_eq!(a.detector_name, "Password Spraying");
        // The accounts of the completing event are related, the address not listed twice.
        assert!(a.related_entities.iter().all(|e| e.uuid != entity.uuid));
    }
}
