//! Triage of many alerts at once, as an analyst clears a scanner sweep: the sweep's alerts (the
//! rule's first three entities alone, the rest in one group alert) are found by detector and by
//! dedup key, and one `PATCH /alerts?<filters>` closes them all.

mod common;

use common::{Service, free_port, http, json, send_lines, stamp, syslog_config, wait_for};

const RULE: &str = "dcec6854-a593-491f-9a9c-59c065d2aca7";

#[test]
fn a_sweep_is_closed_in_one_bulk_change() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let _svc = Service::start(dir.path(), &config, api);
    let sweep: String = (0..8)
        .map(|i| {
            let t = stamp(i - 10);
            format!(
                "<38>{t} edge-01 sshd[30{i}]: Invalid user probe{i} from 198.51.100.{} port 4100{i}\n",
                i + 1
            )
        })
        .collect();
    send_lines(tcp, &sweep);
    let by_rule = format!("/api/v1/alerts?detector={RULE}");
    let listed = wait_for(api, &by_rule, |v| {
        v["items"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["entity_count"] == 5))
    });
    assert_eq!(listed["meta"]["total"], 4, "{listed}");
    let (_, body) = http(
        api,
        "GET",
        &format!("/api/v1/alerts?dedup_key=sigma:{RULE}:group:*"),
        "",
    );
    let groups = json(&body);
    assert_eq!(groups["meta"]["total"], 1, "{groups}");

    // No filter: refused, so that a bare call cannot close the whole queue.
    let (status, body) = http(
        api,
        "PATCH",
        "/api/v1/alerts",
        r#"{"status":"acknowledged"}"#,
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(json(&body)["parameter"], "filter");
    // A change the alerts refuse (closing without a reason): nothing changes.
    let bulk = format!("/api/v1/alerts?detector={RULE}&status=open");
    let (status, body) = http(api, "PATCH", &bulk, r#"{"status":"closed"}"#);
    assert_eq!(
        (status, json(&body)["field"].clone()),
        (422, "reason".into()),
        "{body}"
    );
    let (_, body) = http(api, "GET", &format!("{by_rule}&status=open"), "");
    assert_eq!(json(&body)["meta"]["total"], 4);
    // An unknown filter is refused as on the listing.
    let (status, _) = http(api, "PATCH", "/api/v1/alerts?colour=red", r#"{"note":"x"}"#);
    assert_eq!(status, 422);

    let (status, body) = http(
        api,
        "PATCH",
        &bulk,
        r#"{"status":"closed","reason":"benign_positive","note":"internet scanner sweep"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let done = json(&body);
    assert_eq!(done["matched"], 4, "{done}");
    assert_eq!(done["changed"], 4);
    assert_eq!(done["truncated"], false);
    assert_eq!(done["ids"].as_array().unwrap().len(), 4);
    let (_, body) = http(api, "GET", &format!("{by_rule}&status=open"), "");
    assert_eq!(json(&body)["meta"]["total"], 0);
    let (_, body) = http(api, "GET", &format!("{by_rule}&status=closed"), "");
    let closed = json(&body);
    assert_eq!(closed["meta"]["total"], 4);
    for a in closed["items"].as_array().unwrap() {
        assert_eq!(a["triage"]["reason"], "benign_positive", "{a}");
        assert_eq!(
            a["triage"]["history"][0]["note"], "internet scanner sweep",
            "{a}"
        );
    }
    // The same call again selects nothing and changes nothing.
    let (status, body) = http(
        api,
        "PATCH",
        &bulk,
        r#"{"status":"closed","reason":"benign_positive"}"#,
    );
    assert_eq!(status, 200);
    assert_eq!(json(&body)["changed"], 0);
}

/// An alert stays open for its cooldown and folds repeats; once an analyst closes it, the
/// next firing is a new alert in the queue, not a count on a closed one.
#[test]
fn after_a_close_the_next_firing_is_a_new_alert() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let _svc = Service::start(dir.path(), &config, api);
    let guess = |i: i64| {
        let t = stamp(i - 10);
        format!("<38>{t} edge-01 sshd[40{i}]: Invalid user probe from 198.51.100.9 port 4200{i}\n")
    };
    let by_rule = format!("/api/v1/alerts?detector={RULE}");
    send_lines(tcp, &guess(0));
    let first = wait_for(api, &by_rule, |v| v["meta"]["total"] == 1)["items"][0].clone();
    // Inside the cooldown, a repeat bumps the open alert.
    send_lines(tcp, &guess(1));
    let id = first["id"].as_str().unwrap().to_string();
    wait_for(api, &format!("/api/v1/alerts/{id}"), |v| v["count"] == 2);
    let (status, body) = http(
        api,
        "PATCH",
        &format!("/api/v1/alerts/{id}"),
        r#"{"status":"closed","reason":"false_positive"}"#,
    );
    assert_eq!(status, 200, "{body}");
    send_lines(tcp, &guess(2));
    let open = wait_for(api, &format!("{by_rule}&status=open"), |v| {
        v["meta"]["total"] == 1
    });
    let next = &open["items"][0];
    assert_ne!(next["id"], first["id"], "{open}");
    assert_eq!(next["count"], 1, "{next}");
    let (_, body) = http(api, "GET", &format!("/api/v1/alerts/{id}"), "");
    let closed = json(&body);
    assert_eq!(
        closed["count"], 2,
        "the closed alert took no repeat: {closed}"
    );
    assert_eq!(closed["triage"]["status"], "closed");
}
