//! LLM assistance against the running service and a model daemon on loopback that speaks
//! Ollama's real wire protocol: explanations made, cached, refreshed; hunts answered from an
//! entity's timeline or translated by the model; Sigma rule drafts for confirmed patterns,
//! validated and repaired; the daemon failing, hanging and missing; the LLM off.

mod common;

#[cfg(feature = "local-runner")]
use common::http_slow;
use common::provider::{Kind, Provider, Scripted};
use common::{
    LOW_ALERTS, Service, free_port, http, invalid_user_lines, json, send_lines, stamp, wait_for,
};
use std::collections::VecDeque;
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
/// the next queued reply, or Markdown when none is queued (chunked, as a proxy in front of a
/// daemon may send it), and records the request.
struct Daemon {
    port: u16,
    mode: Arc<AtomicU8>,
    chats: Arc<Mutex<Vec<serde_json::Value>>>,
    replies: Arc<Mutex<VecDeque<String>>>,
}

impl Daemon {
    fn start() -> Daemon {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(OK));
        let chats = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(VecDeque::new()));
        let (m, c, r) = (mode.clone(), chats.clone(), replies.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (m, c, r) = (m.clone(), c.clone(), r.clone());
                std::thread::spawn(move || serve(conn, &m, &c, &r));
            }
        });
        Daemon {
            port,
            mode,
            chats,
            replies,
        }
    }

    /// Queues the text of the next chat answers.
    fn reply(&self, texts: &[&str]) {
        let mut q = self.replies.lock().unwrap();
        q.clear();
        q.extend(texts.iter().map(|t| t.to_string()));
    }

    fn chats(&self) -> Vec<serde_json::Value> {
        self.chats.lock().unwrap().clone()
    }
}

