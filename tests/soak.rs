//! The soak: the service runs for a while under steady load (numbered events posted to
//! `POST /api/v1/ingest`, numbered syslog lines over TCP, a WebSocket client reading the stream
//! and one that never reads), custom Sigma rules are uploaded as it runs, and it is restarted
//! again and again, by SIGTERM and by SIGKILL in turn. Checked throughout: every start comes up
//! healthy, every graceful stop exits 0, each uploaded rule goes live (its alert appears) and
//! every earlier one is still loaded after the restarts, resident memory stays inside the budget
//! `/stats` reports. At the end: every event acknowledged over HTTP is stored exactly once, and no
//! syslog line twice.
//!
//! CI runs a minute (`WATCHPOST_SOAK_SECONDS`, default 60); `scripts/soak MINUTES` runs it
//! longer and prints the figures.

mod common;

use common::{Service, free_port, http, json, syslog_config, wait_for};
use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use watchpost_proto::config::StorageConfig;
use watchpost_store::Store;

/// Events per HTTP request.
const PER_REQUEST: u64 = 100;
/// Pause between a client's requests and between syslog chunks: a steady load of a few
/// thousand events a second, not a flood (the crash test and the benchmarks flood).
const PACE: Duration = Duration::from_millis(20);

/// The load, running across restarts until `stop`: it waits out the gaps when the service is
/// down. Returns the numbers acknowledged over HTTP.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    acked: Arc<Mutex<Vec<u64>>>,
    lines_sent: Arc<AtomicU64>,
    ws_frames: Arc<AtomicU64>,
}

impl Load {
    fn start(api: u16, tcp: u16) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let lines_sent = Arc::new(AtomicU64::new(0));
        let ws_frames = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for c in 0..2u64 {
            let (stop, acked) = (Arc::clone(&stop), Arc::clone(&acked));
            threads.push(std::thread::spawn(move || {
                let mut next = c * 1_000_000_000;
                while !stop.load(Ordering::Relaxed) {
                    let body: String = (next..next + PER_REQUEST)
                        .map(|n| {
                            format!(
                                "{{\"message\":\"soak event {n}\",\"host.name\":\"h{}\",\"user.name\":\"u{}\"}}\n",
                                n % 7,
                                n % 50
                            )
                        })
                        .collect();
                    if common::ingest_acknowledged(api, &body) {
                        acked.lock().unwrap().extend(next..next + PER_REQUEST);
                    } else {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    next += PER_REQUEST;
                    std::thread::sleep(PACE);
                }
            }));
        }
        {
            let (stop, sent) = (Arc::clone(&stop), Arc::clone(&lines_sent));
            threads.push(std::thread::spawn(move || {
                let mut next = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(("127.0.0.1", tcp)) else {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let chunk: String = (next..next + 100)
                            .map(|n| {
                                format!(
                                    "<38>Nov 27 01:00:00 srv-0{} app[9]: soak line {n}\n",
                                    n % 5
                                )
                            })
                            .collect();
                        if s.write_all(chunk.as_bytes()).is_err() {
                            break;
                        }
                        next += 100;
                        sent.fetch_add(100, Ordering::Relaxed);
                        std::thread::sleep(PACE);
                    }
                }
            }));
        }
        // A stream reader, and a client that connects and never reads (its queue is bounded).
        for reads in [true, false] {
            let (stop, frames) = (Arc::clone(&stop), Arc::clone(&ws_frames));
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok((mut ws, _)) =
                        tungstenite::connect(format!("ws://127.0.0.1:{api}/api/v1/ws"))
                    else {
                        std::thread::sleep(Duration::from_millis(500));
                        continue;
                    };
                    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
                        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                    }
                    while !stop.load(Ordering::Relaxed) {
                        if !reads {
                            std::thread::sleep(Duration::from_millis(200));
                            // A closed connection shows as a failed write of a ping.
                            if ws
                                .send(tungstenite::Message::Ping(Vec::new().into()))
                                .is_err()
                            {
                                break;
                            }
                            continue;
                        }
                        match ws.read() {
                            Ok(_) => {
                                frames.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(tungstenite::Error::Io(e))
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => break,
                        }
                    }
                }
            }));
        }
        Load {
            stop,
            threads,
            acked,
            lines_sent,
            ws_frames,
        }
    }

    fn stop(self) -> (Vec<u64>, u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let acked = self.acked.lock().unwrap().clone();
        (
            acked,
            self.lines_sent.load(Ordering::Relaxed),
            self.ws_frames.load(Ordering::Relaxed),
        )
    }
}

/// A custom rule matching `canary-<n>` (level high, so it alerts).
fn rule(n: u32) -> String {
    format!(
        "title: Soak canary {n}\nid: 00000000-0000-4000-8000-{n:012}\nstatus: test\nlevel: high\nlogsource:\n  product: linux\ndetection:\n  sel:\n    - 'canary-{n}'\n  condition: sel\n"
    )
}

/// Uploads rule `n`, sends a line it matches, and waits for its alert.
fn upload_and_fire(api: u16, tcp: u16, n: u32) {
    let (status, body) = http(
        api,
        "POST",
        "/api/v1/sigma/rules",
        &serde_json::json!({ "yaml": rule(n) }).to_string(),
    );
    assert_eq!(status, 201, "upload of rule {n}: {body}");
    fire(api, tcp, n);
}

/// Sends a line rule `n` matches and waits until its alert is listed.
fn fire(api: u16, tcp: u16, n: u32) {
    let id = format!("00000000-0000-4000-8000-{n:012}");
    let mut s = TcpStream::connect(("127.0.0.1", tcp)).unwrap();
    writeln!(s, "<38>{} db-01 app[3]: canary-{n} seen", common::stamp(0)).unwrap();
    drop(s);
    wait_for(api, &format!("/api/v1/alerts?detector={id}"), |v| {
        v["meta"]["total"].as_u64() >= Some(1)
    });
}

