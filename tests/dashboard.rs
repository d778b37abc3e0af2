//! The dashboard against the running service: what `GET /` and its assets are served with (the
//! strict content-security policy above all), and the page itself driven in headless Chromium
//! (`ui/tests/dashboard.mjs`) while log lines flow in.

mod common;

use common::{
    LOW_ALERTS, Service, browser_tools, free_port, header, http, invalid_user_lines, json, request,
    send_lines, stamp,
};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn start(dir: &Path) -> (Service, u16, u16) {
    let (api, tcp) = (free_port(), free_port());
    let config = dir.join("watchpost.toml");
    // A threat feed with one address, for the indicator and kill-chain alerts.
    let feeds = dir.join("feeds");
    std::fs::create_dir_all(&feeds).unwrap();
    std::fs::write(
        feeds.join("blocklist.csv"),
        "indicator,type,description\n198.51.100.77,ipv4,known SSH scanner\n",
    )
    .unwrap();
    std::fs::write(
        &config,
        format!(
            "{LOW_ALERTS}\ndetection.ioc_dir = \"{}\"\ndashboard_port = {api}\nhealth_port = 0\napi_list_rate_limit = \"100000/minute\"\nws_filter_min_interval_ms = 1500\n[inputs.syslog_udp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[inputs.syslog_tcp]\naddress = \"127.0.0.1:{tcp}\"\n[dataplane]\npin_workers = false\n[llm]\nrule_suggestion_min_tp = 1\n",
            feeds.display()
        ),
    )
    .unwrap();
    (Service::start(dir, &config, api), api, tcp)
}

