//! The `watchpost` binary as an operator uses it: configuration checks, template mining, and the
//! service itself started on loopback, fed real lines, queried over HTTP, stopped with SIGTERM and
//! started again.

use std::time::{Duration, Instant};

mod common;

use common::{Service, bin, free_port, http, json, send_lines, stamp, syslog_config};

#[test]
fn config_check_names_every_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "dashboard_port = 0\n[ueba.sub_score_weights]\nvolume = 0.9\n",
    )
    .unwrap();
    let out = bin().args(["config", "check"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dashboard_port: port 0 is out of range"),
        "{err}"
    );
    assert!(
        err.contains("ueba.sub_score_weights: the four weights must sum to 1.0"),
        "{err}"
    );

    // A type error, a misspelt key and a line that is not TOML: all three at once, the key
    // with its closest spelling.
    std::fs::write(
        &bad,
        "dashboard_port = \"eighty\"\n[ueba]\nwarmup_dayz = 3\nnot toml at all\n",
    )
    .unwrap();
    let out = bin().args(["config", "check"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TOML parse error at line 4"), "{err}");
    assert!(
        err.contains("dashboard_port: line 1: the string \"eighty\" is not an integer"),
        "{err}"
    );
    assert!(
        err.contains("ueba.warmup_dayz: line 3: unknown key; did you mean `warmup_days`?"),
        "{err}"
    );

    let example = std::path::PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string()),
    )
    .join("deploy/watchpost.toml");
    let out = bin()
        .args(["config", "check"])
        .arg(&example)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn config_show_masks_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.toml");
    std::fs::write(
        &f,
        "api_rate_limit_store_url = \"redis://:pw@127.0.0.1:6379/0\"\n[llm]\nbackend = \"cloud\"\ncloud_provider = \"openai\"\ncloud_model = \"m\"\ncloud_api_key = \"sk-live-123\"\n",
    )
    .unwrap();
    let out = bin()
        .args(["config", "show", "--config"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success());
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        !shown.contains("sk-live-123") && !shown.contains(":pw@"),
        "{shown}"
    );
    assert!(shown.contains("cloud_api_key = \"********\""), "{shown}");
    assert!(shown.contains("dashboard_port = 8080"), "{shown}");
}

#[test]
fn templates_mine_prints_one_line_per_input_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("in.log");
    std::fs::write(
        &f,
        "Accepted password for alice from 10.0.0.5 port 22 ssh2\nAccepted password for bob from 10.0.0.6 port 2222 ssh2\nDisk /dev/sda1 is 91% full\n",
    )
    .unwrap();
    let out = bin().args(["templates", "mine"]).arg(&f).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<(&str, &str)> = text.lines().map(|l| l.split_once('\t').unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].0, lines[1].0, "same template: {text}");
    assert_ne!(lines[0].0, lines[2].0);
    assert!(
        lines[0].0.len() == 16 && lines[0].1.contains("<IP>"),
        "{text}"
    );
}

/// Issue 50, item 10: on raw syslog the header stayed in the template (every line of a host and
/// minute alike) and `Accepted` merged with `Failed`.
#[test]
fn templates_mine_reads_the_message_of_syslog_and_json_lines_as_the_service_does() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("auth.log");
    std::fs::write(
        &f,
        concat!(
            "Nov 21 10:00:01 web-01 sshd[4242]: Accepted publickey for alice from 10.0.0.5 port 50022 ssh2\n",
            "Nov 21 10:00:02 web-01 sshd[4243]: Failed password for bob from 10.0.0.6 port 50023 ssh2\n",
            "<38>Nov 21 10:00:03 web-02 sshd[4244]: Accepted publickey for carol from 10.0.0.7 port 50024 ssh2\n",
            "{\"@timestamp\":\"2026-11-21T10:00:04Z\",\"message\":\"Failed password for dave from 10.0.0.8 port 50025 ssh2\"}\n",
        ),
    )
    .unwrap();
    let out = bin().args(["templates", "mine"]).arg(&f).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<(&str, &str)> = text.lines().map(|l| l.split_once('\t').unwrap()).collect();
    assert_eq!(lines.len(), 4, "{text}");
    for (_, template) in &lines {
        assert!(
            !template.contains("web-0") && !template.contains("sshd[") && !template.contains("Nov"),
            "the header is not part of a template: {text}"
        );
    }
    assert_eq!(lines[0].0, lines[2].0, "both accepted logins: {text}");
    assert_eq!(
        lines[1].0, lines[3].0,
        "both failures, syslog and JSON: {text}"
    );
    assert_ne!(lines[0].0, lines[1].0, "accepted is not failed: {text}");
    assert!(lines[0].1.starts_with("Accepted publickey for"), "{text}");
    // `--raw` mines whole lines, as before.
    let out = bin()
        .args(["templates", "mine", "--raw"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("sshd[<NUM>]"));
}

