//! File tail across rotation, truncation and restarts: no line lost, none repeated.

mod common;

use common::*;
use std::io::Write;
use std::time::{Duration, Instant};
use watchpost_dataplane::Pipeline;

fn append(path: &std::path::Path, lines: std::ops::Range<u32>) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for i in lines {
        writeln!(f, "Nov 21 10:00:00 web-01 app[1]: line {i}").unwrap();
    }
}

fn wait_messages(p: &Pipeline, n: usize) -> Vec<String> {
    let t = Instant::now();
    loop {
        let msgs: Vec<String> = all_events(&p.store())
            .into_iter()
            .map(|e| e.message)
            .collect();
        if msgs.len() >= n || t.elapsed() > Duration::from_secs(20) {
            return msgs;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn numbers(msgs: &[String]) -> Vec<u32> {
    let mut v: Vec<u32> = msgs
        .iter()
        .filter_map(|m| m.strip_prefix("line ")?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn rotation_truncation_and_restart_lose_and_repeat_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("app.log");
    let mut cfg = config(&dir.path().join("data"));
    cfg.inputs.file.enabled = true;
    cfg.inputs.file.paths = vec![format!("{}/*.log", logs.display())];
    cfg.inputs.file.poll_interval_ms = 20;

    append(&log, 0..100);
    let p = Pipeline::start(&cfg).unwrap();
    assert_eq!(
        numbers(&wait_messages(&p, 100)),
        (0..100).collect::<Vec<_>>()
    );

    // Rotate: the old file is renamed (not matched by the glob any more) after more lines arrive.
    append(&log, 100..150);
    std::fs::rename(&log, logs.join("app.log.1")).unwrap();
    append(&log, 150..200);
    assert_eq!(
        numbers(&wait_messages(&p, 200)),
        (0..200).collect::<Vec<_>>()
    );

    // Truncate in place and write again.
    std::fs::write(&log, b"").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    append(&log, 200..210);
    assert_eq!(
        numbers(&wait_messages(&p, 210)),
        (0..210).collect::<Vec<_>>()
    );
    p.shutdown();

    // Lines written while the service is down are read once after the restart.
    append(&log, 210..260);
    let p = Pipeline::start(&cfg).unwrap();
    let got = numbers(&wait_messages(&p, 260));
    std::thread::sleep(Duration::from_millis(200));
    let got_later = numbers(&wait_messages(&p, 260));
    assert_eq!(got, (0..260).collect::<Vec<_>>());
    assert_eq!(got_later, got, "nothing is repeated after the restart");
    let f = p.stats().snapshot();
    assert_eq!(
        f.inputs.iter().find(|i| i.name == "file").unwrap().received,
        50
    );
    p.shutdown();
}

/// A stop while a large file is read from its beginning ends without reading the rest, and the
/// next start reads on from the checkpoint: every line once.
#[test]
fn a_stop_in_the_middle_of_a_large_file_reads_no_further_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("big.log");
    let total = 1_000_000u32;
    append(&log, 0..total);
    let mut cfg = config(&dir.path().join("data"));
    cfg.inputs.file.enabled = true;
    cfg.inputs.file.paths = vec![format!("{}/*.log", logs.display())];
    cfg.inputs.file.poll_interval_ms = 20;
    let p = Pipeline::start(&cfg).unwrap();
    wait_stored(&p, 1);
    let stats = p.stats();
    let report = p.shutdown_within(Duration::from_secs(60));
    assert!(report.completed, "{report:?}");
    let first = stats.snapshot().stored_total;
    assert!(
        first < u64::from(total),
        "the stop read the whole file ({first} lines) before it ended"
    );
    let p = Pipeline::start(&cfg).unwrap();
    wait_stored(&p, u64::from(total) - first);
    let second = p.stats().snapshot().stored_total;
    let store = p.store();
    p.shutdown();
    assert_eq!(first + second, u64::from(total), "every line once");
    let mut seen = vec![false; total as usize];
    store
        .scan_events(i64::MIN, i64::MAX, u64::MAX, |_, e| {
            if let Some(n) = e.message.strip_prefix("line ") {
                seen[n.parse::<usize>().unwrap()] = true;
            }
            true
        })
        .unwrap();
    assert!(seen.iter().all(|s| *s), "a line is missing");
}

/// A folder watched for Windows event log exports: an export that appears is read whole, each
/// record one event with its Windows fields; a restart takes none of it again, nor does the
/// export saved again over itself (read again, its records already taken are passed over).
#[test]
fn an_evtx_export_dropped_in_a_watched_folder_is_read_once_record_by_record() {
    let dir = tempfile::tempdir().unwrap();
    let exports = dir.path().join("exports");
    std::fs::create_dir_all(&exports).unwrap();
    let mut cfg = config(&dir.path().join("data"));
    cfg.inputs.file.enabled = true;
    cfg.inputs.file.paths = vec![format!("{}/*.evtx", exports.display())];
    cfg.inputs.file.poll_interval_ms = 20;
    // Not from the beginning: an export is a whole all the same.
    cfg.inputs.file.start_at = "end".into();
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/evtx/new-user-security.evtx");
    let p = Pipeline::start(&cfg).unwrap();
    std::fs::copy(&sample, exports.join("dc-01.evtx")).unwrap();
    let t = Instant::now();
    let events = loop {
        let events = all_events(&p.store());
        if events.len() >= 4 || t.elapsed() > Duration::from_secs(20) {
            break events;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(events.len(), 4);
    assert!(events.iter().all(|e| e.source == "Security"), "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| e.attributes.get("EventID").map(String::as_str) == Some("4720")),
        "{events:?}"
    );
    p.shutdown();
    let p = Pipeline::start(&cfg).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(all_events(&p.store()).len(), 4, "nothing read twice");
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::copy(&sample, exports.join("dc-01.evtx")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(all_events(&p.store()).len(), 4, "the same records once");
    p.shutdown();
}
