//! Windows event log exports read as they are: `watchpost analyze` and `watchpost rules test`
//! take `.evtx` files and folders of them, each record an event with the field names SigmaHQ
//! rules use (`EventID`, `Channel`, the EventData fields at the top level).

mod common;

use common::{bin, json};
use std::path::PathBuf;

fn sample_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/evtx")
}

#[test]
fn analyze_reads_a_folder_of_evtx_exports_and_names_the_record_of_each_alert() {
    let out = bin().arg("analyze").arg(sample_dir()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alerts: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(json)
        .collect();
    // The bundled rule for a member added to a privileged group, on the fourth record.
    let added = alerts
        .iter()
        .find(|a| a["title"] == "Member Added to a Privileged Group")
        .unwrap_or_else(|| panic!("{alerts:?}"));
    assert_eq!(added["source"], "Security");
    let line = added["contributing_lines"][0].as_str().unwrap();
    assert!(line.ends_with("new-user-security.evtx:4"), "{line}");
    let summary = json(String::from_utf8_lossy(&out.stderr).lines().last().unwrap());
    assert_eq!(summary["lines"], 4, "{summary}");
    assert_eq!(summary["evtx_bad_records"], 0, "{summary}");
}

#[test]
fn rules_test_matches_evtx_records_by_their_windows_fields() {
    let dir = tempfile::tempdir().unwrap();
    let rule = dir.path().join("created.yml");
    std::fs::write(
        &rule,
        "title: Local account created\nid: 0d8d5bd8-7e3a-4f47-a1e4-3e55a7c1f001\nstatus: test\nlevel: medium\nlogsource:\n  product: windows\n  service: security\ndetection:\n  sel:\n    EventID: 4720\n    SamAccountName: IEUser\n  condition: sel\n",
    )
    .unwrap();
    let events = sample_dir().join("new-user-security.evtx");
    let out = bin()
        .args(["rules", "test", "--rules"])
        .arg(&rule)
        .arg("--events")
        .arg(&events)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let matches: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(json)
        .collect();
    assert_eq!(matches.len(), 1, "{matches:?}");
    assert_eq!(matches[0]["line"], 2, "the second record is the 4720");
    assert_eq!(matches[0]["file"], events.display().to_string());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 rules, 4 events, 1 matches"), "{err}");
}

#[test]
fn a_damaged_export_in_a_folder_is_skipped_and_named_the_others_are_analysed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("exports");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        sample_dir().join("new-user-security.evtx"),
        dir.join("a-good.evtx"),
    )
    .unwrap();
    // A truncated header: not an event log the parser can open.
    std::fs::write(dir.join("b-damaged.evtx"), b"ElfFile\0 truncated").unwrap();

    let out = bin().arg("analyze").arg(&dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("b-damaged.evtx: not a readable Windows event log"),
        "{stderr}"
    );
    let summary = json(
        stderr
            .lines()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("{stderr}")),
    );
    assert_eq!(
        summary["lines"], 4,
        "the good export is analysed: {summary}"
    );
    assert_eq!(
        summary["unreadable_files"].as_array().unwrap().len(),
        1,
        "{summary}"
    );
    let alerts = String::from_utf8_lossy(&out.stdout);
    assert!(
        alerts.contains("Member Added to a Privileged Group"),
        "{alerts}"
    );

    let tested = bin()
        .args(["rules", "test", "--rules"])
        .arg(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("rules/sigma/windows/security/win_member_added_to_privileged_group.yml"),
        )
        .arg("--events")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&tested.stderr);
    assert_eq!(tested.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("b-damaged.evtx"), "{stderr}");
    assert!(stderr.contains("4 events, 1 matches"), "{stderr}");
}
