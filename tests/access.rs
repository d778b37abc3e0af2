//! Who may call the API and how often, against the running service: the rate-limit families, per
//! instance and shared by two instances through a real `redis-server` (including what happens
//! when the store goes away, TLS with client certificates and an ACL user, and Sentinel through
//! a failover), and what browsers are told (CORS, security headers).

mod common;

use common::tls::TestCa;
use common::{Redis, RedisKind, Service, free_port, header, http, json, request};
use std::path::Path;
use std::time::{Duration, Instant};

/// A service on its own port with the given top-level keys; ingestion inputs off.
fn start(dir: &Path, keys: &str) -> (Service, u16) {
    let api = free_port();
    let config = dir.join(format!("watchpost-{api}.toml"));
    let probe = if keys.contains("health_port") {
        ""
    } else {
        "health_port = 0\n"
    };
    std::fs::write(
        &config,
        format!(
            "dashboard_port = {api}\n{probe}{keys}\n[storage]\ndata_dir = \"data-{api}\"\n[inputs.syslog_udp]\nenabled = false\n[inputs.syslog_tcp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[dataplane]\npin_workers = false\n"
        ),
    )
    .unwrap();
    (Service::start(dir, &config, api), api)
}

fn status(api: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    request(api, "GET", path, headers, "")
}

#[test]
fn each_family_has_its_own_allowance_per_client() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(
        dir.path(),
        "api_list_rate_limit = \"3/minute\"\napi_detail_rate_limit = \"5/minute\"",
    );
    for _ in 0..3 {
        assert_eq!(status(api, "/api/v1/alerts", &[]).0, 200);
    }
    let (code, head, body) = status(api, "/api/v1/events", &[]);
    assert_eq!(code, 429, "the 4th list request in a minute: {body}");
    let e = json(&body);
    assert_eq!(
        (e["error"].as_str(), e["family"].as_str()),
        (Some("rate_limited"), Some("list"))
    );
    assert_eq!(
        header(&head, "retry-after"),
        Some("20"),
        "one request per 20 s: {head}"
    );
    // Without api_trust_proxy_headers a forwarded address changes nothing.
    let spoofed = [("X-Forwarded-For", "198.51.100.1")];
    assert_eq!(status(api, "/api/v1/alerts", &spoofed).0, 429);
    // The detail family is counted apart; system routes are never limited.
    let uuid = "/api/v1/entities/00000000-0000-5000-8000-000000000000/risk-history";
    for _ in 0..5 {
        assert_ne!(status(api, uuid, &[]).0, 429);
    }
    assert_eq!(status(api, uuid, &[]).0, 429);
    for _ in 0..20 {
        assert_eq!(http(api, "GET", "/api/v1/health", "").0, 200);
    }
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(stats["api"]["rate_limited"]["list"], 2);
    assert_eq!(stats["api"]["rate_limited"]["detail"], 1);
}

#[test]
fn behind_a_trusted_proxy_the_forwarded_address_is_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(
        dir.path(),
        "api_list_rate_limit = \"2/minute\"\napi_trust_proxy_headers = true",
    );
    // The proxy appends the address it saw; what the client wrote before it is not trusted.
    let a = [("X-Forwarded-For", "10.9.9.9, 203.0.113.1")];
    let b = [("X-Forwarded-For", "10.9.9.9, 203.0.113.2")];
    for _ in 0..2 {
        assert_eq!(status(api, "/api/v1/alerts", &a).0, 200);
    }
    assert_eq!(status(api, "/api/v1/alerts", &a).0, 429);
    assert_eq!(status(api, "/api/v1/alerts", &b).0, 200, "another client");
}

