//! RELP as operators run it: a real rsyslog (`rsyslogd` with `omrelp`, installed by
//! `scripts/setup`) takes syslog over TCP and forwards it to the service's RELP input, which
//! stores every message and answers each once it is durable.

mod common;

use common::{Rsyslog, Service, enable_relp, free_port, json, syslog_config, wait_for};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The forwarding configuration operators install, `deploy/rsyslog/60-watchpost-relp.conf`.
const DEPLOYED: &str = include_str!("../deploy/rsyslog/60-watchpost-relp.conf");

/// Starts rsyslog listening on `tcp_port` and forwarding everything over RELP to `relp_port`
/// with the deployed configuration.
fn rsyslog(dir: &std::path::Path, tcp_port: u16, relp_port: u16) -> Rsyslog {
    let work = dir.join("rsyslog");
    std::fs::create_dir_all(&work).unwrap();
    let conf = dir.join("rsyslog.conf");
    let forward = DEPLOYED.replacen("port=\"2514\"", &format!("port=\"{relp_port}\""), 1);
    assert_ne!(forward, DEPLOYED, "the deployed file names the RELP port");
    std::fs::write(
        &conf,
        format!(
            "global(workDirectory=\"{}\")\nmodule(load=\"imtcp\")\n\
             input(type=\"imtcp\" port=\"{tcp_port}\" address=\"127.0.0.1\")\n{forward}",
            work.display()
        ),
    )
    .unwrap();
    Rsyslog::start(dir, &conf, &[tcp_port], "rsyslog and rsyslog-relp")
}

#[test]
fn rsyslog_forwards_over_relp_and_every_message_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (api, relp, tcp) = (free_port(), free_port(), free_port());
    let config = syslog_config(dir.path(), api, None, "");
    enable_relp(&config, relp);
    let _svc = Service::start(dir.path(), &config, api);
    let _rsyslog = rsyslog(dir.path(), tcp, relp);
    let mut s = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    for i in 0..2000 {
        writeln!(
            s,
            "<38>Nov 27 01:00:00 web-01 sshd[{i}]: Accepted publickey for alice from 10.0.0.{} port 50022 ssh2",
            i % 250
        )
        .unwrap();
    }
    drop(s);
    let stats = wait_for(api, "/api/v1/stats", |v| {
        v["stored_total"].as_u64() >= Some(2000)
    });
    let relp_input = stats["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "relp")
        .unwrap();
    assert_eq!(relp_input["received"], 2000, "{relp_input}");
    assert_eq!(relp_input["parsed"], 2000, "{relp_input}");
    assert!(
        stats["spool"]["requests"].as_u64().unwrap() >= 1,
        "{}",
        stats["spool"]
    );
    let page = json(&common::http(api, "GET", "/api/v1/events?limit=1", "").1);
    let event = &page["items"][0];
    assert_eq!(event["source"], "sshd", "{event}");
    assert!(
        event["message"]
            .as_str()
            .unwrap()
            .starts_with("Accepted publickey for alice")
    );
}

/// Numbered lines `from..to` to rsyslog's TCP input, one connection.
fn send_numbered(tcp: u16, from: u32, to: u32) {
    let mut s = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    for i in from..to {
        writeln!(s, "<38>Nov 27 01:00:00 db-01 app[7]: relp line {i}").unwrap();
    }
}

/// How many of the numbered lines are stored, and how many of them more than once.
fn stored_lines(dir: &std::path::Path) -> (usize, usize) {
    use std::collections::HashMap;
    let store = watchpost_store::Store::open(
        &dir.join("data"),
        &watchpost_proto::config::StorageConfig::default(),
    )
    .unwrap();
    let mut seen: HashMap<u32, u32> = HashMap::new();
    store
        .scan_events(i64::MIN, i64::MAX, u64::MAX, |_, e| {
            if let Some(n) = e.message.strip_prefix("relp line ") {
                *seen.entry(n.parse().unwrap()).or_default() += 1;
            }
            true
        })
        .unwrap();
    (seen.len(), seen.values().filter(|c| **c > 1).count())
}

#[test]
fn with_the_deployed_settings_rsyslog_resumes_within_seconds_of_a_crash_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (api, relp, tcp) = (free_port(), free_port(), free_port());
    let config = syslog_config(dir.path(), api, None, "");
    enable_relp(&config, relp);
    let svc = Service::start(dir.path(), &config, api);
    let _rsyslog = rsyslog(dir.path(), tcp, relp);
    send_numbered(tcp, 0, 500);
    wait_for(api, "/api/v1/stats", |v| {
        v["stored_total"].as_u64() >= Some(500)
    });
    svc.kill();
    // rsyslog takes these while the service is gone: its action is suspended and queues them.
    send_numbered(tcp, 500, 1000);
    std::thread::sleep(Duration::from_secs(3));
    let svc = Service::start(dir.path(), &config, api);
    let back = Instant::now();
    send_numbered(tcp, 1000, 1500);
    // With rsyslog's defaults the first retry comes 30 s after the suspension.
    let t = Instant::now();
    loop {
        let stored = json(&common::http(api, "GET", "/api/v1/stats", "").1)["stored_total"]
            .as_u64()
            .unwrap_or(0);
        if stored >= 1000 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "rsyslog had not resumed 15 s after the restart ({stored} stored)"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let resumed = back.elapsed();
    // Everything arrives: the last lines may still be on their way.
    let t = Instant::now();
    while json(&common::http(api, "GET", "/api/v1/stats", "").1)["stored_total"].as_u64()
        < Some(1500)
        && t.elapsed() < Duration::from_secs(15)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(svc.stop().success());
    let (distinct, twice) = stored_lines(dir.path());
    assert_eq!(
        distinct, 1500,
        "every line rsyslog took is stored (resumed after {resumed:?})"
    );
    // RELP is at-least-once: a message answered in the crash may come again, at most a window.
    assert!(twice <= 128, "{twice} stored twice");
}
