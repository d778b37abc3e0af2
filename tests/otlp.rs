//! OTLP logs in as a collector or an instrumented application sends them: the OpenTelemetry
//! Python SDK's own OTLP/HTTP exporter (protobuf), a collector-style JSON body gzip-compressed,
//! and bodies an exporter must be told not to retry.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where `scripts/setup --test` installs the OpenTelemetry Python SDK.
fn otel_python_path() -> std::path::PathBuf {
    let cache = std::env::var_os("WATCHPOST_CACHE_DIR").map_or_else(
        || std::path::PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/watchpost"),
        std::path::PathBuf::from,
    );
    cache.join("python-otel")
}

/// `POST path` with a binary body; status, head and body bytes.
fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let at = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&out[..at]).to_string();
    (head[9..12].parse().unwrap(), head, out[at + 4..].to_vec())
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .arg("-c")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out.stdout
}

#[test]
fn the_opentelemetry_python_exporter_delivers_logs_that_become_events() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(dir.path(), api, None, "");
    let _svc = Service::start(dir.path(), &config, api);
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/otlp_export.py"
        ))
        .arg(format!("http://127.0.0.1:{api}/v1/logs"))
        .arg("20")
        .env("PYTHONPATH", otel_python_path())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the exporter failed (scripts/setup --test installs it): {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace_id = stdout.lines().next().unwrap().trim().to_string();
    assert_eq!(trace_id.len(), 32);

    // Acknowledged means durable: all 20 are counted, then stored as events of the service.
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(stats["api"]["otlp_records"], 20, "{stats}");
    let page = wait_for(api, "/api/v1/events?source=sshd-gateway&limit=50", |v| {
        v["items"].as_array().is_some_and(|i| i.len() == 20)
    });
    let e = &page["items"][0];
    assert_eq!(e["host"], "bastion-01");
    assert_eq!(e["severity"], 3, "WARNING is medium: {e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("Failed password for root from 203.0.113."),
        "{e}"
    );
    assert_eq!(e["attributes"]["trace.id"], trace_id.as_str());
    assert_eq!(e["attributes"]["span.id"].as_str().unwrap().len(), 16);
    assert_eq!(e["attributes"]["user.name"], "root");
    assert_eq!(e["attributes"]["log.level"], "WARN");
    // Entities as for any JSON event: the user attribute, the address in the message.
    let by_user = json(&http(api, "GET", "/api/v1/events?entity=root&limit=50", "").1);
    assert_eq!(by_user["items"].as_array().unwrap().len(), 20, "{by_user}");
    let by_ip = json(&http(api, "GET", "/api/v1/events?entity=203.0.113.7", "").1);
    assert_eq!(by_ip["items"].as_array().unwrap().len(), 1, "{by_ip}");
}

#[test]
fn gzip_json_is_taken_and_bad_bodies_get_a_status_the_exporter_does_not_retry() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(dir.path(), api, None, "");
    let _svc = Service::start(dir.path(), &config, api);

    let now = watchpost_proto::now_ns();
    let body = format!(
        r#"{{"resourceLogs":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"payments"}}}}]}},
        "scopeLogs":[{{"logRecords":[{{"timeUnixNano":"{now}","severityNumber":17,"severityText":"ERROR",
        "body":{{"stringValue":"card processor timeout"}},
        "attributes":[{{"key":"client.address","value":{{"stringValue":"198.51.100.23"}}}}]}}]}}]}}]}}"#
    );
    let (status, head, answer) = post(
        api,
        "/v1/logs",
        &[
            ("Content-Type", "application/json"),
            ("Content-Encoding", "gzip"),
        ],
        &gzip(body.as_bytes()),
    );
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json")
    );
    assert_eq!(answer, b"{}");
    let page = wait_for(api, "/api/v1/events?source=payments", |v| {
        v["items"].as_array().is_some_and(|i| i.len() == 1)
    });
    assert_eq!(page["items"][0]["severity"], 4, "ERROR is high");
    assert_eq!(page["items"][0]["message"], "card processor timeout");

    // A body that is not protobuf: 400 with a google.rpc.Status (code 3) in protobuf.
    let (status, head, answer) = post(
        api,
        "/v1/logs",
        &[("Content-Type", "application/x-protobuf")],
        b"\xff\xff\xff\xff",
    );
    assert_eq!(status, 400, "{head}");
    assert!(head.to_ascii_lowercase().contains("application/x-protobuf"));
    assert_eq!(&answer[..2], &[0x08, 3], "{answer:?}");
    // Another encoding: 415. A gzip bomb: 413, however small it was on the wire.
    let (status, _, _) = post(api, "/v1/logs", &[("Content-Type", "text/plain")], b"hi");
    assert_eq!(status, 415);
    let bomb = gzip(&vec![b' '; 40 << 20]);
    assert!(bomb.len() < 1 << 20);
    let (status, _, answer) = post(
        api,
        "/v1/logs",
        &[
            ("Content-Type", "application/json"),
            ("Content-Encoding", "gzip"),
        ],
        &bomb,
    );
    assert_eq!(status, 413);
    assert!(String::from_utf8_lossy(&answer).contains("api_max_body_bytes"));

    // Only the good record was accepted; the refusals are counted by status.
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(stats["api"]["otlp_records"], 1);
    let metrics = http(api, "GET", "/metrics", "").1;
    for status in ["200", "400", "413", "415"] {
        let line = format!(
            "watchpost_api_requests_total{{method=\"POST\",route=\"/v1/logs\",status=\"{status}\"}} 1"
        );
        assert!(metrics.contains(&line), "{line} missing");
    }
}
