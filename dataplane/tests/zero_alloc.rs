//! Steady state allocates nothing per event: the template miner, the normaliser (parse, normalise, mine, extract,
//! encode) on its own thread, and the whole running pipeline (inputs, rings, workers, writer)
//! counted across every thread while real traffic flows.
//!
//! One counting global allocator serves every test here: a per-thread switch for the first, a global
//! switch for the second. The tests run one after the other (a lock) so their counts stay apart.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use watchpost_dataplane::Pipeline;
use watchpost_normalize::{
    Change, Format, LineMeta, MinerConfig, Normalizer, Tally, TemplateMiner,
};
use watchpost_proto::InputId;
use watchpost_store::EncodedBlock;

struct Counting;

thread_local! {
    static THIS_THREAD: Cell<bool> = const { Cell::new(false) };
    static THREAD_COUNT: Cell<u64> = const { Cell::new(0) };
}
static ALL_THREADS: AtomicBool = AtomicBool::new(false);
static GLOBAL_COUNT: AtomicU64 = AtomicU64::new(0);
static SERIAL: Mutex<()> = Mutex::new(());

fn note() {
    if ALL_THREADS.load(Ordering::Relaxed) {
        GLOBAL_COUNT.fetch_add(1, Ordering::Relaxed);
    }
    let _ = THIS_THREAD.try_with(|on| {
        if on.get() {
            let _ = THREAD_COUNT.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: defers to `System`, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    THREAD_COUNT.with(|c| c.set(0));
    THIS_THREAD.with(|on| on.set(true));
    f();
    THIS_THREAD.with(|on| on.set(false));
    THREAD_COUNT.with(|c| c.get())
}

/// One line of every shape the masker handles, so every scanner runs under the counter.
const MINER_LINES: &[&str] = &[
    "Invalid user webmaster from 173.234.31.186",
    "Invalid user chen from 202.100.179.208",
    "Failed password for invalid user test9 from 52.80.34.196 port 36060 ssh2",
    "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=173.234.31.186  user=root",
    "connection from 24.54.76.216 (24-54-76-216.bflony.adelphia.net) at Fri Jun 17 07:07:00 2005",
    "BLOCK* ask 10.250.17.177:50010 to delete  blk_-8570780307468499817 blk_-9122557405432088649",
    "Receiving block blk_-1608999687919862906 src: /10.250.19.102:54106 dest: /10.250.19.102:50010",
    "proxy.cse.cuhk.edu.hk:5070 close, 1190 bytes (1.16 KB) sent, 1671 bytes (1.63 KB) received, lifetime 00:02",
    "www.google.com:443 close, 0 bytes sent, 0 bytes received, lifetime <1 sec",
    "Block broadcast_9_piece0 stored as bytes in memory (estimated size 5.2 KB, free 5.2 KB)",
    "Input split: hdfs://10.10.34.11:9000/pjhe/logs/2kSOSP.log:21876+7292",
    "Created local directory at /opt/hdfs/nodemanager/usercache/curi/appcache/blockmgr-70293f72-844a-4b39-9ad6-fb0ad7e364e4",
    "Expiring session 0x24ede63a01b003b, timeout of 10000ms exceeded",
    "Ido chip status changed: FF:F2:9F:16:E2:23:00:0D:60:E9:1D:DC ip=10.0.0.151 v=9 t=4 status=M Fri Jul 01 08:16:53 PDT 2005",
    "Server environment:zookeeper.version=3.4.5--1, built on 06/10/2013 17:26 GMT",
    "request 123e4567-e89b-12d3-a456-426614174000 from fe80::1ff:fe23:4567:890a at 2024-01-31T12:00:00.123Z took 1h30m5s",
    "load C:\\Windows\\system32\\x.dll and ./run.sh, code -1, ratio 0.25",
    "(softheader=003b005b 00030000 00000001 00000000) PSR0=00001f01",
    "usuário ação 42",
    "",
];

/// Realistic mixed traffic: every input format and entity extractor path.
const LINES: &[&str] = &[
    "<38>Nov 21 10:00:01 web-01 sshd[4242]: Accepted publickey for alice from 10.0.0.5 port 50022 ssh2",
    "<38>Nov 21 10:00:02 web-01 sshd[4243]: Failed password for invalid user admin from 203.0.113.7 port 52211 ssh2",
    "<86>Nov 21 10:00:03 web-01 sudo:    alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/usr/bin/systemctl restart nginx",
    "<78>Nov 21 10:00:04 web-01 CRON[999]: (root) CMD (run-parts /etc/cron.hourly)",
    "<4>Nov 21 10:00:05 fw-01 kernel: [12345.678] IN=eth0 OUT= MAC=00:11:22:33:44:55 SRC=198.51.100.4 DST=10.0.0.1 LEN=60 PROTO=TCP SPT=51234 DPT=22",
    "<165>1 2026-11-21T10:00:06.003Z db-01 evntslog - ID47 [ex@32473 iut=\"3\" eventSource=\"App\"] An application event 17",
    "<190>Nov 21 10:00:07 web-01 nginx: 10.0.0.9 - bob [21/Nov/2026:10:00:07 +0000] \"GET /index.html?id=5 HTTP/1.1\" 200 512 \"-\" \"curl/8.0\"",
    "<38>Nov 21 10:00:08 web-02 sshd[77]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=218.188.2.4  user=root",
];
const JSON: &[&str] = &[
    r#"{"@timestamp":"2026-11-21T10:00:04Z","message":"user login failed for bob","user":{"name":"bob"},"source":{"ip":"203.0.113.7"},"event":{"dataset":"app.auth","severity":4},"http":{"status":401},"tags":["a","b"]}"#,
    r#"{"EventID":4625,"Channel":"Security","Computer":"DC01.corp.example","TimeCreated":"2026-11-21 10:00:05.1234567","TargetUserName":"Administrator","IpAddress":"198.51.100.20","LogonType":3,"Level":0}"#,
    r#"{"ts":1795255205.5,"msg":"cache miss \"key\" \u00e9 ratio=0.25","host":"app-07","level":"warn","latency_ms":12}"#,
];

fn meta(len: usize) -> LineMeta {
    LineMeta {
        start: 0,
        len: len as u32,
        received_ns: 1_795_255_200_000_000_000,
        truncated: false,
    }
}

#[test]
fn normalising_a_steady_stream_allocates_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut n = Normalizer::new(TemplateMiner::new(&MinerConfig::default()).unwrap());
    let mut block = EncodedBlock::with_capacity(0, 1024);
    let mut tally = Tally::default();
    let pass = |n: &mut Normalizer, block: &mut EncodedBlock, tally: &mut Tally| {
        for l in LINES {
            n.push_line(
                l.as_bytes(),
                &meta(l.len()),
                InputId::SyslogTcp,
                Format::Syslog,
                block,
                tally,
            );
        }
        for l in JSON {
            n.push_line(
                l.as_bytes(),
                &meta(l.len()),
                InputId::JsonTcp,
                Format::Json,
                block,
                tally,
            );
        }
        for l in LINES.iter().chain(JSON) {
            n.push_line(
                l.as_bytes(),
                &meta(l.len()),
                InputId::File,
                Format::Auto,
                block,
                tally,
            );
        }
        block.clear();
        n.detect_batch().clear();
    };
    // Warm-up: templates and entities become known, buffers reach their working size.
    for _ in 0..3 {
        pass(&mut n, &mut block, &mut tally);
    }
    let allocations = allocations(|| {
        for _ in 0..200 {
            pass(&mut n, &mut block, &mut tally);
        }
    });
    let events = 200 * (2 * LINES.len() + 2 * JSON.len()) as u64;
    assert_eq!(
        allocations, 0,
        "{allocations} allocations over {events} events"
    );
    assert_eq!(tally.malformed, 0, "every sample line parses");
}

#[test]
fn the_running_pipeline_allocates_nothing_per_event() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.inputs.syslog_udp.enabled = false;
    cfg.inputs.http.enabled = false;
    // Small rings so that the warm-up burst below fills every pool to its bound: pools grow
    // lazily up to a fixed size (ring capacity + slack), and only that growth allocates.
    cfg.dataplane.ring_capacity = 4;
    let p = Pipeline::start(&cfg).unwrap();
    let stats = p.stats();
    let mut payload = Vec::new();
    for _ in 0..200 {
        for l in LINES {
            payload.extend_from_slice(l.as_bytes());
            payload.push(b'\n');
        }
    }
    let per_round = (200 * LINES.len()) as u64;
    let mut tcp = TcpStream::connect(p.bound(InputId::SyslogTcp).unwrap()).unwrap();
    let wait = |target: u64| {
        let t = Instant::now();
        while stats.writer.stored.get() < target {
            assert!(t.elapsed() < Duration::from_secs(20), "pipeline stalled");
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    // Warm-up: a burst larger than every ring and pool together, then steady rounds.
    for _ in 0..30 {
        tcp.write_all(&payload).unwrap();
    }
    wait(30 * per_round);
    for r in 31..=40 {
        tcp.write_all(&payload).unwrap();
        wait(r * per_round);
    }
    let alert_writes = || {
        let d = &stats.detect;
        d.alert_updates.get() + d.alerts.iter().map(|c| c.get()).sum::<u64>()
    };
    let writes_before = alert_writes();
    GLOBAL_COUNT.store(0, Ordering::Relaxed);
    ALL_THREADS.store(true, Ordering::Relaxed);
    let measured = Instant::now();
    let rounds = 50;
    for r in 41..=40 + rounds {
        tcp.write_all(&payload).unwrap();
        wait(r * per_round);
    }
    ALL_THREADS.store(false, Ordering::Relaxed);
    let allocations = GLOBAL_COUNT.load(Ordering::Relaxed);
    // Once a second each stage B worker publishes its anomaly minutes and rule fire counts
    // (a store write batch) and flushes changed alerts: bookkeeping per second, not per event.
    let seconds = measured.elapsed().as_secs() + 1;
    let writes = alert_writes() - writes_before;
    let events = rounds * per_round;
    let commits = stats.writer.commits.get();
    eprintln!(
        "pipeline: {allocations} allocations over {events} events, {writes} alert writes \
         ({commits} commits in all)"
    );
    drop(tcp);
    p.shutdown();
    // The sample holds lines that bundled Sigma rules match (an invalid-user login, a root
    // authentication failure), and their timestamps repeat, so their alerts stay open and take
    // repeats. Writing an alert (JSON) allocates; that happens at most once a second per open
    // alert, whatever the event rate. Nothing else may allocate.
    assert!(
        stats.detect.sigma_matches.get() > 0,
        "the sample exercises Sigma matching"
    );
    assert!(
        writes <= 40,
        "{writes} alert writes: repeats must be written in bulk, not per batch"
    );
    assert!(
        allocations
            <= writes * ALLOCATIONS_PER_ALERT_WRITE + seconds * ALLOCATIONS_PER_SECOND_PUBLISH,
        "{allocations} allocations over {events} events with {writes} alert writes in \
         {seconds} s"
    );
}

/// Allocations one alert write may make (JSON encoding, the write batch, key buffers).
const ALLOCATIONS_PER_ALERT_WRITE: u64 = 16;
/// Allocations one second's publish may make (a write batch of series and fire counts). Any
/// per-event allocation would exceed it by four orders of magnitude at these rates.
const ALLOCATIONS_PER_SECOND_PUBLISH: u64 = 32;

#[test]
fn mining_known_lines_does_not_allocate() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut miner = TemplateMiner::new(&MinerConfig::default()).expect("default config");
    // Warm-up: create and generalise the templates and grow the scratch buffers.
    for _ in 0..3 {
        for line in MINER_LINES {
            miner.mine(line);
        }
    }
    let mut changes = Vec::with_capacity(MINER_LINES.len());
    let n = allocations(|| {
        for _ in 0..100 {
            for line in MINER_LINES {
                let o = miner.mine(line);
                if o.change != Change::None {
                    changes.push((*line, o.change));
                }
            }
        }
    });
    assert!(changes.is_empty(), "templates still changing: {changes:?}");
    assert_eq!(n, 0, "mine() allocated {n} times over known lines");
}

#[test]
fn the_counter_sees_allocations() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Guards the tests here against a counter that never counts.
    let n = allocations(|| {
        let v: Vec<u8> = Vec::with_capacity(std::hint::black_box(16));
        std::hint::black_box(v);
    });
    assert_eq!(n, 1);
    // Creating a template does allocate, so the miner really is under the counter.
    let mut miner = TemplateMiner::new(&MinerConfig::default()).expect("default config");
    assert!(
        allocations(|| {
            miner.mine("a brand new line 1");
        }) > 0
    );
}

#[test]
fn detectors_allocate_nothing_per_event_in_steady_state() {
    use watchpost_detect::EventTime;
    use watchpost_detect::{EventFeatures, SourceModel};
    use watchpost_detect::{Observation, Ueba, UebaParams, UebaType};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut model = SourceModel::new(1e-4);
    let mut ueba = Ueba::new(UebaParams {
        warmup_ns: 0,
        warmup_min_events: 10,
        ..UebaParams::default()
    });
    let mut ts = 0i64;
    let mut step = |model: &mut SourceModel, ueba: &mut Ueba, i: u64| {
        ts += 250_000_000;
        let time = EventTime::new(ts);
        model.observe(&EventFeatures {
            time,
            template: i % 17,
            severity: (i % 5) as u8,
            message_len: 80,
            entities: 2,
        });
        for (entity, kind) in [(i % 300, UebaType::User), (1000 + i % 50, UebaType::Host)] {
            ueba.observe(&Observation {
                time,
                entity,
                kind,
                source: Some(0xffff_0a00_0000 + u128::from(i % 40)),
                template: i % 17,
                // Users are on one of a few hosts (hosts scored here too), so the new-host
                // signal is read and learned, and the board of who uses each host is read.
                host: if kind == UebaType::User {
                    1000 + i % 5
                } else {
                    0
                },
                // Half the events name their account, so both sides of the rule run.
                account_named: i.is_multiple_of(2),
                failed_logon: i.is_multiple_of(3),
                // The hosts count their people and publish them on the board.
                person: if kind == UebaType::Host && i.is_multiple_of(2) {
                    i % 300
                } else {
                    0
                },
            });
        }
    };
    // Warm up: every entity known, every threshold calibrated and fitted.
    for i in 0..60_000 {
        step(&mut model, &mut ueba, i);
    }
    assert!(model.threshold().is_calibrated());
    assert!(ueba.threshold(UebaType::User).is_calibrated());
    let n = allocations(|| {
        for i in 60_000..100_000 {
            step(&mut model, &mut ueba, i);
        }
    });
    assert_eq!(n, 0, "{n} allocations over 40,000 events");
}

/// Sigma matching of Windows records allocates nothing once warm, even when two rule sets take
/// turns on one thread and two record layouts take turns under each: what a thread forgets when
/// the set changes (its kept layouts with their gate plans, remembered values, group choices)
/// keeps its room. Each set and layout must still match its own rule: a plan made for one set's
/// gates read under the other (the sets number their fields in another order) would not.
#[test]
fn sigma_matching_with_two_sets_in_turn_allocates_nothing() {
    use std::sync::Arc;
    use watchpost_rules::{Mapping, PlainEvent, RuleSet, parse_rule};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rule = |id: &str, field: &str, value: &str| {
        Arc::new(
            parse_rule(&format!(
                "title: t\nid: {id}\nlogsource: {{product: windows, service: security}}\n\
                 detection:\n    s:\n        {field}|contains: {value}\n    condition: s\n"
            ))
            .expect("a valid rule"),
        )
    };
    let share = rule("z1", "ShareName", "admin");
    let target = rule("z2", "RelativeTargetName", "secret");
    let mapping = Mapping::bundled();
    let sets = [
        RuleSet::compile([share.clone(), target.clone()], &mapping),
        RuleSet::compile([target, share], &mapping),
    ];
    let events = [
        PlainEvent::with_attributes("", &[("Channel", "Security"), ("ShareName", r"\\h\ADMIN$")]),
        PlainEvent::with_attributes(
            "",
            &[
                ("Channel", "Security"),
                ("RelativeTargetName", "secret.txt"),
            ],
        ),
    ];
    let mut out = Vec::with_capacity(8);
    let mut round = || {
        let mut matched = 0;
        for set in &sets {
            for event in &events {
                out.clear();
                set.matches(event, &mut out);
                matched += out.len();
            }
        }
        matched
    };
    for _ in 0..3 {
        assert_eq!(round(), 4, "each set matches each record's rule");
    }
    let mut matched = 0;
    let n = allocations(|| {
        for _ in 0..100 {
            matched += round();
        }
    });
    assert_eq!(
        matched, 400,
        "each set matches each record's rule, every round"
    );
    assert_eq!(n, 0, "matching allocated {n} times over 400 records");
}
