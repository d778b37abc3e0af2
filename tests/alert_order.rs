//! The order of the alert listing as the dashboard's feed and any client see it (issue 50, item
//! 5): the feed showed each alert's last activity but was sorted by creation, so an alert that
//! kept repeating never rose above quieter, newer ones.

mod common;

use common::{Service, free_port, http, json, send_lines, stamp, syslog_config};
use std::time::{Duration, Instant};

/// An sshd line for a user that does not exist, `offset_s` seconds from now: it fires the bundled
/// rule `sshd_invalid_user`, which alerts here (the suites' `LOW_ALERTS`).
fn invalid_user(offset_s: i64, user: &str, address: &str) -> String {
    format!(
        "<38>{} web-01 sshd[77]: Invalid user {user} from {address} port 40000\n",
        stamp(offset_s)
    )
}

/// Polls `/api/v1/alerts` until `done` holds of its items (or fails after 20 s).
fn alerts_until(api: u16, done: impl Fn(&[serde_json::Value]) -> bool) -> Vec<serde_json::Value> {
    let t = Instant::now();
    loop {
        let (code, body) = http(api, "GET", "/api/v1/alerts?sort=first_seen", "");
        assert_eq!(code, 200, "{body}");
        let items = json(&body)["items"].as_array().unwrap().clone();
        if done(&items) {
            return items;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{items:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn naming<'a>(items: &'a [serde_json::Value], address: &str) -> Option<&'a serde_json::Value> {
    items.iter().find(|a| {
        a["entity"]["value"] == address
            || a["related_entities"]
                .as_array()
                .is_some_and(|r| r.iter().any(|e| e["value"] == address))
    })
}

#[test]
fn the_listing_is_by_latest_activity_and_says_so_and_creation_order_is_a_choice() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let _svc = Service::start(dir.path(), &config, api);
    // The older alert, then the newer.
    send_lines(tcp, &invalid_user(-20, "oracle1", "203.0.113.9"));
    alerts_until(api, |a| naming(a, "203.0.113.9").is_some());
    send_lines(tcp, &invalid_user(-10, "oracle2", "198.51.100.20"));
    let items = alerts_until(api, |a| naming(a, "198.51.100.20").is_some());
    let older = naming(&items, "203.0.113.9").unwrap()["id"].clone();
    let newer = naming(&items, "198.51.100.20").unwrap()["id"].clone();
    // The older one repeats now.
    send_lines(tcp, &invalid_user(0, "oracle1", "203.0.113.9"));
    alerts_until(api, |a| {
        naming(a, "203.0.113.9").is_some_and(|x| x["count"].as_u64() == Some(2))
    });

    let (code, body) = http(api, "GET", "/api/v1/alerts", "");
    assert_eq!(code, 200, "{body}");
    let by_default = json(&body);
    assert_eq!(by_default["meta"]["sort"], "last_seen", "{by_default}");
    assert_eq!(
        by_default["items"][0]["id"], older,
        "the repeating alert rises"
    );
    assert_eq!(by_default["items"][1]["id"], newer);

    let by_creation = json(&http(api, "GET", "/api/v1/alerts?sort=first_seen", "").1);
    assert_eq!(by_creation["meta"]["sort"], "first_seen");
    assert_eq!(by_creation["items"][0]["id"], newer);
    assert_eq!(by_creation["items"][1]["id"], older);

    let (code, body) = http(api, "GET", "/api/v1/alerts?sort=severity", "");
    assert_eq!(code, 422, "{body}");
    assert_eq!(json(&body)["parameter"], "sort", "{body}");
    // A bulk change needs a filter that selects: an order is none.
    let (code, body) = http(
        api,
        "PATCH",
        "/api/v1/alerts?sort=first_seen",
        r#"{"status":"acknowledged"}"#,
    );
    assert_eq!(code, 422, "{body}");
}
