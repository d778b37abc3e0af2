//! The WebSocket stream against the running service: frames, server-side filters, the Origin
//! check, the connection cap, and a client that never reads.

mod common;

use common::{
    LOW_ALERTS, Service, free_port, header, http, invalid_user_lines, json, request, send_lines,
    stamp,
};
use serde_json::Value;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket, stream::MaybeTlsStream};

type Ws = WebSocket<MaybeTlsStream<TcpStream>>;

fn start(dir: &Path, keys: &str) -> (Service, u16, u16) {
    let (api, tcp) = (free_port(), free_port());
    let config = dir.join("watchpost.toml");
    std::fs::write(
        &config,
        format!(
            "{LOW_ALERTS}\ndashboard_port = {api}\nhealth_port = 0\napi_list_rate_limit = \"100000/minute\"\n{keys}\n[inputs.syslog_udp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[inputs.syslog_tcp]\naddress = \"127.0.0.1:{tcp}\"\n[dataplane]\npin_workers = false\n"
        ),
    )
    .unwrap();
    (Service::start(dir, &config, api), api, tcp)
}

fn connect(api: u16) -> Ws {
    let (ws, resp) = tungstenite::connect(format!("ws://127.0.0.1:{api}/api/v1/ws")).unwrap();
    assert_eq!(resp.status(), 101);
    if let MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
    }
    ws
}

/// The next text frame as JSON, or `None` when nothing came within the read timeout.
fn next(ws: &mut Ws) -> Option<Value> {
    loop {
        match ws.read() {
            Ok(Message::Text(t)) => return Some(json(t.as_str())),
            Ok(_) => continue,
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None;
            }
            Err(e) => panic!("websocket: {e}"),
        }
    }
}

/// Frames until `want` matches one (or 15 s pass); returns it and everything before it.
fn until(ws: &mut Ws, want: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
    let t = Instant::now();
    let mut before = Vec::new();
    while t.elapsed() < Duration::from_secs(15) {
        if let Some(v) = next(ws) {
            if want(&v) {
                return (v, before);
            }
            before.push(v);
        }
    }
    panic!("no such frame; got {before:?}");
}

fn events_of(v: &Value) -> Vec<Value> {
    match v["type"].as_str() {
        Some("event") => vec![v["event"].clone()],
        Some("batch") => v["events"].as_array().unwrap().clone(),
        _ => Vec::new(),
    }
}

