//! Backpressure: when the store cannot keep up, TCP senders are slowed down and lose nothing, and
//! UDP datagrams that meet full rings are dropped and counted, never lost silently.

mod common;

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use watchpost_dataplane::Pipeline;
use watchpost_proto::InputId;

/// A pipeline with tiny rings and batches, so that holding the writer fills everything quickly.
fn small_pipeline(dir: &std::path::Path) -> Pipeline {
    let mut cfg = common::config(dir);
    cfg.dataplane.ring_capacity = 2;
    cfg.dataplane.batch_size = 64;
    cfg.dataplane.batch_bytes = 16 << 10;
    Pipeline::start(&cfg).expect("pipeline starts")
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_full_pipeline_pauses_a_tcp_sender_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = small_pipeline(dir.path());
    let stats = p.stats();
    stats.writer_hold.store(true, Ordering::Relaxed);

    // Far more than the rings, the pools and both sockets' kernel buffers can hold together.
    const LINES: u64 = 400_000;
    let addr = p.bound(InputId::SyslogTcp).unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let sent = sent.clone();
        std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let mut buf = Vec::with_capacity(64 << 10);
            let mut n = 0u64;
            while n < LINES {
                buf.clear();
                for _ in 0..500 {
                    writeln!(
                        buf,
                        "<38>Nov 21 10:00:00 web-01 sshd[42]: Failed password for bob from 10.0.0.{} port 22 ssh2 seq={n}",
                        n % 250
                    )
                    .unwrap();
                    n += 1;
                }
                s.write_all(&buf).unwrap();
                sent.store(n, Ordering::Relaxed);
            }
        })
    };

    // The sender stalls: no progress over half a second, well short of the end.
    let mut last = u64::MAX;
    wait_until("the sender to stall", || {
        std::thread::sleep(Duration::from_millis(500));
        let now = sent.load(Ordering::Relaxed);
        let stalled = now == last && now < LINES;
        last = now;
        stalled
    });
    let snap = stats.snapshot();
    assert_eq!(snap.stored_total, 0, "the writer was held");
    assert_eq!(snap.dropped_total, 0, "TCP lines are never dropped");
    assert!(
        snap.rings.iter().any(|r| r.depth == r.capacity),
        "some ring is full: {:?}",
        snap.rings
    );

    // Released, everything arrives.
    stats.writer_hold.store(false, Ordering::Relaxed);
    sender.join().unwrap();
    common::wait_stored(&p, LINES);
    let snap = stats.snapshot();
    assert_eq!(snap.stored_total, LINES);
    assert_eq!(snap.dropped_total, 0);
    p.shutdown();
}

#[test]
fn udp_datagrams_meeting_full_rings_are_counted_as_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let p = small_pipeline(dir.path());
    let stats = p.stats();
    stats.writer_hold.store(true, Ordering::Relaxed);

    let addr = p.bound(InputId::SyslogUdp).unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut n = 0u64;
    wait_until("datagrams to be dropped", || {
        for _ in 0..2000 {
            let line = format!("<13>Nov 21 10:00:00 fw-01 kernel: packet {n}");
            let _ = sock.send_to(line.as_bytes(), addr);
            n += 1;
        }
        stats.snapshot().dropped_total > 0
    });

    stats.writer_hold.store(false, Ordering::Relaxed);
    // Every datagram the input took in is either stored or counted as dropped.
    wait_until("received = stored + dropped", || {
        let s = stats.snapshot();
        let received = s.inputs.iter().map(|i| i.received).sum::<u64>();
        received > 0 && s.stored_total + s.dropped_total == received
    });
    let s = stats.snapshot();
    let udp = s.inputs.iter().find(|i| i.name == "syslog_udp").unwrap();
    assert!(udp.dropped > 0 && udp.dropped < udp.received, "{udp:?}");
    assert!(s.stored_total > 0);
    p.shutdown();
}
