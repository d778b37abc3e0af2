//! Hostile and broken input: every case is counted and reported, nothing panics, and nothing that
//! was accepted goes missing.

mod common;

use common::*;
use std::io::Write;
use std::net::{Shutdown, TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use watchpost_dataplane::Pipeline;
use watchpost_proto::InputId;

#[test]
fn malformed_syslog_is_kept_as_text_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::start(&config(dir.path())).unwrap();
    let mut tcp = TcpStream::connect(p.bound(InputId::SyslogTcp).unwrap()).unwrap();
    tcp.write_all(b"this is not syslog at all\n<999>garbage PRI\n<13\n\x00\x01\x02 binary\n")
        .unwrap();
    drop(tcp);
    wait_stored(&p, 4);
    let s = p.stats().snapshot();
    let tcp_stats = s.inputs.iter().find(|i| i.name == "syslog_tcp").unwrap();
    assert_eq!(tcp_stats.received, 4);
    assert!(tcp_stats.malformed >= 3, "{tcp_stats:?}");
    let events = all_events(&p.store());
    assert!(
        events
            .iter()
            .any(|e| e.message.contains("this is not syslog at all"))
    );
    p.shutdown();
}

#[test]
fn invalid_utf8_is_kept_with_replacement_characters_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::start(&config(dir.path())).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(
        b"<13>Nov 21 10:00:00 h app: bad \xff\xfe bytes",
        p.bound(InputId::SyslogUdp).unwrap(),
    )
    .unwrap();
    let mut json = TcpStream::connect(p.bound(InputId::JsonTcp).unwrap()).unwrap();
    json.write_all(b"{\"message\":\"bad \xc3\x28 json\"}\n")
        .unwrap();
    drop(json);
    wait_stored(&p, 2);
    let s = p.stats().snapshot();
    assert_eq!(s.inputs.iter().map(|i| i.invalid_utf8).sum::<u64>(), 2);
    let events = all_events(&p.store());
    assert!(
        events
            .iter()
            .any(|e| e.message == "bad \u{fffd}\u{fffd} bytes"),
        "{events:?}"
    );
    p.shutdown();
}

#[test]
fn a_one_mebibyte_line_is_truncated_flagged_and_the_stream_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::start(&config(dir.path())).unwrap();
    let mut tcp = TcpStream::connect(p.bound(InputId::SyslogTcp).unwrap()).unwrap();
    let mut big = b"<13>Nov 21 10:00:00 h app: ".to_vec();
    big.extend(std::iter::repeat_n(b'A', 1 << 20));
    big.push(b'\n');
    tcp.write_all(&big).unwrap();
    tcp.write_all(b"<13>Nov 21 10:00:01 h app: after the big one\n")
        .unwrap();
    drop(tcp);
    wait_stored(&p, 2);
    let s = p.stats().snapshot();
    let t = s.inputs.iter().find(|i| i.name == "syslog_tcp").unwrap();
    assert_eq!((t.received, t.truncated), (2, 1), "{t:?}");
    let events = all_events(&p.store());
    let cut = events
        .iter()
        .find(|e| e.attributes.contains_key("watchpost.truncated"))
        .unwrap();
    assert!(cut.message.len() < 70_000 && cut.message.starts_with("AAAA"));
    assert!(events.iter().any(|e| e.message == "after the big one"));
    p.shutdown();
}

#[test]
fn invalid_json_is_kept_with_the_parse_error_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::start(&config(dir.path())).unwrap();
    let mut json = TcpStream::connect(p.bound(InputId::JsonTcp).unwrap()).unwrap();
    json.write_all(b"{\"message\": \"unterminated\n[1,2,3]\n{\"ok\":true,\"message\":\"fine\"}\n{\"a\":1} trailing\n").unwrap();
    // Nested one level past the parser's bound (32), and a hundred thousand levels deep.
    let nested = |depth: usize| format!("{}1{}\n", "{\"a\":".repeat(depth), "}".repeat(depth));
    json.write_all(nested(33).as_bytes()).unwrap();
    json.write_all(nested(100_000).as_bytes()).unwrap();
    json.write_all(nested(32).as_bytes()).unwrap();
    drop(json);
    wait_stored(&p, 7);
    let s = p.stats().snapshot();
    let j = s.inputs.iter().find(|i| i.name == "json_tcp").unwrap();
    assert_eq!((j.received, j.malformed, j.parsed), (7, 5, 2), "{j:?}");
    let events = all_events(&p.store());
    let bad: Vec<_> = events
        .iter()
        .filter(|e| e.attributes.contains_key("watchpost.parse_error"))
        .collect();
    assert_eq!(bad.len(), 5);
    assert_eq!(
        bad.iter()
            .filter(|e| e.attributes["watchpost.parse_error"].contains("nested deeper than 32"))
            .count(),
        2
    );
    assert!(bad.iter().any(|e| e.message == "[1,2,3]"));
    assert!(
        bad.iter()
            .all(|e| e.attributes["watchpost.parse_error"].starts_with("invalid JSON"))
    );
    assert!(events.iter().any(|e| e.message == "fine"));
    // Invalid HTTP bodies are refused whole, before anything is accepted.
    let err = p
        .http_ingest()
        .unwrap()
        .submit(b"[{\"a\":1}, 5]".to_vec())
        .unwrap_err();
    assert!(err.to_string().contains("not an object"), "{err}");
    p.shutdown();
}

