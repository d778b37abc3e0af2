//! `watchpost analyze`: the whole detection stack over log files, offline.
//!
//! Lines go through the same [`Normalizer`] and [`Detector`] as live ingestion, in one thread and
//! in file order, with the events' own timestamps as the only clock: weeks of logs replay in
//! seconds, and the same files always give the same alerts (ids included). Nothing is written to
//! the store.
//!
//! Events are named `<file index><first line of batch>` + position, so an alert's
//! `contributing_events` turn back into file and line numbers (`contributing_lines`).

use crate::Error;
use crate::catalog::Catalog;
use crate::exceptions::ExceptionBook;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use watchpost_detect::{Collect, Detector, DetectorParams};
use watchpost_normalize::{Format, LineMeta};
use watchpost_normalize::{MinerConfig, TemplateMiner};
use watchpost_normalize::{Normalizer, Tally};
use watchpost_proto::{Alert, Config, InputId};
use watchpost_store::{EncodedBlock, parse_event_id};

/// Lines per block (as a worker's batch).
const BATCH: usize = 1024;

/// What a run saw.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    /// Lines read.
    pub lines: u64,
    /// Lines that did not parse as their format (kept as free text, still analysed).
    pub malformed: u64,
    /// Alerts by type.
    pub alerts: std::collections::BTreeMap<String, u64>,
    /// Signals (matches below the alerting level that add risk; docs/risk.md).
    pub signals: u64,
    /// Records of `.evtx` files the parser could not read (counted, not analysed).
    pub evtx_bad_records: u64,
    /// `.evtx` files that could not be read at all (no valid header), each as `path: error`:
    /// passed over, so that one damaged export does not stop a folder's analysis. The CLI
    /// names them and exits 1.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable_files: Vec<String>,
    /// Sigma matches in all (every rule an event matched).
    pub sigma_matches: u64,
    /// Matches past `detection.sigma_max_matches_per_event` of their event, which neither
    /// alerted nor added risk (the least severe of that event's).
    pub sigma_dropped: u64,
    /// Event time of the first and last event, ns.
    pub first_ns: i64,
    /// See `first_ns`.
    pub last_ns: i64,
    /// Wall seconds taken.
    pub seconds: f64,
    /// Events each exception kept from raising or joining an alert, by exception id (absent
    /// without exceptions).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub suppressed: std::collections::BTreeMap<String, u64>,
}

/// Analyses `files` in order and returns every alert (final state, ordered by first event time)
/// with the run's summary.
pub fn analyze(cfg: &Config, files: &[PathBuf]) -> Result<(Vec<Alert>, Summary), Error> {
    analyze_with(cfg, files, &ExceptionBook::in_memory(Vec::new()))
}

