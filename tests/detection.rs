//! Detection end to end, as an operator meets it: the service learns two weeks of users' normal
//! logins (replayed with their own timestamps), raises a UEBA alert for a login from a new
//! network, takes feedback on it, serves baselines, entities and the anomaly timeline, and after a
//! restart still knows every baseline without a new warmup.

use std::time::{SystemTime, UNIX_EPOCH};

mod common;

use common::{Service, free_port, http, json, send_lines, wait_for};

/// RFC 3339 of ns since the epoch, as the API's own formatter writes it.
fn iso(ns: i64) -> String {
    watchpost_controlplane::rfc3339(ns)
}

fn login(ts: i64, user: &str, ip: &str) -> String {
    format!(
        "{{\"@timestamp\":\"{}\",\"event.dataset\":\"sshd\",\"host.name\":\"srv-01\",\"message\":\"Accepted password for {user} from {ip} port 50000 ssh2\",\"user.name\":\"{user}\",\"source.ip\":\"{ip}\"}}\n",
        iso(ts)
    )
}

#[test]
fn ueba_alerts_take_feedback_and_baselines_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (api, json_port) = (free_port(), free_port());
    let config = dir.path().join("watchpost.toml");
    std::fs::write(
        &config,
        format!(
            "dashboard_port = {api}\nhealth_port = 0\napi_list_rate_limit = \"100000/minute\"\napi_detail_rate_limit = \"100000/minute\"\n[inputs.syslog_udp]\nenabled = false\n[inputs.syslog_tcp]\nenabled = false\n[inputs.json_tcp]\naddress = \"127.0.0.1:{json_port}\"\n[dataplane]\npin_workers = false\n[detection]\nmodel_save_interval_seconds = 1\n[ueba]\nwarmup_days = 2.0\nwarmup_min_events = 20\n"
        ),
    )
    .unwrap();
    let svc = Service::start(dir.path(), &config, api);

    // Fourteen days of 30 users logging in from their own address, ending now.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let day = 86_400_000_000_000i64;
    let start = (now / day - 14) * day;
    let mut lines = String::new();
    let mut n = 0;
    for d in 0..14 {
        for slot in 0..16 {
            for u in 0..30 {
                let ts = start + d * day + (8 * 3600 + slot * 1800 + u * 20) * 1_000_000_000;
                lines.push_str(&login(ts, &format!("user{u:02}"), &format!("10.0.{u}.5")));
                n += 1;
            }
        }
    }
    // Then user07 from a network it has never used at 03:00 UTC, an hour nobody works (the last
    // 03:00 before now: today's, or yesterday's just after midnight), and a newcomer still
    // warming up. A fixed hour, not "an hour ago": an hour ago is a working hour when the suite
    // runs in the morning, and a new address alone is a signal, not an alert.
    let hour = 3_600_000_000_000i64;
    let today = now / day * day;
    let attack = if now > today + 3 * hour + 60_000_000_000 {
        today + 3 * hour
    } else {
        today - day + 3 * hour
    };
    lines.push_str(&login(attack, "user07", "203.0.113.50"));
    lines.push_str(&login(attack, "newbie", "10.0.99.5"));
    n += 2;
    send_lines(json_port, &lines);
    wait_for(api, "/api/v1/stats", |v| {
        v["detection"]["scored"].as_u64() >= Some(n)
    });

    // The alert.
    let alerts = wait_for(api, "/api/v1/alerts?type=ueba", |v| {
        v["meta"]["total"].as_u64() >= Some(1)
    });
    let alert = alerts["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["dedup_key"] == "ueba:new_source:user:203.0.113.50")
        .unwrap_or_else(|| panic!("no new-network alert: {alerts}"))
        .clone();
    assert_eq!(alert["entity"]["value"], "user07", "{alert}");
    assert_eq!(alert["detector"], "ueba:user");
    assert_eq!(alert["attack"][0]["technique_id"], "T1078");
    assert!(alert["contributions"]["source_novelty"].as_f64().unwrap() > 0.0);
    let id = alert["id"].as_str().unwrap().to_string();
    let (status, body) = http(api, "GET", &format!("/api/v1/alerts/{id}"), "");
    assert_eq!(status, 200, "{body}");
    let detail = json(&body);
    assert!(
        detail["events"][0]["message"]
            .as_str()
            .unwrap()
            .contains("203.0.113.50"),
        "{detail}"
    );
    let by_entity = wait_for(api, "/api/v1/alerts?entity=user07", |_| true);
    assert!(
        by_entity["meta"]["total"].as_u64() >= Some(1),
        "{by_entity}"
    );
    let (status, _) = http(api, "GET", "/api/v1/alerts?type=bogus", "");
    assert_eq!(status, 422);
    let (status, _) = http(
        api,
        "GET",
        "/api/v1/alerts?technique=T1078&tactic=Initial%20Access",
        "",
    );
    assert_eq!(status, 200);

    // Feedback: 204, 404, 422; the log lists it; the threshold moved and /stats counts it.
    let path = format!("/api/v1/alerts/{id}/feedback");
    let (status, body) = http(
        api,
        "POST",
        &path,
        r#"{"feedback":"fp","note":"travelling, known","origin":"dashboard"}"#,
    );
    assert_eq!(status, 204, "{body}");
    let (status, _) = http(
        api,
        "POST",
        "/api/v1/alerts/0190a000-0000-7000-8000-000000000000/feedback",
        r#"{"feedback":"fp"}"#,
    );
    assert_eq!(status, 404);
    for bad in [
        r#"{"feedback":"maybe"}"#,
        "not json",
        r#"{"feedback":"tp","extra":1}"#,
    ] {
        let (status, body) = http(api, "POST", &path, bad);
        assert_eq!(status, 422, "{bad}: {body}");
    }
    // Issue 50, item 10: the same verdict again from the same sender (a double click) is not
    // stored twice and moves no threshold.
    let (status, body) = http(
        api,
        "POST",
        &path,
        r#"{"feedback":"fp","note":"clicked twice","origin":"dashboard"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["recorded"], false, "{body}");
    let (status, body) = http(api, "GET", &path, "");
    assert_eq!(status, 200);
    let log = json(&body);
    assert_eq!(log["meta"]["total"], 1);
    let entry = &log["items"][0];
    assert_eq!(entry["origin"], "dashboard");
    let change = &entry["threshold_change"];
    assert_eq!(change["detector"], "ueba:user", "{entry}");
    assert!(change["new_risk"].as_f64() < change["old_risk"].as_f64());
    let (_, body) = http(api, "GET", "/api/v1/stats", "");
    let stats = json(&body);
    assert_eq!(
        stats["feedback"]["by_detector"]["ueba:user"]["fp"], 1,
        "{stats}"
    );
    // A changed verdict is recorded (and moves the threshold back); another analyst's is theirs.
    let (status, _) = http(
        api,
        "POST",
        &path,
        r#"{"feedback":"tp","origin":"dashboard"}"#,
    );
    assert_eq!(status, 204);
    let (status, _) = http(
        api,
        "POST",
        &path,
        r#"{"feedback":"tp","origin":"dashboard","analyst":"bob"}"#,
    );
    assert_eq!(status, 204);
    let (status, _) = http(
        api,
        "POST",
        &path,
        r#"{"feedback":"tp","origin":"soar","analyst":"bob"}"#,
    );
    assert_eq!(status, 200, "bob's verdict, whatever tool sent it");
    let log = json(&http(api, "GET", &path, "").1);
    assert_eq!(log["meta"]["total"], 3, "{log}");
    assert_eq!(log["items"][0]["analyst"], "bob", "{log}");
    let back = &log["items"][1]["threshold_change"];
    assert!(
        back["new_risk"].as_f64() > back["old_risk"].as_f64(),
        "{log}"
    );

    // Triage: open by default; acknowledged and assigned; listings filter on it; closing takes a
    // reason; bad bodies are refused whole.
    assert_eq!(alert["triage"]["status"], "open", "{alert}");
    let one = format!("/api/v1/alerts/{id}");
    let (status, body) = http(
        api,
        "PATCH",
        &one,
        r#"{"status":"acknowledged","assignee":"alice"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let acked = json(&body);
    assert_eq!(acked["triage"]["status"], "acknowledged");
    assert_eq!(acked["triage"]["assignee"], "alice");
    assert!(acked["triage"]["updated_ns"].as_i64() > Some(0));
    let listed = |query: &str| {
        let (status, body) = http(api, "GET", &format!("/api/v1/alerts?{query}"), "");
        assert_eq!(status, 200, "{query}: {body}");
        json(&body)["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == id.as_str())
    };
    assert!(listed("status=acknowledged&assignee=alice"));
    assert!(listed("status=open,acknowledged"));
    assert!(!listed("status=open"));
    assert!(!listed("assignee=bob"));
    for (bad, field) in [
        (r#"{"status":"closed"}"#, "reason"),
        (r#"{"reason":"duplicate"}"#, "reason"),
        (r#"{"status":"gone"}"#, "status"),
        (r#"{"assignee":""}"#, "assignee"),
        (r#"{"assignee":7}"#, "assignee"),
        (r#"{"owner":"bob"}"#, "owner"),
        ("{}", "body"),
        ("[1]", "body"),
        ("not json", "body"),
    ] {
        let (status, body) = http(api, "PATCH", &one, bad);
        let v = json(&body);
        assert_eq!(
            (status, v["error"].as_str()),
            (422, Some("invalid_body")),
            "{bad}: {body}"
        );
        assert_eq!(v["field"], field, "{bad}: {body}");
    }
    let (status, _) = http(api, "GET", "/api/v1/alerts?status=snoozed", "");
    assert_eq!(status, 422);
    let (status, _) = http(
        api,
        "PATCH",
        "/api/v1/alerts/0190a000-0000-7000-8000-000000000000",
        r#"{"status":"open"}"#,
    );
    assert_eq!(status, 404);
    let (status, body) = http(
        api,
        "PATCH",
        &one,
        r#"{"status":"closed","reason":"benign_positive","assignee":null,"note":"travelling"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let closed = json(&body);
    assert_eq!(closed["triage"]["reason"], "benign_positive");
    assert!(closed["triage"]["assignee"].is_null());
    assert_eq!(closed["triage"]["history"].as_array().unwrap().len(), 2);
    assert!(listed("status=closed"));

    // Entities and baselines.
    let found = wait_for(api, "/api/v1/entities/search?q=user07", |_| true);
    let user07 = found["items"][0].clone();
    assert_eq!(
        (user07["value"].as_str(), user07["kind"].as_str()),
        (Some("user07"), Some("user"))
    );
    let uuid = user07["uuid"].as_str().unwrap().to_string();
    let (status, body) = http(api, "GET", &format!("/api/v1/entities/{uuid}/baseline"), "");
    assert_eq!(status, 200, "{body}");
    let base = json(&body);
    assert_eq!(base["warming_up"], false);
    assert!(
        base["hours_active"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(8)),
        "{base}"
    );
    assert!(
        base["top_source_ips"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("10.0.7.5"))
    );
    let count = base["event_count"].as_u64().unwrap();
    assert!(count >= 14 * 16, "{base}");
    let newbie = wait_for(api, "/api/v1/entities/search?q=newbie", |_| true);
    let newbie = newbie["items"][0]["uuid"].as_str().unwrap().to_string();
    let (status, body) = http(
        api,
        "GET",
        &format!("/api/v1/entities/{newbie}/baseline"),
        "",
    );
    let warming = json(&body);
    assert_eq!(
        (status, warming["status"].as_str()),
        (404, Some("warming_up")),
        "{warming}"
    );
    assert_eq!(warming["events_remaining"], 19);
    let (status, _) = http(
        api,
        "GET",
        "/api/v1/entities/00000000-0000-5000-8000-000000000000/baseline",
        "",
    );
    assert_eq!(status, 404);
    let (status, body) = http(
        api,
        "GET",
        &format!("/api/v1/entities/{uuid}/timeline?limit=5"),
        "",
    );
    assert_eq!(status, 200);
    let tl = json(&body);
    assert_eq!(tl["events"].as_array().unwrap().len(), 5);
    assert!(
        tl["related_entities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["value"] == "srv-01")
    );
    let risk = wait_for(
        api,
        &format!("/api/v1/entities/{uuid}/risk-history?range=7d"),
        |v| !v["points"].as_array().unwrap().is_empty(),
    );
    assert_eq!(risk["resolution"], "1h");
    // The alert's hour is there, though user07 has not acted since (the hour is still open).
    let attack_hour = attack / hour * hour;
    let points = risk["points"].as_array().unwrap();
    assert!(
        points
            .iter()
            .any(|p| p["ts_ns"].as_i64() == Some(attack_hour)),
        "no point at the alert's hour {attack_hour}: {risk}"
    );

    // The anomaly timeline of the last week has the replayed days' events in its buckets (a
    // week, not a day: the replayed days end yesterday at 16:00, which leaves the last 24 hours
    // from 15:00 UTC on).
    let tl = wait_for(
        api,
        "/api/v1/anomaly/timeline?range=7d&resolution=1h",
        |v| {
            v["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["events"].as_u64() > Some(0))
        },
    );
    assert_eq!(tl["buckets"].as_array().unwrap().len(), 168);
    let (status, _) = http(api, "GET", "/api/v1/anomaly/timeline?range=2d", "");
    assert_eq!(status, 422);
    let (status, _) = http(
        api,
        "GET",
        "/api/v1/anomaly/timeline?range=7d&resolution=1m",
        "",
    );
    assert_eq!(status, 422);

    // A restart keeps the baselines: no new warmup.
    assert!(svc.stop().success());
    let svc = Service::start(dir.path(), &config, api);
    let (status, body) = http(api, "GET", &format!("/api/v1/entities/{uuid}/baseline"), "");
    assert_eq!(status, 200, "{body}");
    let again = json(&body);
    assert_eq!(again["event_count"].as_u64(), Some(count));
    assert_eq!(again["warming_up"], false);
    let (_, body) = http(api, "GET", &one, "");
    let kept = json(&body);
    assert_eq!(kept["triage"]["status"], "closed", "{kept}");
    assert_eq!(kept["triage"]["history"][1]["note"], "travelling");
    assert!(svc.stop().success());

    // With UEBA off, baselines answer 503.
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("[ueba]\n", "[ueba]\nenabled = false\n"),
    )
    .unwrap();
    let svc = Service::start(dir.path(), &config, api);
    let (status, body) = http(api, "GET", &format!("/api/v1/entities/{uuid}/baseline"), "");
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (503, Some("ueba_disabled"))
    );
    assert!(svc.stop().success());
}