#[test]
fn two_instances_share_limits_through_redis_and_serve_on_when_it_is_gone() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let keys = format!(
        "api_list_rate_limit = \"4/minute\"\napi_rate_limit_store_url = \"redis://127.0.0.1:{}/0\"",
        redis.port
    );
    let (_a, api_a) = start(dir.path(), &keys);
    let (_b, api_b) = start(dir.path(), &keys);
    let health = json(&http(api_a, "GET", "/api/v1/health", "").1);
    assert_eq!(
        health["components"]["rate_limit_store"]["status"], "ok",
        "{health}"
    );

    for api in [api_a, api_b, api_a, api_b] {
        assert_eq!(status(api, "/api/v1/alerts", &[]).0, 200);
    }
    // Four taken over two instances: the fifth is refused on either.
    for api in [api_a, api_b] {
        let (code, head, _) = status(api, "/api/v1/alerts", &[]);
        assert_eq!(code, 429);
        assert_eq!(header(&head, "retry-after"), Some("15"));
    }

    // The store goes away: the API keeps answering (limits fall back to each instance) and
    // /health says the store is degraded.
    let port = redis.port;
    drop(redis);
    let (code, _, body) = status(api_a, "/api/v1/events", &[]);
    assert!(
        code == 200 || code == 429,
        "served, not failed: {code} {body}"
    );
    let (code, _, body) = request(api_a, "GET", "/api/v1/health", &[], "");
    assert_eq!(code, 503, "{body}");
    let h = json(&body);
    assert_eq!(h["components"]["rate_limit_store"]["status"], "degraded");
    assert!(
        h["degraded"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == "rate-limit store"),
        "{h}"
    );
    assert!(h["components"]["rate_limit_store"]["last_error"].is_string());
    // Per instance now: B has its own fresh allowance of four.
    for _ in 0..4 {
        assert_eq!(status(api_b, "/api/v1/sigma/rules", &[]).0, 200);
    }
    assert_eq!(status(api_b, "/api/v1/sigma/rules", &[]).0, 429);

    // Back at the same address: health recovers (reconnection is tried once a second).
    let _redis = Redis::start_on(port);
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    let (code, _, body) = request(api_a, "GET", "/api/v1/health", &[], "");
    assert_eq!(code, 200, "{body}");
}

/// The store's part of `/health`.
fn store_health(api: u16) -> serde_json::Value {
    json(&http(api, "GET", "/api/v1/health", "").1)["components"]["rate_limit_store"].clone()
}

/// Issue 53, item 5: Redis as users run it. TLS with a private CA and Redis's default
/// `tls-auth-clients yes` (so the service shows a client certificate), an ACL user allowed only
/// the limiter's keys whose password holds URL-reserved characters, and the default user off.
#[test]
fn two_instances_share_limits_over_tls_as_an_acl_user_and_bad_credentials_degrade_health() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "redis");
    let (client_cert, client_key) = ca.client(dir.path(), "watchpost");
    let redis = Redis::start_configured(
        free_port(),
        &format!(
            "tls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\ntls-auth-clients yes\n\
             user default off\nuser watchpost on >s3cr@t:pw ~watchpost:rl:* +@all -@dangerous\n",
            ca.cert_file.display(),
            ca.key_file.display(),
            ca.ca_file.display()
        ),
        RedisKind::Tls,
    );
    let files = format!(
        "api_rate_limit_store_ca_file = \"{}\"\napi_rate_limit_store_cert_file = \"{}\"\n\
         api_rate_limit_store_key_file = \"{}\"\n",
        ca.ca_file.display(),
        client_cert.display(),
        client_key.display()
    );
    let keys = |password: &str, files: &str| {
        format!(
            "api_list_rate_limit = \"4/minute\"\n{files}\
             api_rate_limit_store_url = \"rediss://watchpost:{password}@127.0.0.1:{}/0\"",
            redis.port
        )
    };
    let good = keys("s3cr%40t%3Apw", &files);
    let (_a, api_a) = start(dir.path(), &good);
    let (_b, api_b) = start(dir.path(), &good);
    let h = store_health(api_a);
    assert_eq!(h["status"], "ok", "{h}");
    assert_eq!(h["address"], format!("tls 127.0.0.1:{}", redis.port));
    for api in [api_a, api_b, api_a, api_b] {
        assert_eq!(status(api, "/api/v1/alerts", &[]).0, 200);
    }
    for api in [api_a, api_b] {
        assert_eq!(status(api, "/api/v1/alerts", &[]).0, 429, "shared over TLS");
    }
    assert_eq!(
        store_health(api_b)["checks"],
        3,
        "every check answered by the store"
    );

    // A wrong password, and the right one without a client certificate: each instance serves
    // on its own limits and says why the store is degraded.
    for (config, says) in [
        (keys("wrong", &files), "authentication failed"),
        (
            keys(
                "s3cr%40t%3Apw",
                &format!(
                    "api_rate_limit_store_ca_file = \"{}\"\n",
                    ca.ca_file.display()
                ),
            ),
            "CertificateRequired",
        ),
    ] {
        let (_c, api_c) = start(dir.path(), &config);
        assert_eq!(status(api_c, "/api/v1/alerts", &[]).0, 200, "served");
        let h = store_health(api_c);
        assert_eq!(h["status"], "degraded", "{h}");
        let error = h["last_error"].as_str().unwrap_or_default().to_string();
        assert!(error.contains(says) && !error.contains("s3cr"), "{error}");
    }
}