/// Issue 50, item 9: a rule on a field no sudo line carries validated without a word, and
/// `rules test` then found nothing, also without a word.
#[test]
fn rules_validate_and_test_name_a_field_the_logsource_never_carries() {
    let dir = tempfile::tempdir().unwrap();
    let rule = dir.path().join("sudo_shadow.yml");
    std::fs::write(
        &rule,
        "title: Shadow read through sudo\nid: 5b0e3c1a-8d2f-4e6a-9c7b-1f2e3d4c5b6a\nlogsource:\n  product: linux\n  service: sudo\ndetection:\n  selection:\n    COMMAND|contains: shadow\n  condition: selection\nlevel: high\n",
    )
    .unwrap();
    let out = bin()
        .args(["rules", "validate"])
        .arg(&rule)
        .output()
        .unwrap();
    assert!(out.status.success());
    let line = json(String::from_utf8_lossy(&out.stdout).lines().next().unwrap());
    assert_eq!(line["valid"], true, "{line}");
    let warnings = line["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains("field `COMMAND`") && w.contains("linux/sudo") && w.starts_with("line 8:")
        }),
        "{line}"
    );
    let events = dir.path().join("auth.log");
    std::fs::write(
        &events,
        "<85>Nov 21 10:00:50 srv-05 sudo:    alice : TTY=pts/5 ; PWD=/home/alice ; USER=root ; COMMAND=/bin/cat /etc/shadow\n",
    )
    .unwrap();
    let out = bin()
        .args(["rules", "test", "--rules"])
        .arg(&rule)
        .arg("--events")
        .arg(&events)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: line 8: field `COMMAND`"),
        "{stderr}"
    );
}

/// Issue 50, item 10: `watchpost hunt` asked port 8080 whatever port the service ran on.
#[test]
fn hunt_finds_the_service_through_its_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let svc = Service::start(dir.path(), &config, api);
    send_lines(tcp, &common::invalid_user_lines());
    common::settle(api);
    let out = bin()
        .args(["hunt", "203.0.113.9"])
        .env("WATCHPOST_CONFIG", &config)
        .env_remove("WATCHPOST_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Invalid user oracle"),
        "{stderr}"
    );
    // Told of no configuration (and none installed), it says where the address came from.
    let out = bin()
        .args([
            "hunt",
            "--url",
            &format!("http://127.0.0.1:{}", free_port()),
        ])
        .arg("203.0.113.9")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("(from --url or $WATCHPOST_URL)"),
        "{stderr}"
    );
    drop(svc);
}

