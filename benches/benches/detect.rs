//! Per-event cost of detection on one core: each detector alone (Half-Space Trees, DSPOT, the
//! Markov chain, UEBA) and the content ensemble plus UEBA together, as a worker will run them for
//! every event (one source model, three entity observations: user, source IP, host).
//!
//! Inputs come from a seeded generator over a realistic spread: 5,000 users, 20,000 addresses,
//! 500 hosts, 40 templates, timestamps advancing about 1 ms per event.
//! `cargo bench -p watchpost-benches --bench detect`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use watchpost_detect::{
    Dspot, DspotConfig, EventFeatures, EventTime, HalfSpaceTrees, HstConfig, LOOKAHEAD, Markov,
    Observation, SourceModel, SplitMix64, Ueba, UebaParams, UebaType,
};

// The allocator the service ships with: where it places the baselines' blocks decides how many
// lines an observation touches. Of 100,000 768-byte blocks, mimalloc put every one on a cache-line
// boundary; the system allocator put a quarter at each 16-byte offset in a line.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const N: usize = 16_384;

#[derive(Clone, Copy)]
struct Synthetic {
    features: EventFeatures,
    user: u64,
    ip: u64,
    host: u64,
    source_ip: u128,
}

fn events(start_ns: i64) -> Vec<Synthetic> {
    let mut rng = SplitMix64::new(99);
    let mut ts = start_ns;
    (0..N)
        .map(|_| {
            ts += 1_000_000;
            let user = rng.below(5_000);
            let ip = 1_000_000 + rng.below(20_000);
            let template = rng.below(40);
            Synthetic {
                features: EventFeatures {
                    time: EventTime::new(ts),
                    template,
                    severity: (template % 4) as u8,
                    message_len: 40 + (template as u32 * 7) % 200,
                    entities: 3,
                },
                user,
                ip,
                host: 2_000_000 + rng.below(500),
                source_ip: 0xffff_0a00_0000 + u128::from(ip % 65_536),
            }
        })
        .collect()
}

fn detectors(c: &mut Criterion) {
    let mut g = c.benchmark_group("detect");
    g.throughput(Throughput::Elements(N as u64));

    let mut rng = SplitMix64::new(1);
    let points: Vec<[f32; 6]> = (0..N)
        .map(|_| std::array::from_fn(|_| rng.next_f64() as f32))
        .collect();
    let mut hst = HalfSpaceTrees::new(HstConfig::default());
    for p in &points {
        hst.score_and_learn(p);
    }
    g.bench_function("hst_10x8", |b| {
        b.iter(|| {
            for p in &points {
                black_box(hst.score_and_learn(black_box(p)));
            }
        })
    });

    let values: Vec<f64> = (0..N).map(|_| rng.gaussian()).collect();
    let mut dspot = Dspot::new(DspotConfig::default());
    for _ in 0..20 {
        for &v in &values {
            dspot.update(v);
        }
    }
    g.bench_function("dspot", |b| {
        b.iter(|| {
            for &v in &values {
                black_box(dspot.update(black_box(v)));
            }
        })
    });

    let templates: Vec<u64> = (0..N).map(|_| rng.below(40)).collect();
    let mut markov = Markov::default();
    g.bench_function("markov", |b| {
        b.iter(|| {
            for &t in &templates {
                black_box(markov.score_and_learn(black_box(t)));
            }
        })
    });

    // Start two weeks in so that every entity is past warmup after the priming pass.
    let evs = events(14 * 86_400_000_000_000);
    let params = UebaParams {
        warmup_ns: 0,
        warmup_min_events: 1,
        ..UebaParams::default()
    };
    let mut ueba = Ueba::new(params);
    let mut model = SourceModel::new(1e-4);
    let observe_all = |ueba: &mut Ueba, model: &mut SourceModel, e: &Synthetic, shift: i64| {
        // Worked out once per event and shared by the ensemble and UEBA, as the engine does.
        let time = EventTime::new(e.features.time.ts_ns + shift);
        let f = EventFeatures { time, ..e.features };
        black_box(model.observe(&f));
        for (entity, kind, source) in [
            (e.user, UebaType::User, Some(e.source_ip)),
            (e.ip, UebaType::Ip, None),
            (e.host, UebaType::Host, Some(e.source_ip)),
        ] {
            black_box(ueba.observe(&Observation {
                time,
                entity,
                kind,
                source,
                template: f.template,
                host: if kind == UebaType::User { e.host } else { 0 },
                account_named: true,
                failed_logon: false,
                // The host counts the person among its people, as the engine has it.
                person: if kind == UebaType::Host { e.user } else { 0 },
            }));
        }
    };
    for round in 0..4 {
        for e in &evs {
            observe_all(&mut ueba, &mut model, e, round * 20_000_000_000);
        }
    }
    // The service moves closed risk-history points out at every publish; so does each
    // iteration here, or the bench would measure a vector growing without end.
    let mut risk_points = Vec::new();
    // As `Detector::process_all` runs them: the baselines of the next `LOOKAHEAD` events are
    // prefetched in stages while this one is scored.
    let mut round = 4;
    g.bench_function("ensemble_plus_ueba_per_event", |b| {
        b.iter(|| {
            for (i, e) in evs.iter().enumerate() {
                for ahead in 1..=LOOKAHEAD {
                    let Some(next) = evs.get(i + ahead) else {
                        break;
                    };
                    for entity in [next.user, next.ip, next.host] {
                        ueba.prefetch(entity, ahead);
                    }
                }
                observe_all(&mut ueba, &mut model, e, round * 20_000_000_000);
            }
            ueba.take_risk_points(&mut risk_points);
            risk_points.clear();
            round += 1;
        })
    });
    // The same without prefetching, to show what it buys.
    g.bench_function("ensemble_plus_ueba_per_event_no_prefetch", |b| {
        b.iter(|| {
            for e in &evs {
                observe_all(&mut ueba, &mut model, e, round * 20_000_000_000);
            }
            ueba.take_risk_points(&mut risk_points);
            risk_points.clear();
            round += 1;
        })
    });
    g.finish();
}

criterion_group!(benches, detectors);
criterion_main!(benches);