/// Issue 53, item 5: with Sentinel the service asks the sentinels (with their own password)
/// for the master, and when the master dies follows them to the replica they promote, where
/// the allowances, replicated, still hold.
#[test]
fn through_sentinel_the_limits_follow_the_master_when_it_dies() {
    let auth = "requirepass mpw\nmasterauth mpw\n";
    let master = Redis::start_configured(free_port(), auth, RedisKind::Plain);
    let replica = Redis::start_configured(
        free_port(),
        &format!("{auth}replicaof 127.0.0.1 {}\n", master.port),
        RedisKind::Plain,
    );
    let synced = |r: &Redis| r.cli(&["-a", "mpw", "INFO", "replication"]);
    wait_until("the replica syncs", || {
        synced(&replica).contains("master_link_status:up")
    });
    let sentinel = Redis::start_configured(
        free_port(),
        &format!(
            "requirepass spw\nsentinel monitor cache 127.0.0.1 {} 1\n\
             sentinel auth-pass cache mpw\nsentinel down-after-milliseconds cache 1000\n\
             sentinel failover-timeout cache 3000\n",
            master.port
        ),
        RedisKind::Sentinel,
    );
    let ask = |args: &[&str]| sentinel.cli(&[&["-a", "spw"], args].concat());
    wait_until("the sentinel knows the replica", || {
        ask(&["SENTINEL", "REPLICAS", "cache"]).contains(&replica.port.to_string())
    });

    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(
        dir.path(),
        &format!(
            "api_list_rate_limit = \"2/hour\"\napi_rate_limit_store_url = \
             \"redis+sentinel://:mpw@127.0.0.1:{}/cache/0?sentinel_password=spw\"",
            sentinel.port
        ),
    );
    let h = store_health(api);
    assert_eq!(h["status"], "ok", "{h}");
    assert_eq!(
        h["address"],
        format!("master cache via sentinel 127.0.0.1:{}", sentinel.port)
    );
    for _ in 0..2 {
        assert_eq!(status(api, "/api/v1/alerts", &[]).0, 200);
    }
    assert_eq!(status(api, "/api/v1/alerts", &[]).0, 429);
    assert!(
        master
            .cli(&["-a", "mpw", "KEYS", "watchpost:rl:*"])
            .contains("watchpost:rl:list")
    );

    // The master dies: the sentinel sees it down after a second and promotes the replica.
    drop(master);
    wait_until("the sentinel names the replica as master", || {
        ask(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "cache"]).contains(&replica.port.to_string())
    });
    wait_until("the promoted replica takes writes", || {
        replica.cli(&["-a", "mpw", "ROLE"]).starts_with("master")
    });
    // Checks failed on the dead master and fell back; the service asks the sentinel again (once
    // a second) and reaches the new master, which has the allowance: refused again, by the
    // store (the only one left to answer).
    let checks_before = store_health(api)["checks"].as_u64().unwrap();
    wait_until("a check answered by the new master", || {
        let refused = status(api, "/api/v1/alerts", &[]).0 == 429;
        let h = store_health(api);
        refused && h["status"] == "ok" && h["checks"].as_u64().unwrap() > checks_before
    });
    assert!(
        replica
            .cli(&["-a", "mpw", "KEYS", "watchpost:rl:*"])
            .contains("watchpost:rl:list")
    );
}

