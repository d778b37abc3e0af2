//! A store that cannot be read, as an analyst meets it: the alert whose record is damaged
//! answers 500 with the error shape, never 404 "no such alert" or a list without it; `/health`
//! says the store is degraded and names the failure; the failures are counted; everything else
//! is served as before.

mod common;

use common::{
    Service, free_port, http, invalid_user_lines, json, send_lines, syslog_config, wait_for,
};
use watchpost_proto::config::StorageConfig;
use watchpost_store::Store;

#[test]
fn a_damaged_alert_is_a_500_and_degraded_health_never_a_404() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let svc = Service::start(dir.path(), &config, api);
    let lines = invalid_user_lines();
    send_lines(tcp, &lines);
    let v = wait_for(api, "/api/v1/alerts?type=sigma", |v| {
        v["meta"]["total"].as_u64() >= Some(1)
    });
    let id = v["items"][0]["id"].as_str().unwrap().to_string();
    assert!(svc.stop().success());

    // What a bad disk leaves behind: the record is there and does not decode. (RocksDB admits
    // one process at a time, so this happens while the service is stopped.)
    let store = Store::open(&dir.path().join("data"), &StorageConfig::default()).unwrap();
    store.damage_alert(&id).unwrap();
    drop(store);

    let _svc = Service::start(dir.path(), &config, api);
    let alert = format!("/api/v1/alerts/{id}");
    for (method, path, body) in [
        ("GET", alert.as_str(), ""),
        ("GET", "/api/v1/alerts", ""),
        ("GET", &format!("{alert}/feedback"), ""),
        ("POST", &format!("{alert}/feedback"), r#"{"feedback":"tp"}"#),
    ] {
        let (code, text) = http(api, method, path, body);
        let e = json(&text);
        assert_eq!(
            (code, e["error"].as_str()),
            (500, Some("store_error")),
            "{method} {path}: {text}"
        );
        assert!(
            e["message"].as_str().unwrap().contains("does not decode"),
            "{e}"
        );
    }

    let (code, text) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(code, 503, "{text}");
    let h = json(&text);
    assert!(
        h["degraded"]
            .as_array()
            .unwrap()
            .contains(&"store reads".into()),
        "{h}"
    );
    let s = &h["components"]["store"];
    assert_eq!(s["status"], "degraded", "{s}");
    assert_eq!(s["read_errors"], 4, "one per failed request: {s}");
    assert!(
        s["last_read_error"].as_str().unwrap().contains("alert"),
        "{s}"
    );

    // Counted in /stats and /metrics; what does not touch the record is served as before.
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(
        stats["store_reads"]["read_errors"], 4,
        "{}",
        stats["store_reads"]
    );
    let (_, metrics) = http(api, "GET", "/metrics", "");
    assert!(
        metrics
            .lines()
            .any(|l| l == "watchpost_store_read_errors_total 4"),
        "{metrics}"
    );
    let (code, text) = http(api, "GET", "/api/v1/events?limit=5", "");
    assert_eq!(code, 200, "{text}");
    assert_eq!(json(&text)["meta"]["total"], 3);
}
