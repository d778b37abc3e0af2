//! Risk-based alerting with the defaults, as an internet-facing sensor sees a scanner and then
//! an intruder: each attempt on a non-existent account matches a low Sigma rule, which is a
//! signal (stored, searchable, no alert); the address's guesses are one behaviour, so a
//! scanner's visit raises nothing; the same address then probing and logging in as root adds
//! behaviours of other tactics, and one `risk` alert names it, its signals and their tactics.

mod common;

use common::{Service, free_port, http, json, send_lines, stamp, wait_for};

/// The bundled rule `sshd_invalid_user.yml` (level low).
const RULE: &str = "dcec6854-a593-491f-9a9c-59c065d2aca7";

#[test]
fn a_scanners_guesses_stay_signals_and_an_address_gathering_behaviours_raises_one_risk_alert() {
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
    // A scanner's visit: five names that do not exist, five signals, and no alert. Its guesses
    // are one behaviour whatever names they try (two guesses' worth of risk, about 28).
    let attempt = |i: i64| {
        let t = stamp(i - 20);
        format!(
            "<38>{t} edge-01 sshd[50{i}]: Invalid user guess{i} from 203.0.113.66 port 4300{i}\n"
        )
    };
    send_lines(tcp, &(0..5).map(attempt).collect::<String>());
    let signals = wait_for(api, &format!("/api/v1/signals?detector={RULE}"), |v| {
        v["meta"]["total"] == 4
    });
    let (_, body) = http(api, "GET", "/api/v1/alerts", "");
    assert_eq!(
        json(&body)["meta"]["total"],
        0,
        "a scanner's visit alerted: {body}"
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

    // Then the same address probes the service (a connection closed before authenticating:
    // reconnaissance) and logs in as root with a key (initial access and persistence): one
    // behaviour each, over four tactics in all. Breadth crosses where repetition did not: one
    // risk alert about the address.
    send_lines(
        tcp,
        &format!(
            "<38>{} edge-01 sshd[5200]: Connection closed by 203.0.113.66 port 44100 [preauth]\n<38>{} edge-01 sshd[5201]: Accepted publickey for root from 203.0.113.66 port 44200 ssh2: ED25519 SHA256:kq3Xv0yWm0hG3wQ\n",
            stamp(-12),
            stamp(-10)
        ),
    );
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
    let contributions = a["contributions"].as_object().unwrap();
    let mut titles: Vec<&String> = contributions.keys().collect();
    titles.sort();
    assert_eq!(
        titles,
        [
            "SSH Connection Closed Before Authentication",
            "SSH Login Attempt for Non-Existent User (×5)",
            "SSH Public Key Login Accepted for Root"
        ],
        "{a}"
    );
    // Five names tried, two guesses' worth (a low signal weighs 15 at most).
    let guessed = contributions["SSH Login Attempt for Non-Existent User (×5)"]
        .as_f64()
        .unwrap();
    assert!(guessed > 15.0 && guessed <= 30.0, "{a}");
    // Six signal records (four of the guesses: three of their own, the rule's group signal
    // for the last two), seven events.
    assert_eq!(a["related_alerts"].as_array().unwrap().len(), 6, "{a}");
    assert_eq!(a["contributing_events"].as_array().unwrap().len(), 7, "{a}");
    let tactics: std::collections::BTreeSet<&str> = a["attack"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tactic_id"].as_str())
        .collect();
    assert_eq!(
        tactics.into_iter().collect::<Vec<_>>(),
        ["TA0001", "TA0003", "TA0006", "TA0043"],
        "{a}"
    );
    assert!(
        a["title"]
            .as_str()
            .unwrap()
            .contains("by an address: 7 signals across 4 tactics"),
        "{a}"
    );
    let (_, body) = http(api, "GET", "/api/v1/stats", "");
    let stats = json(&body);
    // Three names with a signal each, the fourth and fifth in the rule's group signal (as
    // alerts group past `detection.alert_group_after_entities`), the probe and the login.
    assert_eq!(stats["detection"]["signals"], 6, "{stats}");
    // Repeats are written with the next flush (a second at most).
    let groups = wait_for(
        api,
        &format!("/api/v1/signals?dedup_key=signal:{RULE}:group:*"),
        |v| v["items"][0]["entity_count"] == 2,
    );
    assert_eq!(groups["meta"]["total"], 1, "{groups}");
    // Signals are not in the analysts' queue; the risk alert is, beside the kill chain's (the
    // same four tactics on one address), both about the address.
    let (_, body) = http(api, "GET", "/api/v1/alerts?status=open", "");
    let open = json(&body);
    let mut detectors: Vec<&str> = open["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert_eq!(a["entity"]["value"], "203.0.113.66", "{a}");
            a["detector"].as_str().unwrap()
        })
        .collect();
    detectors.sort();
    assert_eq!(detectors, ["killchain", "risk"], "{body}");
    // Bad parameters are refused as on the alert listing; triage filters do not apply here.
    let (status, body) = http(api, "GET", "/api/v1/signals?status=open", "");
    assert_eq!(
        (status, json(&body)["parameter"].as_str()),
        (422, Some("status"))
    );
}
