//! Exceptions as an analyst uses them: made from an alert of a scanner sweep, they keep the
//! sweep's next events from alerting while another address still does, count what they held,
//! survive a restart, and refuse a bad body naming the field.

mod common;

use common::{Service, free_port, http, json, send_lines, stamp, syslog_config, wait_for};

/// The bundled rule `sshd_invalid_user.yml`.
const RULE: &str = "dcec6854-a593-491f-9a9c-59c065d2aca7";

fn invalid_user(from: &str, user: &str, i: i64) -> String {
    let t = stamp(i - 30);
    format!("<38>{t} edge-01 sshd[40{i}]: Invalid user {user} from {from} port 4200{i}\n")
}

#[test]
fn an_exception_made_from_an_alert_holds_the_sweep_back_counts_it_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    // Grouping off, so that every new account would be an alert of its own.
    let config = syslog_config(
        dir.path(),
        api,
        Some(tcp),
        "detection.alert_group_after_entities = 0",
    );
    let svc = Service::start(dir.path(), &config, api);
    send_lines(tcp, &invalid_user("198.51.100.7", "scan0", 0));
    let by_rule = format!("/api/v1/alerts?detector={RULE}");
    let first = wait_for(api, &by_rule, |v| v["meta"]["total"] == 1);
    let alert_id = first["items"][0]["id"].as_str().unwrap().to_string();

    let (status, body) = http(
        api,
        "POST",
        "/api/v1/exceptions",
        &format!(
            r#"{{"detector": "{RULE}", "reason": "our external scanner", "author": "ana",
                "conditions": {{"source_cidrs": ["198.51.100.0/24"]}}, "from_alert": "{alert_id}"}}"#
        ),
    );
    assert_eq!(status, 201, "{body}");
    let made = json(&body);
    let id = made["id"].as_str().unwrap().to_string();
    assert_eq!(
        (made["hits"].as_u64(), made["enabled"].as_bool()),
        (Some(0), Some(true))
    );

    // Five more accounts from the scanner's network, then one from elsewhere.
    let sweep: String = (1..=5)
        .map(|i| invalid_user(&format!("198.51.100.{i}"), &format!("scan{i}"), i))
        .collect();
    send_lines(tcp, &sweep);
    send_lines(tcp, &invalid_user("203.0.113.50", "intruder", 6));
    let listed = wait_for(api, &by_rule, |v| v["meta"]["total"] == 2);
    let values: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["entity"]["value"].as_str())
        .collect();
    assert!(
        !values
            .iter()
            .any(|v| v.starts_with("scan") && *v != "scan0"),
        "{listed}"
    );
    let held = wait_for(api, &format!("/api/v1/exceptions/{id}"), |v| v["hits"] == 5);
    assert!(held["last_hit_ns"].as_i64().is_some(), "{held}");
    let (_, body) = http(
        api,
        "GET",
        &format!("/api/v1/exceptions?detector={RULE}"),
        "",
    );
    assert_eq!(json(&body)["meta"]["total"], 1, "{body}");

    // A graceful stop writes the hits back; a restart reads the exception and its hits.
    assert!(svc.stop().success());
    let _svc = Service::start(dir.path(), &config, api);
    let (status, body) = http(api, "GET", &format!("/api/v1/exceptions/{id}"), "");
    assert_eq!(status, 200, "{body}");
    let back = json(&body);
    assert_eq!(
        (back["hits"].as_u64(), back["from_alert"].as_str()),
        (Some(5), Some(alert_id.as_str()))
    );

    // Turned off, it holds nothing back: the next scanner account alerts.
    let (status, body) = http(
        api,
        "PATCH",
        &format!("/api/v1/exceptions/{id}"),
        r#"{"enabled": false}"#,
    );
    assert_eq!(
        (status, json(&body)["enabled"].as_bool()),
        (200, Some(false)),
        "{body}"
    );
    send_lines(tcp, &invalid_user("198.51.100.9", "scan9", 9));
    wait_for(api, &by_rule, |v| v["meta"]["total"] == 3);

    let (status, _) = http(api, "DELETE", &format!("/api/v1/exceptions/{id}"), "");
    assert_eq!(status, 204);
    let (status, _) = http(api, "GET", &format!("/api/v1/exceptions/{id}"), "");
    assert_eq!(status, 404);
}

#[test]
fn a_bad_exception_is_refused_naming_the_field_and_nothing_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(dir.path(), api, None, "");
    let _svc = Service::start(dir.path(), &config, api);
    let refused = |body: &str| {
        let (status, answer) = http(api, "POST", "/api/v1/exceptions", body);
        assert_eq!(status, 422, "{body}: {answer}");
        json(&answer)["field"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(refused(r#"{"detector": "ioc:*", "author": "ana"}"#), "body");
    assert_eq!(
        refused(r#"{"detector": "ioc:*", "reason": " ", "author": "ana"}"#),
        "reason"
    );
    assert_eq!(
        refused(r#"{"reason": "r", "author": "ana", "conditions": {"users": ["x"]}}"#),
        "detector"
    );
    assert_eq!(
        refused(r#"{"scope": "global", "reason": "r", "author": "ana"}"#),
        "conditions"
    );
    assert_eq!(
        refused(
            r#"{"detector": "ueba:user", "reason": "r", "author": "ana", "conditions": {"source_cidrs": ["10.0.0.1/8"]}}"#
        ),
        "conditions.source_cidrs"
    );
    assert_eq!(
        refused(r#"{"detector": "ueba:user", "reason": "r", "author": "ana", "colour": "red"}"#),
        "body"
    );
    // Issue 51, item 7: every address is no condition (a global exception of it silenced
    // everything), and text is one line (ESC and newlines wrote into terminals and logs).
    assert_eq!(
        refused(
            r#"{"scope": "global", "reason": "r", "author": "ana", "conditions": {"source_cidrs": ["0.0.0.0/0", "::/0"]}}"#
        ),
        "conditions.source_cidrs"
    );
    assert_eq!(
        refused(r#"{"detector": "ioc:*", "reason": "r", "author": "ana\u001b[2J"}"#),
        "author"
    );
    assert_eq!(
        refused(r#"{"detector": "ioc:*", "reason": "r\nFORGED", "author": "ana"}"#),
        "reason"
    );
    let (_, body) = http(api, "GET", "/api/v1/exceptions", "");
    assert_eq!(json(&body)["meta"]["total"], 0, "{body}");
    let (status, body) = http(api, "GET", "/api/v1/exceptions/not-a-uuid", "");
    assert_eq!(
        (status, json(&body)["parameter"].as_str()),
        (422, Some("exception_id"))
    );
    let (status, _) = http(
        api,
        "PATCH",
        "/api/v1/exceptions/0190a000-0000-7000-8000-000000000001",
        r#"{"enabled": false}"#,
    );
    assert_eq!(status, 404);
    let (status, body) = http(api, "GET", "/api/v1/exceptions?enabled=maybe", "");
    assert_eq!(
        (status, json(&body)["parameter"].as_str()),
        (422, Some("enabled"))
    );
}
