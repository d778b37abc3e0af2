//! Request bodies as a client meets their bounds (issue 51): a stalled or trickling body is cut
//! at its deadline and gives its slot back, one address cannot hold every ingest slot, a body
//! declared longer than its route takes is refused before a byte is read (`Expect:
//! 100-continue` included), what bodies hold stays inside the memory budget `/stats` reports, a
//! dense body is refused by its count of events, and requests with two `Host` headers are 400.

mod common;

use common::{Service, free_port, http, json, syslog_config};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A connection to the API from loopback address `from` (127.0.0.x: the whole block is local).
fn connect_from(api: u16, from: [u8; 4]) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from((from, 0)).into()).unwrap();
    socket
        .connect(&SocketAddr::from(([127, 0, 0, 1], api)).into())
        .unwrap();
    let s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads one answer: its status, head and JSON body (the connection may stay open).
fn answer(s: &mut TcpStream) -> (u16, String, serde_json::Value) {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = s.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&out);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= len {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    (status, head.to_string(), body)
}

fn start(dir: &std::path::Path, extra: &str) -> (Service, u16) {
    let api = free_port();
    let config = syslog_config(
        dir,
        api,
        None,
        &format!(
            "api_header_read_timeout_seconds = 5\n{}{extra}",
            if extra.contains("api_body_read_timeout_seconds") {
                ""
            } else {
                "api_body_read_timeout_seconds = 3\n"
            }
        ),
    );
    (Service::start(dir, &config, api), api)
}

/// Sends the head of a `POST path` declaring `length` bytes, and `part` of its body.
fn begin(api: u16, from: [u8; 4], path: &str, length: u64, part: &[u8]) -> TcpStream {
    let mut s = connect_from(api, from);
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    .unwrap();
    s.write_all(part).unwrap();
    s
}

fn ingest_from(api: u16, from: [u8; 4], body: &str) -> (u16, serde_json::Value) {
    let mut s = begin(
        api,
        from,
        "/api/v1/ingest",
        body.len() as u64,
        body.as_bytes(),
    );
    let (status, _, body) = answer(&mut s);
    (status, body)
}