/// Resident memory and the budget, from `/stats`.
fn memory(api: u16) -> (u64, u64) {
    let s = json(&http(api, "GET", "/api/v1/stats", "").1);
    (
        s["memory"]["resident_bytes"].as_u64().unwrap(),
        s["memory"]["budget_bytes"].as_u64().unwrap(),
    )
}

/// Waits until `/health` answers and says the service is up (`ok`).
fn healthy(api: u16) {
    let t = Instant::now();
    loop {
        let (status, body) = http(api, "GET", "/api/v1/health", "");
        if status == 200 && json(&body)["status"] == "ok" {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "not healthy 60 s after the start: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_long_run_with_restarts_and_rule_uploads_loses_nothing_acknowledged_and_stays_in_budget() {
    let seconds: u64 = std::env::var("WATCHPOST_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    // Six restarts and twelve uploads per run, however long it is.
    let restart_every = Duration::from_secs((seconds / 6).max(10));
    let upload_every = Duration::from_secs((seconds / 12).max(5));
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let mut svc = Some(Service::start(dir.path(), &config, api));
    healthy(api);
    let load = Load::start(api, tcp);
    let began = Instant::now();
    let (mut last_restart, mut last_upload) = (Instant::now(), Instant::now());
    let (mut restarts, mut kills, mut uploads) = (0u32, 0u32, 0u32);
    let mut peak = (0u64, 0u64);
    let mut samples = Vec::new();
    while began.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(1));
        let (resident, budget) = memory(api);
        assert!(
            resident <= budget,
            "resident {resident} bytes past the budget of {budget} at {:?}",
            began.elapsed()
        );
        if resident > peak.0 {
            peak = (resident, budget);
        }
        samples.push((began.elapsed().as_secs(), resident));
        if last_upload.elapsed() >= upload_every {
            last_upload = Instant::now();
            uploads += 1;
            upload_and_fire(api, tcp, uploads);
        }
        if last_restart.elapsed() >= restart_every {
            last_restart = Instant::now();
            let s = svc.take().unwrap();
            if restarts % 2 == 0 {
                let t = Instant::now();
                let status = s.stop();
                assert!(status.success(), "graceful stop {restarts}: {status}");
                assert!(
                    t.elapsed() < Duration::from_secs(35),
                    "stop took {:?}",
                    t.elapsed()
                );
            } else {
                s.kill();
                kills += 1;
            }
            restarts += 1;
            svc = Some(Service::start(dir.path(), &config, api));
            healthy(api);
            // Every rule uploaded so far is still loaded and still fires.
            if uploads > 0 {
                fire(api, tcp, uploads);
                let custom = json(
                    &http(
                        api,
                        "GET",
                        "/api/v1/sigma/rules?source=custom&limit=500",
                        "",
                    )
                    .1,
                );
                assert_eq!(
                    custom["meta"]["total"].as_u64(),
                    Some(u64::from(uploads)),
                    "{custom}"
                );
            }
        }
    }
    let (acked, lines_sent, ws_frames) = load.stop();
    common::settle(api);
    let svc = svc.take().unwrap();
    assert!(svc.stop().success());

    let store = Store::open(&dir.path().join("data"), &StorageConfig::default()).unwrap();
    let mut events: HashMap<u64, u32> = HashMap::new();
    let mut lines: HashMap<u64, u32> = HashMap::new();
    store
        .scan_events(i64::MIN, i64::MAX, u64::MAX, |_, e| {
            if let Some(n) = e.message.strip_prefix("soak event ") {
                *events.entry(n.parse().unwrap()).or_default() += 1;
            } else if let Some(n) = e.message.strip_prefix("soak line ") {
                *lines.entry(n.parse().unwrap()).or_default() += 1;
            }
            true
        })
        .unwrap();
    let lost = acked.iter().filter(|n| !events.contains_key(n)).count();
    let twice = events.values().filter(|c| **c > 1).count();
    let lines_twice = lines.values().filter(|c| **c > 1).count();
    assert!(
        acked.len() as u64 >= PER_REQUEST * u64::from(restarts + 1),
        "the clients were answered: {}",
        acked.len()
    );
    assert_eq!(
        lost,
        0,
        "{lost} of {} acknowledged events lost",
        acked.len()
    );
    assert_eq!(twice, 0, "{twice} events stored twice");
    assert_eq!(lines_twice, 0, "{lines_twice} syslog lines stored twice");
    assert!(ws_frames > 0, "the stream reader got frames");
    let mib = |b: u64| b / (1 << 20);
    eprintln!(
        "soak: {seconds} s, {restarts} restarts ({kills} by SIGKILL), {uploads} rules uploaded; \
         {} events acknowledged over HTTP, all stored once; {} of {lines_sent} syslog lines stored \
         (TCP: lines in flight at a kill are the sender's loss), none twice; {ws_frames} stream \
         frames read; peak resident {} MiB of a {} MiB budget",
        acked.len(),
        lines.len(),
        mib(peak.0),
        mib(peak.1)
    );
    // Resident memory by minute (the highest sample of each), to see whether it levels.
    let mut by_minute: Vec<(u64, u64)> = Vec::new();
    for (at, resident) in samples {
        match by_minute.last_mut() {
            Some((minute, high)) if *minute == at / 60 => *high = (*high).max(resident),
            _ => by_minute.push((at / 60, resident)),
        }
    }
    let shown: Vec<String> = by_minute
        .iter()
        .map(|(m, r)| format!("{m}:{}", mib(*r)))
        .collect();
    eprintln!("soak: resident MiB by minute: {}", shown.join(" "));
}
