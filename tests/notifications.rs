//! Notifications as operators run them: alerts raised from real log lines reach real receivers
//! on loopback (an HTTPS webhook receiver for webhook, Slack and Teams messages, rsyslog over
//! UDP, TCP and TLS, an SMTP server with STARTTLS and AUTH), at least once, across a receiver
//! outage and a restart of the service.

mod common;

use common::receiver::Receiver;
use common::tls::TestCa;
use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bundled rule the suites raise alerts with (`sshd_invalid_user.yml`).
const RULE: &str = "dcec6854-a593-491f-9a9c-59c065d2aca7";

/// A `[[notifications]]` table posting to `receiver` at `path`, with `extra` keys.
fn http_channel(name: &str, kind: &str, receiver: &Receiver, path: &str, extra: &str) -> String {
    let severity = if extra.contains("min_severity") {
        ""
    } else {
        "min_severity = 0\n"
    };
    format!(
        "[[notifications]]\nname = \"{name}\"\nkind = \"{kind}\"\nurl = \"{}\"\ntls_ca_file = \"{}\"\n{severity}{extra}\n",
        receiver.url(path),
        receiver.ca_file.display()
    )
}

/// A service config with syslog over TCP on `tcp` and `channels` appended.
fn config_with(dir: &Path, api: u16, tcp: u16, channels: &str) -> std::path::PathBuf {
    let path = syslog_config(dir, api, Some(tcp), "");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}{channels}")).unwrap();
    path
}

/// Starts the service with `channels`, its log in `DIR/service.log`, and sends the lines that
/// raise one alert (the bundled invalid-user rule).
fn start_and_alert(
    dir: &Path,
    api: u16,
    tcp: u16,
    channels: &str,
) -> (Service, std::path::PathBuf) {
    let config = config_with(dir, api, tcp, channels);
    let log = dir.join("service.log");
    let svc = Service::start_logging_to(dir, &config, api, std::fs::File::create(&log).unwrap());
    send_lines(tcp, &invalid_user_lines());
    (svc, log)
}

fn stats_channel(api: u16, name: &str) -> serde_json::Value {
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    stats["notifications"]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no channel {name} in /stats: {stats}"))
        .clone()
}

