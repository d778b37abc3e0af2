//! One sender flooding a TCP input as fast as it can does not starve the input's other
//! connections: each connection reads a bounded turn before the next gets its own, so a quiet
//! sender's line is stored while the flood goes on.

mod common;

use common::{Service, free_port, http, json, syslog_config};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[test]
fn a_quiet_sender_is_heard_while_another_floods_the_same_input() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let _svc = Service::start(dir.path(), &config, api);
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = Arc::new(AtomicBool::new(true));
    let flood = {
        let (stop, flooding) = (Arc::clone(&stop), Arc::clone(&flooding));
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
            let line = "<38>Nov 21 10:00:01 web-01 sshd[4242]: Accepted publickey for alice from 10.0.0.5 port 50022 ssh2\n";
            let chunk = line.repeat(500);
            while !stop.load(Ordering::Relaxed) {
                if s.write_all(chunk.as_bytes()).is_err() {
                    break;
                }
            }
            flooding.store(false, Ordering::Relaxed);
        })
    };
    let stored = || json(&http(api, "GET", "/api/v1/stats", "").1)["stored_total"].as_u64();
    let t = Instant::now();
    while stored() < Some(20_000) {
        assert!(t.elapsed() < Duration::from_secs(30), "nothing stored");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The flood is on and the input is busy with it: a second sender connects and sends one line.
    let mut quiet = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    quiet
        .write_all(b"<38>Nov 21 10:00:02 db-01 fairprobe[7]: one line from a quiet sender\n")
        .unwrap();
    quiet.shutdown(Shutdown::Write).unwrap();
    let t = Instant::now();
    let found = loop {
        let (status, body) = http(api, "GET", "/api/v1/events?source=fairprobe", "");
        assert_eq!(status, 200, "{body}");
        if json(&body)["meta"]["total"] == 1 {
            break t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the quiet sender's line was not stored in 20 s while the flood went on"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        flooding.load(Ordering::Relaxed),
        "the flood stopped before the line was found ({found:?})"
    );
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
}
