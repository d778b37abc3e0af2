//! The fleet's data path (docs/cluster.md, issue 53), as an operator runs it: two sensors, two
//! detectors and a console, five processes on a real three-server JetStream cluster over TLS.
//! Attacks sent to either sensor alert once on the console, naming their sensor and their
//! entities; a detector killed with SIGKILL hands its partitions to the other within a bound,
//! and nothing the sensors published is lost; a NATS server killed changes nothing an analyst
//! sees; with the servers' majority lost, a sensor spools its records to disk, says so in
//! `/health`, and sends them when the servers return. Content set on the console (a rule, an
//! exception, an indicator file) reaches every node and acts there; the console's event
//! searches, timelines and hunts ask every sensor and say which did not answer.

mod common;

use common::nats::{NatsCluster, PASSWORD};
use common::{LOW_ALERTS, Service, free_port, http, json, send_lines, stamp};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const PARTITIONS: usize = 16;

/// Held by each test for its whole length: a test runs three NATS servers and four or five
/// nodes, and two at once on two cores starve each other (a week-ahead run once waited 30 s
/// for an indicator file that takes about a second alone).
static ONE_FLEET_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The folder of the running test's node logs (`<name>.log`), printed when a wait fails: a
/// fleet that misses a deadline says why only in its nodes' logs.
static LOGS: std::sync::Mutex<Option<std::path::PathBuf>> = std::sync::Mutex::new(None);

/// A node of the fleet on its own port; a sensor reads syslog over TCP on its `syslog` port.
fn node(
    dir: &Path,
    nats: &NatsCluster,
    name: &str,
    roles: &[&str],
    syslog: Option<u16>,
) -> (Service, u16) {
    node_with(dir, nats, name, roles, syslog, "")
}

/// [`node`], with `extra` top-level keys (dotted: `ueba.warmup_days = 2.0`).
fn node_with(
    dir: &Path,
    nats: &NatsCluster,
    name: &str,
    roles: &[&str],
    syslog: Option<u16>,
    extra: &str,
) -> (Service, u16) {
    let api = free_port();
    let syslog = match syslog {
        Some(port) => format!("address = \"127.0.0.1:{port}\""),
        None => "enabled = false".into(),
    };
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "{extra}\n{LOW_ALERTS}\ndetection.model_save_interval_seconds = 2\n\
             detection.alert_group_after_entities = 100\n\
             detection.ioc_reload_interval_seconds = 1\ndashboard_port = {api}\n\
             health_port = 0\napi_list_rate_limit = \"100000/minute\"\n[storage]\n\
             data_dir = \"data-{name}\"\n[inputs.syslog_udp]\nenabled = false\n\
             [inputs.json_tcp]\nenabled = false\n[inputs.syslog_tcp]\n{syslog}\n[dataplane]\n\
             pin_workers = false\n{}partitions = {PARTITIONS}\nlease_seconds = 3\n",
            nats.node_config(name, roles, PASSWORD)
        ),
    )
    .unwrap();
    *LOGS.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.to_path_buf());
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))
        .unwrap();
    (Service::start_logging_to(dir, &config, api, log), api)
}