fn hmac_hex(key: &str, text: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
    ring::hmac::sign(&key, text)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn an_alert_reaches_a_signed_webhook_slack_and_teams_once_and_filters_hold_back_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    let (api, tcp) = (free_port(), free_port());
    let channels = [
        http_channel(
            "hook",
            "webhook",
            &receiver,
            "/hook",
            "secret = \"s3cret-signing-key\"",
        ),
        http_channel("soc-slack", "slack", &receiver, "/slack", ""),
        http_channel("soc-teams", "teams", &receiver, "/teams", ""),
        http_channel("pager", "webhook", &receiver, "/pager", "min_severity = 5"),
    ]
    .concat();
    let (_svc, log) = start_and_alert(dir.path(), api, tcp, &channels);

    let hook = receiver.wait_for("/hook", 1, Duration::from_secs(30));
    let slack = receiver.wait_for("/slack", 1, Duration::from_secs(10));
    let teams = receiver.wait_for("/teams", 1, Duration::from_secs(10));
    // Nothing more comes: the alert's later fires fold into it and are not notified again.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(receiver.on("/hook").len(), 1);
    assert_eq!(receiver.on("/slack").len(), 1);
    assert_eq!(receiver.on("/teams").len(), 1);
    assert!(
        receiver.on("/pager").is_empty(),
        "min_severity 5 takes no low alert"
    );

    // The webhook: the whole alert, its delivery id in the header, signed.
    let h = &hook[0];
    let doc = h.json();
    assert_eq!(doc["kind"], "alert");
    assert_eq!(doc["channel"], "hook");
    assert_eq!(doc["alert"]["detector"], RULE);
    let id = doc["alert"]["id"].as_str().unwrap();
    assert_eq!(http(api, "GET", &format!("/api/v1/alerts/{id}"), "").0, 200);
    assert_eq!(h.header("idempotency-key"), doc["delivery_id"].as_str());
    let ts = h.header("x-watchpost-timestamp").unwrap();
    let mut signed = format!("{ts}.").into_bytes();
    signed.extend_from_slice(&h.body);
    assert_eq!(
        h.header("x-watchpost-signature").unwrap(),
        format!("sha256={}", hmac_hex("s3cret-signing-key", &signed))
    );
    // Slack: a text and blocks; Teams: an Adaptive Card.
    let s = slack[0].json();
    assert!(
        s["text"].as_str().unwrap().starts_with("Watchpost low:"),
        "{s}"
    );
    assert_eq!(s["blocks"][0]["type"], "header");
    assert!(
        s["blocks"][1]["text"]["text"]
            .as_str()
            .unwrap()
            .contains(id)
    );
    let t = teams[0].json();
    assert_eq!(
        t["attachments"][0]["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    assert!(t.to_string().contains(id));

    // Counted in /stats and /metrics, healthy, credentials masked in /config.
    let c = wait_for(api, "/api/v1/stats", |v| {
        v["notifications"]["channels"][0]["pending"] == 0
    });
    let hook_stats = &c["notifications"]["channels"][0];
    assert_eq!(hook_stats["alerts_sent"], 1, "{hook_stats}");
    assert_eq!(hook_stats["failures"], 0);
    assert!(hook_stats["latency_p50_s"].as_f64().unwrap() <= 2.5);
    assert!(stats_channel(api, "pager")["filtered"].as_u64().unwrap() >= 1);
    let metrics = http(api, "GET", "/metrics", "").1;
    assert!(
        metrics.contains("watchpost_notify_messages_total{channel=\"soc-slack\",kind=\"slack\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("watchpost_notify_latency_seconds_count{channel=\"hook\"} 1"));
    let health = json(&http(api, "GET", "/api/v1/health", "").1);
    assert_eq!(
        health["components"]["notifications"]["status"], "ok",
        "{health}"
    );
    let shown = http(api, "GET", "/api/v1/config", "").1;
    assert!(
        !shown.contains("s3cret-signing-key") && !shown.contains("/hook"),
        "{shown}"
    );
    assert_eq!(json(&shown)["notifications"][0]["url"], "********");

    // A test message on demand; an unknown channel is a 404.
    let (status, body) = http(
        api,
        "POST",
        "/api/v1/notifications/test",
        r#"{"channel": "soc-teams"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["results"][0]["delivered"], true);
    assert_eq!(receiver.on("/teams").len(), 2);
    let (status, body) = http(
        api,
        "POST",
        "/api/v1/notifications/test",
        r#"{"channel": "nope"}"#,
    );
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (404, Some("not_found"))
    );
    // The URL (it carries the receiver's token) and the signing key stay out of the log.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("API listening"), "{logged}");
    for secret in ["s3cret-signing-key", "/hook", "/slack"] {
        assert!(!logged.contains(secret), "{secret} in {logged}");
    }
}

#[test]
fn a_receiver_outage_and_a_restart_lose_no_alert() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(dir.path());
    receiver.answer(503);
    let (api, tcp) = (free_port(), free_port());
    let channel = http_channel(
        "hook",
        "webhook",
        &receiver,
        "/hook",
        "max_backoff_s = 1\nfailures_before_degraded = 2",
    );
    let config = config_with(dir.path(), api, tcp, &channel);
    let svc = Service::start(dir.path(), &config, api);
    send_lines(tcp, &invalid_user_lines());

    // The receiver refuses: retried, counted, and /health says so.
    let health = {
        let t = Instant::now();
        loop {
            let (status, body) = http(api, "GET", "/api/v1/health", "");
            let v = json(&body);
            if status == 503
                && v["degraded"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d == "notifications hook")
            {
                break v;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "{body}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let channel = &health["components"]["notifications"]["channels"][0];
    assert!(
        channel["last_error"].as_str().unwrap().contains("HTTP 503"),
        "{channel}"
    );
    assert_eq!(channel["pending"], 1);
    let (status, body) = http(api, "POST", "/api/v1/notifications/test", "");
    assert_eq!(status, 502, "{body}");
    assert_eq!(json(&body)["error"], "notification_failed");
    assert_eq!(json(&body)["results"][0]["delivered"], false);

    // Stopped while the receiver is down; the receiver comes back; the service starts again.
    assert!(svc.stop().success());
    assert!(receiver.on("/hook").is_empty());
    receiver.answer(200);
    let _svc = Service::start(dir.path(), &config, api);
    let got = receiver.wait_for("/hook", 1, Duration::from_secs(30));
    assert_eq!(got.len(), 1, "the queued alert is sent after the restart");
    let doc = got[0].json();
    assert_eq!(doc["kind"], "alert");
    assert_eq!(doc["alert"]["detector"], RULE);
    // A delivery is counted as sent before its outbox entry is deleted, so `pending` reaches 0
    // a moment after `alerts_sent` reaches 1: wait for both, never for one and assert the other.
    let stats = wait_for(api, "/api/v1/stats", |v| {
        let hook = &v["notifications"]["channels"][0];
        hook["alerts_sent"] == 1 && hook["pending"] == 0
    });
    assert_eq!(
        stats["notifications"]["channels"][0]["queued"], 0,
        "{stats}"
    );
    assert_eq!(
        json(&http(api, "GET", "/api/v1/health", "").1)["components"]["notifications"]["status"],
        "ok"
    );
}

/// rsyslog with UDP, TCP and TLS inputs (each named, so the output says which one a line came
/// in on), writing each message's raw text to `out`.
fn rsyslog(dir: &Path, ca: &TestCa, ports: [u16; 3], out: &Path) -> Rsyslog {
    let [udp, tcp, tls] = ports;
    let work = dir.join("rsyslog");
    std::fs::create_dir_all(&work).unwrap();
    let conf = dir.join("rsyslog.conf");
    std::fs::write(
        &conf,
        format!(
            "global(workDirectory=\"{work}\" defaultNetstreamDriverCAFile=\"{ca}\" \
             defaultNetstreamDriverCertFile=\"{cert}\" defaultNetstreamDriverKeyFile=\"{key}\")\n\
             module(load=\"imudp\")\nmodule(load=\"imtcp\")\n\
             input(type=\"imudp\" port=\"{udp}\" address=\"127.0.0.1\" name=\"udp\")\n\
             input(type=\"imtcp\" port=\"{tcp}\" address=\"127.0.0.1\" name=\"tcp\")\n\
             input(type=\"imtcp\" port=\"{tls}\" address=\"127.0.0.1\" name=\"tls\" \
             streamDriver.name=\"gtls\" streamDriver.mode=\"1\" streamDriver.authMode=\"anon\")\n\
             template(name=\"raw\" type=\"string\" string=\"%inputname% %msgid% %msg%\\n\")\n\
             *.* action(type=\"omfile\" file=\"{out}\" template=\"raw\")\n",
            work = work.display(),
            ca = ca.ca_file.display(),
            cert = ca.cert_file.display(),
            key = ca.key_file.display(),
            out = out.display(),
        ),
    )
    .unwrap();
    Rsyslog::start(dir, &conf, &[tcp, tls], "rsyslog and rsyslog-gnutls")
}

/// The lines of `out` once it holds `at_least` (or `within` passed).
fn lines_of(out: &Path, at_least: usize, within: Duration) -> Vec<String> {
    let t = Instant::now();
    loop {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= at_least || t.elapsed() > within {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn cef_alerts_reach_rsyslog_over_udp_tcp_and_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "rsyslog");
    let ports = [free_port(), free_port(), free_port()];
    let out = dir.path().join("siem.log");
    let _rsyslog = rsyslog(dir.path(), &ca, ports, &out);
    let (api, tcp) = (free_port(), free_port());
    let mut channels = String::new();
    for (transport, port) in ["udp", "tcp", "tls"].iter().zip(ports) {
        channels.push_str(&format!(
            "[[notifications]]\nname = \"siem-{transport}\"\nkind = \"syslog\"\n\
             syslog_address = \"127.0.0.1:{port}\"\nsyslog_transport = \"{transport}\"\n\
             tls_ca_file = \"{}\"\nmin_severity = 0\n",
            ca.ca_file.display()
        ));
    }
    let config = config_with(dir.path(), api, tcp, &channels);
    let _svc = Service::start(dir.path(), &config, api);
    send_lines(tcp, &invalid_user_lines());

    let lines = lines_of(&out, 3, Duration::from_secs(30));
    for input in ["udp", "tcp", "tls"] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("{input} ")))
            .unwrap_or_else(|| panic!("nothing came over {input}: {lines:?}"));
        assert!(
            line.starts_with(&format!("{input} alert CEF:0|Watchpost|Watchpost|")),
            "{line}"
        );
        assert!(line.contains(&format!("|{RULE}|")), "{line}");
        assert!(line.contains("cs1Label=alertId cs1="), "{line}");
    }
    assert_eq!(lines.len(), 3, "one message per channel: {lines:?}");
    // The receiver may write a line before the sender has counted it: wait for the counts.
    let stats = wait_for(api, "/api/v1/stats", |v| {
        v["notifications"]["channels"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["alerts_sent"] != 0)
    });
    for c in stats["notifications"]["channels"].as_array().unwrap() {
        assert_eq!(c["alerts_sent"], 1, "{c}");
    }
    // A second message on each: over TCP and TLS it follows the first on the kept connection,
    // and the collector still reads each frame whole.
    let (status, body) = http(api, "POST", "/api/v1/notifications/test", "");
    assert_eq!(status, 200, "{body}");
    let lines = lines_of(&out, 6, Duration::from_secs(10));
    for input in ["udp", "tcp", "tls"] {
        let prefix = format!("{input} test CEF:0|Watchpost|Watchpost|");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&prefix) && l.ends_with(|c: char| c.is_ascii_hexdigit())),
            "no whole test message over {input}: {lines:?}"
        );
    }
    assert_eq!(lines.len(), 6, "{lines:?}");
}