/// Polls `ready` every 100 ms for up to 20 s.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ready() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{what}: not within 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn cors_follows_api_allowed_origins_and_every_answer_has_security_headers() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api) = start(
        dir.path(),
        "api_allowed_origins = [\"https://soc.example.com\"]",
    );
    let ok = [("Origin", "https://soc.example.com")];
    let (code, head, _) = status(api, "/api/v1/alerts", &ok);
    assert_eq!(code, 200);
    assert_eq!(
        header(&head, "access-control-allow-origin"),
        Some("https://soc.example.com")
    );
    assert_eq!(header(&head, "x-content-type-options"), Some("nosniff"));
    assert!(
        header(&head, "content-security-policy").is_some_and(|c| c.contains("default-src 'none'"))
    );
    let preflight = [
        ("Origin", "https://soc.example.com"),
        ("Access-Control-Request-Method", "PATCH"),
    ];
    let (code, head, _) = request(api, "OPTIONS", "/api/v1/alerts/x", &preflight, "");
    assert_eq!(code, 204, "{head}");
    assert!(header(&head, "access-control-allow-methods").is_some_and(|m| m.contains("PATCH")));
    // Another origin: no CORS header (the browser keeps the answer from the page), preflight 403.
    let evil = [("Origin", "https://evil.example")];
    let (code, head, _) = status(api, "/api/v1/alerts", &evil);
    assert_eq!(code, 200);
    assert_eq!(header(&head, "access-control-allow-origin"), None);
    let preflight = [
        ("Origin", "https://evil.example"),
        ("Access-Control-Request-Method", "GET"),
    ];
    let (code, _, body) = request(api, "OPTIONS", "/api/v1/alerts", &preflight, "");
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (403, Some("origin_not_allowed"))
    );
    // Writes from another site are refused before any handler runs (a text/plain POST needs no
    // preflight); the listed origin, this listener's own and non-browser clients may write.
    let line = r#"{"message":"cross-site test","host.name":"web-01"}"#;
    let own = format!("http://127.0.0.1:{api}");
    for (origin, want) in [
        (Some("https://evil.example"), 403),
        (Some("null"), 403),
        (Some("http://localhost:1"), 403),
        (Some("https://soc.example.com"), 202),
        (Some(own.as_str()), 202),
        (None, 202),
    ] {
        let headers: Vec<(&str, &str)> = origin.iter().map(|o| ("Origin", *o)).collect();
        let (code, _, body) = request(api, "POST", "/api/v1/ingest", &headers, line);
        assert_eq!(code, want, "{origin:?}: {body}");
        if want == 403 {
            assert_eq!(json(&body)["error"], "origin_not_allowed");
        }
    }
    let (code, _, _) = request(
        api,
        "PATCH",
        "/api/v1/alerts/x",
        &[("Origin", "https://evil.example")],
        r#"{"status":"closed","reason":"other"}"#,
    );
    assert_eq!(code, 403, "a cross-site triage");
    // Errors carry the headers too.
    let (code, head, _) = status(api, "/api/v1/nope", &[]);
    assert_eq!(code, 404);
    assert_eq!(header(&head, "x-frame-options"), Some("DENY"));
}

