//! Helpers shared by the data-plane integration tests: a pipeline on free loopback ports with its
//! store in a temporary folder, and waits that poll instead of sleeping blindly.

#![allow(dead_code)]

use std::time::{Duration, Instant};
use watchpost_dataplane::Pipeline;
use watchpost_proto::{Config, Event};
use watchpost_store::{EventQuery, Store};

/// A configuration on ephemeral loopback ports, storing under `dir`.
pub fn config(dir: &std::path::Path) -> Config {
    let mut c = Config::default();
    c.storage.data_dir = dir.to_string_lossy().into_owned();
    c.inputs.syslog_udp.address = "127.0.0.1:0".into();
    c.inputs.syslog_tcp.address = "127.0.0.1:0".into();
    c.inputs.json_tcp.address = "127.0.0.1:0".into();
    c.dataplane.batch_linger_ms = 5;
    c.dataplane.pin_workers = false;
    c.storage.block_cache_mb = 8;
    c.storage.write_buffer_mb = 4;
    c
}

/// Waits until `stored_total` reaches `n` (or fails after 20 s).
pub fn wait_stored(p: &Pipeline, n: u64) {
    let t = Instant::now();
    loop {
        let s = p.stats().snapshot();
        if s.stored_total >= n {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "only {} of {n} events stored: {s:?}",
            s.stored_total
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every stored event, newest first.
pub fn all_events(store: &Store) -> Vec<Event> {
    let q = EventQuery {
        page: 1,
        limit: 100_000,
        retention_days: 30,
        ..EventQuery::default()
    };
    store.search_events(&q).expect("search").items
}

/// Runs `q` with defaults for paging.
pub fn search(store: &Store, mut q: EventQuery) -> (Vec<Event>, u64) {
    if q.limit == 0 {
        q.limit = 1000;
    }
    q.page = q.page.max(1);
    q.retention_days = 30;
    let r = store.search_events(&q).expect("search");
    (r.items, r.total)
}