/// A field name is copied for every value under it; a long one is dropped and counted rather
/// than copied hundreds of times (a 50 KB line became a 12 MB event).
#[test]
fn long_field_names_are_dropped_and_counted_not_copied() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::start(&config(dir.path())).unwrap();
    let key = "k".repeat(48 << 10);
    let leaves: Vec<String> = (0..300).map(|i| format!("\"f{i}\":{i}")).collect();
    let line = format!(
        "{{\"message\":\"wide\",\"ok\":{{\"name\":\"kept\"}},\"{key}\":{{{}}}}}\n<14>1 2026-11-21T10:00:00Z web-01 app 1 - [{}@1 {}=\"x\"] sd\n",
        leaves.join(","),
        "i".repeat(200),
        "n".repeat(100)
    );
    let mut json = TcpStream::connect(p.bound(InputId::JsonTcp).unwrap()).unwrap();
    json.write_all(line.lines().next().unwrap().as_bytes())
        .unwrap();
    json.write_all(b"\n").unwrap();
    drop(json);
    let mut syslog = TcpStream::connect(p.bound(InputId::SyslogTcp).unwrap()).unwrap();
    syslog
        .write_all(format!("{}\n", line.lines().nth(1).unwrap()).as_bytes())
        .unwrap();
    drop(syslog);
    wait_stored(&p, 2);
    let events = all_events(&p.store());
    let wide = events.iter().find(|e| e.message == "wide").unwrap();
    assert_eq!(
        wide.attributes.get("ok.name").map(String::as_str),
        Some("kept")
    );
    assert_eq!(wide.attributes["watchpost.fields_dropped"], "300");
    assert!(wide.attributes.keys().all(|k| k.len() <= 256));
    let sd = events.iter().find(|e| e.message == "sd").unwrap();
    assert_eq!(
        sd.attributes["watchpost.fields_dropped"], "1",
        "{:?}",
        sd.attributes
    );
    p.shutdown();
}

#[test]
fn half_closed_and_reset_connections_keep_what_was_sent() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::start(&config(dir.path())).unwrap();
    let addr = p.bound(InputId::SyslogTcp).unwrap();

    // Half-close: the last line has no newline; the peer shuts its write side and waits.
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(
        b"<13>Nov 21 10:00:00 h app: one\n<13>Nov 21 10:00:00 h app: last without newline",
    )
    .unwrap();
    half.shutdown(Shutdown::Write).unwrap();

    // Reset: SO_LINGER 0 makes close() send RST instead of FIN.
    let mut reset = TcpStream::connect(addr).unwrap();
    reset
        .write_all(b"<13>Nov 21 10:00:00 h app: before reset\n")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    set_linger_zero(&reset);
    drop(reset);

    wait_stored(&p, 3);
    let msgs: Vec<String> = all_events(&p.store())
        .into_iter()
        .map(|e| e.message)
        .collect();
    for m in ["one", "last without newline", "before reset"] {
        assert!(msgs.iter().any(|x| x == m), "{m} missing from {msgs:?}");
    }
    drop(half);
    p.shutdown();
}

#[test]
fn connections_over_the_limit_are_refused_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.inputs.syslog_tcp.max_connections = 1;
    let p = Pipeline::start(&cfg).unwrap();
    let addr = p.bound(InputId::SyslogTcp).unwrap();
    let mut a = TcpStream::connect(addr).unwrap();
    a.write_all(b"<13>Nov 21 10:00:00 h app: kept\n").unwrap();
    wait_stored(&p, 1);
    let _b = TcpStream::connect(addr).unwrap();
    let t = std::time::Instant::now();
    while p
        .stats()
        .input(InputId::SyslogTcp)
        .connections_refused
        .get()
        == 0
    {
        assert!(t.elapsed().as_secs() < 10, "refusal not counted");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        p.stats()
            .input(InputId::SyslogTcp)
            .up
            .load(Ordering::Relaxed)
    );
    p.shutdown();
}

fn set_linger_zero(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a pointer to a linger struct of the size given.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[test]
fn a_long_host_name_is_still_an_entity() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::start(&config(dir.path())).unwrap();
    let host = format!("h{}.example.com", "x".repeat(300));
    let mut tcp = TcpStream::connect(p.bound(InputId::SyslogTcp).unwrap()).unwrap();
    writeln!(
        tcp,
        "<38>Nov 21 10:00:00 {host} sshd[1]: Accepted password for alice from 10.0.0.5 port 22 ssh2"
    )
    .unwrap();
    drop(tcp);
    wait_stored(&p, 1);
    let e = &all_events(&p.store())[0];
    let has = |kind, v: &str| e.entities.iter().any(|x| x.kind == kind && x.value == v);
    assert!(
        has(watchpost_proto::EntityKind::Host, &host),
        "{:?}",
        e.entities
    );
    assert!(
        has(watchpost_proto::EntityKind::User, "alice"),
        "{:?}",
        e.entities
    );
    p.shutdown();
}
