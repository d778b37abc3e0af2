//! The listeners' bounds, as a client meets them: a half-sent request is cut at the header-read
//! timeout, a client over its connection cap is answered 503 before its request is read, and the
//! requests the HTTP library refuses itself (a 100 KB query string, a 200 KB header, bytes that
//! are not HTTP) come back in the API's error shape with the security headers.

mod common;

use common::{Service, free_port, header, http, json, syslog_config};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sends `raw` and reads the answer to the end (the server closes these connections).
fn raw_exchange(api: u16, raw: &[u8]) -> (u16, String, serde_json::Value) {
    let mut s = TcpStream::connect(("127.0.0.1", api)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, head.to_string(), json(body))
}

fn config(dir: &std::path::Path, api: u16) -> std::path::PathBuf {
    syslog_config(
        dir,
        api,
        None,
        "api_header_read_timeout_seconds = 1\napi_max_connections_per_client = 4\nws_max_connections = 4\n",
    )
}

#[test]
fn requests_the_http_library_refuses_come_back_in_the_error_shape() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let _svc = Service::start(dir.path(), &config(dir.path(), api), api);
    let long = format!(
        "GET /api/v1/events?q={} HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\n\r\n",
        "a".repeat(100_000)
    );
    let big_header = format!(
        "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\nX-Big: {}\r\n\r\n",
        "b".repeat(500_000)
    );
    for (raw, status, code) in [
        (long.as_bytes(), 414, "uri_too_long"),
        (big_header.as_bytes(), 431, "headers_too_large"),
        (
            &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n"[..],
            400,
            "bad_request",
        ),
    ] {
        let (got, head, body) = raw_exchange(api, raw);
        assert_eq!(
            (got, body["error"].as_str()),
            (status, Some(code)),
            "{head}\n{body}"
        );
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        assert_eq!(
            header(&head, "x-content-type-options"),
            Some("nosniff"),
            "{head}"
        );
        assert!(header(&head, "content-security-policy").is_some(), "{head}");
    }
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(
        stats["api"]["connections"]["refused_malformed"], 3,
        "{}",
        stats["api"]
    );
    // The memory budget is reported beside the resident memory, part by part.
    let memory = &stats["memory"];
    assert!(memory["resident_bytes"].as_u64() > Some(0), "{memory}");
    let parts = memory["parts"].as_array().unwrap();
    let sum: u64 = parts.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
    assert_eq!(memory["budget_bytes"].as_u64(), Some(sum), "{memory}");
    assert!(
        parts.iter().any(|p| p["part"] == "websocket queues"),
        "{memory}"
    );
}

#[test]
fn a_half_sent_request_is_cut_at_the_header_read_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let _svc = Service::start(dir.path(), &config(dir.path(), api), api);
    let mut slow = TcpStream::connect(("127.0.0.1", api)).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    slow.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let t = Instant::now();
    let mut out = Vec::new();
    let _ = slow.read_to_end(&mut out);
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "held for {:?}",
        t.elapsed()
    );
    // A kept-alive connection that goes quiet after its answer is closed the same way.
    let mut idle = TcpStream::connect(("127.0.0.1", api)).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        idle,
        "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\n\r\n"
    )
    .unwrap();
    let t = Instant::now();
    let mut answer = Vec::new();
    let _ = idle.read_to_end(&mut answer);
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "kept for {:?}",
        t.elapsed()
    );
}

#[test]
fn a_client_over_its_connection_cap_is_answered_503_before_its_request_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let _svc = Service::start(dir.path(), &config(dir.path(), api), api);
    // Served once: the accept loop runs (and the start-up probe's connection is gone).
    assert_eq!(http(api, "GET", "/api/v1/health", "").0, 200);
    std::thread::sleep(Duration::from_millis(100));
    // Four connections held open (each sends a request slowly, inside the timeout)...
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", api)).unwrap();
            s.write_all(b"GET /api/v1/health HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // ...and the fifth is refused at once, in the error shape.
    let (status, head, body) = raw_exchange(
        api,
        format!("GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\n\r\n").as_bytes(),
    );
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("too_many_connections")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("api_max_connections_per_client")
    );
    assert_eq!(header(&head, "retry-after"), Some("1"), "{head}");
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    let (code, text) = http(api, "GET", "/api/v1/stats", "");
    assert_eq!(
        code, 200,
        "served again once the held connections closed: {text}"
    );
    let v = json(&text);
    assert_eq!(
        v["api"]["connections"]["refused_per_client"], 1,
        "{}",
        v["api"]
    );
}