/// aiosmtpd (`tests/data/smtp_server.py`) on `port`, writing messages into `outdir`.
struct Smtp(Child);

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn smtp_server(ca: &TestCa, port: u16, outdir: &Path) -> Smtp {
    // Debian's python3 has python3-aiosmtpd; a `python3` earlier on PATH may be another one.
    let python = ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .args(["-c", "import aiosmtpd"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .expect("a python3 with aiosmtpd (scripts/setup installs python3-aiosmtpd)");
    let mut child = Command::new(python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/smtp_server.py"
        ))
        .arg(port.to_string())
        .arg(outdir)
        .arg(&ca.cert_file)
        .arg(&ca.key_file)
        .args(["alerts@example.org", "mail-pass-1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    Smtp(child)
}

#[test]
fn an_alert_is_mailed_through_starttls_and_auth_and_a_wrong_password_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "smtp");
    let (smtp_port, api, tcp) = (free_port(), free_port(), free_port());
    let mailbox = dir.path().join("mailbox");
    std::fs::create_dir_all(&mailbox).unwrap();
    let _smtp = smtp_server(&ca, smtp_port, &mailbox);
    let mail = |name: &str, password: &str| {
        format!(
            "[[notifications]]\nname = \"{name}\"\nkind = \"email\"\nsmtp_host = \"127.0.0.1\"\n\
             smtp_port = {smtp_port}\nsmtp_username = \"alerts@example.org\"\n\
             smtp_password = \"{password}\"\nemail_from = \"watchpost@example.org\"\n\
             email_to = [\"soc@example.org\", \"oncall@example.org\"]\n\
             tls_ca_file = \"{}\"\nmin_severity = 0\nmax_backoff_s = 1\n",
            ca.ca_file.display()
        )
    };
    let channels = mail("mail", "mail-pass-1") + &mail("mail-bad", "Wr0ng-Pa55word");
    let (_svc, log) = start_and_alert(dir.path(), api, tcp, &channels);

    let t = Instant::now();
    let message = loop {
        let mut files: Vec<_> = std::fs::read_dir(&mailbox)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "eml"))
            .collect();
        files.sort();
        if let Some(first) = files.first() {
            break std::fs::read_to_string(first).unwrap();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no mail arrived");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        message.contains("X-Envelope-From: watchpost@example.org"),
        "{message}"
    );
    assert!(
        message.contains("X-Envelope-To: soc@example.org"),
        "{message}"
    );
    assert!(
        message.contains("X-Envelope-To: oncall@example.org"),
        "{message}"
    );
    assert!(message.contains("Subject: Watchpost low:"), "{message}");
    // Quoted-printable wraps long lines with a soft break (`=` at the end of a line).
    let unfolded = message.replace("=\n", "").replace("=\r\n", "");
    assert!(
        unfolded.contains(&format!(
            "Detector: SSH Login Attempt for Non-Existent User ({RULE})"
        )),
        "{message}"
    );
    assert!(unfolded.contains("Entity: user oracle"), "{message}");
    let delivery = message
        .lines()
        .find_map(|l| l.strip_prefix("Delivery id: "))
        .unwrap();
    assert!(
        message.contains(&format!("Message-ID: <{delivery}@watchpost>")),
        "{message}"
    );
    // The channel with a wrong password fails, retried, with the server's refusal.
    let bad = {
        let t = Instant::now();
        loop {
            let c = stats_channel(api, "mail-bad");
            if c["failures"].as_u64().unwrap() >= 2 {
                break c;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "{c}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let error = bad["last_error"].as_str().unwrap();
    assert!(error.contains("535"), "{error}");
    // Neither the password nor its base64 (what AUTH PLAIN and LOGIN send) is echoed or logged.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("mail-bad"),
        "the failure is logged: {logged}"
    );
    for shown in [error, &logged, &http(api, "GET", "/api/v1/stats", "").1] {
        for secret in [
            "Wr0ng-Pa55word",
            "V3IwbmctUGE1NXdvcmQ",
            "XcjBuZy1QYTU1d29yZA",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }
    assert_eq!(stats_channel(api, "mail")["alerts_sent"], 1);
}