#[test]
fn frames_follow_the_server_side_filter_and_alerts_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api, tcp) = start(
        dir.path(),
        "ws_tick_interval_s = 0.2\nws_status_interval_s = 1.0\nws_filter_min_interval_ms = 300",
    );
    let mut ws = connect(api);
    let (hello, _) = until(&mut ws, |v| v["type"] == "status");
    assert_eq!(hello["dropped"], 0);

    ws.send(Message::Text(
        r#"{"type":"filter","min_severity":4}"#.into(),
    ))
    .unwrap();
    let (ack, _) = until(&mut ws, |v| {
        v["type"] == "status" && v["reason"] == "filter"
    });
    assert_eq!(ack["filter"]["min_severity"], 4);
    // A second filter inside ws_filter_min_interval_ms is held back, then applied (latest wins).
    ws.send(Message::Text(
        r#"{"type":"filter","min_severity":2}"#.into(),
    ))
    .unwrap();
    ws.send(Message::Text(
        r#"{"type":"filter","min_severity":4,"source":["sshd"]}"#.into(),
    ))
    .unwrap();
    let (ack, _) = until(&mut ws, |v| {
        v["type"] == "status" && v["reason"] == "filter"
    });
    assert_eq!(ack["filter"]["source"][0], "sshd", "{ack}");
    ws.send(Message::Text(
        r#"{"type":"filter","min_severity":"high"}"#.into(),
    ))
    .unwrap();
    let (err, _) = until(&mut ws, |v| v["type"] == "error");
    assert_eq!(err["error"], "invalid_filter");

    // notice (2) from sshd, error (4) from cron, error (4) from sshd: only the last passes.
    let (t1, t2, t3) = (stamp(-3), stamp(-2), stamp(-1));
    send_lines(
        tcp,
        &format!(
            "<37>{t1} web-01 sshd[1]: Connection closed by 10.0.0.1\n\
             <27>{t2} web-01 cron[2]: job failed badly\n\
             <27>{t3} web-01 sshd[3]: error: kex_exchange_identification: banner\n"
        ),
    );
    let (frame, before) = until(&mut ws, |v| !events_of(v).is_empty());
    let got = events_of(&frame);
    assert_eq!(got.len(), 1, "{frame}");
    assert_eq!(
        (got[0]["source"].as_str(), got[0]["severity"].as_u64()),
        (Some("sshd"), Some(4))
    );
    assert!(before.iter().all(|v| events_of(v).is_empty()));

    // An alert: three invalid-user lines fire the bundled Sigma rule (severity 3 or more).
    ws.send(Message::Text(r#"{"type":"filter"}"#.into()))
        .unwrap();
    until(&mut ws, |v| {
        v["type"] == "status" && v["reason"] == "filter"
    });
    let lines = invalid_user_lines();
    send_lines(tcp, &lines);
    let (alert, _) = until(&mut ws, |v| v["type"] == "alert");
    assert_eq!(alert["alert"]["type"], "sigma", "{alert}");
    // Its entities are named, as the API names them (the detector's copy holds UUIDs only).
    let (_, api_body) = http(
        api,
        "GET",
        &format!("/api/v1/alerts/{}", alert["alert"]["id"].as_str().unwrap()),
        "",
    );
    let from_api = json(&api_body);
    assert_eq!(alert["alert"]["entity"], from_api["entity"], "{alert}");
    assert!(
        !alert["alert"]["entity"]["value"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "{alert}"
    );
    for e in alert["alert"]["related_entities"].as_array().unwrap() {
        assert!(!e["value"].as_str().unwrap().is_empty(), "{alert}");
    }
    // Triage through the API reaches the stream as an update, with the triage in it.
    let id = alert["alert"]["id"].as_str().unwrap().to_string();
    let (status, body) = http(
        api,
        "PATCH",
        &format!("/api/v1/alerts/{id}"),
        r#"{"status":"acknowledged","assignee":"alice"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (update, _) = until(&mut ws, |v| {
        v["type"] == "alert_batch"
            && v["alerts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["id"] == id.as_str())
    });
    let triaged = update["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id.as_str())
        .unwrap();
    assert_eq!(triaged["triage"]["status"], "acknowledged", "{update}");
    assert_eq!(triaged["triage"]["assignee"], "alice");
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(stats["websocket"]["connections"], 1);
    assert!(stats["websocket"]["filters_throttled"].as_u64() >= Some(1));
    assert!(stats["websocket"]["invalid_frames"].as_u64() >= Some(1));
}

fn upgrade(api: u16, origin: Option<&str>) -> (u16, String) {
    let mut h = vec![
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    if let Some(o) = origin {
        h.push(("Origin", o));
    }
    let mut s = TcpStream::connect(("127.0.0.1", api)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let head: String = h.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    write!(
        s,
        "GET /api/v1/ws HTTP/1.1\r\nHost: localhost:{api}\r\n{head}\r\n"
    )
    .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = std::io::Read::read(&mut s, &mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    (text[9..12].parse().unwrap(), text)
}

#[test]
fn origins_and_the_connection_cap_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api, _) = start(dir.path(), "ws_max_connections = 2");
    let (code, text) = upgrade(api, Some("https://evil.example"));
    assert_eq!(code, 403, "{text}");
    assert!(text.contains("origin_not_allowed"));
    let own = format!("http://localhost:{api}");
    let (code, _) = upgrade(api, Some(&own));
    assert_eq!(code, 101);
    let _a = connect(api);
    // Two open (the raw upgrade above has been dropped, its slot given back) ...
    std::thread::sleep(Duration::from_millis(200));
    let _b = connect(api);
    let (code, text) = upgrade(api, None);
    assert_eq!(code, 503, "{text}");
    assert!(text.contains("too_many_connections"));
    assert_eq!(header(&text, "retry-after"), Some("10"));
    // A plain GET is told to upgrade, in the API's error shape.
    let (code, _, body) = request(api, "GET", "/api/v1/ws", &[], "");
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (426, Some("websocket_required"))
    );
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(stats["websocket"]["refused_origin"], 1);
    assert_eq!(stats["websocket"]["refused_capacity"], 1);
}

#[test]
fn a_client_that_never_reads_loses_its_own_oldest_frames_only() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api, tcp) = start(
        dir.path(),
        "ws_tick_interval_s = 0.05\nws_queue_maxlen = 8\nws_batch_max_events = 500",
    );
    let mut stalled = connect(api);
    let mut reader = connect(api);
    // About 60 MB of events over four seconds: far more than the stalled socket's buffers.
    let filler = "x".repeat(400);
    let t = Instant::now();
    let mut sent = 0u64;
    let mut seen = 0usize;
    let mut conn = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    while t.elapsed() < Duration::from_secs(4) {
        let now = stamp(0);
        let chunk: String = (0..2_000)
            .map(|i| format!("<14>{now} web-01 app[{i}]: load {sent} {i} {filler}\n"))
            .collect();
        conn.write_all(chunk.as_bytes()).unwrap();
        sent += 2_000;
        while let Some(v) = next_quick(&mut reader) {
            seen += events_of(&v).len();
        }
    }
    drop(conn);
    assert!(seen > 0, "the reading client kept receiving");
    let stats = common::wait_for(api, "/api/v1/stats", |v| {
        v["stored_total"].as_u64() == Some(sent)
    });
    assert!(
        stats["websocket"]["frames_dropped"].as_u64() > Some(0),
        "{}",
        stats["websocket"]
    );
    // The stalled client finally reads: a status frame tells it how much it lost.
    if let MaybeTlsStream::Plain(s) = stalled.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    }
    let (status, _) = until(&mut stalled, |v| {
        v["type"] == "status" && v["dropped"].as_u64() > Some(0)
    });
    assert!(status["dropped_total"].as_u64() >= status["dropped"].as_u64());
}

