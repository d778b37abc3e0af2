//! The detection scenario table: generates four weeks of normal behaviour with seven labelled
//! attacks, runs the whole detection stack over it exactly as `watchpost analyze` does, and
//! reports each attack's detection and the false alerts per 10,000 normal events after warmup.
//!
//! ```text
//! cargo run --release -p watchpost-benches --bin scenario_table -- [--realistic | --org remote|shifts|domain] [--weeks N] [--seed 1] [--out DIR] [--config FILE] [--list-false 15]
//! ```
//! `--realistic` runs the realistic scenario instead (`watchpost_benches::realistic`: five weeks
//! by default, mixed formats, internet background, eleven attacks with benign look-alikes).
//! `--out` keeps `scenario.jsonl`, `labels.json` and `alerts.jsonl` for a look with
//! `watchpost analyze DIR/scenario.jsonl`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use watchpost_benches::scenario::{Attack, generate};
use watchpost_benches::{domain, orgs, realistic};
use watchpost_dataplane::{analyze, event_line};
use watchpost_proto::{Alert, Config};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let real = std::env::args().any(|a| a == "--realistic");
    let weeks: i64 = arg("--weeks")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if real || arg("--org").is_some() { 5 } else { 4 });
    let seed: u64 = arg("--seed").and_then(|v| v.parse().ok()).unwrap_or(1);
    let out = PathBuf::from(arg("--out").unwrap_or_else(|| "target/scenario".into()));
    std::fs::create_dir_all(&out).expect("create the output folder");
    // `--org NAME` runs one of the organisations built unlike the realistic one (`orgs`:
    // `remote`, `shifts`; `domain`, a Windows domain), to report on what was tuned elsewhere.
    let s = if let Some(name) = arg("--org") {
        match orgs::by_name(&name) {
            Some(p) => orgs::generate(&p, seed, weeks),
            None if name == "domain" => domain::generate(seed, weeks),
            None => panic!("no organisation {name}: remote, shifts or domain"),
        }
    } else if real {
        realistic::generate(seed, weeks)
    } else {
        generate(seed, weeks)
    };
    let log = out.join("scenario.jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&log).expect("create log"));
        for l in &s.lines {
            writeln!(f, "{l}").expect("write log");
        }
    }
    std::fs::write(
        out.join("labels.json"),
        serde_json::to_vec_pretty(&s.attacks).unwrap_or_default(),
    )
    .expect("write labels");

    // `--config FILE` runs with an operator's configuration (for what-if runs); the figures in
    // docs/benchmarks.md are with the defaults.
    let cfg = match arg("--config") {
        Some(path) => Config::load(Some(std::path::Path::new(&path))).expect("load the config"),
        None => Config::default(),
    };
    let files = vec![log.clone()];
    let (alerts, summary) = analyze(&cfg, &files).expect("analyze");
    {
        let mut f = std::fs::File::create(out.join("alerts.jsonl")).expect("create alerts");
        watchpost_dataplane::write_alerts(&mut f, &files, &alerts).expect("write");
    }

    let line_of = |a: &Alert| -> Vec<u64> {
        a.contributing_events
            .iter()
            .filter_map(|e| event_line(&files, e))
            .filter_map(|l| l.rsplit(':').next().and_then(|n| n.parse().ok()))
            .collect()
    };
    let names = |a: &Alert| -> Vec<String> {
        a.entity
            .iter()
            .chain(&a.related_entities)
            .map(|e| e.value.clone())
            .collect()
    };
    let matches = |a: &Alert, at: &Attack| -> bool {
        let lines = line_of(a);
        if lines.iter().any(|l| at.lines.binary_search(l).is_ok()) {
            return true;
        }
        let near = a.first_seen_ns >= at.start_ns - 60_000_000_000
            && a.first_seen_ns <= at.end_ns + 1_800_000_000_000;
        let n = names(a);
        near && (n.contains(&at.entity) || at.actor.as_ref().is_some_and(|x| n.contains(x)))
    };
    let attack_lines: std::collections::HashSet<u64> = s
        .attacks
        .iter()
        .flat_map(|a| a.lines.iter().copied())
        .collect();
    let normal_after_warmup = s
        .times
        .iter()
        .enumerate()
        .filter(|(i, t)| **t >= s.warm_ns && !attack_lines.contains(&(*i as u64 + 1)))
        .count();
    let mut false_alerts: Vec<&Alert> = Vec::new();
    let mut per_attack: Vec<Vec<&Alert>> = vec![Vec::new(); s.attacks.len()];
    for a in &alerts {
        let mut hit = false;
        for (i, at) in s.attacks.iter().enumerate() {
            if matches(a, at) {
                per_attack[i].push(a);
                hit = true;
            }
        }
        if !hit && a.first_seen_ns >= s.warm_ns {
            false_alerts.push(a);
        }
    }

    println!(
        "scenario: {} events over {} weeks ({} after warmup, not attacks), analysed in {:.2} s ({:.0} events/s)",
        s.lines.len(),
        weeks,
        normal_after_warmup,
        summary.seconds,
        s.lines.len() as f64 / summary.seconds
    );
    println!();
    println!("| attack | detected | alerts | by | first alert after attack start |");
    println!("|---|---|---|---|---|");
    let mut detected = 0;
    for (at, hits) in s.attacks.iter().zip(&per_attack) {
        let by: BTreeMap<String, usize> = hits.iter().fold(BTreeMap::new(), |mut m, a| {
            *m.entry(a.detector.clone()).or_default() += 1;
            m
        });
        let first = hits.iter().map(|a| a.first_seen_ns).min();
        if !hits.is_empty() {
            detected += 1;
        }
        println!(
            "| {} | {} | {} | {} | {} |",
            at.name,
            if hits.is_empty() { "no" } else { "yes" },
            hits.len(),
            by.iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", "),
            first.map_or("-".to_string(), |f| format!(
                "{:.1} s",
                (f - at.start_ns) as f64 / 1e9
            )),
        );
    }
    let per_10k = false_alerts.len() as f64 * 10_000.0 / normal_after_warmup.max(1) as f64;
    println!();
    println!(
        "detected {detected}/{}; false alerts after warmup: {} over {} normal events = {:.3} per 10,000",
        s.attacks.len(),
        false_alerts.len(),
        normal_after_warmup,
        per_10k
    );
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for a in &false_alerts {
        *by.entry(a.detector.clone()).or_default() += 1;
    }
    println!("false alerts by detector: {by:?}");
    let mut by_type: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &false_alerts {
        *by_type.entry(a.alert_type.name()).or_default() += 1;
    }
    println!(
        "false alerts by type: {by_type:?}; signals stored: {}",
        summary.signals
    );
    let listed: usize = arg("--list-false")
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    for a in false_alerts.iter().take(listed) {
        let first_line = line_of(a).first().copied();
        println!(
            "  {} {} {} score {:.3} thr {:.3} {:?} {:?} {:?}",
            a.detector,
            a.title,
            a.entity.as_ref().map_or("", |e| e.value.as_str()),
            a.score,
            a.threshold,
            a.contributions,
            a.deviation.as_ref().map(|d| (d.signal, d.bits)),
            first_line
        );
        if let Some(text) = first_line.and_then(|n| s.lines.get(n as usize - 1)) {
            println!("      {}", text.chars().take(200).collect::<String>());
        }
    }
}