/// [`analyze`] with `exceptions` applied as live ingestion applies them; their hits are in
/// the summary and in the book.
pub fn analyze_with(
    cfg: &Config,
    files: &[PathBuf],
    exceptions: &ExceptionBook,
) -> Result<(Vec<Alert>, Summary), Error> {
    let started = std::time::Instant::now();
    let miner_cfg = MinerConfig::from_config(&cfg.templates);
    let miner = TemplateMiner::new(&miner_cfg)?;
    let mut norm = Normalizer::new(miner);
    norm.set_max_matches(cfg.detection.sigma_max_matches_per_event as usize);
    norm.set_severity_scales(&cfg.severity);
    let mut detector = Detector::new(DetectorParams::from_config(cfg));
    // The rules live ingestion would apply: bundled, configured folders, custom uploads.
    let catalog = std::sync::Arc::new(Catalog::load(cfg, None)?);
    let (_, rules, (plan_version, plan)) = catalog.snapshot();
    norm.set_rules(Some(rules));
    norm.set_plan(plan_version, Some(plan));
    detector.set_catalog(Some(catalog));
    // The indicators live ingestion would match (none when the folder does not exist).
    let iocs = std::sync::Arc::new(crate::ioc::IocFeed::open(cfg, false)?);
    let (ioc_version, ioc_set) = iocs.current();
    norm.set_iocs(ioc_version, Some(ioc_set));
    detector.set_iocs(Some(iocs));
    detector.set_exceptions(exceptions.current().1);
    let mut sink = Collect::default();
    let mut names: HashMap<[u8; 16], String> = HashMap::new();
    let mut block = EncodedBlock::with_capacity(0, BATCH);
    let mut summary = Summary {
        first_ns: i64::MAX,
        last_ns: i64::MIN,
        ..Summary::default()
    };
    let max_line = cfg.dataplane.max_line_bytes as usize;
    for (fi, path) in files.iter().enumerate() {
        let file = std::fs::File::open(path).map_err(|source| Error::ReadInput {
            path: path.clone(),
            source,
        })?;
        // An event log export is read record by record into JSON lines (one file's worth in
        // memory at a time); a line number is then the record's position in the file.
        let evtx = crate::evtx::is_evtx(path);
        let mut evtx_text = Vec::new();
        if evtx {
            match crate::evtx::evtx_lines(path, &mut evtx_text) {
                Ok(read) => summary.evtx_bad_records += read.bad_records,
                Err(e) => {
                    summary.unreadable_files.push(format!(
                        "{}: not a readable Windows event log: {e}",
                        path.display()
                    ));
                    continue;
                }
            }
        }
        // Year-less syslog timestamps are read relative to the file's modification time: the
        // lines were written before it. Deterministic for a given file.
        let reference_ns = file
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i64);
        let mut reader: Box<dyn std::io::BufRead> = if evtx {
            Box::new(std::io::Cursor::new(evtx_text))
        } else {
            Box::new(std::io::BufReader::with_capacity(1 << 20, file))
        };
        let mut line = Vec::with_capacity(4096);
        let mut line_no: u64 = 0;
        let mut first_line = 1u64;
        let mut tally = Tally::default();
        loop {
            // A skipped (empty) line ends the block, so that block position + first line is
            // always the line number.
            let mut skipped = false;
            let (n, truncated) =
                read_line(&mut reader, &mut line, max_line).map_err(|source| Error::ReadInput {
                    path: path.clone(),
                    source,
                })?;
            if n > 0 {
                line_no += 1;
                if !line.is_empty() {
                    let meta = LineMeta {
                        start: 0,
                        len: line.len() as u32,
                        received_ns: reference_ns,
                        truncated,
                    };
                    if block.is_empty() {
                        first_line = line_no;
                    }
                    norm.push_line(
                        &line,
                        &meta,
                        InputId::File,
                        Format::Auto,
                        &mut block,
                        &mut tally,
                    );
                    summary.lines += 1;
                } else {
                    skipped = true;
                }
            }
            if !block.is_empty() && (block.len() >= BATCH || n == 0 || skipped) {
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&(fi as u64).to_be_bytes());
                key[8..].copy_from_slice(&first_line.to_be_bytes());
                for e in &block.new_entities {
                    let name = &block.names[e.name.start as usize..e.name.end as usize];
                    names.entry(e.uuid).or_insert_with(|| name.to_string());
                }
                let detect = norm.detect_batch();
                for r in detect.records.iter_mut() {
                    r.block = key;
                    r.owned = u8::MAX;
                    summary.first_ns = summary.first_ns.min(r.ts_ns);
                    summary.last_ns = summary.last_ns.max(r.ts_ns);
                }
                for h in detect.hits.iter_mut() {
                    h.record.block = key;
                }
                detector.process_all(detect, &mut sink);
                detector.correlate(&detect.hits, &mut sink);
                detector.flush(&mut sink);
                detect.clear();
                block.clear();
            }
            if n == 0 {
                break;
            }
        }
        summary.malformed += tally.malformed;
        summary.sigma_matches += tally.sigma_matches;
        summary.sigma_dropped += tally.sigma_dropped;
    }
    detector.flush(&mut sink);
    summary.signals = sink.signals.len() as u64;
    let mut alerts: Vec<Alert> = sink.alerts.into_values().collect();
    alerts.sort_by(|a, b| a.first_seen_ns.cmp(&b.first_seen_ns).then(a.id.cmp(&b.id)));
    for a in &mut alerts {
        for e in a.entity.iter_mut().chain(a.related_entities.iter_mut()) {
            if let Some(n) = names.get(e.uuid.as_bytes()) {
                e.value = n.clone();
            }
        }
        *summary
            .alerts
            .entry(a.alert_type.name().to_string())
            .or_default() += 1;
    }
    if summary.lines == 0 {
        summary.first_ns = 0;
        summary.last_ns = 0;
    }
    summary.seconds = started.elapsed().as_secs_f64();
    summary.suppressed = exceptions
        .list()
        .into_iter()
        .map(|e| (e.id.to_string(), e.hits))
        .collect();
    Ok((alerts, summary))
}

/// Reads one line into `line` (without its line ending), keeping at most `max` bytes and
/// skipping the rest of a longer one, so one endless line cannot grow memory. Returns the bytes
/// consumed (0 at end of file) and whether the line was cut. (The inputs' `Framer` bounds memory
/// the same way but skips empty lines, and analysis must count every line to report line
/// numbers.)
pub fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(usize, bool)> {
    line.clear();
    let mut consumed = 0;
    let mut truncated = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let newline = memchr::memchr(b'\n', buf);
        let (chunk, done) = match newline {
            Some(i) => (&buf[..i], i + 1),
            None => (buf, buf.len()),
        };
        let room = max.saturating_sub(line.len());
        truncated |= chunk.len() > room;
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        reader.consume(done);
        consumed += done;
        if newline.is_some() {
            break;
        }
    }
    while line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok((consumed, truncated))
}

/// `file:line` of an event id produced by [`analyze`].
pub fn event_line(files: &[PathBuf], id: &str) -> Option<String> {
    let (key, pos) = parse_event_id(id)?;
    let fi = u64::from_be_bytes(key[..8].try_into().ok()?) as usize;
    let first = u64::from_be_bytes(key[8..].try_into().ok()?);
    let path: &Path = files.get(fi)?;
    Some(format!("{}:{}", path.display(), first + u64::from(pos)))
}

/// Writes alerts as JSON lines, each with `contributing_lines` added.
pub fn write_alerts(
    out: &mut impl Write,
    files: &[PathBuf],
    alerts: &[Alert],
) -> std::io::Result<()> {
    for a in alerts {
        let mut v = serde_json::to_value(a).unwrap_or_default();
        let lines: Vec<String> = a
            .contributing_events
            .iter()
            .filter_map(|e| event_line(files, e))
            .collect();
        v["contributing_lines"] = serde_json::json!(lines);
        serde_json::to_writer(&mut *out, &v)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_counted_whole() {
        let text = format!("short\r\n{}\n\nlast", "x".repeat(100));
        let mut r = std::io::BufReader::with_capacity(16, text.as_bytes());
        let mut line = Vec::new();
        let mut got = Vec::new();
        loop {
            let (n, cut) = read_line(&mut r, &mut line, 10).unwrap();
            if n == 0 {
                break;
            }
            got.push((String::from_utf8(line.clone()).unwrap(), cut));
        }
        assert_eq!(
            got,
            vec![
                ("short".to_string(), false),
                ("x".repeat(10), true),
                (String::new(), false),
                ("last".to_string(), false),
            ]
        );
    }
}
