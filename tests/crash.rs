//! Acknowledged means durable, tested as a crash happens: two clients post numbered events to
//! `POST /api/v1/ingest` as fast as the service takes them, and a RELP sender (as rsyslog's
//! `omrelp` is one) sends numbered syslog messages; the service is killed with SIGKILL at a random
//! moment, started again, and so on. At the end every event answered 202, and every message
//! answered `200 OK`, is in the store exactly once, and no event is stored twice (one whose answer
//! was lost in the crash may be stored or not: its client saw no acknowledgement), and the
//! indexes agree with the events (a sample found again by its host and by its source).
//! `scripts/crash-test` runs the same loop longer and reports the figures.

mod common;

use common::{
    Service, enable_relp, free_port, ingest_acknowledged, relp_send, settle, syslog_config,
    wait_for,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use watchpost_proto::config::StorageConfig;
use watchpost_store::{EntityFilter, EventQuery, Store};

/// Events per request.
const PER_REQUEST: u64 = 200;

/// A client that posts numbered events until told to stop or the service goes away, and records
/// the numbers acknowledged.
fn client(api: u16, first: u64, acked: Arc<Mutex<Vec<u64>>>, stop: Arc<AtomicBool>) -> u64 {
    let mut next = first;
    while !stop.load(Ordering::Relaxed) {
        let body: String = (next..next + PER_REQUEST)
            .map(|n| {
                format!(
                    "{{\"message\":\"crash-test event {n}\",\"host.name\":\"h{}\"}}\n",
                    n % 7
                )
            })
            .collect();
        let ok = ingest_acknowledged(api, &body);
        if ok {
            acked.lock().unwrap().extend(next..next + PER_REQUEST);
        }
        next += PER_REQUEST;
        if !ok {
            break;
        }
    }
    next
}

/// A RELP sender of numbered syslog messages, session after session, until told to stop or the
/// service goes away; records the numbers answered `200 OK`.
fn relp_client(port: u16, first: u64, acked: Arc<Mutex<Vec<u64>>>, stop: Arc<AtomicBool>) {
    let mut next = first;
    while !stop.load(Ordering::Relaxed) {
        let messages: Vec<String> = (next..next + 500)
            .map(|n| {
                format!(
                    "<38>Nov 27 01:00:00 relp-{} app[1]: crash-test event {n}",
                    n % 5
                )
            })
            .collect();
        let answered = relp_send(port, &messages, 128);
        let done = answered.len() == messages.len();
        acked
            .lock()
            .unwrap()
            .extend(answered.into_iter().map(|i| next + i as u64));
        next += 500;
        if !done {
            break;
        }
    }
}

#[test]
fn acknowledged_events_survive_kill_9_and_none_is_stored_twice() {
    let rounds: u64 = std::env::var("WATCHPOST_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    let dir = tempfile::tempdir().unwrap();
    let (api, relp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, None, "");
    enable_relp(&config, relp);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let relp_acked = Arc::new(Mutex::new(Vec::new()));
    let mut next = 0u64;
    let mut rng = watchpost_detect::SplitMix64::new(7);
    for round in 0..rounds {
        let svc = Service::start(dir.path(), &config, api);
        if round > 0 {
            // What the previous process acknowledged and had not stored is replayed first.
            wait_for(api, "/api/v1/health", |_| true);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut clients: Vec<_> = (0..2u64)
            .map(|c| {
                let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
                let first = next + c * 1_000_000_000;
                std::thread::spawn(move || {
                    client(api, first, acked, stop);
                })
            })
            .collect();
        let (relp_acked, relp_stop) = (Arc::clone(&relp_acked), Arc::clone(&stop));
        let relp_first = next + 2_000_000_000;
        clients.push(std::thread::spawn(move || {
            relp_client(relp, relp_first, relp_acked, relp_stop)
        }));
        std::thread::sleep(Duration::from_millis(300 + rng.below(1200)));
        svc.kill();
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.join().unwrap();
        }
        next += 10_000_000_000;
    }

    // A last start replays what the last kill left; then everything is counted.
    let svc = Service::start(dir.path(), &config, api);
    settle(api);
    // What the kills left loads: the service is healthy (its store reads cleanly, the saved
    // models and baselines loaded) and lists its alerts.
    wait_for(api, "/api/v1/health", |v| v["status"] == "ok");
    assert_eq!(
        common::http(api, "GET", "/api/v1/alerts?limit=1", "").0,
        200
    );
    assert!(svc.stop().success());

    let store = Store::open(&dir.path().join("data"), &StorageConfig::default()).unwrap();
    let mut seen: HashMap<u64, u32> = HashMap::new();
    // Every 499th event posted over HTTP, to be found again through the indexes below. (Those
    // carry their receive time, shared by one request's events at most; the RELP messages all
    // carry the same syslog time, which no time window could tell apart.)
    let mut sample: Vec<(String, i64, String, String)> = Vec::new();
    store
        .scan_events(i64::MIN, i64::MAX, u64::MAX, |id, e| {
            if let Some(n) = e.message.strip_prefix("crash-test event ") {
                *seen.entry(n.parse().unwrap()).or_default() += 1;
                if seen.len().is_multiple_of(499)
                    && sample.len() < 100
                    && !e.host.starts_with("relp")
                {
                    sample.push((id.to_string(), e.timestamp_ns, e.host, e.source));
                }
            }
            true
        })
        .unwrap();
    // The indexes agree with the events: each sampled event is found by its host (the entity
    // index) and by its source (the source index) at its own time.
    assert!(sample.len() >= 10, "{} sampled", sample.len());
    for (id, ts, host, source) in &sample {
        let at = |q: EventQuery| {
            let page = store
                .search_events(&EventQuery {
                    since_ns: Some(*ts),
                    until_ns: Some(ts + 1),
                    page: 1,
                    limit: 1000,
                    retention_days: 36_500,
                    ..q
                })
                .unwrap();
            page.items.iter().any(|e| &e.id == id)
        };
        let by_host = EntityFilter {
            alternatives: vec![(watchpost_proto::EntityKind::Host, host.clone())],
        };
        assert!(
            at(EventQuery {
                entity: Some(by_host),
                ..EventQuery::default()
            }),
            "event {id} of host {host} is not in the entity index"
        );
        assert!(
            at(EventQuery {
                source: Some(source.clone()),
                ..EventQuery::default()
            }),
            "event {id} of source {source} is not in the source index"
        );
    }
    assert!(
        store.spooled().unwrap().is_empty(),
        "the spool is empty once all is stored"
    );
    let relp_acked = relp_acked.lock().unwrap().clone();
    assert!(
        relp_acked.len() >= 500,
        "the RELP sender was answered: {}",
        relp_acked.len()
    );
    let mut acked = acked.lock().unwrap().clone();
    let http_acked = acked.len();
    acked.extend(&relp_acked);
    assert!(
        acked.len() as u64 >= PER_REQUEST * rounds,
        "each round acknowledged something"
    );
    let lost: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|n| !seen.contains_key(n))
        .collect();
    let twice: Vec<u64> = seen
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(n, _)| *n)
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged events lost, first {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(5)]
    );
    assert!(
        twice.is_empty(),
        "{} events stored twice, first {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    eprintln!(
        "{rounds} kills: {http_acked} events acknowledged over HTTP and {} over RELP, all stored once; {} stored in all",
        relp_acked.len(),
        seen.len()
    );
}
