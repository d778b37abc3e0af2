//! Configuration reload as operators do it: edit the rule folder and the file, send SIGHUP or
//! `POST /api/v1/config/reload`; a bad file is refused with its keys and the service keeps
//! running as it was.

mod common;

use common::receiver::Receiver;
use common::*;
use std::path::Path;
use std::time::Duration;

fn rule(id: &str, marker: &str) -> String {
    format!(
        "title: Reload test {marker}\nid: {id}\nstatus: test\nlogsource:\n    product: linux\n    service: sshd\n\
         detection:\n    keywords:\n        - '{marker}'\n    condition: keywords\nlevel: high\n"
    )
}

const RULE_A: &str = "3f1a2b3c-0000-4000-8000-00000000000a";
const RULE_B: &str = "3f1a2b3c-0000-4000-8000-00000000000b";

fn line(marker: &str, n: u32) -> String {
    format!(
        "<38>{} web-01 sshd[9{n}]: {marker} probe from 203.0.113.{n} port 4000{n}\n",
        stamp(-1)
    )
}

/// The service's file: syslog over TCP, the rule folder, and `extra` appended.
fn write_config(path: &Path, base: &str, rules: &Path, extra: &str) {
    std::fs::write(
        path,
        format!(
            "{base}[detection]\nsigma_rules_dirs = [\"{}\"]\n{extra}",
            rules.display()
        ),
    )
    .unwrap();
}

#[test]
fn sighup_and_the_endpoint_apply_rules_and_channels_and_a_bad_file_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(rules.join("a.yml"), rule(RULE_A, "canary-alpha")).unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    // syslog_config writes the whole file; the [detection] table goes after it, and low rules
    // alerting is a top-level key there, so it is kept out of the [detection] table we add.
    let base = std::fs::read_to_string(&config)
        .unwrap()
        .replace(LOW_ALERTS, "");
    write_config(&config, &base, &rules, "sigma_alert_min_level = \"low\"\n");
    let svc = Service::start(dir.path(), &config, api);
    assert_eq!(
        http(api, "GET", &format!("/api/v1/sigma/rules/{RULE_A}"), "").0,
        200
    );
    assert_eq!(
        http(api, "GET", &format!("/api/v1/sigma/rules/{RULE_B}"), "").0,
        404
    );

    // A new rule in the folder, a webhook channel and a key that needs a restart; SIGHUP.
    std::fs::write(rules.join("b.yml"), rule(RULE_B, "canary-bravo")).unwrap();
    let channel = format!(
        "[[notifications]]\nname = \"hook\"\nkind = \"webhook\"\nurl = \"{}\"\ntls_ca_file = \"{}\"\nmin_severity = 0\n",
        receiver.url("/hook"),
        receiver.ca_file.display()
    );
    let base = base.replace("health_port = 0", "health_port = 0\nws_max_connections = 5");
    write_config(
        &config,
        &base,
        &rules,
        &format!("sigma_alert_min_level = \"low\"\n{channel}"),
    );
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(svc.pid() as i32, libc::SIGHUP) };
    let stats = wait_for(api, "/api/v1/stats", |v| v["reload"]["reloads"] == 1);
    assert_eq!(stats["reload"]["failures"], 0);
    assert_eq!(
        http(api, "GET", &format!("/api/v1/sigma/rules/{RULE_B}"), "").0,
        200
    );
    let shown = json(&http(api, "GET", "/api/v1/config", "").1);
    assert_eq!(shown["notifications"][0]["name"], "hook");
    assert_eq!(shown["notifications"][0]["url"], "********");
    assert_eq!(
        shown["ws_max_connections"], 20,
        "needs a restart: not applied"
    );
    // The new rule alerts, and the new channel sends it.
    send_lines(tcp, &line("canary-bravo", 1));
    wait_for(api, &format!("/api/v1/alerts?detector={RULE_B}"), |v| {
        v["meta"]["total"] == 1
    });
    let sent = receiver.wait_for("/hook", 1, Duration::from_secs(30));
    assert_eq!(sent[0].json()["alert"]["detector"], RULE_B);

    // A file with a problem: refused with its key, nothing changes.
    write_config(
        &config,
        &base,
        &rules,
        &format!("sigma_alert_min_level = \"low\"\n{channel}min_severity = 9\n")
            .replace("min_severity = 0\nmin_severity = 9", "min_severity = 9"),
    );
    let (status, body) = http(api, "POST", "/api/v1/config/reload", "");
    assert_eq!(status, 422, "{body}");
    let refused = json(&body);
    assert_eq!(refused["error"], "invalid_config");
    assert_eq!(
        refused["problems"][0]["key"],
        "notifications[0].min_severity"
    );
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(stats["reload"]["failures"], 1);
    assert!(
        stats["reload"]["last_error"]
            .as_str()
            .unwrap()
            .contains("min_severity")
    );
    assert_eq!(
        json(&http(api, "GET", "/api/v1/config", "").1)["notifications"][0]["min_severity"],
        0
    );

    // The rule removed from the folder and the file fixed: switched off, listed nowhere. Rule
    // A's file broken by an edit: its rule stays as loaded, the error reported.
    std::fs::remove_file(rules.join("b.yml")).unwrap();
    std::fs::write(rules.join("a.yml"), "title: [unclosed\n").unwrap();
    write_config(
        &config,
        &base,
        &rules,
        &format!("sigma_alert_min_level = \"low\"\n{channel}"),
    );
    let (status, body) = http(api, "POST", "/api/v1/config/reload", "");
    assert_eq!(status, 200, "{body}");
    let report = json(&body);
    assert_eq!(report["rules"]["removed"], 1, "{report}");
    assert_eq!(report["rules"]["added"], 0, "{report}");
    let errors = report["rules"]["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{report}");
    assert!(
        errors[0][0].as_str().unwrap().ends_with("a.yml"),
        "{report}"
    );
    assert_eq!(
        http(api, "GET", &format!("/api/v1/sigma/rules/{RULE_A}"), "").0,
        200,
        "kept as loaded"
    );
    assert_eq!(
        report["restart_required"],
        serde_json::json!(["ws_max_connections"])
    );
    assert_eq!(
        http(api, "GET", &format!("/api/v1/sigma/rules/{RULE_B}"), "").0,
        404
    );
    // B's marker raises nothing more; rule A, kept, still alerts.
    send_lines(tcp, &(line("canary-bravo", 2) + &line("canary-alpha", 3)));
    wait_for(api, &format!("/api/v1/alerts?detector={RULE_A}"), |v| {
        v["meta"]["total"] == 1
    });
    settle(api);
    let b = json(&http(api, "GET", &format!("/api/v1/alerts?detector={RULE_B}"), "").1);
    assert_eq!(b["meta"]["total"], 1, "{b}");
    assert_eq!(b["items"][0]["count"], 1, "no repeat folded in: {b}");
    assert_eq!(
        receiver.wait_for("/hook", 2, Duration::from_secs(30)).len(),
        2,
        "rule A's alert was sent too"
    );
}