/// DNS rebinding: a page on an attacker's domain rebinds its name to 127.0.0.1 and is then
/// same-origin with itself, so CORS and Origin checks let it through. Its `Host` still carries
/// the attacker's name, and every listener refuses it.
#[test]
fn requests_naming_another_host_are_refused_on_every_listener() {
    let dir = tempfile::tempdir().unwrap();
    let probe = free_port();
    let (_svc, api) = start(
        dir.path(),
        &format!("health_port = {probe}\napi_allowed_hosts = [\"soc.corp.example\"]"),
    );
    let rebound = format!("rebind.attacker.example:{api}");
    let origin = format!("http://{rebound}");
    let page = [("Host", rebound.as_str()), ("Origin", origin.as_str())];
    let rule = "/api/v1/sigma/rules/dcec6854-a593-491f-9a9c-59c065d2aca7";
    for (method, path, body) in [
        ("GET", "/api/v1/config", ""),
        ("PATCH", rule, r#"{"enabled": false}"#),
        ("GET", "/", ""),
        ("GET", "/api/v1/nope", ""),
        ("OPTIONS", "/api/v1/alerts", ""),
    ] {
        let (code, head, text) = request(api, method, path, &page, body);
        assert_eq!(
            (code, json(&text)["error"].as_str()),
            (421, Some("host_not_allowed")),
            "{method} {path}: {text}"
        );
        assert_eq!(header(&head, "x-content-type-options"), Some("nosniff"));
    }
    let upgrade = [
        ("Host", rebound.as_str()),
        ("Origin", origin.as_str()),
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    assert_eq!(request(api, "GET", "/api/v1/ws", &upgrade, "").0, 421);
    let probe_rebound = format!("rebind.attacker.example:{probe}");
    let (code, _, text) = request(probe, "GET", "/metrics", &[("Host", &probe_rebound)], "");
    assert_eq!(code, 421, "{text}");
    // A loopback name at another port is not this listener either; no Host at all is a 400.
    let other_port = format!("localhost:{probe}");
    assert_eq!(
        status(api, "/api/v1/health", &[("Host", &other_port)]).0,
        421
    );
    let mut s = std::net::TcpStream::connect(("127.0.0.1", api)).unwrap();
    std::io::Write::write_all(&mut s, b"GET /api/v1/health HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.0 400"), "{answer}");
    assert!(answer.contains("host_missing"), "{answer}");

    // The rule is untouched, the service runs on, and every refusal is counted.
    let (code, body) = http(api, "GET", rule, "");
    assert_eq!(
        (code, json(&body)["enabled"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    assert_eq!(stats["api"]["refused_host"], 9, "{}", stats["api"]);
    let (_, metrics) = http(probe, "GET", "/metrics", "");
    assert_eq!(
        parse_exposition(&metrics).get("watchpost_api_refused_host_total"),
        Some(&9.0)
    );
    // The service's own names at its port, and a listed name at any port, are answered.
    for host in [
        format!("localhost:{api}"),
        format!("[::1]:{api}"),
        "soc.corp.example".to_string(),
        "SOC.corp.example:443".to_string(),
    ] {
        let (code, _, text) = status(api, "/api/v1/health", &[("Host", &host)]);
        assert_eq!(code, 200, "{host}: {text}");
    }
    let own = format!("localhost:{probe}");
    assert_eq!(
        request(probe, "GET", "/health", &[("Host", &own)], "").0,
        200
    );
}

/// Checks the Prometheus text format line by line: every family announced by HELP and TYPE
/// before its samples, every sample `name{labels} value` with a number, histogram buckets
/// cumulative and ending in `+Inf` equal to `_count`. Returns the samples by their full name.
fn parse_exposition(text: &str) -> std::collections::BTreeMap<String, f64> {
    let mut typed: std::collections::BTreeMap<String, String> = Default::default();
    let mut samples = std::collections::BTreeMap::new();
    let mut last_bucket: Option<(String, f64)> = None;
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(
                typed.insert(name.into(), kind.into()).is_none(),
                "twice: {line}"
            );
            current = Some(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|sfx| {
                name.strip_suffix(sfx)
                    .filter(|f| typed.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert_eq!(
            current.as_deref(),
            Some(family),
            "a sample outside its family's group: {line}"
        );
        if name.ends_with("_bucket") {
            let key = series
                .split(",le=")
                .next()
                .unwrap()
                .split("{le=")
                .next()
                .unwrap()
                .to_string();
            if let Some((k, prev)) = &last_bucket
                && *k == key
            {
                assert!(value >= *prev, "buckets not cumulative at {line}");
            }
            last_bucket = Some((key, value));
        } else if name.ends_with("_count") && typed.get(family).is_some_and(|k| k == "histogram") {
            let (_, inf) = last_bucket.clone().unwrap();
            assert_eq!(inf, value, "+Inf bucket differs from the count at {line}");
        }
        assert!(
            samples.insert(series.to_string(), value).is_none(),
            "twice: {line}"
        );
    }
    samples
}

#[test]
fn probes_and_metrics_have_their_own_listener() {
    let dir = tempfile::tempdir().unwrap();
    let probe = free_port();
    let (_svc, api) = start(
        dir.path(),
        &format!(
            "health_port = {probe}\napi_list_rate_limit = \"1/minute\"\n[inputs.http]\nenabled = true"
        ),
    );
    for path in ["/health", "/api/v1/health"] {
        let (code, body) = http(probe, "GET", path, "");
        assert_eq!(
            (code, json(&body)["status"].as_str()),
            (200, Some("ok")),
            "{path}: {body}"
        );
    }
    // Only probes there: the API stays on its own listener.
    let (code, body) = http(probe, "GET", "/api/v1/alerts", "");
    assert_eq!(
        (code, json(&body)["error"].as_str()),
        (404, Some("not_found"))
    );
    // Every answer there carries the security headers too, refusals included.
    for path in ["/health", "/metrics", "/api/v1/alerts"] {
        let (_, head, _) = request(probe, "GET", path, &[], "");
        for (name, want) in [
            ("x-content-type-options", "nosniff"),
            ("x-frame-options", "DENY"),
            ("referrer-policy", "no-referrer"),
            ("cache-control", "no-store"),
        ] {
            assert_eq!(header(&head, name), Some(want), "{path} {name}: {head}");
        }
        assert!(
            header(&head, "content-security-policy")
                .is_some_and(|c| c.contains("default-src 'none'")),
            "{path}: {head}"
        );
    }

    // Something to count: an accepted and a refused list request, and two events stored.
    assert_eq!(status(api, "/api/v1/alerts", &[]).0, 200);
    assert_eq!(status(api, "/api/v1/alerts", &[]).0, 429);
    let (code, body) = http(
        api,
        "POST",
        "/api/v1/ingest",
        "{\"message\":\"one\"}\n{\"message\":\"two\"}",
    );
    assert_eq!(code, 202, "{body}");
    let t = std::time::Instant::now();
    let samples = loop {
        let (code, head, text) = request(probe, "GET", "/metrics", &[], "");
        assert_eq!(code, 200);
        assert_eq!(
            header(&head, "content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        let samples = parse_exposition(&text);
        if samples.get("watchpost_events_stored_total") == Some(&2.0) {
            break samples;
        }
        assert!(t.elapsed().as_secs() < 20, "never stored: {text}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let get = |k: &str| samples.get(k).copied().unwrap_or_else(|| panic!("no {k}"));
    assert_eq!(get(r#"watchpost_input_received_total{input="http"}"#), 2.0);
    assert!(get("watchpost_ingest_to_store_seconds_count") >= 1.0);
    assert!(get("watchpost_store_commit_seconds_count") >= 1.0);
    assert_eq!(
        get(r#"watchpost_api_requests_total{method="GET",route="/api/v1/alerts",status="200"}"#),
        1.0
    );
    assert_eq!(
        get(r#"watchpost_api_requests_total{method="GET",route="/api/v1/alerts",status="429"}"#),
        1.0
    );
    assert_eq!(
        get(r#"watchpost_api_request_duration_seconds_count{method="GET",route="/api/v1/alerts"}"#),
        2.0
    );
    assert_eq!(
        get(r#"watchpost_api_rate_limited_total{family="list"}"#),
        1.0
    );
    assert_eq!(get(r#"watchpost_worker_up{stage="parse",worker="0"}"#), 1.0);
    assert_eq!(get("watchpost_store_writer_up"), 1.0);
    assert!(
        samples
            .keys()
            .any(|k| k.starts_with("watchpost_ring_depth{ring="))
    );
    // The same exposition on the API listener, unlimited too.
    for _ in 0..3 {
        assert_eq!(status(api, "/metrics", &[]).0, 200);
    }
}