fn next_quick(ws: &mut Ws) -> Option<Value> {
    if let MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_nonblocking(true).unwrap();
    }
    let v = next(ws);
    if let MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_nonblocking(false).unwrap();
    }
    v
}

#[test]
fn an_alert_raised_right_after_a_client_connects_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api, tcp) = start(dir.path(), "detection.alert_group_after_entities = 0");
    // Each try: a new client, and at once a line that raises a new alert (its own account and
    // address). The stream must deliver it, however soon after the upgrade it was raised.
    for attempt in 0..5 {
        let mut ws = connect(api);
        send_lines(
            tcp,
            &format!(
                "<38>{} web-01 sshd[7{attempt}]: Invalid user early{attempt} from 198.51.100.{} port 4100{attempt}\n",
                stamp(0),
                20 + attempt
            ),
        );
        let user = format!("early{attempt}");
        let (alert, _) = until(&mut ws, |v| {
            v["type"] == "alert" && v["alert"]["entity"]["value"] == user.as_str()
        });
        assert_eq!(alert["alert"]["type"], "sigma", "{alert}");
    }
}

#[test]
fn frames_and_a_stalled_clients_queue_are_bounded_in_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api, tcp) = start(
        dir.path(),
        "ws_tick_interval_s = 0.05\nws_batch_max_events = 500\nws_queue_max_bytes = 262144\nws_frame_max_bytes = 32768",
    );
    let mut stalled = connect(api);
    let mut reader = connect(api);
    let filler = "y".repeat(400);
    let t = Instant::now();
    let mut sent = 0u64;
    let mut largest = 0usize;
    let mut batches = 0usize;
    let mut conn = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    while t.elapsed() < Duration::from_secs(3) {
        let now = stamp(0);
        let chunk: String = (0..2_000)
            .map(|i| format!("<14>{now} web-01 app[{i}]: bytes {sent} {i} {filler}\n"))
            .collect();
        conn.write_all(chunk.as_bytes()).unwrap();
        sent += 2_000;
        if let MaybeTlsStream::Plain(s) = reader.get_ref() {
            s.set_nonblocking(true).unwrap();
        }
        while let Ok(m) = reader.read() {
            if let Message::Text(t) = m {
                largest = largest.max(t.len());
                batches += usize::from(t.as_str().contains("\"type\":\"batch\""));
            }
        }
        if let MaybeTlsStream::Plain(s) = reader.get_ref() {
            s.set_nonblocking(false).unwrap();
        }
    }
    drop(conn);
    // A tick of 500 events of about 600 bytes is 300 KB: it went out in frames of 32 KiB.
    assert!(batches > 0, "batches arrived");
    assert!(largest <= 32 << 10, "a frame of {largest} bytes");
    let stats = common::wait_for(api, "/api/v1/stats", |v| {
        v["stored_total"].as_u64() == Some(sent)
    });
    assert!(
        stats["websocket"]["frames_dropped"].as_u64() > Some(0),
        "the stalled client's queue dropped frames at 256 KiB, long before 1,000 frames: {}",
        stats["websocket"]
    );
    if let MaybeTlsStream::Plain(s) = stalled.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    }
    let (status, _) = until(&mut stalled, |v| {
        v["type"] == "status" && v["dropped"].as_u64() > Some(0)
    });
    assert_eq!(status["queue_max_bytes"], 262144, "{status}");
    assert!(
        status["queued_bytes"].as_u64().unwrap() <= 262144,
        "{status}"
    );
}