/// The last lines of every node's log, for a failure's message.
fn log_tails() -> String {
    let Some(dir) = LOGS.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return String::new();
    };
    // `FLEET_LOG_TAIL=N` keeps more lines, for a failure chased on purpose.
    let tail = std::env::var("FLEET_LOG_TAIL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let mut out = String::new();
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    for path in logs {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        out.push_str(&format!("\n--- {} ---\n", path.display()));
        for line in &lines[lines.len().saturating_sub(tail)..] {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn get(api: u16, path: &str) -> Value {
    json(&http(api, "GET", path, "").1)
}

/// Polls `ready` every 100 ms for up to `within`; returns how long it took.
fn wait_until(what: &str, within: Duration, mut ready: impl FnMut() -> bool) -> Duration {
    let t = Instant::now();
    while !ready() {
        if t.elapsed() >= within {
            panic!(
                "{what}: not within {within:?}; the nodes' logs:{}",
                log_tails()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    t.elapsed()
}

/// The partitions each detector owns, by node name, as the console sees the fleet.
fn owners(console: u16) -> Vec<(String, Vec<u64>)> {
    get(console, "/api/v1/cluster")["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| {
            n["roles"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == "detector")
        })
        .map(|n| {
            let parts = n["partitions"].as_array().unwrap();
            let parts = parts.iter().map(|p| p.as_u64().unwrap()).collect();
            (n["name"].as_str().unwrap().to_string(), parts)
        })
        .collect()
}

/// Three SSH attempts for users that do not exist, from `address`: one `sigma` alert.
fn attack(port: u16, host: &str, address: &str, user: &str) {
    let lines: String = (0..3)
        .map(|i| {
            format!(
                "<38>{} {host} sshd[4{i}]: Invalid user {user}{i} from {address} port 5100{i}\n",
                stamp(i - 3)
            )
        })
        .collect();
    send_lines(port, &lines);
}

/// Ordinary traffic: accepted logins of a few people, `n` lines.
fn background(port: u16, host: &str, n: usize) {
    let lines: String = (0..n)
        .map(|i| {
            format!(
                "<38>{} {host} sshd[9{}]: Accepted publickey for user{} from 10.1.{}.{} port 22\n",
                stamp(-1),
                i % 100,
                i % 7,
                i % 3,
                i % 50
            )
        })
        .collect();
    send_lines(port, &lines);
}

/// The console's alerts, one line each, for a failure's message.
fn alert_lines(console: u16) -> String {
    let all = get(console, "/api/v1/alerts?limit=100");
    let mut out = String::new();
    for a in all["items"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "\n  {} {} {:?} entity {} count {} sensor {}",
            a["id"], a["type"], a["title"], a["entity"]["value"], a["count"], a["sensor"]
        ));
    }
    out
}

fn sigma_alerts(console: u16) -> Vec<Value> {
    get(console, "/api/v1/alerts?type=sigma&limit=100")["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn sensors_detectors_and_a_console_share_one_queue_and_survive_a_detector_and_a_server() {
    let _alone = ONE_FLEET_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mut nats = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let (syslog_a, syslog_b) = (free_port(), free_port());
    let (_sensor_a, sensor_a) = node(dir.path(), &nats, "sensor-a", &["sensor"], Some(syslog_a));
    let (_sensor_b, sensor_b) = node(dir.path(), &nats, "sensor-b", &["sensor"], Some(syslog_b));
    let (det_1, _) = node(dir.path(), &nats, "det-1", &["detector"], None);
    let (_det_2, det_2) = node(dir.path(), &nats, "det-2", &["detector"], None);
    let (_console_node, console) = node(dir.path(), &nats, "console", &["console"], None);

    // The detectors share the partitions out: every one owned, by one detector, half each.
    wait_until("the partitions shared out", Duration::from_secs(30), || {
        let o = owners(console);
        let mut all: Vec<u64> = o.iter().flat_map(|(_, p)| p.clone()).collect();
        all.sort_unstable();
        o.len() == 2
            && o.iter().all(|(_, p)| p.len() == PARTITIONS / 2)
            && all == (0..PARTITIONS as u64).collect::<Vec<_>>()
    });
    let sensor_view = get(sensor_a, "/api/v1/cluster");
    assert_eq!(
        sensor_view["data_path"]["link"], "connected",
        "{sensor_view}"
    );

    // Attacks on both sensors, among ordinary traffic: one alert each on the console, naming
    // the sensor and the entity.
    background(syslog_a, "web-01", 2_000);
    background(syslog_b, "web-02", 2_000);
    attack(syslog_a, "web-01", "203.0.113.9", "oracle");
    attack(syslog_b, "web-02", "198.51.100.7", "admin");
    wait_until("two alerts on the console", Duration::from_secs(30), || {
        sigma_alerts(console).len() == 2
    });
    let alerts = sigma_alerts(console);
    let mut sensors: Vec<&str> = alerts
        .iter()
        .map(|a| a["sensor"].as_str().unwrap())
        .collect();
    sensors.sort_unstable();
    assert_eq!(sensors, ["sensor-a", "sensor-b"], "{alerts:?}");
    for a in &alerts {
        assert_eq!(a["title"], "SSH Login Attempt for Non-Existent User");
        let user = a["entity"]["value"].as_str().unwrap();
        assert!(
            user.starts_with("oracle") || user.starts_with("admin"),
            "{a}"
        );
    }
    let filtered = get(console, "/api/v1/alerts?type=sigma&sensor=sensor-b");
    assert_eq!(filtered["meta"]["total"], 1, "{filtered}");

    // Two servers of three stopped (maintenance gone wrong, a partition): the stream is away.
    // The sensor keeps its records in its spool and says so, and sends them when the servers
    // return.
    nats.stop(1);
    nats.stop(2);
    attack(syslog_a, "web-01", "192.0.2.99", "ghost");
    wait_until("sensor-a spooling", Duration::from_secs(30), || {
        get(sensor_a, "/api/v1/health")["components"]["cluster"]["link"] == "spooling"
    });
    let health = get(sensor_a, "/api/v1/health");
    assert_eq!(
        health["components"]["cluster"]["status"], "degraded",
        "{health}"
    );
    assert!(
        health["components"]["cluster"]["spool_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    let outage = Instant::now();
    nats.restart_all(&[1, 2]);
    wait_until("the third alert", Duration::from_secs(60), || {
        sigma_alerts(console).len() == 3
    });
    eprintln!(
        "alert of an attack made during the outage, after the servers' return: {:?}",
        outage.elapsed()
    );
    wait_until("the spool drained", Duration::from_secs(30), || {
        let path = &get(sensor_a, "/api/v1/cluster")["data_path"];
        path["link"] == "connected" && path["spool_bytes"] == 0
    });

    // A detector killed: the other takes its partitions over, from their snapshots.
    det_1.kill();
    let takeover = wait_until(
        "det-2 owns every partition",
        Duration::from_secs(30),
        || {
            let o = owners(console);
            o.len() == 1 && o[0].0 == "det-2" && o[0].1.len() == PARTITIONS
        },
    );
    eprintln!("takeover of a killed detector's partitions: {takeover:?}");
    background(syslog_a, "web-01", 1_000);
    attack(syslog_a, "web-01", "192.0.2.55", "guest");
    wait_until("the fourth alert", Duration::from_secs(30), || {
        sigma_alerts(console).len() == 4
    });

    // A NATS server killed: an attack still reaches the console.
    nats.kill(0);
    attack(syslog_b, "web-02", "192.0.2.77", "test");
    let t = Instant::now();
    while sigma_alerts(console).len() < 5 {
        assert!(
            t.elapsed() < Duration::from_secs(45),
            "the fifth alert: not within 45 s; the console's alerts: {}; sensor-b's stats: {}; \
             its last events: {}; sensor-b: {}; the detector: {}; the console: {}; the nodes' logs:{}",
            alert_lines(console),
            get(sensor_b, "/api/v1/stats"),
            get(sensor_b, "/api/v1/events?limit=4"),
            get(sensor_b, "/api/v1/cluster")["data_path"],
            get(det_2, "/api/v1/cluster")["data_path"],
            get(console, "/api/v1/cluster")["data_path"],
            log_tails()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    nats.restart(0);

    // Every attack alerted once, with its three attempts; nothing the sensors published was
    // dropped, and everything was scored.
    std::thread::sleep(Duration::from_secs(2));
    let alerts = sigma_alerts(console);
    assert_eq!(alerts.len(), 5, "{alerts:?}");
    for a in &alerts {
        assert_eq!(a["count"], 3, "{a}");
    }
    for api in [sensor_a, sensor_b] {
        let path = &get(api, "/api/v1/cluster")["data_path"];
        assert_eq!(path["records_dropped"], 0, "{path}");
        assert_eq!(path["spool_bytes"], 0, "{path}");
        assert_eq!(path["records_published"], path["records_queued"], "{path}");
    }
    // The console's health, once the servers have settled after the outage: a node with no
    // input is not degraded for it.
    wait_until("the console healthy", Duration::from_secs(30), || {
        http(console, "GET", "/api/v1/health", "").0 == 200
    });
    let health = get(console, "/api/v1/health");
    assert_eq!(health["components"]["cluster"]["nodes"], 4, "{health}");
    assert_eq!(
        health["components"]["detection"]["workers"][0]["status"],
        "idle"
    );
}

/// A rule the console uploads: one line holding the canary word matches it.
const CANARY: &str = "title: Fleet canary\nid: 6c1f2d4e-9a0b-4c3d-8e7f-1a2b3c4d5e6f\nstatus: test\nlogsource:\n    product: linux\n    service: sshd\ndetection:\n    keywords:\n        - 'canary-91d4'\n    condition: keywords\nlevel: high\n";
const CANARY_ID: &str = "6c1f2d4e-9a0b-4c3d-8e7f-1a2b3c4d5e6f";

fn canary(port: u16, host: &str, n: usize) {
    let lines: String = (0..n)
        .map(|i| {
            format!(
                "<38>{} {host} sshd[77{i}]: probe canary-91d4 from 10.9.9.{i}\n",
                stamp(-1)
            )
        })
        .collect();
    send_lines(port, &lines);
}

fn alerts_titled(console: u16, title: &str) -> Vec<Value> {
    get(console, "/api/v1/alerts?limit=100")["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["title"] == title)
        .cloned()
        .collect()
}

#[test]
fn content_set_on_the_console_acts_on_every_node_and_searches_ask_every_sensor() {
    let _alone = ONE_FLEET_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let mut nats = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let (syslog_a, syslog_b) = (free_port(), free_port());
    let (sensor_a_node, sensor_a) =
        node(dir.path(), &nats, "sensor-a", &["sensor"], Some(syslog_a));
    let (sensor_b_node, sensor_b) =
        node(dir.path(), &nats, "sensor-b", &["sensor"], Some(syslog_b));
    let (det_node, det) = node(dir.path(), &nats, "det-1", &["detector"], None);
    let (console_node, console) = node(dir.path(), &nats, "console", &["console"], None);
    wait_until("the partitions owned", Duration::from_secs(30), || {
        let o = owners(console);
        o.len() == 1 && o[0].1.len() == PARTITIONS
    });

    // Content is set on the console only: a sensor refuses it, naming where it goes.
    let upload = serde_json::json!({ "yaml": CANARY }).to_string();
    let (status, body) = http(sensor_a, "POST", "/api/v1/sigma/rules", &upload);
    assert_eq!(status, 409, "{body}");
    assert_eq!(json(&body)["error"], "set_on_console", "{body}");

    // A rule uploaded on the console reaches the sensors (which match it) and the detector
    // (which names it), and its alert names the sensor.
    let (status, body) = http(console, "POST", "/api/v1/sigma/rules", &upload);
    assert_eq!(status, 201, "{body}");
    let shared = wait_until("the rule on every node", Duration::from_secs(20), || {
        [sensor_a, sensor_b, det]
            .iter()
            .all(|&api| http(api, "GET", &format!("/api/v1/sigma/rules/{CANARY_ID}"), "").0 == 200)
    });
    eprintln!("a rule uploaded on the console live on every node after {shared:?}");
    canary(syslog_b, "web-02", 1);
    wait_until("the canary's alert", Duration::from_secs(30), || {
        !alerts_titled(console, "Fleet canary").is_empty()
    });
    let first = alerts_titled(console, "Fleet canary");
    assert_eq!(first[0]["sensor"], "sensor-b", "{first:?}");
    assert_eq!(
        get(det, "/api/v1/cluster")["data_path"]["content_unresolved"],
        0
    );

    // The series the detector keeps, seen on the console: the rule's fire and the ensemble's
    // scores, asked of the detectors (the console scores nothing itself).
    let rule_timeline = format!("/api/v1/sigma/rules/{CANARY_ID}/timeline");
    wait_until(
        "the canary's fire on the console",
        Duration::from_secs(10),
        || get(console, &rule_timeline)["total"] == 1,
    );
    let fires = get(console, &rule_timeline);
    assert_eq!(
        fires["detectors"]["asked"],
        serde_json::json!(["det-1"]),
        "{fires}"
    );
    assert_eq!(fires["detectors"]["partial"], false, "{fires}");
    // The catalogue's counts agree with the timeline: the list and the rule's page, asked of
    // the detectors with the same filters.
    let listed = get(console, "/api/v1/sigma/rules?q=fleet%20canary");
    assert_eq!(listed["items"][0]["fires_24h"], 1, "{listed}");
    assert_eq!(
        listed["meta"]["detectors"]["asked"],
        serde_json::json!(["det-1"]),
        "{listed}"
    );
    let one = get(console, &format!("/api/v1/sigma/rules/{CANARY_ID}"));
    assert_eq!(one["fires_24h"], 1, "{one}");
    assert_eq!(one["detectors"]["partial"], false, "{one}");
    let scored = || {
        let t = get(console, "/api/v1/anomaly/timeline?range=1h");
        let events: u64 = t["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["events"].as_u64().unwrap())
            .sum();
        (events, t)
    };
    wait_until(
        "the detector's scores on the console",
        Duration::from_secs(10),
        || scored().0 > 0,
    );
    let (_, scores) = scored();
    assert_eq!(scores["detectors"]["partial"], false, "{scores}");

    // An exception made on the console holds the rule back on the detector.
    let exception = serde_json::json!({
        "detector": CANARY_ID,
        "conditions": {"hosts": ["web-03"]},
        "reason": "the fleet test's own probe host",
        "author": "fleet test",
    });
    let (status, body) = http(
        console,
        "POST",
        "/api/v1/exceptions",
        &exception.to_string(),
    );
    assert_eq!(status, 201, "{body}");
    let id = json(&body)["id"].as_str().unwrap().to_string();
    wait_until(
        "the exception on the detector",
        Duration::from_secs(20),
        || http(det, "GET", &format!("/api/v1/exceptions/{id}"), "").0 == 200,
    );
    canary(syslog_a, "web-03", 3);
    wait_until("the exception's hits", Duration::from_secs(30), || {
        get(det, &format!("/api/v1/exceptions/{id}"))["hits"].as_u64() >= Some(1)
    });
    assert!(
        alerts_titled(console, "Fleet canary")
            .iter()
            .all(|a| a["sensor"] != "sensor-a"),
        "an excepted host raised an alert"
    );

    // An indicator file dropped into the console's folder reaches the sensors and the
    // detector: an address in it alerts.
    let ioc_dir = dir.path().join("data-console").join("ioc");
    std::fs::write(ioc_dir.join("fleet-test.txt"), "192.0.2.200\n").unwrap();
    wait_until(
        "the indicator on the sensor",
        Duration::from_secs(30),
        || {
            get(sensor_a, "/api/v1/ioc")["indicators"].as_u64() >= Some(1)
                && get(det, "/api/v1/ioc")["indicators"].as_u64() >= Some(1)
        },
    );
    send_lines(
        syslog_a,
        &format!(
            "<38>{} web-01 sshd[5150]: Failed password for root from 192.0.2.200 port 40022 ssh2\n",
            stamp(-1)
        ),
    );
    wait_until("the indicator's alert", Duration::from_secs(30), || {
        get(console, "/api/v1/alerts?type=ioc")["meta"]["total"].as_u64() >= Some(1)
    });

    // The console's searches ask both sensors and merge their events, each named by sensor.
    let found = get(console, "/api/v1/events?q=canary-91d4&limit=10");
    let sensors = &found["meta"]["sensors"];
    assert_eq!(sensors["partial"], false, "{found}");
    assert_eq!(
        sensors["asked"],
        serde_json::json!(["sensor-a", "sensor-b"])
    );
    let items = found["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{found}");
    let mut from: Vec<&str> = items
        .iter()
        .map(|e| e["sensor"].as_str().unwrap())
        .collect();
    from.dedup();
    assert!(
        from.contains(&"sensor-a") && from.contains(&"sensor-b"),
        "{from:?}"
    );
    let received: Vec<i64> = items
        .iter()
        .map(|e| e["received_ns"].as_i64().unwrap())
        .collect();
    assert!(
        received.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {received:?}"
    );
    let hits = get(console, "/api/v1/entities/search?q=192.0.2.200");
    let uuid = hits["items"][0]["uuid"].as_str().unwrap().to_string();
    let timeline = get(console, &format!("/api/v1/entities/{uuid}/timeline"));
    assert_eq!(
        timeline["events"].as_array().unwrap().len(),
        1,
        "{timeline}"
    );
    assert_eq!(timeline["events"][0]["sensor"], "sensor-a");
    assert_eq!(timeline["sensors"]["partial"], false);
    // Its baseline lives on the detector that owns its partition: the console finds it there,
    // still warming up (with its progress), as a node alone would answer.
    let (status, body) = http(
        console,
        "GET",
        &format!("/api/v1/entities/{uuid}/baseline"),
        "",
    );
    let baseline = json(&body);
    assert_eq!(
        (status, baseline["status"].as_str()),
        (404, Some("warming_up")),
        "{body}"
    );
    assert_eq!(baseline["event_count"], 1, "{body}");
    let (status, body) = http(
        console,
        "POST",
        "/api/v1/hunt",
        r#"{"query": "192.0.2.200"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let hunt = json(&body);
    assert_eq!(
        (hunt["mode"].as_str(), hunt["total"].as_u64()),
        (Some("entity"), Some(1))
    );

    // A sensor gone: the console's answer is partial and names it.
    sensor_b_node.kill();
    let found = get(console, "/api/v1/events?q=canary-91d4&limit=10");
    let sensors = &found["meta"]["sensors"];
    assert_eq!(sensors["partial"], true, "{found}");
    assert_eq!(sensors["missing"][0]["sensor"], "sensor-b", "{found}");
    assert_eq!(found["items"].as_array().unwrap().len(), 3, "{found}");

    // Everything restarted, the servers too: the state resumes. The detector takes its
    // partitions from their snapshots (not from the stream's start), the exception and its
    // hits are where they were, and it still holds the rule back.
    std::thread::sleep(Duration::from_secs(3)); // a snapshot and a save of the hits after the last records
    let hits_before = get(det, &format!("/api/v1/exceptions/{id}"))["hits"]
        .as_u64()
        .unwrap();
    let alerts_before = get(console, "/api/v1/alerts?limit=1")["meta"]["total"].clone();
    let scored_before = get(det, "/api/v1/cluster")["data_path"]["records_scored"]
        .as_u64()
        .unwrap();
    for n in [sensor_a_node, det_node, console_node] {
        n.stop();
    }
    for i in 0..3 {
        nats.stop(i);
    }
    nats.restart_all(&[0, 1, 2]);
    let restart = |name: &str, api: u16| {
        Service::start(dir.path(), &dir.path().join(format!("{name}.toml")), api)
    };
    let (_sensor_a, _det, _console) = (
        restart("sensor-a", sensor_a),
        restart("det-1", det),
        restart("console", console),
    );
    wait_until(
        "the partitions owned again",
        Duration::from_secs(60),
        || {
            let o = owners(console);
            o.len() == 1 && o[0].1.len() == PARTITIONS
        },
    );
    let path = get(det, "/api/v1/cluster")["data_path"].clone();
    let resumed = path["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["sequence"].as_u64() > Some(0))
        .count();
    assert!(resumed > 0, "no partition resumed from a snapshot: {path}");
    // From the stream's start it would score all of them again.
    std::thread::sleep(Duration::from_secs(1));
    let scored = get(det, "/api/v1/cluster")["data_path"]["records_scored"]
        .as_u64()
        .unwrap();
    assert!(
        scored < scored_before,
        "{scored} records scored again of {scored_before}: not resumed from the snapshots"
    );
    assert_eq!(
        get(console, "/api/v1/alerts?limit=1")["meta"]["total"],
        alerts_before
    );
    assert_eq!(
        get(det, &format!("/api/v1/exceptions/{id}"))["hits"].as_u64(),
        Some(hits_before),
        "the exception's hits survive a restart"
    );
    canary(syslog_a, "web-03", 1);
    wait_until(
        "the exception holding again",
        Duration::from_secs(30),
        || get(det, &format!("/api/v1/exceptions/{id}"))["hits"].as_u64() > Some(hits_before),
    );
    assert!(
        alerts_titled(console, "Fleet canary")
            .iter()
            .all(|a| a["sensor"] != "sensor-a")
    );
}

/// A login line of `user` from `address` at `at_ns`, on host `srv-01`.
fn login_at(at_ns: i64, user: &str, address: &str) -> String {
    format!(
        "<38>{} srv-01 sshd[5000]: Accepted password for {user} from {address} port 50000 ssh2\n",
        watchpost_normalize::Rfc3339(at_ns)
    )
}

#[test]
fn a_verdict_on_the_console_moves_the_thresholds_of_the_detectors_that_own_them() {
    let _alone = ONE_FLEET_AT_A_TIME
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let nats = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let syslog = free_port();
    let ueba = "ueba.warmup_days = 2.0\nueba.warmup_min_events = 20";
    let (_sensor, sensor) = node_with(
        dir.path(),
        &nats,
        "sensor-a",
        &["sensor"],
        Some(syslog),
        ueba,
    );
    let (_det, det) = node_with(dir.path(), &nats, "det-1", &["detector"], None, ueba);
    let (_console_node, console) =
        node_with(dir.path(), &nats, "console", &["console"], None, ueba);
    wait_until("the partitions owned", Duration::from_secs(30), || {
        owners(console).iter().map(|(_, p)| p.len()).sum::<usize>() == PARTITIONS
    });

    // Fourteen days of 30 users logging in from their own address, ending now; then user07
    // from a network it never used at 03:00 UTC, an hour nobody works (as in
    // tests/detection.rs). Its burst of one address alerts the source's ensemble (in the
    // source's partition); the hour alerts UEBA (in the partition of the entity it names).
    // Which entity's UEBA alerts is not asked: each partition calibrates its own type
    // thresholds on its own share of the entities (docs/cluster.md).
    let now = watchpost_proto::now_ns();
    let (day, hour) = (86_400_000_000_000i64, 3_600_000_000_000i64);
    let start = (now / day - 14) * day;
    let mut lines = String::new();
    for d in 0..14 {
        for slot in 0..16 {
            for u in 0..30 {
                let at = start + d * day + (8 * 3600 + slot * 1800 + u * 20) * 1_000_000_000;
                lines.push_str(&login_at(
                    at,
                    &format!("user{u:02}"),
                    &format!("10.0.{u}.5"),
                ));
            }
        }
    }
    // Yesterday's 03:00 at whatever hour the suite runs: before that day's logins, inside the
    // history. Today's 03:00 (after a night with no events) raised the UEBA alert but left the
    // source's ensemble below its threshold: the test failed whenever it ran after 03:00 UTC.
    let attack = (now / day - 1) * day + 3 * hour;
    lines.push_str(&login_at(attack, "user07", "203.0.113.50"));
    send_lines(syslog, &lines);
    let first_of = |kind: &str| {
        get(console, &format!("/api/v1/alerts?type={kind}&limit=1"))["items"][0].clone()
    };
    let (mut ml, mut ueba) = (Value::Null, Value::Null);
    wait_until(
        "an ml and a UEBA alert on the console",
        Duration::from_secs(60),
        || {
            ml = first_of("ml");
            ueba = first_of("ueba");
            !ml.is_null() && !ueba.is_null()
        },
    );
    assert_eq!(ml["sensor"], "sensor-a", "{ml}");
    assert_eq!(ueba["sensor"], "sensor-a", "{ueba}");
    assert_eq!(
        get(det, "/api/v1/cluster")["data_path"]["feedback_applied"],
        0
    );

    // The analyst's verdicts on the console reach the thresholds that raised the alerts: the
    // source's ensemble in its one partition, the UEBA type's threshold in every partition
    // (each scores its own entities against its own copy).
    for alert in [&ml, &ueba] {
        let id = alert["id"].as_str().unwrap();
        let (status, body) = http(
            console,
            "POST",
            &format!("/api/v1/alerts/{id}/feedback"),
            r#"{"feedback":"fp","note":"known","origin":"dashboard"}"#,
        );
        assert_eq!(status, 204, "{body}");
    }
    let applied = 1 + PARTITIONS as u64;
    wait_until("the verdicts sent", Duration::from_secs(10), || {
        get(console, "/api/v1/cluster")["data_path"]["feedback_sent"].as_u64() >= Some(2)
    });
    wait_until("the verdicts applied", Duration::from_secs(20), || {
        get(det, "/api/v1/cluster")["data_path"]["feedback_applied"].as_u64() >= Some(applied)
    });
    let feedback = get(console, "/api/v1/stats")["feedback"].clone();
    assert_eq!(feedback["by_detector"]["ensemble"]["fp"], 1, "{feedback}");

    // The alerted entity's risk history on the console: the hours the detector that owns its
    // partition scored, named as the sensors name the entity.
    let entity = ueba["entity"]["uuid"].as_str().unwrap();
    let path = format!("/api/v1/entities/{entity}/risk-history?range=7d");
    let mut history = Value::Null;
    wait_until(
        "the risk history from the detector",
        Duration::from_secs(10),
        || {
            history = get(console, &path);
            history["points"].as_array().is_some_and(|p| !p.is_empty())
        },
    );
    assert_eq!(
        history["entity"]["value"], ueba["entity"]["value"],
        "{history}"
    );
    assert_eq!(
        history["entity"]["kind"], ueba["entity"]["kind"],
        "{history}"
    );
    assert!(
        history["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["max_score"].as_f64() > Some(0.0)),
        "{history}"
    );
    // Each partition moved once: no verdict reached a partition twice.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        get(det, "/api/v1/cluster")["data_path"]["feedback_applied"],
        applied
    );
    assert_eq!(
        get(sensor, "/api/v1/cluster")["data_path"]["records_dropped"],
        0
    );
}
