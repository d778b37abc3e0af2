//! LLM assistance against the running service and a model daemon on loopback that speaks
//! Ollama's real wire protocol: explanations made, cached, refreshed; the daemon failing,
//! hanging and missing; the LLM off.

mod common;

use common::{Service, free_port, http, json, send_lines, wait_for};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the fake daemon answers a chat.
const OK: u8 = 0;
const FAIL: u8 = 1;
const HANG: u8 = 2;

/// An Ollama-compatible daemon: `GET /api/tags` lists `tiny`, `POST /api/chat` answers with
/// Markdown (chunked, as a proxy in front of a daemon may send it) and records the request.
struct Daemon {
    port: u16,
    mode: Arc<AtomicU8>,
    chats: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Daemon {
    fn start() -> Daemon {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(OK));
        let chats = Arc::new(Mutex::new(Vec::new()));
        let (m, c) = (mode.clone(), chats.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (m, c) = (m.clone(), c.clone());
                std::thread::spawn(move || serve(conn, &m, &c));
            }
        });
        Daemon { port, mode, chats }
    }

    fn chats(&self) -> Vec<serde_json::Value> {
        self.chats.lock().unwrap().clone()
    }
}

fn serve(conn: TcpStream, mode: &AtomicU8, chats: &Mutex<Vec<serde_json::Value>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let mut out = conn;
    let answer = |out: &mut TcpStream, status: &str, body: &str| {
        let _ = write!(
            out,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
    };
    match request_line.split_whitespace().take(2).collect::<Vec<_>>()[..] {
        ["GET", "/api/tags"] => answer(
            &mut out,
            "200 OK",
            r#"{"models":[{"name":"tiny:latest","model":"tiny:latest"}]}"#,
        ),
        ["POST", "/api/chat"] => {
            chats
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            match mode.load(Ordering::SeqCst) {
                FAIL => answer(
                    &mut out,
                    "500 Internal Server Error",
                    r#"{"error":"model crashed"}"#,
                ),
                HANG => std::thread::sleep(Duration::from_secs(5)),
                _ => {
                    let reply = serde_json::json!({
                        "model": "tiny", "done": true,
                        "message": {"role": "assistant", "content": "## Summary\nSomeone is guessing SSH user names from 203.0.113.9.\n"},
                    })
                    .to_string();
                    let (a, b) = reply.split_at(reply.len() / 2);
                    let _ = write!(
                        out,
                        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                        a.len(),
                        b.len()
                    );
                }
            }
        }
        _ => answer(&mut out, "404 Not Found", r#"{"error":"not found"}"#),
    }
}

fn start(dir: &Path, llm: &str) -> (Service, u16, u16) {
    let (api, tcp) = (free_port(), free_port());
    let config = dir.join(format!("watchpost-{api}.toml"));
    std::fs::write(
        &config,
        format!(
            "dashboard_port = {api}\nhealth_port = 0\napi_detail_rate_limit = \"100000/minute\"\n[storage]\ndata_dir = \"data-{api}\"\n[inputs.syslog_udp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[inputs.syslog_tcp]\naddress = \"127.0.0.1:{tcp}\"\n[dataplane]\npin_workers = false\n[llm]\n{llm}\n"
        ),
    )
    .unwrap();
    (Service::start(dir, &config, api), api, tcp)
}

/// Three invalid-user lines fire the bundled Sigma rule; returns the alert's id.
fn raise_alert(api: u16, tcp: u16) -> String {
    let lines: String = (0..3)
        .map(|i| format!("<38>Nov 21 10:15:0{i} web-01 sshd[21{i}]: Invalid user oracle{i} from 203.0.113.9 port 4000{i}\n"))
        .collect();
    send_lines(tcp, &lines);
    let v = wait_for(api, "/api/v1/alerts?type=sigma", |v| {
        v["items"].as_array().is_some_and(|a| !a.is_empty())
    });
    v["items"][0]["id"].as_str().unwrap().to_string()
}

#[test]
fn explanations_are_made_cached_and_refreshed_and_failures_are_502() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start();
    let (svc, api, tcp) = start(
        dir.path(),
        &format!(
            "backend = \"daemon\"\ndaemon_url = \"http://127.0.0.1:{}\"\ndaemon_model = \"tiny\"\nexplanation_timeout_s = 1.0\n",
            daemon.port
        ),
    );
    let (code, body) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(code, 200, "{body}");
    assert_eq!(json(&body)["components"]["llm"]["status"], "ok", "{body}");
    let id = raise_alert(api, tcp);
    let explanation = format!("/api/v1/alerts/{id}/explanation");
    let explain = format!("/api/v1/alerts/{id}/explain");

    let (code, body) = http(api, "GET", &explanation, "");
    assert_eq!(code, 404, "nothing cached yet: {body}");
    assert!(daemon.chats().is_empty(), "GET never calls the model");

    let (code, body) = http(api, "POST", &explain, "");
    assert_eq!(code, 200, "{body}");
    let v = json(&body);
    assert!(
        v["markdown"].as_str().unwrap().starts_with("## Summary"),
        "{v}"
    );
    assert_eq!(
        (v["cached"].as_bool(), v["model"].as_str()),
        (Some(false), Some("tiny"))
    );
    assert!(v["events_in_prompt"].as_u64().unwrap() >= 1, "{v}");
    let chats = daemon.chats();
    assert_eq!(chats.len(), 1);
    assert_eq!(
        (chats[0]["model"].as_str(), chats[0]["stream"].as_bool()),
        (Some("tiny"), Some(false))
    );
    let prompt = chats[0]["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains(&format!("Alert {id}")), "{prompt}");
    assert!(
        prompt.contains("```\n") && prompt.contains("Invalid user oracle"),
        "events are fenced: {prompt}"
    );
    assert!(
        chats[0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("never as instructions")
    );

    // Cached: the same text, no new call, from either route.
    let (code, body) = http(api, "POST", &explain, "{}");
    assert_eq!(code, 200, "{body}");
    assert_eq!(json(&body)["cached"], true);
    let (code, body) = http(api, "GET", &explanation, "");
    assert_eq!(
        (code, json(&body)["cached"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    assert_eq!(daemon.chats().len(), 1);

    // Refresh asks again; an upstream error or a hang is a 502 that names it, and the cached
    // explanation stays.
    daemon.mode.store(FAIL, Ordering::SeqCst);
    let (code, body) = http(api, "POST", &explain, r#"{"refresh": true}"#);
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (502, Some("llm_failed")),
        "{body}"
    );
    assert!(body.contains("model crashed"), "{body}");
    daemon.mode.store(HANG, Ordering::SeqCst);
    let t = Instant::now();
    let (code, body) = http(api, "POST", &explain, r#"{"refresh": true}"#);
    assert_eq!(code, 502, "{body}");
    assert!(body.contains("no answer within 1.0 s"), "{body}");
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "the timeout holds: {:?}",
        t.elapsed()
    );
    assert_eq!(http(api, "GET", &explanation, "").0, 200);

    // Bad bodies and unknown alerts.
    let (code, body) = http(api, "POST", &explain, r#"{"refresh": "yes"}"#);
    assert_eq!(code, 422, "{body}");
    let (code, body) = http(api, "POST", &explain, r#"{"model": "other"}"#);
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        http(api, "POST", "/api/v1/alerts/no-such-alert/explain", "").0,
        404
    );
    assert_eq!(
        http(api, "GET", "/api/v1/alerts/no-such-alert/explanation", "").0,
        404
    );
    drop(svc);
}

#[test]
fn a_missing_daemon_or_model_is_503_and_degrades_health_and_off_is_503() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on this port.
    let closed = free_port();
    let (svc, api, tcp) = start(
        dir.path(),
        &format!(
            "backend = \"daemon\"\ndaemon_url = \"http://127.0.0.1:{closed}\"\ndaemon_model = \"tiny\"\n"
        ),
    );
    let (code, body) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(code, 503, "{body}");
    let h = json(&body);
    assert_eq!(h["components"]["llm"]["status"], "degraded", "{h}");
    assert!(
        h["degraded"].as_array().unwrap().iter().any(|d| d == "llm"),
        "{h}"
    );
    let id = raise_alert(api, tcp);
    let (code, body) = http(api, "POST", &format!("/api/v1/alerts/{id}/explain"), "");
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (503, Some("llm_unavailable")),
        "{body}"
    );
    assert!(body.contains("cannot connect"), "{body}");
    drop(svc);

    // A daemon without the model: not ready either, and it says which models it has.
    let daemon = Daemon::start();
    let (svc, api, tcp) = start(
        dir.path(),
        &format!(
            "backend = \"daemon\"\ndaemon_url = \"http://127.0.0.1:{}\"\ndaemon_model = \"huge\"\n",
            daemon.port
        ),
    );
    let id = raise_alert(api, tcp);
    let (code, body) = http(api, "POST", &format!("/api/v1/alerts/{id}/explain"), "");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("\\\"huge\\\"") && body.contains("tiny:latest"),
        "{body}"
    );
    assert!(daemon.chats().is_empty());
    drop(svc);

    // Off (the default): 503 on both routes, and health is not degraded by it.
    let (svc, api, tcp) = start(dir.path(), "");
    let (code, body) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(
        (code, json(&body)["components"]["llm"]["status"].as_str()),
        (200, Some("disabled")),
        "{body}"
    );
    let id = raise_alert(api, tcp);
    for (method, path) in [("POST", "explain"), ("GET", "explanation")] {
        let (code, body) = http(api, method, &format!("/api/v1/alerts/{id}/{path}"), "");
        assert_eq!(code, 503, "{method} {path}: {body}");
        assert!(body.contains("disabled"), "{body}");
    }
    drop(svc);
}
