//! Detection quality of the Half-Space Trees forest: ROC AUC over seeded streams with labelled
//! outliers, each point scored before it is learned (the way the ensemble runs it).
//!
//! The design's goal for Half-Space Trees is River's speed times thirty "with the same AUC"; this
//! measures our side of that, and `--csv DIR` writes the same streams for scoring with River
//! (`benches/scripts/hst_auc_river.py`), so both read the same points.
//!
//! `cargo run --release -p watchpost-benches --bin hst_auc -- [--seed N] [--csv DIR]`; with
//! `HST_DEBUG` set it also prints score quantiles of inliers and outliers to stderr, and with
//! `HST_CHECKSUM` set a checksum of every stream's scores (equal before and after a change of
//! the forest's layout when the change keeps the scores bit-identical).

use std::io::Write;
use watchpost_detect::{HalfSpaceTrees, HstConfig, SplitMix64};

/// Points per stream.
const POINTS: usize = 60_000;
/// Dimensions, as the ensemble's feature vector has.
const DIMS: usize = 6;

/// One labelled point.
struct Point {
    x: [f32; DIMS],
    outlier: bool,
}

/// The streams measured: how outliers differ from the normal points.
const STREAMS: [(&str, &str); 3] = [
    (
        "clusters",
        "three Gaussian clusters (sd 0.05); 1% outliers uniform over the cube",
    ),
    (
        "one_dimension",
        "three Gaussian clusters (sd 0.05); 1% outliers moved 0.3 along one random dimension",
    ),
    (
        "discrete",
        "ensemble-like features (a few severity and length levels, office hours); 1% outliers \
         with a rare level in one feature",
    ),
];

fn clamp01(v: f64) -> f32 {
    v.clamp(0.0, 1.0) as f32
}

fn stream(name: &str, seed: u64) -> Vec<Point> {
    let mut rng = SplitMix64::new(seed);
    let centres: Vec<[f64; DIMS]> = (0..3)
        .map(|_| std::array::from_fn(|_| 0.2 + 0.6 * rng.next_f64()))
        .collect();
    (0..POINTS)
        .map(|_| {
            let outlier = rng.next_f64() < 0.01;
            let c = &centres[rng.below(3) as usize];
            let mut x: [f32; DIMS] = std::array::from_fn(|d| clamp01(c[d] + 0.05 * rng.gaussian()));
            match name {
                "clusters" if outlier => x = std::array::from_fn(|_| rng.next_f64() as f32),
                "one_dimension" if outlier => {
                    let d = rng.below(DIMS as u64) as usize;
                    let step = if c[d] > 0.5 { -0.3 } else { 0.3 };
                    x[d] = clamp01(f64::from(x[d]) + step);
                }
                "discrete" => {
                    // severity, log length, entities, hour, log gap, template rarity
                    let sev = [0.2, 0.4, 0.6][rng.below(3) as usize];
                    let len = 0.45 + 0.05 * rng.below(4) as f64;
                    let ents = [0.25, 0.375][rng.below(2) as usize];
                    let hour = (8 + rng.below(10)) as f64 / 24.0;
                    let gap = clamp01(0.3 + 0.05 * rng.gaussian());
                    let rarity = 0.1 * rng.next_f64();
                    x = [
                        sev as f32,
                        len as f32,
                        ents as f32,
                        hour as f32,
                        gap,
                        rarity as f32,
                    ];
                    if outlier {
                        match rng.below(4) {
                            0 => x[0] = 1.0,
                            1 => x[1] = 0.95,
                            2 => x[3] = 3.0 / 24.0,
                            _ => x[5] = 0.9,
                        }
                    }
                }
                _ => {}
            }
            Point { x, outlier }
        })
        .collect()
}

/// ROC AUC by the rank-sum, ties counted half: the chance that a random outlier scores above a
/// random normal point.
fn auc(scored: &mut [(f64, bool)]) -> f64 {
    scored.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum, mut pos) = (0.0, 0.0);
    let mut i = 0;
    while i < scored.len() {
        let mut j = i;
        while j < scored.len() && scored[j].0 == scored[i].0 {
            j += 1;
        }
        // Ranks i+1..=j share their mean.
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        for s in &scored[i..j] {
            if s.1 {
                rank_sum += mean_rank;
                pos += 1.0;
            }
        }
        i = j;
    }
    let neg = scored.len() as f64 - pos;
    (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg)
}

/// ROC AUC of the Half-Space Trees forest on seeded streams with labelled outliers.
#[derive(clap::Parser)]
struct Args {
    /// Seed of the streams (stream `i` uses `seed + i`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write each stream to `DIR/<name>.csv` (six features, then 1 for an outlier).
    #[arg(long, value_name = "DIR")]
    csv: Option<std::path::PathBuf>,
}

fn main() {
    let Args { seed, csv } = clap::Parser::parse();
    println!("| stream | what | AUC |");
    println!("|---|---|---|");
    for (i, (name, what)) in STREAMS.iter().enumerate() {
        let points = stream(name, seed.wrapping_add(i as u64));
        let mut forest = HalfSpaceTrees::new(HstConfig::default());
        // The first window has no reference yet: its scores are all 0, left out of the AUC.
        let warm = HstConfig::default().window as usize;
        let mut scored: Vec<(f64, bool)> = points
            .iter()
            .map(|p| (forest.score_and_learn(&p.x), p.outlier))
            .skip(warm)
            .collect();
        // A checksum of every score, to show that a change of the forest's layout left the
        // scores bit-identical.
        if std::env::var("HST_CHECKSUM").is_ok() {
            let h = scored
                .iter()
                .fold(0u64, |h, s| h.rotate_left(5) ^ s.0.to_bits());
            eprintln!("{name} checksum {h:016x}");
        }
        if std::env::var("HST_DEBUG").is_ok() {
            for label in [false, true] {
                let mut v: Vec<f64> = scored
                    .iter()
                    .filter(|s| s.1 == label)
                    .map(|s| s.0)
                    .collect();
                v.sort_by(f64::total_cmp);
                let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
                eprintln!(
                    "{name} outlier={label}: p10 {:.3} p50 {:.3} p90 {:.3} p99 {:.3}",
                    q(0.1),
                    q(0.5),
                    q(0.9),
                    q(0.99)
                );
            }
        }
        println!("| {name} | {what} | {:.4} |", auc(&mut scored));
        if let Some(dir) = &csv {
            let path = dir.join(format!("{name}.csv"));
            if let Err(e) = write_csv(&path, &points) {
                eprintln!("hst_auc: cannot write {}: {e}", path.display());
                std::process::exit(1);
            }
        }
    }
}

fn write_csv(path: &std::path::Path, points: &[Point]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for p in points {
        let cols: Vec<String> = p.x.iter().map(|v| v.to_string()).collect();
        writeln!(out, "{},{}", cols.join(","), u8::from(p.outlier))?;
    }
    out.flush()
}