#[test]
fn analyze_applies_exceptions_and_counts_what_each_held_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("auth.log");
    let lines: String = (0..6)
        .map(|i| {
            let from = if i < 4 { "198.51.100.7" } else { "203.0.113.50" };
            format!(
                "<38>2026-11-02T10:00:0{i}Z edge-01 sshd[9{i}]: Invalid user probe{i} from {from} port 5000{i}\n"
            )
        })
        .collect();
    std::fs::write(&log, lines).unwrap();
    // The bundled rule these lines match is low: alerting directly here, not only a signal.
    let config = dir.path().join("watchpost.toml");
    std::fs::write(&config, format!("{}\n", common::LOW_ALERTS)).unwrap();
    let run = |extra: &[&str]| {
        let out = bin()
            .arg("analyze")
            .arg(&log)
            .arg("--config")
            .arg(&config)
            .args(extra)
            .output()
            .unwrap();
        let alerts: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(json)
            .collect();
        (out, alerts)
    };
    let (out, before) = run(&[]);
    assert!(out.status.success());
    let sigma = |alerts: &[serde_json::Value]| {
        alerts
            .iter()
            .filter(|a| a["type"] == "sigma")
            .map(|a| a["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sigma(&before), 6, "{before:?}");

    let exceptions = dir.path().join("exceptions.json");
    std::fs::write(
        &exceptions,
        r#"[{"scope": "global", "reason": "our scanner", "author": "ana",
             "conditions": {"source_cidrs": ["198.51.100.0/24"], "log_sources": ["sshd"]}}]"#,
    )
    .unwrap();
    let (out, after) = run(&["--exceptions", exceptions.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(sigma(&after), 2, "only the other address: {after:?}");
    let summary = json(String::from_utf8_lossy(&out.stderr).lines().last().unwrap());
    let held: Vec<u64> = summary["suppressed"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(held, [4], "{summary}");

    // A refused exception stops the run before it starts, naming it and its field.
    std::fs::write(
        &exceptions,
        r#"[{"scope": "global", "reason": "r", "author": "a"}]"#,
    )
    .unwrap();
    let (out, _) = run(&["--exceptions", exceptions.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exception 0: conditions:"), "{err}");
}

fn wait_total(api: u16, query: &str, n: u64) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let (status, body) = http(api, "GET", &format!("/api/v1/events?{query}"), "");
        assert_eq!(status, 200, "{body}");
        let v = json(&body);
        if v["meta"]["total"].as_u64() == Some(n) || t.elapsed() > Duration::from_secs(20) {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_service_ingests_serves_and_keeps_events_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (api, syslog, json_port) = (free_port(), free_port(), free_port());
    let config = dir.path().join("watchpost.toml");
    std::fs::write(
        &config,
        format!(
            "dashboard_port = {api}\nhealth_port = 0\napi_list_rate_limit = \"100000/minute\"\napi_detail_rate_limit = \"100000/minute\"\n[inputs.syslog_udp]\naddress = \"127.0.0.1:{syslog}\"\n[inputs.syslog_tcp]\naddress = \"127.0.0.1:{syslog}\"\n[inputs.json_tcp]\naddress = \"127.0.0.1:{json_port}\"\n[dataplane]\npin_workers = false\n"
        ),
    )
    .unwrap();
    let svc = Service::start(dir.path(), &config, api);

    let (status, body) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["status"], "ok");

    send_lines(
        syslog,
        &format!(
            "<38>{} web-01 sshd[4242]: Accepted publickey for alice from 10.0.0.5 port 50022 ssh2\n",
            stamp(0)
        ),
    );
    send_lines(
        json_port,
        "{\"message\":\"user login\",\"user.name\":\"bob\",\"source.ip\":\"10.0.0.9\",\"event.dataset\":\"app.auth\",\"log.level\":\"error\"}\n",
    );
    let (status, body) = http(
        api,
        "POST",
        "/api/v1/ingest",
        "{\"message\":\"disk almost full\",\"host.name\":\"db-01\"}\n{\"message\":\"second\"}",
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(json(&body)["accepted"], 2);

    let all = wait_total(api, "", 4);
    assert_eq!(
        all["meta"],
        serde_json::json!({"total": 4, "page": 1, "limit": 50})
    );
    let v = wait_total(api, "entity=10.0.0.5", 1);
    assert_eq!(v["items"][0]["source"], "sshd");
    let v = wait_total(api, "severity=high", 1);
    assert_eq!(v["items"][0]["source"], "app.auth");
    let v = wait_total(api, "q=DISK&limit=1&page=1", 1);
    assert_eq!(v["items"][0]["host"], "db-01");
    let page2 = wait_total(api, "limit=3&page=2", 4);
    assert_eq!(
        page2["items"].as_array().unwrap().len(),
        1,
        "the 4th event is on page 2"
    );

    let (status, body) = http(api, "GET", "/api/v1/events?limit=1001", "");
    assert_eq!(status, 422);
    let e = json(&body);
    assert_eq!(
        (e["error"].as_str(), e["parameter"].as_str()),
        (Some("invalid_parameter"), Some("limit"))
    );
    let (status, body) = http(
        api,
        "GET",
        "/api/v1/events?since=2026-11-22T00:00:00Z&until=2026-11-21T00:00:00Z",
        "",
    );
    assert_eq!(status, 422, "{body}");
    let (status, body) = http(api, "GET", "/api/v1/nope", "");
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (404, Some("not_found"))
    );
    let (status, body) = http(api, "POST", "/api/v1/ingest", "[{\"a\":1},");
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (400, Some("invalid_body"))
    );
    let (status, body) = http(api, "GET", "/api/v1/stats", "");
    assert_eq!(status, 200);
    let stats = json(&body);
    assert_eq!(stats["stored_total"], 4);
    assert!(stats["rings"].as_array().unwrap().len() >= 4);
    let (status, body) = http(api, "GET", "/api/v1/config", "");
    assert_eq!(
        (status, json(&body)["dashboard_port"].as_u64()),
        (200, Some(u64::from(api)))
    );

    assert!(svc.stop().success(), "SIGTERM is a clean shutdown");
    let svc = Service::start(dir.path(), &config, api);
    let again = wait_total(api, "", 4);
    assert_eq!(
        again["items"], all["items"],
        "the same events after a restart"
    );
    assert!(svc.stop().success());
}

/// A log written to a file (a unit's journal, `> watchpost.log`) is plain text: colour codes
/// only when standard output is a terminal.
#[test]
fn a_log_written_to_a_file_carries_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(dir.path(), api, Some(free_port()), "");
    let log_path = dir.path().join("watchpost.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let svc = Service::start_logging_to(dir.path(), &config, api, log);
    assert!(svc.stop().success());
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.lines().count() >= 2, "too little logged: {log}");
    assert!(log.contains("INFO"), "{log}");
    assert!(!log.contains('\u{1b}'), "colour codes in a file: {log:?}");
}
