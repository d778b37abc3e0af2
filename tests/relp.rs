//! RELP as operators run it: a real rsyslog (`rsyslogd` with `omrelp`, installed by
//! `scripts/setup`) takes syslog over TCP and forwards it to the service's RELP input, which
//! stores every message and answers each once it is durable.

mod common;

use common::{Service, enable_relp, free_port, json, syslog_config, wait_for};
use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `rsyslogd` in the foreground with its own configuration, killed when dropped.
struct Rsyslog(Child);

impl Drop for Rsyslog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts rsyslog listening on `tcp_port` and forwarding everything over RELP to `relp_port`.
fn rsyslog(dir: &std::path::Path, tcp_port: u16, relp_port: u16) -> Rsyslog {
    let work = dir.join("rsyslog");
    std::fs::create_dir_all(&work).unwrap();
    let conf = dir.join("rsyslog.conf");
    std::fs::write(
        &conf,
        format!(
            "global(workDirectory=\"{}\")\nmodule(load=\"imtcp\")\nmodule(load=\"omrelp\")\n\
             input(type=\"imtcp\" port=\"{tcp_port}\" address=\"127.0.0.1\" ruleset=\"fwd\")\n\
             ruleset(name=\"fwd\") {{ action(type=\"omrelp\" target=\"127.0.0.1\" port=\"{relp_port}\" \
             template=\"RSYSLOG_ForwardFormat\" action.resumeRetryCount=\"-1\") }}\n",
            work.display()
        ),
    )
    .unwrap();
    // Debian installs it in /usr/sbin, which a user's PATH may not hold.
    let program = ["/usr/sbin/rsyslogd", "/sbin/rsyslogd"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("rsyslogd");
    let child = Command::new(program)
        .arg("-n")
        .arg("-f")
        .arg(&conf)
        .arg("-i")
        .arg(dir.join("rsyslog.pid"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rsyslogd runs (scripts/setup installs rsyslog and rsyslog-relp)");
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", tcp_port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "rsyslogd did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Rsyslog(child)
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
