//! Grouping accuracy and throughput of the template miner on the Loghub 2k samples.
//!
//! Usage: `template_ga <loghub-2k dir>... [--detail]`; `--detail` lists, per dataset, every
//! ground-truth event that was not grouped exactly, with the templates its lines went to. Each
//! folder holds dataset folders and is scored as a set with its own mean: the eight samples the
//! miner was tuned on (`../shared/data/loghub-2k`) apart from the ones held back from tuning
//! (docs/benchmarks.md, "Template miner", says where to get them).
//!
//! For each dataset `DS` it mines the `Content` column of `DS/DS_2k.log_structured_corrected.csv`
//! in file order with one fresh miner and the default configuration, then scores the ids returned
//! online against `EventId`. Grouping accuracy (GA) is the Loghub definition: a line is correct
//! when the set of lines that got its id is exactly the set of lines sharing its ground-truth
//! event. It also checks that restoring the final templates into a fresh miner and re-mining the
//! file gives every line the same id.
//!
//! Throughput: one miner mines all lines of all datasets once (warm-up, creating the templates),
//! then mines them again round after round for a few seconds on this one thread; lines/s is the
//! number mined in the timed rounds over the wall-clock time they took. On Linux it also reports
//! lines per second of CPU time actually given to the thread (from `/proc/thread-self/schedstat`),
//! which stays honest on a machine shared with other work, and the time spent waiting for a CPU.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use watchpost_normalize::{Change, MinerConfig, TemplateId, TemplateMiner};

/// Parses RFC 4180-style CSV: `"`-quoted fields may hold commas, newlines and `""`.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    field.push('"');
                    chars.next();
                } else {
                    quoted = false;
                }
            } else {
                field.push(c);
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => row.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                any = false;
            }
            _ => field.push(c),
        }
    }
    if any {
        row.push(field);
        rows.push(row);
    }
    rows
}

struct Dataset {
    name: String,
    content: Vec<String>,
    event: Vec<String>,
    event_template: HashMap<String, String>,
}

/// The structured sample of dataset folder `dir` (`DS/DS_2k.log_structured_corrected.csv`).
fn sample_of(dir: &Path) -> Option<(String, std::path::PathBuf)> {
    let name = dir.file_name()?.to_string_lossy().into_owned();
    let path = dir.join(format!("{name}_2k.log_structured_corrected.csv"));
    path.is_file().then_some((name, path))
}

/// Every dataset folder in `dir`, by name.
fn datasets_in(dir: &Path) -> Result<Vec<Dataset>, String> {
    let mut found: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| sample_of(&e.ok()?.path()))
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(format!(
            "{}: no DS/DS_2k.log_structured_corrected.csv",
            dir.display()
        ));
    }
    found
        .into_iter()
        .map(|(name, path)| load(&path, name))
        .collect()
}

fn load(path: &Path, name: String) -> Result<Dataset, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = parse_csv(&text).into_iter();
    let header = rows
        .next()
        .ok_or_else(|| format!("{}: empty", path.display()))?;
    let col = |want: &str| {
        header
            .iter()
            .position(|h| h == want)
            .ok_or_else(|| format!("{}: no {want} column", path.display()))
    };
    let (c, e, t) = (col("Content")?, col("EventId")?, col("EventTemplate")?);
    let mut ds = Dataset {
        name,
        content: Vec::new(),
        event: Vec::new(),
        event_template: HashMap::new(),
    };
    for row in rows {
        if row.len() <= c.max(e).max(t) {
            return Err(format!("{}: short row {row:?}", path.display()));
        }
        ds.content.push(row[c].clone());
        ds.event.push(row[e].clone());
        ds.event_template
            .entry(row[e].clone())
            .or_insert_with(|| row[t].clone());
    }
    Ok(ds)
}

/// Loghub grouping accuracy of `predicted` against `truth` (parallel per-line labels).
fn grouping_accuracy(predicted: &[TemplateId], truth: &[String]) -> f64 {
    let mut truth_size: HashMap<&str, usize> = HashMap::new();
    for t in truth {
        *truth_size.entry(t).or_default() += 1;
    }
    let mut groups: HashMap<TemplateId, Vec<usize>> = HashMap::new();
    for (i, &p) in predicted.iter().enumerate() {
        groups.entry(p).or_default().push(i);
    }
    let mut correct = 0;
    for lines in groups.values() {
        let t = &truth[lines[0]];
        if lines.iter().all(|&i| &truth[i] == t) && truth_size[t.as_str()] == lines.len() {
            correct += lines.len();
        }
    }
    correct as f64 / truth.len().max(1) as f64
}

