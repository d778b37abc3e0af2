//! Risk-based alerting with the defaults, as an internet-facing sensor sees a spray: each
//! attempt on a non-existent account matches a low Sigma rule, which is a signal (stored,
//! searchable, no alert), and the address behind them gathers their risk until one `risk` alert
//! names it, its signals and their tactic.

mod common;

use common::{Service, free_port, http, json, send_lines, stamp, wait_for};

/// The bundled rule `sshd_invalid_user.yml` (level low).
const RULE: &str = "dcec6854-a593-491f-9a9c-59c065d2aca7";

#[test]
fn low_matches_are_signals_and_one_address_gathering_them_raises_one_risk_alert() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    // The defaults, except the one key the shared helper sets for the other suites.
    let path = dir.path().join("watchpost.toml");
    std::fs::write(
        &path,
        format!(
            "dashboard_port = {api}\nhealth_port = 0\napi_list_rate_limit = \"100000/minute\"\napi_detail_rate_limit = \"100000/minute\"\n[inputs.syslog_udp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[inputs.syslog_tcp]\naddress = \"127.0.0.1:{tcp}\"\n[dataplane]\npin_workers = false\n"
        ),
    )
    .unwrap();
    let _svc = Service::start(dir.path(), &path, api);
    // Four accounts: four signals, risk about 56 on the address, below the threshold of 60.
    let attempt = |i: i64| {
        let t = stamp(i - 20);
        format!(
            "<38>{t} edge-01 sshd[50{i}]: Invalid user guess{i} from 203.0.113.66 port 4300{i}\n"
        )
    };
    send_lines(tcp, &(0..4).map(attempt).collect::<String>());
    let signals = wait_for(api, &format!("/api/v1/signals?detector={RULE}"), |v| {
        v["meta"]["total"] == 4
    });
    let (_, body) = http(api, "GET", "/api/v1/alerts", "");
    assert_eq!(
        json(&body)["meta"]["total"],
        0,
        "a low rule alerted: {body}"
    );
    let one = &signals["items"][0];
    assert_eq!(one["type"], "sigma");
    assert!(
        one["dedup_key"].as_str().unwrap().starts_with("signal:"),
        "{one}"
    );
    let (status, body) = http(
        api,
        "GET",
        &format!("/api/v1/signals/{}", one["id"].as_str().unwrap()),
        "",
    );
    assert_eq!(status, 200, "{body}");
    let (_, body) = http(api, "GET", "/api/v1/signals?entity=203.0.113.66", "");
    assert_eq!(json(&body)["meta"]["total"], 4, "{body}");

    // A fifth account crosses it: one risk alert about the address.
    send_lines(tcp, &attempt(4));
    let risk = wait_for(api, "/api/v1/alerts?detector=risk", |v| {
        v["meta"]["total"] == 1
    });
    let a = &risk["items"][0];
    assert_eq!(
        (a["type"].as_str(), a["entity"]["value"].as_str()),
        (Some("correlation"), Some("203.0.113.66")),
        "{a}"
    );
    assert!(a["score"].as_f64().unwrap() >= a["threshold"].as_f64().unwrap());
    // Four signal records: three of their own, the rule's group signal for the last two.
    assert_eq!(a["related_alerts"].as_array().unwrap().len(), 4, "{a}");
    assert_eq!(
        a["contributions"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["SSH Login Attempt for Non-Existent User (×5)"],
        "{a}"
    );
    assert_eq!(a["contributing_events"].as_array().unwrap().len(), 5, "{a}");
    assert_eq!(a["attack"][0]["tactic_id"], "TA0006", "{a}");
    assert!(
        a["title"]
            .as_str()
            .unwrap()
            .contains("by an address: 5 signals across 1 tactic"),
        "{a}"
    );
    let (_, body) = http(api, "GET", "/api/v1/stats", "");
    let stats = json(&body);
    // Three accounts with a signal each, the fourth and fifth in the rule's group signal (as
    // alerts group past `detection.alert_group_after_entities`).
    assert_eq!(stats["detection"]["signals"], 4, "{stats}");
    // Repeats are written with the next flush (a second at most).
    let groups = wait_for(
        api,
        &format!("/api/v1/signals?dedup_key=signal:{RULE}:group:*"),
        |v| v["items"][0]["entity_count"] == 2,
    );
    assert_eq!(groups["meta"]["total"], 1, "{groups}");
    // Signals are not in the analysts' queue; the risk alert is.
    let (_, body) = http(api, "GET", "/api/v1/alerts?status=open", "");
    assert_eq!(json(&body)["meta"]["total"], 1, "{body}");
    // Bad parameters are refused as on the alert listing; triage filters do not apply here.
    let (status, body) = http(api, "GET", "/api/v1/signals?status=open", "");
    assert_eq!(
        (status, json(&body)["parameter"].as_str()),
        (422, Some("status"))
    );
}