#[test]
fn stalled_bodies_from_one_address_neither_hold_ingest_nor_outlive_their_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(dir.path(), "");
    let one = [127, 0, 0, 2];
    // Sixteen half-sent ingest bodies from one address: four are taken (and stall), the rest
    // are refused at once; before, all sixteen held every ingest slot for minutes.
    let started = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..16)
        .map(|_| begin(api, one, "/api/v1/ingest", 10_000, br#"[{"message":"part"#))
        .collect();
    let mut refused = 0;
    for s in &mut stalled {
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut peek = [0u8; 12];
        if s.read(&mut peek).is_ok_and(|n| n >= 12) && &peek[9..12] == b"429" {
            refused += 1;
        }
    }
    assert_eq!(refused, 12, "per-client cap: four bodies at once");
    // Another address ingests meanwhile.
    let (status, body) = ingest_from(api, [127, 0, 0, 3], r#"{"message":"still answered"}"#);
    assert_eq!(status, 202, "{body}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The four stalled bodies are cut at the deadline (3 s), 408 in the error shape.
    let mut timed_out = 0;
    for s in &mut stalled {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (status, _, body) = answer(s);
        if status == 408 {
            assert_eq!(body["error"], "body_timeout", "{body}");
            timed_out += 1;
        }
    }
    assert_eq!(timed_out, 4);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // Their slots are free again.
    let (status, body) = ingest_from(api, one, r#"{"message":"after"}"#);
    assert_eq!(status, 202, "{body}");
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    let bodies = &stats["api"]["bodies"];
    assert_eq!(bodies["timed_out"], 4, "{bodies}");
    assert_eq!(bodies["per_client"], 12, "{bodies}");
}

#[test]
fn stalled_bodies_from_many_addresses_hold_no_ingest_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(dir.path(), "api_ingest_max_in_flight = 16\n");
    // One half-sent body from each of twenty addresses: more than api_ingest_max_in_flight.
    let _stalled: Vec<TcpStream> = (0..20)
        .map(|i| {
            begin(
                api,
                [127, 0, 1, 20 + i],
                "/api/v1/ingest",
                10_000,
                br#"[{"message":"part"#,
            )
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // Before, each held an ingest slot while it waited: every other ingest got 503 `busy`.
    let (status, body) = ingest_from(api, [127, 0, 0, 3], r#"{"message":"still answered"}"#);
    assert_eq!(status, 202, "{body}");
}

#[test]
fn a_trickling_body_is_cut_below_the_minimum_rate() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(
        dir.path(),
        "api_body_read_timeout_seconds = 60\napi_body_min_bytes_per_second = 1000\n",
    );
    // Ten bytes a second against a floor of 1,000: cut after the 5 s grace, not at 60 s.
    let started = Instant::now();
    let mut s = begin(api, [127, 0, 0, 4], "/api/v1/ingest", 100_000, b"[");
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || {
            for _ in 0..100 {
                if w.write_all(b"{\"a\":1},").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(800));
            }
        })
    };
    let (status, _, body) = answer(&mut s);
    assert_eq!(
        (status, body["error"].as_str()),
        (408, Some("body_timeout")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("api_body_min_bytes_per_second"),
        "{body}"
    );
    let took = started.elapsed();
    assert!(
        (Duration::from_secs(4)..Duration::from_secs(15)).contains(&took),
        "{took:?}"
    );
    drop(s);
    let _ = writer.join();
}

#[test]
fn a_body_declared_longer_than_its_route_takes_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(dir.path(), "");
    for (path, length) in [
        // Rule uploads take 1 MiB, commands 64 KiB, ingest api_max_body_bytes (16 MiB).
        ("/api/v1/sigma/rules", 16_000_000u64),
        (
            "/api/v1/alerts/0190a000-0000-7000-8000-000000000000/feedback",
            100_000,
        ),
        ("/api/v1/ingest", 200_000_000),
        ("/api/v1/ingest", 1_000_000_000_000),
        // 2^64-1: hyper itself refuses it (as 431); the client is told 413 all the same.
        ("/api/v1/ingest", u64::MAX),
    ] {
        let started = Instant::now();
        let mut s = connect_from(api, [127, 0, 0, 5]);
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\nExpect: 100-continue\r\nContent-Length: {length}\r\n\r\n"
        )
        .unwrap();
        let (status, head, body) = answer(&mut s);
        assert_eq!(
            (status, body["error"].as_str()),
            (413, Some("payload_too_large")),
            "{path}: {head}\n{body}"
        );
        assert!(!head.contains("100 Continue"), "{path}: {head}");
        assert!(started.elapsed() < Duration::from_secs(2), "{path}");
    }
    // The same, the header split between two packets (it is recognised across reads).
    let mut s = connect_from(api, [127, 0, 0, 5]);
    s.set_nodelay(true).unwrap();
    write!(
        s,
        "POST /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\nContent-Length: 1844674407"
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(b"3709551615\r\n\r\n").unwrap();
    let (status, head, _) = answer(&mut s);
    assert_eq!(status, 413, "{head}");
    // Two Host headers: 400, whichever is first.
    let mut s = connect_from(api, [127, 0, 0, 5]);
    write!(
        s,
        "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\nHost: evil.example\r\n\r\n"
    )
    .unwrap();
    let (status, _, body) = answer(&mut s);
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("host_duplicate")),
        "{body}"
    );
}

#[test]
fn bodies_in_flight_stay_inside_their_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    // 8 MiB for bodies, each budgeted at twice what has arrived of it (a step ahead): two
    // half-sent bodies of 1.5 MB hold almost all of it, a third cannot start.
    let (_svc, api) = start(
        dir.path(),
        "api_max_body_bytes = 2000000\napi_body_memory_mb = 8\napi_body_read_timeout_seconds = 10\napi_body_min_bytes_per_second = 0\n",
    );
    let half = vec![b' '; 1_500_000];
    let _a = begin(api, [127, 0, 0, 6], "/api/v1/ingest", 2_000_000, &half);
    let _b = begin(api, [127, 0, 0, 7], "/api/v1/ingest", 2_000_000, &half);
    std::thread::sleep(Duration::from_millis(500));
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    let held = stats["api"]["bodies"]["held_bytes"].as_u64().unwrap();
    assert!((2 * 2 * 1_500_000..=8 << 20).contains(&held), "{held}");
    let mut c = begin(api, [127, 0, 0, 8], "/api/v1/ingest", 2_000_000, b"[");
    let (status, head, body) = answer(&mut c);
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("busy")),
        "{head}\n{body}"
    );
    assert!(head.to_ascii_lowercase().contains("retry-after"), "{head}");
    // Small requests still pass, and the budget is what /stats reports for request bodies.
    let (status, body) = ingest_from(api, [127, 0, 0, 9], r#"{"message":"small"}"#);
    assert_eq!(status, 202, "{body}");
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    let part = stats["memory"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == "request bodies")
        .cloned()
        .unwrap();
    assert_eq!(part["bytes"], 8u64 << 20, "{part}");
    assert_eq!(stats["api"]["bodies"]["busy"], 1, "{}", stats["api"]);
}

