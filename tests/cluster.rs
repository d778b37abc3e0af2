//! The fleet (docs/cluster.md, issue 53) against a real three-server NATS JetStream cluster on
//! loopback, over TLS with a user and password: nodes see each other in `/api/v1/cluster`,
//! survive the loss of a server, drop out when killed, report a lost cluster in `/health` and
//! come back with it; a node with no `[cluster]` stands alone as before.

mod common;

use common::nats::{NatsCluster, PASSWORD};
use common::{Service, free_port, http, json, request};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// A service on its own port with `extra` added; ingestion inputs off.
fn start(dir: &Path, extra: &str) -> (Service, u16) {
    let api = free_port();
    let config = dir.join(format!("watchpost-{api}.toml"));
    std::fs::write(
        &config,
        format!(
            "dashboard_port = {api}\nhealth_port = 0\n[storage]\ndata_dir = \"data-{api}\"\n\
             [inputs.syslog_udp]\nenabled = false\n[inputs.syslog_tcp]\nenabled = false\n\
             [inputs.json_tcp]\nenabled = false\n[dataplane]\npin_workers = false\n{extra}"
        ),
    )
    .unwrap();
    (Service::start(dir, &config, api), api)
}

fn cluster(api: u16) -> Value {
    json(&http(api, "GET", "/api/v1/cluster", "").1)
}

fn names(view: &Value) -> Vec<String> {
    view["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect()
}

/// Polls `ready` every 100 ms for up to `within`.
fn wait_until(what: &str, within: Duration, mut ready: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ready() {
        assert!(t.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn nodes_see_each_other_survive_a_server_drop_out_when_killed_and_follow_the_cluster_back() {
    let mut nats = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let (sensor, sensor_api) = start(
        dir.path(),
        &nats.node_config("sensor-a", &["sensor"], PASSWORD),
    );
    let (_console, console_api) = start(
        dir.path(),
        &nats.node_config("console-1", &["console", "detector"], PASSWORD),
    );
    let both = || {
        [sensor_api, console_api].iter().all(|&api| {
            let v = cluster(api);
            v["status"] == "ok" && names(&v) == ["console-1", "sensor-a"]
        })
    };
    wait_until("both nodes in both views", Duration::from_secs(20), both);
    let view = cluster(console_api);
    assert_eq!(view["node"], "console-1");
    assert_eq!(view["roles"], serde_json::json!(["console", "detector"]));
    assert_eq!(view["servers"], serde_json::json!(nats.urls()));
    assert!(
        view["server"].as_str().is_some_and(|s| s.starts_with('n')),
        "{view}"
    );
    let sensor_entry = &view["nodes"][1];
    assert_eq!(sensor_entry["roles"], serde_json::json!(["sensor"]));
    assert_eq!(
        sensor_entry["api"],
        format!("http://127.0.0.1:{sensor_api}")
    );
    assert_eq!(sensor_entry["this_node"], false);
    assert_eq!(view["nodes"][0]["this_node"], true);
    assert!(sensor_entry["last_contact_ns"].as_i64().unwrap() > 0);
    assert!(sensor_entry["last_contact"].is_string(), "RFC 3339 sibling");
    let health = json(&http(console_api, "GET", "/api/v1/health", "").1);
    assert_eq!(health["components"]["cluster"]["status"], "ok", "{health}");
    assert_eq!(health["components"]["cluster"]["nodes"], 2);

    // One server of three dies: the nodes reconnect to the others and keep renewing.
    nats.kill(0);
    let renewed_after = |api: u16, at: i64| {
        let v = cluster(api);
        v["status"] == "ok" && v["last_heartbeat_ns"].as_i64().unwrap() > at
    };
    let now = cluster(console_api)["last_heartbeat_ns"].as_i64().unwrap();
    wait_until(
        "renewals with a server down",
        Duration::from_secs(20),
        || renewed_after(console_api, now + 2_000_000_000) && renewed_after(sensor_api, now),
    );
    // While the bucket's stream elects a new leader, renewals stall and, with heartbeats of a
    // second, an entry can age out for a moment: the views come back whole.
    wait_until(
        "both nodes in both views with a server down",
        Duration::from_secs(20),
        both,
    );
    nats.restart(0);

    // A node killed drops out of the other's view once its entry ages out (three heartbeats).
    sensor.kill();
    wait_until("the killed node ages out", Duration::from_secs(15), || {
        names(&cluster(console_api)) == ["console-1"]
    });

    // The cluster loses its majority: the node says so, and serves on.
    nats.kill(1);
    nats.kill(2);
    wait_until(
        "the node reports the cluster lost",
        Duration::from_secs(30),
        || {
            let (code, _, body) = request(console_api, "GET", "/api/v1/health", &[], "");
            let h = json(&body);
            code == 503
                && h["components"]["cluster"]["status"] == "degraded"
                && h["degraded"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d == "cluster")
        },
    );
    assert!(cluster(console_api)["last_error"].is_string());
    assert_eq!(http(console_api, "GET", "/api/v1/alerts", "").0, 200);

    // Back: the client reconnects by itself and the node renews its entry again.
    nats.restart(1);
    nats.restart(2);
    nats.wait_ready();
    wait_until(
        "the node back in the cluster",
        Duration::from_secs(30),
        || {
            let v = cluster(console_api);
            v["status"] == "ok" && names(&v) == ["console-1"]
        },
    );
}

#[test]
fn wrong_credentials_degrade_health_with_the_reason_and_no_cluster_is_standalone() {
    let nats = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(
        dir.path(),
        &nats.node_config("sensor-b", &["sensor"], "wrong"),
    );
    wait_until("the refusal reported", Duration::from_secs(15), || {
        let v = cluster(api);
        v["status"] == "degraded"
            && v["last_error"]
                .as_str()
                .is_some_and(|e| e.to_lowercase().contains("authorization"))
    });
    let view = cluster(api);
    assert!(
        !view["last_error"].as_str().unwrap().contains("wrong"),
        "{view}"
    );
    assert_eq!(request(api, "GET", "/api/v1/health", &[], "").0, 503);

    let (_alone, alone_api) = start(dir.path(), "");
    let view = cluster(alone_api);
    assert_eq!(view["status"], "standalone");
    assert_eq!(view["nodes"], serde_json::json!([]));
    let health = json(&http(alone_api, "GET", "/api/v1/health", "").1);
    assert_eq!(health["components"]["cluster"]["status"], "disabled");
    assert_eq!(health["status"], "ok", "{health}");
}
