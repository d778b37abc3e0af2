//! The service always stops: a SIGTERM stops the inputs reading at once, even with a sender that
//! never pauses, and the process exits once what was accepted is stored; a second signal exits
//! at once, whatever the first is still waiting for. (A store that refuses every write is held
//! to `dataplane.shutdown_timeout_seconds` in `dataplane/tests/durable_ingest.rs`.)

mod common;

use common::{Service, free_port, http, json, syslog_config};
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Sends syslog lines as fast as the service reads them until told to stop or refused.
fn flood(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let line = "<38>Nov 21 10:00:01 web-01 sshd[4242]: Accepted publickey for alice from 10.0.0.5 port 50022 ssh2\n";
        let chunk = line.repeat(500);
        while !stop.load(Ordering::Relaxed) {
            if s.write_all(chunk.as_bytes()).is_err() {
                return;
            }
        }
    })
}

#[test]
fn sigterm_stops_reading_at_once_while_a_sender_keeps_sending() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let svc = Service::start(dir.path(), &config, api);
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = (0..2).map(|_| flood(tcp, Arc::clone(&stop))).collect();
    let t = Instant::now();
    while json(&http(api, "GET", "/api/v1/stats", "").1)["stored_total"].as_u64() < Some(20_000) {
        assert!(t.elapsed() < Duration::from_secs(30), "nothing stored");
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    let status = svc.stop();
    let took = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.join().unwrap();
    }
    assert!(status.success(), "{status}");
    // The senders never paused; before, the input read on for as long as they sent.
    assert!(took < Duration::from_secs(10), "exited after {took:?}");
}

#[test]
fn a_second_signal_exits_at_once_while_the_first_waits() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(dir.path(), api, None, "");
    // The key goes into the [dataplane] table syslog_config writes.
    let text = std::fs::read_to_string(&config).unwrap().replacen(
        "[dataplane]\n",
        "[dataplane]\nshutdown_timeout_seconds = 600\n",
        1,
    );
    std::fs::write(&config, text).unwrap();
    let svc = Service::start(dir.path(), &config, api);
    // A client that sends half a request and waits keeps the API's graceful stop waiting (for
    // as long as the header-read timeout allows).
    let mut slow = TcpStream::connect(("127.0.0.1", api)).unwrap();
    slow.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let pid = svc.pid();
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let status = svc.wait();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(130), "{status}");
}

#[test]
fn one_sigterm_exits_even_with_a_client_stuck_halfway_through_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = syslog_config(dir.path(), api, None, "");
    let svc = Service::start(dir.path(), &config, api);
    let mut slow = TcpStream::connect(("127.0.0.1", api)).unwrap();
    slow.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let status = svc.stop();
    assert!(status.success(), "{status}");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
}