#[test]
fn a_body_that_stalls_after_a_fast_start_is_cut_within_two_rate_windows() {
    let dir = tempfile::tempdir().unwrap();
    // The deadline is far (60 s); the rate (1 KiB/s over each 5 s window) cuts it.
    let (_svc, api) = start(
        dir.path(),
        "api_body_read_timeout_seconds = 60\napi_body_min_bytes_per_second = 1024\n",
    );
    let started = Instant::now();
    let mut s = begin(
        api,
        [127, 0, 0, 12],
        "/api/v1/ingest",
        16_000_000,
        &vec![b' '; 4_000_000],
    );
    let (status, _, body) = answer(&mut s);
    let took = started.elapsed();
    assert_eq!(
        (status, body["error"].as_str()),
        (408, Some("body_timeout")),
        "{body}"
    );
    // Before, its average since the start (4 MB in a moment) let it stay until the deadline.
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(12),
        "{took:?}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("0 bytes in the last"),
        "{body}"
    );
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(stats["api"]["bodies"]["held_bytes"], 0, "{}", stats["api"]);
}

#[test]
fn a_dense_body_is_refused_by_its_count_of_events() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(dir.path(), "api_ingest_max_events = 1000\n");
    let dense = format!("[{}{{}}]", "{},".repeat(1000));
    let (status, body) = ingest_from(api, [127, 0, 0, 10], &dense);
    assert_eq!(
        (status, body["error"].as_str()),
        (413, Some("too_many_events")),
        "{body}"
    );
    assert_eq!(body["limit"], 1000, "{body}");
    let lines = "{}\n".repeat(1001);
    let (status, body) = ingest_from(api, [127, 0, 0, 10], &lines);
    assert_eq!(status, 413, "{body}");
    // At the bound, accepted.
    let fits = format!("[{}{{}}]", "{},".repeat(999));
    let (status, body) = ingest_from(api, [127, 0, 0, 10], &fits);
    assert_eq!(
        (status, body["accepted"].as_u64()),
        (202, Some(1000)),
        "{body}"
    );
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(
        stats["api"]["bodies"]["too_many_events"], 2,
        "{}",
        stats["api"]["bodies"]
    );
}

/// An OTLP/HTTP protobuf request of `records` empty log records: 2 bytes each on the wire.
fn empty_otlp_records(records: usize) -> Vec<u8> {
    fn field(number: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![number << 3 | 2];
        let mut n = payload.len();
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n > 0 { b | 0x80 } else { b });
            if n == 0 {
                break;
            }
        }
        out.extend_from_slice(payload);
        out
    }
    // ExportLogsServiceRequest.resource_logs[0].scope_logs[0].log_records[..]
    field(1, &field(2, &b"\x12\x00".repeat(records)))
}

#[test]
fn a_dense_otlp_request_is_refused_by_its_count_of_records() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(dir.path(), "api_ingest_max_events = 1000\n");
    let post = |records: usize| {
        let body = empty_otlp_records(records);
        let mut s = connect_from(api, [127, 0, 0, 11]);
        write!(
            s,
            "POST /v1/logs HTTP/1.1\r\nHost: 127.0.0.1:{api}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .unwrap();
        s.write_all(&body).unwrap();
        let (status, _, _) = answer(&mut s);
        status
    };
    // Before, 499,000 empty records in a 1 MB body were taken whatever api_ingest_max_events.
    assert_eq!(post(1001), 413);
    assert_eq!(post(1000), 200);
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(
        stats["api"]["bodies"]["too_many_events"], 1,
        "{}",
        stats["api"]["bodies"]
    );
    assert_eq!(stats["api"]["otlp_records"], 1000);
}