fn print_detail(ds: &Dataset, ids: &[TemplateId], miner: &TemplateMiner) {
    let mut truth_size: HashMap<&str, usize> = HashMap::new();
    for t in &ds.event {
        *truth_size.entry(t).or_default() += 1;
    }
    let mut by_pred: HashMap<TemplateId, HashMap<&str, usize>> = HashMap::new();
    let mut by_truth: HashMap<&str, HashMap<TemplateId, usize>> = HashMap::new();
    for (id, t) in ids.iter().zip(&ds.event) {
        *by_pred.entry(*id).or_default().entry(t).or_default() += 1;
        *by_truth.entry(t).or_default().entry(*id).or_default() += 1;
    }
    let mut events: Vec<&str> = by_truth.keys().copied().collect();
    events.sort_by_key(|e| std::cmp::Reverse(truth_size[e]));
    for e in events {
        let preds = &by_truth[e];
        let ok = preds.len() == 1 && by_pred[preds.keys().next().unwrap()].len() == 1;
        if ok {
            continue;
        }
        println!(
            "  {e} ({} lines) truth: {}",
            truth_size[e], ds.event_template[e]
        );
        for (id, n) in preds {
            let others: Vec<String> = by_pred[id]
                .iter()
                .filter(|(t, _)| **t != e)
                .map(|(t, n)| format!("{t}x{n}"))
                .collect();
            println!(
                "      {n:5} -> {}   also: {}",
                miner.template(*id).unwrap_or("?"),
                others.join(" ")
            );
        }
    }
}

/// Nanoseconds this thread has run on a CPU and waited for one, where Linux tells.
fn schedstat() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dirs: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with("--")).collect();
    if dirs.is_empty() {
        eprintln!("usage: template_ga <loghub-2k dir>... [--detail]");
        std::process::exit(2);
    }
    let detail = args.iter().any(|a| a == "--detail");
    let cfg = MinerConfig::default();

    // Each folder is a set scored on its own: the datasets the miner was tuned on, and the ones
    // held back from tuning (docs/benchmarks.md, "Template miner").
    let mut sets = Vec::new();
    for dir in dirs {
        match datasets_in(Path::new(dir)) {
            Ok(ds) => sets.push((dir.clone(), ds)),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }

    println!(
        "{:<12} {:>6} {:>9} {:>9} {:>8}",
        "dataset", "GA", "templates", "truth", "restore"
    );
    for (dir, datasets) in &sets {
        let mut sum = 0.0;
        for ds in datasets {
            let mut miner = TemplateMiner::new(&cfg).expect("default config is valid");
            let ids: Vec<TemplateId> = ds.content.iter().map(|l| miner.mine(l).id).collect();
            let ga = grouping_accuracy(&ids, &ds.event);
            sum += ga;

            let mut restored = TemplateMiner::new(&cfg).expect("default config is valid");
            for (id, t) in miner.templates() {
                restored.restore(id, t);
            }
            let moved = ds
                .content
                .iter()
                .zip(&ids)
                .filter(|(l, id)| restored.mine(l).id != **id)
                .count();
            println!(
                "{:<12} {:>6.4} {:>9} {:>9} {:>8}",
                ds.name,
                ga,
                miner.len(),
                ds.event_template.len(),
                if moved == 0 {
                    "ok".to_string()
                } else {
                    format!("{moved} moved")
                }
            );
            if detail {
                print_detail(ds, &ids, &miner);
            }
        }
        println!(
            "mean GA {:.4} over {} datasets of {dir}",
            sum / datasets.len() as f64,
            datasets.len()
        );
    }
    let datasets: Vec<&Dataset> = sets.iter().flat_map(|(_, ds)| ds).collect();

    let lines: Vec<&str> = datasets
        .iter()
        .flat_map(|d| d.content.iter().map(String::as_str))
        .collect();
    let mut miner = TemplateMiner::new(&cfg).expect("default config is valid");
    let start = Instant::now();
    for l in &lines {
        black_box(miner.mine(l));
    }
    let cold = start.elapsed();
    let mut mined = 0u64;
    let mut changed = 0u64;
    let sched_start = schedstat();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        for l in &lines {
            let o = miner.mine(black_box(l));
            changed += u64::from(o.change != Change::None);
            black_box(o);
        }
        mined += lines.len() as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "throughput: {:.0} lines/s wall clock, steady state ({mined} lines in {secs:.2} s, one \
         thread, {changed} template changes; first pass {:.0} lines/s)",
        mined as f64 / secs,
        lines.len() as f64 / cold.as_secs_f64()
    );
    if let (Some((run0, wait0)), Some((run1, wait1))) = (sched_start, schedstat()) {
        let on_cpu = (run1 - run0) as f64 / 1e9;
        println!(
            "            {:.0} lines per CPU-second ({on_cpu:.2} s on CPU, {:.2} s waiting for one)",
            mined as f64 / on_cpu,
            (wait1 - wait0) as f64 / 1e9
        );
    }
}