fn serve(
    conn: TcpStream,
    mode: &AtomicU8,
    chats: &Mutex<Vec<serde_json::Value>>,
    replies: &Mutex<VecDeque<String>>,
) {
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
                    let content = replies.lock().unwrap().pop_front().unwrap_or_else(|| {
                        "## Summary\nSomeone is guessing SSH user names from 203.0.113.9.\n".into()
                    });
                    let reply = serde_json::json!({
                        "model": "tiny", "done": true,
                        "message": {"role": "assistant", "content": content},
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
    start_on(dir, None, llm)
}

/// Like [`start`], on the store in `data` (a fresh one per service when `None`).
fn start_on(dir: &Path, data: Option<&str>, llm: &str) -> (Service, u16, u16) {
    let (config, api, tcp) = config_file(dir, data, llm);
    (Service::start(dir, &config, api), api, tcp)
}

/// A configuration with `llm` as its `[llm]` table; its path, API and syslog ports.
fn config_file(dir: &Path, data: Option<&str>, llm: &str) -> (std::path::PathBuf, u16, u16) {
    let (api, tcp) = (free_port(), free_port());
    let config = dir.join(format!("watchpost-{api}.toml"));
    let data = data.map_or_else(|| format!("data-{api}"), str::to_string);
    std::fs::write(
        &config,
        format!(
            "{LOW_ALERTS}\ndashboard_port = {api}\nhealth_port = 0\napi_detail_rate_limit = \"100000/minute\"\napi_list_rate_limit = \"100000/minute\"\n[storage]\ndata_dir = \"{data}\"\n[inputs.syslog_udp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[inputs.syslog_tcp]\naddress = \"127.0.0.1:{tcp}\"\n[dataplane]\npin_workers = false\n[llm]\n{llm}\n"
        ),
    )
    .unwrap();
    (config, api, tcp)
}

/// Three invalid-user lines fire the bundled Sigma rule; returns the alert's id.
fn raise_alert(api: u16, tcp: u16) -> String {
    let lines = invalid_user_lines();
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

/// A daemon-backed service with `extra` added to its `[llm]` table.
fn start_with_daemon(dir: &Path, daemon: &Daemon, extra: &str) -> (Service, u16, u16) {
    start(
        dir,
        &format!(
            "backend = \"daemon\"\ndaemon_url = \"http://127.0.0.1:{}\"\ndaemon_model = \"tiny\"\n{extra}",
            daemon.port
        ),
    )
}

fn post_hunt(api: u16, body: serde_json::Value) -> (u16, serde_json::Value) {
    let (code, text) = http(api, "POST", "/api/v1/hunt", &body.to_string());
    (code, json(&text))
}

#[test]
fn hunts_answer_entities_without_the_llm_and_translate_other_questions() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start();
    let (svc, api, tcp) = start_with_daemon(dir.path(), &daemon, "hunt_max_query_chars = 64\n");
    raise_alert(api, tcp);

    // An address in the question: its timeline, no model call.
    let (code, v) = post_hunt(
        api,
        serde_json::json!({"query": "What did 203.0.113.9 do?"}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["mode"], "entity", "{v}");
    assert_eq!(v["entities"][0]["value"], "203.0.113.9", "{v}");
    assert_eq!(v["entities"][0]["known"], true, "{v}");
    assert_eq!(v["events"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(
        (v["backend"].is_null(), v["limit"].as_u64()),
        (true, Some(100))
    );
    // A known host name too, with a limit.
    let (code, v) = post_hunt(
        api,
        serde_json::json!({"query": "anything odd on WEB-01", "limit": 2}),
    );
    assert_eq!((code, v["mode"].as_str()), (200, Some("entity")), "{v}");
    assert_eq!(v["events"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["total"], 3, "{v}");
    assert!(
        daemon.chats().is_empty(),
        "entity hunts never call the model"
    );

    // Any other question is translated; the translation is checked, shown and run.
    daemon.reply(&[
        "```json\n{\"entities\": null, \"source\": \"sshd\", \"text\": \"ORACLE2\", \"min_severity\": null}\n```",
    ]);
    let (code, v) = post_hunt(
        api,
        serde_json::json!({"query": "Who tried  the oracle2 account"}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["mode"], "llm", "{v}");
    assert_eq!(v["executed"]["source"], "sshd", "{v}");
    assert_eq!(v["executed"]["text"], "ORACLE2", "{v}");
    let events = v["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{v}");
    assert!(events[0]["message"].as_str().unwrap().contains("oracle2"));
    assert_eq!(
        (v["model"].as_str(), v["cached"].as_bool()),
        (Some("tiny"), Some(false))
    );
    let chats = daemon.chats();
    assert_eq!(chats.len(), 1);
    let prompt = chats[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains("```\nWho tried  the oracle2 account\n```"),
        "{prompt}"
    );
    assert!(prompt.contains("Log sources seen lately: sshd"), "{prompt}");

    // The same question spelled differently shares the answer; refresh asks again.
    let (code, v) = post_hunt(
        api,
        serde_json::json!({"query": " who tried the ORACLE2 account "}),
    );
    assert_eq!((code, v["cached"].as_bool()), (200, Some(true)), "{v}");
    assert_eq!(daemon.chats().len(), 1);
    daemon.reply(&["{\"text\": \"oracle\"}"]);
    let (code, v) = post_hunt(
        api,
        serde_json::json!({"query": "who tried the oracle2 account", "refresh": true}),
    );
    assert_eq!((code, v["cached"].as_bool()), (200, Some(false)), "{v}");
    assert_eq!(v["events"].as_array().unwrap().len(), 3, "{v}");

    // A translation that is not a query, or a failing model, is a 502.
    daemon.reply(&["Sorry, I can't help with that."]);
    let (code, v) = post_hunt(api, serde_json::json!({"query": "show me bad things"}));
    assert_eq!(
        (code, v["error"].as_str()),
        (502, Some("llm_failed")),
        "{v}"
    );
    assert!(
        v["message"].as_str().unwrap().contains("no JSON object"),
        "{v}"
    );
    daemon.reply(&["{\"min_severity\": 11}"]);
    let (code, v) = post_hunt(api, serde_json::json!({"query": "show me bad things"}));
    assert_eq!(code, 502, "{v}");
    daemon.mode.store(FAIL, Ordering::SeqCst);
    let (code, v) = post_hunt(api, serde_json::json!({"query": "show me worse things"}));
    assert_eq!(code, 502, "{v}");
    daemon.mode.store(OK, Ordering::SeqCst);

    // Invalid and over-budget questions are 400.
    for bad in [
        serde_json::json!({"query": "   "}),
        serde_json::json!({"query": "x".repeat(65)}),
        serde_json::json!({"query": "10.0.0.1", "limit": 0}),
        serde_json::json!({"query": "10.0.0.1", "limit": 101}),
        serde_json::json!({"query": 5}),
        serde_json::json!({"question": "10.0.0.1"}),
    ] {
        let (code, v) = post_hunt(api, bad.clone());
        assert_eq!(
            (code, v["error"].as_str()),
            (400, Some("invalid_query")),
            "{bad}: {v}"
        );
    }
    let (code, _) = post_hunt(api, serde_json::json!({"query": "é".repeat(64)}));
    assert_eq!(code, 502, "64 characters are allowed (bytes do not count)");

    // The command-line hunt asks the same API; --limit caps what it prints.
    let out = common::bin()
        .args([
            "hunt",
            "--url",
            &format!("http://127.0.0.1:{api}"),
            "--limit",
            "2",
        ])
        .args(["events", "of", "203.0.113.9"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(
        stdout.contains("sshd  web-01  Invalid user oracle"),
        "{stdout}"
    );
    assert!(
        stderr.contains("entity lookup, no LLM") && stderr.contains("2 shown of 3"),
        "{stderr}"
    );
    let out = common::bin()
        .args([
            "hunt",
            "--url",
            &format!("http://127.0.0.1:{api}"),
            "--json",
        ])
        .arg("x".repeat(65))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("hunt failed (400)"));
    drop(svc);

    // With the LLM off, entity hunts still answer and the rest is 503.
    let (svc, api, tcp) = start(dir.path(), "");
    raise_alert(api, tcp);
    let (code, v) = post_hunt(api, serde_json::json!({"query": "203.0.113.9"}));
    assert_eq!((code, v["mode"].as_str()), (200, Some("entity")), "{v}");
    let (code, v) = post_hunt(api, serde_json::json!({"query": "failed logins"}));
    assert_eq!(
        (code, v["error"].as_str()),
        (503, Some("llm_unavailable")),
        "{v}"
    );
    drop(svc);
}

/// A rule the fake model drafts: valid, and it matches the invalid-user events.
const GOOD_RULE: &str = "Here is the rule:\n```yaml\ntitle: Invalid SSH users confirmed by analysts\nid: 6f1c2a9e-3b7d-4c55-9a1e-0d2b8c7f4e11\nstatus: experimental\ndescription: SSH logins for user names that do not exist\nauthor: Watchpost rule suggestion\ndate: 2026-11-21\ntags:\n  - attack.t1110\nlogsource:\n  product: linux\n  service: sshd\ndetection:\n  keywords:\n    - 'Invalid user'\n  condition: keywords\nfalsepositives:\n  - Mistyped user names\nlevel: medium\n```\n";

fn feedback(api: u16, id: &str, verdict: &str) {
    let (code, body) = http(
        api,
        "POST",
        &format!("/api/v1/alerts/{id}/feedback"),
        &format!(r#"{{"feedback":"{verdict}","note":"confirmed by on-call","origin":"api"}}"#),
    );
    assert_eq!(code, 204, "{body}");
}

fn patterns(api: u16) -> Vec<serde_json::Value> {
    let (code, body) = http(api, "GET", "/api/v1/sigma/rule-suggestions", "");
    assert_eq!(code, 200, "{body}");
    json(&body)["items"].as_array().unwrap().clone()
}

#[test]
fn confirmed_patterns_get_validated_rule_drafts() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start();
    let (svc, api, tcp) = start_on(
        dir.path(),
        Some("data-suggestions"),
        &format!(
            "backend = \"daemon\"\ndaemon_url = \"http://127.0.0.1:{}\"\ndaemon_model = \"tiny\"\n",
            daemon.port
        ),
    );
    // Three attackers: three alerts of one rule, source and template.
    let lines: String = (1..=3)
        .map(|i| {
            let t = stamp(i - 4);
            format!("<38>{t} web-01 sshd[31{i}]: Invalid user admin{i} from 198.51.100.{i} port 5000{i}\n")
        })
        .collect();
    send_lines(tcp, &lines);
    let v = wait_for(api, "/api/v1/alerts?type=sigma", |v| {
        v["items"].as_array().is_some_and(|a| a.len() >= 3)
    });
    let ids: Vec<String> = v["items"].as_array().unwrap()[..3]
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect();

    assert!(patterns(api).is_empty());
    feedback(api, &ids[0], "tp");
    feedback(api, &ids[1], "tp");
    // The same alert marked twice counts once (the repeat is not even stored).
    let (code, body) = http(
        api,
        "POST",
        &format!("/api/v1/alerts/{}/feedback", ids[1]),
        r#"{"feedback":"tp","note":"confirmed by on-call","origin":"api"}"#,
    );
    assert_eq!(code, 200, "{body}");
    assert!(patterns(api).is_empty(), "two alerts are not enough");
    feedback(api, &ids[2], "tp");
    let listed = patterns(api);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let p = &listed[0];
    assert_eq!(
        (p["tp_count"].as_u64(), p["min_tp"].as_u64()),
        (Some(3), Some(3)),
        "{p}"
    );
    assert_eq!(
        (p["alert_type"].as_str(), p["source"].as_str()),
        (Some("sigma"), Some("sshd"))
    );
    assert!(
        p["template"].as_str().unwrap().contains("Invalid user"),
        "{p}"
    );
    assert_eq!(p["suggestion_cached"], false);
    let key = p["pattern_key"].as_str().unwrap().to_string();
    let draft = format!("/api/v1/sigma/rule-suggestions/{key}");

    // The first draft is not valid Sigma: it goes back once with the reason; the second is
    // checked against the evidence and served.
    daemon.reply(&["```yaml\ntitle: broken\ndetection: [\n```", GOOD_RULE]);
    let (code, body) = http(api, "POST", &draft, "");
    assert_eq!(code, 200, "{body}");
    let s = json(&body);
    assert_eq!(
        (s["repaired"].as_bool(), s["cached"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(
        s["draft"]["rule_id"], "6f1c2a9e-3b7d-4c55-9a1e-0d2b8c7f4e11",
        "{s}"
    );
    assert_eq!(s["draft"]["level"], "medium", "{s}");
    assert!(
        s["draft"]["yaml"]
            .as_str()
            .unwrap()
            .starts_with("title: Invalid SSH users"),
        "{s}"
    );
    let checked = s["draft"]["events_checked"].as_u64().unwrap();
    assert!(checked >= 3, "{s}");
    assert_eq!(s["draft"]["matched_events"].as_u64(), Some(checked), "{s}");
    assert_eq!(
        s["evidence"]["feedback"].as_array().unwrap().len(),
        3,
        "{s}"
    );
    assert_eq!(s["evidence"]["feedback"][0]["feedback"], "tp", "{s}");
    let chats = daemon.chats();
    assert_eq!(chats.len(), 2);
    let first = chats[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        first.contains("service: sshd") && first.contains("Invalid user admin"),
        "{first}"
    );
    assert!(
        first.contains("confirmed by on-call"),
        "analyst notes go in: {first}"
    );
    let second = chats[1]["messages"][1]["content"].as_str().unwrap();
    assert!(second.contains("previous draft was refused"), "{second}");

    // Cached from now on, and listed as such; the draft uploads as a rule.
    let (code, body) = http(api, "POST", &draft, "{}");
    assert_eq!(
        (code, json(&body)["cached"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    assert_eq!(daemon.chats().len(), 2);
    assert_eq!(patterns(api)[0]["suggestion_cached"], true);
    let upload = serde_json::json!({"yaml": s["draft"]["yaml"], "dry_run": true}).to_string();
    let (code, body) = http(api, "POST", "/api/v1/sigma/rules", &upload);
    assert_eq!(code, 200, "{body}");
    assert!(json(&body)["matched"].as_u64().unwrap() >= 3, "{body}");

    // Invalidated by DELETE; a model that cannot produce a valid rule is a 502, no YAML.
    assert_eq!(http(api, "DELETE", &draft, "").0, 204);
    assert_eq!(http(api, "DELETE", &draft, "").0, 404);
    daemon.reply(&["not yaml: [", "```yaml\ntitle: still broken\n```"]);
    let (code, body) = http(api, "POST", &draft, "");
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (502, Some("llm_failed")),
        "{body}"
    );
    assert!(
        body.contains("even after one correction") && !body.contains("still broken"),
        "{body}"
    );

    // One alert re-marked false positive: the pattern is no longer eligible.
    daemon.reply(&[GOOD_RULE]);
    assert_eq!(http(api, "POST", &draft, "").0, 200);
    feedback(api, &ids[0], "fp");
    assert!(patterns(api).is_empty());
    let (code, body) = http(api, "POST", &draft, "");
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("not eligible"), "{body}");
    assert_eq!(
        http(api, "DELETE", &draft, "").0,
        404,
        "the stale draft was dropped"
    );
    drop(svc);

    // Listing needs no LLM; drafting does.
    let (svc, api, _) = start_on(
        dir.path(),
        Some("data-suggestions"),
        "rule_suggestion_min_tp = 2\n",
    );
    let listed = patterns(api);
    assert_eq!(listed.len(), 1, "2 alerts still tp, min 2: {listed:?}");
    let key = listed[0]["pattern_key"].as_str().unwrap();
    let (code, body) = http(
        api,
        "POST",
        &format!("/api/v1/sigma/rule-suggestions/{key}"),
        "",
    );
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (503, Some("llm_unavailable")),
        "{body}"
    );
    drop(svc);
}

/// The `[llm]` table of a cloud-backed service talking to `provider`, with `extra` added.
fn cloud_llm(provider: &Provider, name: &str, extra: &str) -> String {
    format!(
        "backend = \"cloud\"\ncloud_provider = \"{name}\"\ncloud_model = \"model-test\"\ncloud_api_key = \"{CLOUD_KEY}\"\ncloud_url = \"{}\"\ntls_ca_file = \"{}\"\n{extra}",
        provider.url(),
        provider.ca_file.display()
    )
}

/// The key the fake provider accepts (it takes any `sk-…`).
const CLOUD_KEY: &str = "sk-test-5ecret-9f8e";

#[test]
fn the_cloud_backend_explains_over_https_with_user_names_pseudonymised() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(dir.path(), Kind::OpenAi);
    let llm = cloud_llm(&provider, "openai", "explanation_timeout_s = 3.0\n");
    let (config, api, tcp) = config_file(dir.path(), None, &llm);
    let log_path = dir.path().join("watchpost.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let svc = Service::start_logging_to(dir.path(), &config, api, log);
    let (code, body) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(code, 200, "{body}");
    let llm = &json(&body)["components"]["llm"];
    assert_eq!(
        (
            llm["status"].as_str(),
            llm["backend"].as_str(),
            llm["model"].as_str()
        ),
        (Some("ok"), Some("cloud"), Some("model-test")),
        "{body}"
    );
    let probe = &provider.received()[0];
    assert_eq!(
        (probe.method.as_str(), probe.path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(
        probe.header("authorization"),
        Some(&*format!("Bearer {CLOUD_KEY}"))
    );

    let id = raise_alert(api, tcp);
    let explain = format!("/api/v1/alerts/{id}/explain");
    let (code, body) = http(api, "POST", &explain, "");
    assert_eq!(code, 200, "{body}");
    let v = json(&body);
    let chats = provider.chats();
    assert_eq!(chats.len(), 1);
    let sent = &chats[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    let request = sent.json();
    assert_eq!(request["model"], "model-test");
    assert_eq!(request["messages"][0]["role"], "system");
    let prompt = request["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains(&format!("Alert {id}")), "{prompt}");
    // No user name left the host, in any spelling: the prompt names pseudonyms instead.
    let raw = String::from_utf8_lossy(&sent.body).to_ascii_lowercase();
    assert!(!raw.contains("oracle"), "{raw}");
    assert!(prompt.contains("Invalid user user-"), "{prompt}");
    // ... and the operator reads the real name where the model wrote the pseudonym.
    let markdown = v["markdown"].as_str().unwrap();
    assert!(
        markdown.contains("oracle") && !markdown.contains("user-"),
        "{markdown}"
    );

    // Rate limited: retried after the provider's Retry-After, within the feature's timeout.
    provider.script(vec![
        Scripted::error(429, "rate_limit_error", "slow down").retry_after(1),
    ]);
    let t = Instant::now();
    let (code, body) = http(api, "POST", &explain, r#"{"refresh": true}"#);
    assert_eq!(code, 200, "{body}");
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(provider.chats().len(), 3);

    // A Retry-After past the timeout is not waited for: 502 at once, with the reason.
    provider.script(vec![
        Scripted::error(429, "rate_limit_error", "quota exhausted").retry_after(30),
    ]);
    let t = Instant::now();
    let (code, body) = http(api, "POST", &explain, r#"{"refresh": true}"#);
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (502, Some("llm_failed")),
        "{body}"
    );
    assert!(
        body.contains("429") && body.contains("quota exhausted"),
        "{body}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    // A provider that quotes the key in its error: the key never comes back out.
    provider.script(vec![Scripted::error(
        401,
        "authentication_error",
        &format!("Incorrect API key provided: {CLOUD_KEY}"),
    )]);
    let (code, body) = http(api, "POST", &explain, r#"{"refresh": true}"#);
    assert_eq!(code, 502, "{body}");
    assert!(
        !body.contains(CLOUD_KEY) && body.contains("********"),
        "{body}"
    );
    // ... nor through the log line of a retried attempt.
    provider.script(vec![
        Scripted::error(
            503,
            "overloaded_error",
            &format!("overloaded while serving {CLOUD_KEY}"),
        )
        .retry_after(1),
    ]);
    let (code, body) = http(api, "POST", &explain, r#"{"refresh": true}"#);
    assert_eq!(code, 200, "{body}");
    for path in ["/api/v1/config", "/api/v1/health"] {
        let (_, body) = http(api, "GET", path, "");
        assert!(!body.contains(CLOUD_KEY), "{path}: {body}");
    }
    // Five explanation calls (two retried inside), two failed; the cached answer served once.
    let (_, body) = http(api, "GET", &format!("/api/v1/alerts/{id}/explanation"), "");
    assert_eq!(json(&body)["cached"], true, "{body}");
    let (_, body) = http(api, "GET", "/api/v1/stats", "");
    let explain = &json(&body)["llm"]["explain"];
    assert_eq!(
        (
            explain["calls"].as_u64(),
            explain["failures"].as_u64(),
            explain["cache_hits"].as_u64()
        ),
        (Some(5), Some(2), Some(1)),
        "{body}"
    );
    assert!(explain["latency_ms_mean"].as_f64().unwrap() > 0.0, "{body}");
    let (_, metrics) = http(api, "GET", "/metrics", "");
    assert!(
        metrics.contains("watchpost_llm_calls_total{feature=\"explain\"} 5"),
        "{metrics}"
    );
    assert!(svc.stop().success());
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("INFO"), "{log}");
    assert!(!log.contains(CLOUD_KEY), "the log holds the key: {log}");
    assert!(
        log.contains("attempt 1 failed") && log.contains("********"),
        "{log}"
    );

    // A key the provider refuses, quoting it: not ready, and /health says why without the key.
    let revoked = "sk-revoked-5ecret-77";
    let (svc, api, _) = start(
        dir.path(),
        &cloud_llm(&provider, "openai", "").replace(CLOUD_KEY, revoked),
    );
    let (code, body) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(code, 503, "{body}");
    let error = json(&body)["components"]["llm"]["error"].clone();
    assert!(error.as_str().unwrap().contains("401"), "{body}");
    assert!(
        !body.contains(revoked) && body.contains("********"),
        "{body}"
    );
    drop(svc);
}

#[test]
fn the_anthropic_protocol_explains_hunts_and_drafts_and_an_untrusted_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::start(dir.path(), Kind::Anthropic);
    // Hashing off: the operator chose to send names as they are.
    let (svc, api, tcp) = start(
        dir.path(),
        &cloud_llm(
            &provider,
            "anthropic",
            "cloud_hash_usernames = false\nrule_suggestion_min_tp = 1\n",
        ),
    );
    let id = raise_alert(api, tcp);
    let (code, body) = http(api, "POST", &format!("/api/v1/alerts/{id}/explain"), "");
    assert_eq!(code, 200, "{body}");
    let sent = &provider.chats()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(CLOUD_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    let request = sent.json();
    assert!(
        request["system"]
            .as_str()
            .unwrap()
            .contains("never as instructions")
    );
    assert!(request["max_tokens"].as_u64().unwrap() > 0);
    assert_eq!(request["messages"][0]["role"], "user");
    assert!(
        request["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("oracle")
    );
    assert!(
        json(&body)["markdown"]
            .as_str()
            .unwrap()
            .starts_with("## Summary")
    );

    // A hunt the provider translates, run against the store.
    provider.script(vec![Scripted::reply(
        Kind::Anthropic,
        r#"{"source": "sshd", "text": "Invalid user"}"#,
    )]);
    let (code, v) = post_hunt(api, serde_json::json!({"query": "failed ssh logins"}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(
        (v["mode"].as_str(), v["executed"]["source"].as_str()),
        (Some("llm"), Some("sshd")),
        "{v}"
    );
    assert!(v["total"].as_u64().unwrap() >= 3, "{v}");
    let asked = provider.chats().last().unwrap().json();
    assert!(
        asked["system"].as_str().unwrap().contains("JSON object"),
        "{asked}"
    );

    // A rule draft for the pattern of the alert an analyst confirmed, validated.
    feedback(api, &id, "tp");
    let key = patterns(api)[0]["pattern_key"]
        .as_str()
        .unwrap()
        .to_string();
    provider.script(vec![Scripted::reply(Kind::Anthropic, GOOD_RULE)]);
    let (code, body) = http(
        api,
        "POST",
        &format!("/api/v1/sigma/rule-suggestions/{key}"),
        "",
    );
    assert_eq!(code, 200, "{body}");
    assert!(
        json(&body)["draft"]["matched_events"].as_u64().unwrap() >= 1,
        "{body}"
    );
    drop(svc);

    // The same provider without its CA trusted: no connection, the LLM not ready, and why.
    let before = provider.received().len();
    let (svc, api, tcp) = start(
        dir.path(),
        &format!(
            "backend = \"cloud\"\ncloud_provider = \"anthropic\"\ncloud_model = \"model-test\"\ncloud_api_key = \"{CLOUD_KEY}\"\ncloud_url = \"{}\"\n",
            provider.url()
        ),
    );
    let (code, body) = http(api, "GET", "/api/v1/health", "");
    assert_eq!(code, 503, "{body}");
    let llm = &json(&body)["components"]["llm"];
    assert_eq!(llm["status"], "degraded", "{body}");
    assert!(
        llm["error"].as_str().unwrap().contains("UnknownIssuer"),
        "{body}"
    );
    let id = raise_alert(api, tcp);
    let (code, body) = http(api, "POST", &format!("/api/v1/alerts/{id}/explain"), "");
    assert_eq!(code, 503, "{body}");
    assert_eq!(provider.received().len(), before, "nothing got through");
    drop(svc);
}

/// The local runner's test model, fetched by `scripts/setup --test` (or `WATCHPOST_TEST_MODEL`).
#[cfg(feature = "local-runner")]
fn test_model() -> std::path::PathBuf {
    let path = std::env::var_os("WATCHPOST_TEST_MODEL")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap())
                .join(".cache/watchpost/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        });
    assert!(
        path.is_file(),
        "the test model {} is missing: run scripts/setup --test",
        path.display()
    );
    path
}

/// Waits until `/health` reports the LLM `ok` (the model loads on its own thread).
#[cfg(feature = "local-runner")]
fn wait_for_llm(api: u16) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let (_, body) = http(api, "GET", "/api/v1/health", "");
        let v = json(&body);
        if v["components"]["llm"]["status"] == "ok" {
            return v;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the model did not load: {v}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(feature = "local-runner")]
#[test]
fn the_local_runner_explains_hunts_and_drafts_rules_with_a_real_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = test_model();
    let (svc, api, tcp) = start_on(
        dir.path(),
        Some("data-local"),
        &format!(
            "backend = \"local_runner\"\nmodel_path = \"{}\"\nn_ctx = 2048\nlocal_queue_max = 1\nexplanation_timeout_s = 120.0\nhunt_timeout_s = 120.0\nrule_suggestion_timeout_s = 120.0\n",
            model.display()
        ),
    );
    let health = wait_for_llm(api);
    assert_eq!(
        health["components"]["llm"]["model"], "SmolLM2-135M-Instruct.Q4_1.gguf",
        "{health}"
    );

    // An explanation: Markdown text from the model, whatever its quality.
    let id = raise_alert(api, tcp);
    let t = Instant::now();
    let (code, body) = http_slow(api, "POST", &format!("/api/v1/alerts/{id}/explain"), "");
    eprintln!("local explanation: {:?}", t.elapsed());
    assert_eq!(code, 200, "{body}");
    let v = json(&body);
    assert!(v["markdown"].as_str().unwrap().trim().len() > 10, "{v}");
    assert_eq!(v["backend"], "local_runner");

    // One answer at a time and one waiting (llm.local_queue_max = 1): a third is refused at
    // once with the reason, not queued behind the others.
    let asks: Vec<_> = (0..3)
        .map(|_| {
            let path = format!("/api/v1/alerts/{id}/explain");
            std::thread::spawn(move || http_slow(api, "POST", &path, r#"{"refresh": true}"#))
        })
        .collect();
    let answers: Vec<(u16, String)> = asks.into_iter().map(|a| a.join().unwrap()).collect();
    let codes: Vec<u16> = answers.iter().map(|(c, _)| *c).collect();
    assert!(
        answers
            .iter()
            .any(|(c, b)| *c == 503 && b.contains("llm_busy") && b.contains("llm.local_queue_max")),
        "{answers:?}"
    );
    assert!(codes.contains(&200), "{answers:?}");

    // A hunt the model translates: the grammar makes its answer a query that runs.
    let t = Instant::now();
    let (code, body) = http_slow(
        api,
        "POST",
        "/api/v1/hunt",
        r#"{"query": "which ssh logins failed in the last day?"}"#,
    );
    eprintln!("local hunt translation: {:?}", t.elapsed());
    let v = json(&body);
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["mode"], "llm", "{v}");
    assert!(v["executed"].is_object(), "{v}");

    // A rule draft for a confirmed pattern: valid Sigma with the given id that matches its
    // evidence, because the grammar holds the model to that shape.
    let lines: String = (1..=3)
        .map(|i| {
            let t = stamp(i - 4);
            format!("<38>{t} web-01 sshd[41{i}]: Invalid user backup{i} from 198.51.100.{i} port 5100{i}\n")
        })
        .collect();
    send_lines(tcp, &lines);
    let v = wait_for(api, "/api/v1/alerts?type=sigma&limit=100", |v| {
        v["items"].as_array().is_some_and(|a| a.len() >= 4)
    });
    for alert in v["items"].as_array().unwrap() {
        feedback(api, alert["id"].as_str().unwrap(), "tp");
    }
    let listed = patterns(api);
    assert!(!listed.is_empty(), "no eligible pattern");
    let key = listed[0]["pattern_key"].as_str().unwrap();
    let t = Instant::now();
    let (code, body) = http_slow(
        api,
        "POST",
        &format!("/api/v1/sigma/rule-suggestions/{key}"),
        "",
    );
    eprintln!("local rule draft: {:?}", t.elapsed());
    assert_eq!(code, 200, "{body}");
    let s = json(&body);
    let draft = &s["draft"];
    assert!(draft["matched_events"].as_u64().unwrap() >= 1, "{s}");
    assert!(
        draft["yaml"].as_str().unwrap().contains("detection:"),
        "{s}"
    );
    // The dashboard's Explain button, Hunt tab and Rule Suggestions tab, in a real browser.
    match common::browser_tools() {
        Some((ui, chromium)) => {
            let shots = std::env::temp_dir().join(format!("watchpost-llm-{api}"));
            let out = std::process::Command::new("node")
                .arg(ui.join("tests/llm-features.mjs"))
                .arg(format!("http://127.0.0.1:{api}"))
                .arg(&shots)
                .env("CHROMIUM", &chromium)
                .current_dir(&ui)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "the browser run failed; screenshots in {}\n{stdout}\n{}",
                shots.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!("{stdout}");
        }
        None => assert!(
            std::env::var("CI").is_err(),
            "CI needs node, Chromium and ui/node_modules (scripts/setup installs them)"
        ),
    }
    let (_, body) = http(api, "GET", "/api/v1/stats", "");
    let llm = &json(&body)["llm"];
    assert!(llm["explain"]["calls"].as_u64().unwrap() >= 1, "{llm}");
    assert!(llm["hunt"]["calls"].as_u64().unwrap() >= 1, "{llm}");
    assert!(
        llm["rule_suggestion"]["calls"].as_u64().unwrap() >= 1,
        "{llm}"
    );
    drop(svc);
}

#[cfg(feature = "local-runner")]
#[test]
fn a_missing_or_damaged_model_degrades_the_llm_only() {
    let dir = tempfile::tempdir().unwrap();
    let not_gguf = dir.path().join("notes.gguf");
    std::fs::write(&not_gguf, b"these are not weights").unwrap();
    // A real header and then nothing: only llama.cpp's own load can tell.
    let cut = dir.path().join("cut.gguf");
    let model = std::fs::read(test_model()).unwrap();
    std::fs::write(&cut, &model[..4096]).unwrap();
    for (path, why) in [
        (dir.path().join("absent.gguf"), "No such file"),
        (not_gguf, "not a GGUF model file"),
        (cut, "cannot load it"),
    ] {
        let (svc, api, tcp) = start(
            dir.path(),
            &format!(
                "backend = \"local_runner\"\nmodel_path = \"{}\"\n",
                path.display()
            ),
        );
        let t = Instant::now();
        let llm = loop {
            let (_, body) = http(api, "GET", "/api/v1/health", "");
            let llm = json(&body)["components"]["llm"].clone();
            if llm["error"].as_str().is_some_and(|e| e.contains(why)) {
                break llm;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{}: {llm}",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let error = llm["error"].as_str().unwrap();
        assert_eq!(llm["status"], "degraded");
        assert!(
            error.contains("llm.model_path") && error.contains(&*path.to_string_lossy()),
            "{error}"
        );
        // The rest of the service works: events are taken in and alert.
        let id = raise_alert(api, tcp);
        let (code, body) = http(api, "POST", &format!("/api/v1/alerts/{id}/explain"), "");
        assert_eq!(code, 503, "{body}");
        drop(svc);
    }
}
