//! Sigma rules end to end, as an operator meets them: a bundled rule raises a `sigma` alert with
//! its ATT&CK names from a real syslog line, the catalogue lists it with its 24 h fires and
//! timeline, a toggle stops it and survives a restart, an upload is live at once (and 409, 422
//! with line and column, dry runs), and the coverage matrix counts it.

mod common;

use common::{
    Service, free_port, http, http_with_head, invalid_user_lines, json, send_lines, stamp,
    syslog_config, wait_for,
};

/// `sshd_invalid_user.yml`.
const INVALID_USER: &str = "dcec6854-a593-491f-9a9c-59c065d2aca7";

const CUSTOM: &str = "title: Watchpost test canary\nid: 5b0e1c3a-8f7e-4d2a-9c1b-3e4f5a6b7c8d\nstatus: test\nlogsource:\n    product: linux\n    service: sshd\ndetection:\n    keywords:\n        - 'canary-7f3a'\n    condition: keywords\ntags:\n    - attack.discovery\n    - attack.t1087\nlevel: high\n";

#[test]
fn sigma_rules_alert_list_toggle_upload_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(
        dir.path(),
        api,
        Some(tcp),
        "api_coverage_rate_limit = \"3/minute\"",
    );
    let svc = Service::start(dir.path(), &config, api);

    // Three bot attempts from one address: one alert for the address, three fires.
    let lines = invalid_user_lines();
    send_lines(tcp, &lines);
    let alerts = wait_for(api, "/api/v1/alerts?type=sigma", |v| {
        v["meta"]["total"].as_u64() >= Some(1)
    });
    let alert = &alerts["items"][0];
    assert_eq!(alert["detector"], INVALID_USER, "{alert}");
    assert_eq!(alert["title"], "SSH Login Attempt for Non-Existent User");
    assert_eq!(alert["severity"], 2, "level low");
    assert_eq!(alert["attack"][0]["technique_id"], "T1110.001");
    assert_eq!(
        alert["attack"][0]["technique"],
        "Brute Force: Password Guessing"
    );
    assert_eq!(alert["attack"][0]["tactic"], "Credential Access");

    // The catalogue: filters, fires, the rule with its YAML, the timeline.
    let list = wait_for(
        api,
        "/api/v1/sigma/rules?q=ssh+login+attempt+for+non-existent",
        |v| v["items"][0]["fires_24h"].as_u64() == Some(3),
    );
    assert_eq!(list["meta"]["total"], 1, "{list}");
    let all = json(&http(api, "GET", "/api/v1/sigma/rules?limit=1", "").1);
    assert!(all["meta"]["total"].as_u64().unwrap() >= 100, "{all}");
    let creds = json(
        &http(
            api,
            "GET",
            "/api/v1/sigma/rules?tactic=credential-access&source=bundled&limit=500",
            "",
        )
        .1,
    );
    assert!(
        creds["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == INVALID_USER)
    );
    for bad in [
        "enabled=maybe",
        "level=severe",
        "source=elsewhere",
        "bogus=1",
    ] {
        let (s, b) = http(api, "GET", &format!("/api/v1/sigma/rules?{bad}"), "");
        assert_eq!(s, 422, "{bad}: {b}");
    }
    let (s, b) = http(
        api,
        "GET",
        &format!("/api/v1/sigma/rules/{INVALID_USER}"),
        "",
    );
    assert_eq!(s, 200);
    let rule = json(&b);
    assert!(rule["yaml"].as_str().unwrap().contains("Invalid user"));
    assert_eq!(rule["enabled"], true);
    assert_eq!(
        http(api, "GET", "/api/v1/sigma/rules/no-such-rule", "").0,
        404
    );
    let tl = json(
        &http(
            api,
            "GET",
            &format!("/api/v1/sigma/rules/{INVALID_USER}/timeline"),
            "",
        )
        .1,
    );
    assert_eq!(tl["buckets"].as_array().unwrap().len(), 24);
    assert_eq!(tl["total"], 3, "{tl}");

    // Toggle off: further lines are not matched.
    let path = format!("/api/v1/sigma/rules/{INVALID_USER}");
    assert_eq!(http(api, "PATCH", &path, r#"{"enabled": "no"}"#).0, 422);
    assert_eq!(
        http(
            api,
            "PATCH",
            "/api/v1/sigma/rules/nope",
            r#"{"enabled": false}"#
        )
        .0,
        404
    );
    let (s, b) = http(api, "PATCH", &path, r#"{"enabled": false}"#);
    assert_eq!(s, 200, "{b}");
    assert_eq!(json(&b)["enabled"], false);
    let before = json(&http(api, "GET", "/api/v1/stats", "").1)["detection"]["sigma_matches"]
        .as_u64()
        .unwrap();
    let (t0, t1) = (stamp(-2), stamp(-1));
    send_lines(
        tcp,
        &format!(
            "<38>{t0} web-01 sshd[300]: Invalid user zed from 203.0.113.10 port 1\n<38>{t1} web-01 sshd[301]: Accepted password for alice from 10.0.0.5 port 2 ssh2\n"
        ),
    );
    wait_for(api, "/api/v1/stats", |v| {
        v["stored_total"].as_u64() >= Some(5)
    });
    let after = json(&http(api, "GET", "/api/v1/stats", "").1)["detection"]["sigma_matches"]
        .as_u64()
        .unwrap();
    assert_eq!(
        after - before,
        1,
        "a disabled rule matches nothing; the login matches only the informational login rule"
    );

    // Uploads: invalid (422 with line and column), dry run, created and live, collision.
    let (s, b) = http(api, "POST", "/api/v1/sigma/rules", &serde_json::json!({"yaml": "title: x\nid: y\ndetection:\n  sel:\n    a|bogus: 1\n  condition: sel\nlogsource:\n  product: linux\n"}).to_string());
    assert_eq!(s, 422, "{b}");
    let e = json(&b);
    assert_eq!(
        (e["line"].as_u64(), e["error"].as_str()),
        (Some(5), Some("invalid_rule")),
        "{e}"
    );
    assert!(e["column"].as_u64().is_some());
    send_lines(
        tcp,
        &format!(
            "<38>{} web-01 sshd[400]: probe canary-7f3a seen\n",
            stamp(0)
        ),
    );
    wait_for(api, "/api/v1/stats", |v| {
        v["stored_total"].as_u64() >= Some(6)
    });
    let (s, b) = http(
        api,
        "POST",
        "/api/v1/sigma/rules",
        &serde_json::json!({"yaml": CUSTOM, "dry_run": true}).to_string(),
    );
    assert_eq!(s, 200, "{b}");
    let dry = json(&b);
    assert_eq!(dry["matched"], 1, "{dry}");
    // An ATT&CK id no version knows is kept and warned about, not dropped in silence.
    let unknown = CUSTOM.replace("attack.t1087", "attack.t9999");
    let (s, b) = http(
        api,
        "POST",
        "/api/v1/sigma/rules",
        &serde_json::json!({"yaml": unknown, "dry_run": true}).to_string(),
    );
    assert_eq!(s, 200, "{b}");
    let warned = json(&b);
    assert!(
        warned["warnings"][0]
            .as_str()
            .is_some_and(|w| w.starts_with("tag attack.t9999: no such technique")),
        "{warned}"
    );
    assert!(
        warned["rule"]["attack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["technique_id"] == "T9999"),
        "{warned}"
    );
    assert!(dry["events_scanned"].as_u64().unwrap() >= 6);
    assert_eq!(
        http(
            api,
            "GET",
            "/api/v1/sigma/rules/5b0e1c3a-8f7e-4d2a-9c1b-3e4f5a6b7c8d",
            ""
        )
        .0,
        404,
        "a dry run writes nothing"
    );
    let (s, b) = http(
        api,
        "POST",
        "/api/v1/sigma/rules",
        &serde_json::json!({"yaml": CUSTOM}).to_string(),
    );
    assert_eq!(s, 201, "{b}");
    assert_eq!(json(&b)["source"], "custom");
    assert_eq!(
        http(
            api,
            "POST",
            "/api/v1/sigma/rules",
            &serde_json::json!({"yaml": CUSTOM}).to_string()
        )
        .0,
        409
    );
    send_lines(
        tcp,
        &format!(
            "<38>{} web-01 sshd[401]: probe canary-7f3a seen again\n",
            stamp(0)
        ),
    );
    let custom = wait_for(api, "/api/v1/alerts?type=sigma", |v| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["detector"] == "5b0e1c3a-8f7e-4d2a-9c1b-3e4f5a6b7c8d")
    });
    assert!(
        custom["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["severity"] == 4)
    );

    // Coverage counts the enabled rules and the fires.
    let cov = json(&http(api, "GET", "/api/v1/attack/coverage", "").1);
    assert_eq!(cov["attack_version"], "19.1");
    assert_eq!(cov["tactics"].as_array().unwrap().len(), 15);
    let disc = cov["tactics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "TA0007")
        .unwrap();
    let t1087 = disc["techniques"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "T1087")
        .unwrap();
    assert!(t1087["rules"].as_u64().unwrap() >= 1);
    assert!(
        cov["techniques_covered"].as_u64().unwrap() >= 50,
        "{}",
        cov["techniques_covered"]
    );
    assert_eq!(
        http(
            api,
            "GET",
            "/api/v1/attack/coverage?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z",
            ""
        )
        .0,
        422
    );
    // Its own rate limit (3/minute here): the fourth call in a minute waits.
    let _ = http(api, "GET", "/api/v1/attack/coverage", "");
    let (status, head, body) = http_with_head(api, "GET", "/api/v1/attack/coverage", "");
    assert_eq!(status, 429, "{body}");
    assert_eq!(json(&body)["error"], "rate_limited");
    let retry: u64 = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after: ")
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no Retry-After: {head}"))
        .trim()
        .parse()
        .unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    assert_eq!(
        http(api, "GET", "/api/v1/sigma/rules?limit=1", "").0,
        200,
        "other routes unaffected"
    );

    // After a restart: the toggle and the upload are still there.
    assert!(svc.stop().success());
    let _svc = Service::start(dir.path(), &config, api);
    let r = json(&http(api, "GET", &path, "").1);
    assert_eq!(r["enabled"], false, "{r}");
    let c = json(&http(api, "GET", "/api/v1/sigma/rules?source=custom", "").1);
    assert_eq!(c["meta"]["total"], 1, "{c}");
}

/// A rule nested past the parser's bounds, posted as a dry run or for real, is a 422 naming the
/// line and column where it goes too deep; the service runs on. Thousands of brackets or `not`s,
/// or a YAML list nested fifty thousand deep, used to overflow the stack of the request's thread
/// and abort the whole process.
#[test]
fn rules_nested_past_the_bounds_are_refused_with_their_place_and_the_service_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(dir.path(), api, None, "");
    let _svc = Service::start(dir.path(), &config, api);
    // The condition is on line 9; its text starts in column 16.
    let rule = |condition: &str| {
        format!(
            "title: Deep\nid: 0b4cbd3e-6f0e-4c9a-9f5e-2d8b1a7c3e21\nstatus: test\nlogsource:\n    product: linux\ndetection:\n    sel:\n        - 'deep-canary'\n    condition: {condition}\nlevel: low\n"
        )
    };
    let post = |yaml: &str, dry_run: bool| {
        let body = serde_json::json!({"yaml": yaml, "dry_run": dry_run}).to_string();
        let (code, text) = http(api, "POST", "/api/v1/sigma/rules", &body);
        (code, json(&text))
    };
    let nested = |depth: usize| format!("{}sel{}", "(".repeat(depth), ")".repeat(depth));

    let (code, v) = post(&rule(&nested(64)), true);
    assert_eq!(code, 200, "64 levels are allowed: {v}");
    for (condition, column) in [
        (nested(65), 16 + 64),
        (nested(2_000), 16 + 64),
        (format!("{}sel", "not ".repeat(5_000)), 16 + 4 * 64),
    ] {
        for dry_run in [true, false] {
            let (code, e) = post(&rule(&condition), dry_run);
            assert_eq!(code, 422, "{e}");
            assert_eq!(
                (e["error"].as_str(), e["kind"].as_str()),
                (Some("invalid_rule"), Some("condition")),
                "{e}"
            );
            assert_eq!(
                (e["line"].as_u64(), e["column"].as_u64()),
                (Some(9), Some(column))
            );
            assert!(
                e["message"].as_str().unwrap().contains("deeper than 64"),
                "{e}"
            );
        }
    }
    let deep_yaml = format!("{}x\n", "- ".repeat(50_000));
    let (code, e) = post(&deep_yaml, true);
    assert_eq!((code, e["kind"].as_str()), (422, Some("yaml")), "{e}");
    assert_eq!(
        (e["line"].as_u64(), e["column"].as_u64()),
        (Some(1), Some(129))
    );

    let (code, body) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(code, 200, "the service runs on: {body}");
    let (code, _) = http(
        api,
        "GET",
        "/api/v1/sigma/rules/0b4cbd3e-6f0e-4c9a-9f5e-2d8b1a7c3e21",
        "",
    );
    assert_eq!(code, 404, "nothing refused was stored");
}

#[test]
fn custom_rules_are_bounded_per_rule_and_in_total_with_answers_that_name_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(
        dir.path(),
        api,
        None,
        "detection.sigma_custom_max_total_bytes = 65536",
    );
    let _svc = Service::start(dir.path(), &config, api);
    let post = |yaml: &str| {
        let body = serde_json::json!({"yaml": yaml}).to_string();
        let (code, text) = http(api, "POST", "/api/v1/sigma/rules", &body);
        (code, json(&text))
    };
    let rule = |id: usize, values: usize, pad: usize| {
        let list: String = (0..values)
            .map(|v| format!("            - 'canary-{id}-{v}'\n"))
            .collect();
        format!(
            "title: Many values {id}\nid: 7c1d9a52-0000-4000-8000-{id:012}\nstatus: test\ndescription: '{}'\nlogsource:\n    product: linux\ndetection:\n    sel:\n        message|contains:\n{list}    condition: sel\nlevel: low\n",
            "d".repeat(pad)
        )
    };
    // Past the values one rule may hold: 422, with the bound in the message.
    let (code, e) = post(&rule(1, 10_001, 0));
    assert_eq!(
        (code, e["error"].as_str()),
        (422, Some("invalid_rule")),
        "{e}"
    );
    assert!(e["message"].as_str().unwrap().contains("10000"), "{e}");
    // Rules of about 20 KB each: three fit in 64 KiB, the fourth would not.
    for id in 2..5 {
        let (code, e) = post(&rule(id, 10, 20_000));
        assert_eq!(code, 201, "{e}");
    }
    let (code, e) = post(&rule(5, 10, 20_000));
    assert_eq!(
        (code, e["error"].as_str(), e["limit"].as_str()),
        (
            413,
            Some("custom_rules_too_large"),
            Some("detection.sigma_custom_max_total_bytes")
        ),
        "{e}"
    );
    assert_eq!(e["max"], 65536, "{e}");
}

/// Issue 51, item 5 and 7: an id of 251 characters answered 500 ("File name too long"), `..`,
/// `/`, NUL and newlines were accepted, and sanitising ids into file names made `a.b` and `a_b`
/// one file (the second refused as "already loaded"); a rule of 9,900 `re` values was taken.
#[test]
fn uploaded_rule_ids_are_checked_their_files_never_collide_and_regex_heavy_rules_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(dir.path(), api, None, "");
    let _svc = Service::start(dir.path(), &config, api);
    let post = |yaml: &str| {
        let body = serde_json::json!({"yaml": yaml}).to_string();
        let (code, text) = http(api, "POST", "/api/v1/sigma/rules", &body);
        (code, json(&text))
    };
    let rule = |id: &str| {
        format!(
            "title: Checked id\nid: {id}\nstatus: test\nlogsource:\n    product: linux\ndetection:\n    sel:\n        message|contains: canary-{}\n    condition: sel\nlevel: low\n",
            id.len()
        )
    };
    for bad in [
        "\"a/b\"".to_string(),
        "\"../escape\"".to_string(),
        "\"a\\u0000b\"".to_string(),
        "\"a\\nb\"".to_string(),
        "x".repeat(251),
    ] {
        let (code, e) = post(&rule(&bad));
        assert_eq!(
            (code, e["error"].as_str(), e["line"].as_u64()),
            (422, Some("invalid_rule"), Some(2)),
            "{bad}: {e}"
        );
        assert!(e["message"].as_str().unwrap().starts_with("id "), "{e}");
    }
    // Ids that sanitising made one file name are two rules.
    for id in ["a.b", "a_b", "a-b"] {
        let (code, e) = post(&rule(id));
        assert_eq!(code, 201, "{id}: {e}");
    }
    let (code, e) = post(&rule("a_b"));
    assert_eq!(
        (code, e["error"].as_str()),
        (409, Some("rule_exists")),
        "{e}"
    );
    for name in ["a.b.yml", "a_b.yml", "a-b.yml"] {
        assert!(
            dir.path().join("data/sigma-custom").join(name).is_file(),
            "{name}"
        );
    }
    // A rule compiling to more regular expressions than an upload may: refused, named.
    let list: String = (0..1_001)
        .map(|v| format!("            - 'canary-{v}-[0-9]+'\n"))
        .collect();
    let heavy = format!(
        "title: Regex heavy\nid: regex-heavy\nstatus: test\nlogsource:\n    product: linux\ndetection:\n    sel:\n        message|re:\n{list}    condition: sel\nlevel: low\n"
    );
    let (code, e) = post(&heavy);
    assert_eq!(
        (code, e["error"].as_str()),
        (422, Some("invalid_rule")),
        "{e}"
    );
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("regex-heavy") && message.contains("1001 regular expressions"),
        "{message}"
    );
}
