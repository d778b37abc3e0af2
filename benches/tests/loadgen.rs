//! End-to-end tests of the `watchpost-loadgen` binary against sockets opened by the test.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_watchpost-loadgen"))
        .args(args)
        .arg("--quiet")
        .output()
        .expect("loadgen runs")
}

/// The `{"sent": N, ...}` summary of a successful run.
fn summary(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "loadgen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout.clone()).expect("UTF-8 summary");
    let line = stdout.lines().last().expect("a summary line");
    let v: serde_json::Value = serde_json::from_str(line).expect("summary is JSON");
    for key in ["sent", "seconds", "rate", "bytes"] {
        assert!(v[key].is_number(), "{key} in {line}");
    }
    v
}

/// Accepts `conns` connections and returns everything each sent, read to EOF.
fn tcp_sink(conns: usize) -> (String, thread::JoinHandle<Vec<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("tcp://{}", listener.local_addr().unwrap());
    let handle = thread::spawn(move || {
        let readers: Vec<_> = (0..conns)
            .map(|_| {
                let (mut s, _) = listener.accept().unwrap();
                thread::spawn(move || {
                    let mut v = Vec::new();
                    s.read_to_end(&mut v).unwrap();
                    v
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    (addr, handle)
}

#[test]
fn tcp_newline_delivers_exactly_what_it_reports() {
    let (addr, sink) = tcp_sink(2);
    let out = loadgen(&[
        "--target",
        &addr,
        "--count",
        "20001",
        "--connections",
        "2",
        "--seed",
        "7",
    ]);
    let s = summary(&out);
    let received = sink.join().unwrap();
    let lines: Vec<&[u8]> = received
        .iter()
        .flat_map(|c| c.split(|&b| b == b'\n').filter(|l| !l.is_empty()))
        .collect();
    assert_eq!(s["sent"], 20_001);
    assert_eq!(lines.len(), 20_001);
    assert_eq!(
        s["bytes"].as_u64().unwrap(),
        received.iter().map(|c| c.len() as u64).sum::<u64>()
    );
    // Both connections carried traffic, and different traffic.
    assert!(received.iter().all(|c| c.len() > 100_000));
    assert_ne!(received[0][..200], received[1][..200]);
    for l in lines {
        let l = std::str::from_utf8(l).expect("UTF-8 line");
        assert!(l.starts_with('<') && l[1..5].contains('>'), "{l}");
    }
}

#[test]
fn tcp_octet_counting_frames_decode() {
    let (addr, sink) = tcp_sink(1);
    let out = loadgen(&[
        "--target",
        &addr,
        "--count",
        "5000",
        "--framing",
        "octet",
        "--format",
        "json",
    ]);
    let s = summary(&out);
    let data = sink.join().unwrap().pop().unwrap();
    let mut rest = &data[..];
    let mut frames = 0;
    while !rest.is_empty() {
        let sp = rest.iter().position(|&b| b == b' ').expect("LEN SP");
        let len: usize = std::str::from_utf8(&rest[..sp]).unwrap().parse().unwrap();
        let msg = &rest[sp + 1..sp + 1 + len];
        let v: serde_json::Value = serde_json::from_slice(msg).expect("frame is one JSON event");
        assert!(v.is_object());
        rest = &rest[sp + 1 + len..];
        frames += 1;
    }
    assert_eq!(s["sent"], 5000);
    assert_eq!(frames, 5000);
}

#[test]
fn udp_sends_one_datagram_per_line() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = format!("udp://{}", sock.local_addr().unwrap());
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let receiver = thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        let mut got = Vec::new();
        let give_up = Instant::now() + Duration::from_secs(20);
        while got.len() < 2000 && Instant::now() < give_up {
            if let Ok(n) = sock.recv(&mut buf) {
                got.push(buf[..n].to_vec());
            }
        }
        got
    });
    // Paced well below what a loopback socket buffer absorbs, so nothing is dropped.
    let out = loadgen(&[
        "--target", &addr, "--count", "2000", "--rate", "5000", "--seed", "3",
    ]);
    let s = summary(&out);
    let got = receiver.join().unwrap();
    assert_eq!(s["sent"], 2000);
    assert_eq!(got.len(), 2000);
    for d in &got {
        assert_eq!(d[0], b'<');
        assert!(!d.ends_with(b"\n"));
    }
    assert_eq!(
        s["bytes"].as_u64().unwrap(),
        got.iter().map(|d| d.len() as u64).sum::<u64>()
    );
}

#[test]
fn rate_and_duration_are_honoured() {
    let (addr, sink) = tcp_sink(1);
    let out = loadgen(&["--target", &addr, "--rate", "2000", "--duration", "1.5"]);
    let s = summary(&out);
    drop(sink.join());
    let sent = s["sent"].as_u64().unwrap();
    let secs = s["seconds"].as_f64().unwrap();
    assert!((2700..=3300).contains(&sent), "{sent}");
    assert!((1.4..2.0).contains(&secs), "{secs}");
}

#[test]
fn refused_connection_is_a_clean_error() {
    // Grab a free port and release it, so nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = loadgen(&[
        "--target",
        &format!("tcp://127.0.0.1:{port}"),
        "--count",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot connect"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_target_is_rejected() {
    let out = loadgen(&["--target", "ftp://127.0.0.1:1", "--count", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported scheme"));
}

/// An ingest endpoint on one keep-alive connection: the first body is refused with 503 and
/// `Retry-After: 0`, every later one acknowledged. Returns the lines of the acknowledged bodies.
fn http_ingest() -> (String, thread::JoinHandle<usize>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/v1/ingest", listener.local_addr().unwrap());
    let handle = thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut out = s;
        let (mut requests, mut lines) = (0, 0);
        loop {
            let mut length = 0usize;
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap() == 0 {
                return lines;
            }
            assert!(line.starts_with("POST /api/v1/ingest HTTP/1.1"), "{line}");
            loop {
                line.clear();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            requests += 1;
            if requests == 1 {
                out.write_all(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 2\r\n\r\n{}").unwrap();
            } else {
                lines += body
                    .split(|&b| b == b'\n')
                    .filter(|l| !l.is_empty())
                    .count();
                out.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}")
                    .unwrap();
            }
        }
    });
    (url, handle)
}

#[test]
fn http_target_counts_acknowledged_events_and_retries_a_503() {
    let (url, server) = http_ingest();
    let out = loadgen(&[
        "--target",
        &url,
        "--format",
        "json",
        "--count",
        "500",
        "--batch-bytes",
        "4096",
    ]);
    let v = summary(&out);
    assert_eq!(v["sent"], 500, "{v}");
    assert_eq!(v["retries"], 1, "{v}");
    assert!(v["ack_p99_ms"].as_f64().unwrap() >= v["ack_p50_ms"].as_f64().unwrap());
    assert_eq!(
        server.join().unwrap(),
        500,
        "every event reached the server once acknowledged"
    );
}

#[test]
fn stdout_target_writes_lines_and_reports_on_stderr() {
    let out = loadgen(&["--target", "stdout", "--count", "300", "--format", "json"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 300);
    for l in text.lines() {
        serde_json::from_str::<serde_json::Value>(l).expect("JSON line");
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"sent\": 300"));
}