#[test]
fn the_page_and_its_assets_carry_the_strict_policy() {
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api, _) = start(dir.path());
    let (code, head, body) = request(api, "GET", "/", &[], "");
    assert_eq!(code, 200);
    assert!(body.starts_with("<!doctype html>"), "{body}");
    assert_eq!(
        header(&head, "content-security-policy"),
        Some(watchpost_controlplane::CSP)
    );
    for (name, want) in [
        ("content-type", "text/html; charset=utf-8"),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
        ("cache-control", "no-cache"),
    ] {
        assert_eq!(header(&head, name), Some(want), "{name}: {head}");
    }
    assert!(header(&head, "permissions-policy").is_some_and(|p| p.contains("camera=()")));
    let csp = watchpost_controlplane::CSP;
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "object-src 'none'",
        "require-trusted-types-for 'script'",
    ] {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");

    // Every file, with its type and tag; an unchanged file revalidates to a 304 with no body.
    for a in &watchpost_ui::ASSETS {
        let (code, head, body) = request(api, "GET", &format!("/assets/{}", a.name), &[], "");
        assert_eq!(code, 200, "{}", a.name);
        assert_eq!(header(&head, "content-type"), Some(a.content_type));
        assert_eq!(body.as_bytes(), a.body, "{}", a.name);
        assert_eq!(
            header(&head, "content-security-policy"),
            Some(watchpost_controlplane::CSP)
        );
        let tag = header(&head, "etag").unwrap().to_string();
        let (code, head, body) = request(
            api,
            "GET",
            &format!("/assets/{}", a.name),
            &[("If-None-Match", &tag)],
            "",
        );
        assert_eq!((code, body.as_str()), (304, ""), "{}", a.name);
        assert_eq!(header(&head, "etag"), Some(tag.as_str()));
        let stale = request(
            api,
            "GET",
            &format!("/assets/{}", a.name),
            &[("If-None-Match", "\"0000000000000000\"")],
            "",
        );
        assert_eq!(stale.0, 200);
    }

    // Unknown files and paths that try to leave the asset table are 404s in the API's shape.
    for path in [
        "/assets/nope.js",
        "/assets/..%2FCargo.toml",
        "/assets/../Cargo.toml",
        "/assets/",
        "/index.html",
    ] {
        let (code, body) = http(api, "GET", path, "");
        assert_eq!(code, 404, "{path}: {body}");
        assert_eq!(json(&body)["error"], "not_found", "{path}");
    }
    assert_eq!(http(api, "POST", "/", "").0, 405);
    // The API keeps its own, stricter policy: JSON loads nothing.
    let (_, head, _) = request(api, "GET", "/api/v1/health", &[], "");
    assert_eq!(
        header(&head, "content-security-policy"),
        Some("default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
    );
}

#[test]
fn a_person_can_watch_triage_and_filter_in_a_real_browser() {
    let Some((ui, chromium)) = browser_tools() else {
        // CI installs all three (scripts/setup); a developer machine without them says so.
        assert!(
            std::env::var("CI").is_err(),
            "CI needs node, Chromium and ui/node_modules (scripts/setup installs them)"
        );
        eprintln!("SKIPPED: node, Chromium or ui/node_modules missing; run scripts/setup");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_svc, api, tcp) = start(dir.path());
    // Alerts before the page opens: invalid-user lines fire a bundled Sigma rule. They carry the
    // present time (rsyslog's ISO form in the RFC 3164 position): the ATT&CK heatmap counts
    // fires by event time over the last 24 hours, so a fixed date would age out of it.
    // Failed passwords match an informational rule: signals, never alerts (the Signals tab).
    let failed: String = (0..2)
        .map(|i| {
            format!(
                "<86>{} web-01 sshd[31{i}]: Failed password for alice from 198.51.100.7 port 5100{i} ssh2\n",
                stamp(i - 3)
            )
        })
        .collect();
    // An account with history: logins twice an hour in business hours (08-18 UTC) over the
    // last ten days, enough event time and events for its UEBA baseline to finish warming up,
    // for the Entity Explorer's baseline and risk history. None within an hour of a day ago, where
    // the page's 24-hour ATT&CK window and the test's, taken seconds apart, could differ.
    let now_s = watchpost_proto::now_ns() / 1_000_000_000;
    let history: String = (1..=240i64)
        .rev()
        .filter(|h| !(23..=25).contains(h))
        .filter(|h| ((now_s - h * 3600) / 3600) % 24 >= 8 && ((now_s - h * 3600) / 3600) % 24 <= 18)
        .flat_map(|h| (0..2i64).map(move |j| (h, j)))
        .map(|(h, j)| {
            format!(
                "<86>{} bastion-01 sshd[4{h}{j}]: Accepted publickey for carol from 192.0.2.44 port 5{h:03}{j} ssh2\n",
                // A minute and eight minutes into the hour: both inside it, whatever the minute now.
                stamp(-h * 3600 - now_s % 3600 + 60 + j * 420)
            )
        })
        .collect();
    // An address on the feed guesses dave's password twelve times and gets in, a minute ago:
    // an indicator alert, the guessing-then-success correlation and a kill-chain alert joining
    // them, all older than the invalid-user alert, which stays the newest.
    let mut intrusion: String = (0..12)
        .map(|i| {
            format!(
                "<38>{} web-04 sshd[50{i:02}]: Failed password for dave from 198.51.100.77 port 410{i:02} ssh2\n",
                stamp(i - 80)
            )
        })
        .collect();
    intrusion.push_str(&format!(
        "<38>{} web-04 sshd[5100]: Accepted password for dave from 198.51.100.77 port 41100 ssh2\n",
        stamp(-60)
    ));
    let t = Instant::now();
    while json(&http(api, "GET", "/api/v1/ioc", "").1)["indicators"] != 1 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the feed was not loaded"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A population for UEBA: thirty accounts logging in from their own address in working
    // hours over fourteen days, then one of them at 03:00 UTC (the last 03:00 before now) from
    // an address it never used: a UEBA alert, older than the invalid-user one.
    let day = 86_400i64;
    let start = (now_s / day - 14) * day;
    let mut population = String::new();
    for d in 0..14 {
        for slot in 0..16 {
            for u in 0..30 {
                let at = start + d * day + 8 * 3600 + slot * 1800 + u * 20;
                population.push_str(&format!(
                    "<86>{} srv-01 sshd[6{u:02}]: Accepted password for user{u:02} from 10.0.{u}.5 port 50000 ssh2\n",
                    stamp(at - now_s)
                ));
            }
        }
    }
    let today = now_s / day * day;
    let attack = if now_s > today + 3 * 3600 + 60 {
        today + 3 * 3600
    } else {
        today - day + 3 * 3600
    };
    population.push_str(&format!(
        "<86>{} srv-01 sshd[699]: Accepted password for user07 from 203.0.113.50 port 50000 ssh2\n",
        stamp(attack - now_s)
    ));
    let lines = population + &history + &intrusion + &invalid_user_lines() + &failed;
    send_lines(tcp, &lines);
    let t = Instant::now();
    loop {
        let (code, body) = http(api, "GET", "/api/v1/alerts", "");
        assert_eq!(code, 200, "{body}");
        // Every kind the page is asked about is in before it opens (the invalid-user rule's
        // alert among them: the history's alerts alone would let the timeline draw without it).
        let (_, chains) = http(api, "GET", "/api/v1/alerts?detector=killchain", "");
        let (_, ueba) = http(api, "GET", "/api/v1/alerts?type=ueba", "");
        let (_, sigma) = http(api, "GET", "/api/v1/alerts?type=sigma", "");
        if json(&sigma)["meta"]["total"].as_u64() > Some(0)
            && json(&chains)["meta"]["total"].as_u64() > Some(0)
            && json(&ueba)["meta"]["total"].as_u64() > Some(0)
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "not every kind of alert was raised: sigma {}, killchain {}, ueba {}; all: {body}",
            json(&sigma)["meta"]["total"],
            json(&chains)["meta"]["total"],
            json(&ueba)["meta"]["total"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Lines keep coming while the browser watches: every severity, and hostile markup.
    let stop = Arc::new(AtomicBool::new(false));
    let feeding = stop.clone();
    let feeder = std::thread::spawn(move || {
        let mut i = 0u32;
        while !feeding.load(Ordering::Relaxed) {
            i += 1;
            let now = stamp(0);
            send_lines(
                tcp,
                &format!(
                    "<37>{now} web-03 app[{i}]: user login <img src=x onerror=alert(1)> ok\n\
                     <27>{now} web-02 cron[{i}]: job {i} failed badly\n\
                     <38>{now} web-01 sshd[{i}]: Connection closed by 10.0.0.{}\n",
                    i % 250
                ),
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let shots = std::env::temp_dir().join(format!("watchpost-dashboard-{api}"));
    let mut child = Command::new("node")
        .arg(ui.join("tests/dashboard.mjs"))
        .arg(format!("http://127.0.0.1:{api}"))
        .arg(&shots)
        .env("CHROMIUM", &chromium)
        .current_dir(&ui)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "the browser run failed ({status:?}); screenshots in {}\n{stdout}\n{stderr}",
        shots.display()
    );
    let summary = json(stdout.lines().last().unwrap_or("{}"));
    assert!(
        summary["html_sink"]
            .as_str()
            .unwrap()
            .starts_with("refused")
    );
    eprintln!("dashboard: {summary}; screenshots in {}", shots.display());
}
