//! Per-event cost of the stage A hot path on one core: syslog parsing, JSON scanning, template
//! mining, and the whole normalise-and-encode step a worker runs for every event.
//!
//! Inputs are the load generator's seeded realistic traffic, so figures are comparable run to run.
//! `cargo bench -p watchpost-benches --bench pipeline`

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use watchpost_benches::Traffic;
use watchpost_dataplane::batch::{Format, InputId, LineMeta};
use watchpost_dataplane::normalize::{Normalizer, Tally};
use watchpost_dataplane::parse::syslog::parse_syslog;
use watchpost_dataplane::store::EncodedBlock;
use watchpost_dataplane::template::{MinerConfig, TemplateMiner};

const LINES: usize = 8192;
const NOW_S: i64 = 1_795_000_000;

fn lines(json: bool) -> Vec<Vec<u8>> {
    let mut t = Traffic::new(7);
    (0..LINES)
        .map(|_| {
            let mut v = Vec::new();
            if json {
                t.next_json(NOW_S, &mut v);
            } else {
                t.next_syslog(NOW_S, &mut v);
            }
            v
        })
        .collect()
}

fn normalize(c: &mut Criterion, name: &str, json: bool) {
    let lines = lines(json);
    let mut n =
        Normalizer::new(TemplateMiner::new(&MinerConfig::default()).expect("default miner"));
    let mut block = EncodedBlock::with_capacity(0, 1024);
    let mut tally = Tally::default();
    let (input, format) = if json {
        (InputId::JsonTcp, Format::Json)
    } else {
        (InputId::SyslogTcp, Format::Syslog)
    };
    // Warm up: templates and entities are known, buffers have grown to size.
    for l in &lines {
        let meta = LineMeta {
            start: 0,
            len: l.len() as u32,
            received_ns: NOW_S * 1_000_000_000,
            truncated: false,
        };
        n.push_line(l, &meta, input, format, &mut block, &mut tally);
        if block.len() == 1024 {
            block.clear();
        }
    }
    let mut g = c.benchmark_group("normalize");
    g.throughput(Throughput::Elements(lines.len() as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            for l in &lines {
                let meta = LineMeta {
                    start: 0,
                    len: l.len() as u32,
                    received_ns: NOW_S * 1_000_000_000,
                    truncated: false,
                };
                n.push_line(black_box(l), &meta, input, format, &mut block, &mut tally);
                if block.len() == 1024 {
                    block.clear();
                }
            }
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    normalize(c, "syslog", false);
    normalize(c, "json", true);

    let syslog = lines(false);
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(syslog.len() as u64));
    g.bench_function("syslog_header", |b| {
        b.iter(|| {
            for l in &syslog {
                black_box(parse_syslog(black_box(l), NOW_S * 1_000_000_000));
            }
        })
    });
    g.finish();

    let messages: Vec<String> = syslog
        .iter()
        .map(|l| {
            let r = parse_syslog(l, NOW_S * 1_000_000_000);
            String::from_utf8_lossy(&l[r.msg]).into_owned()
        })
        .collect();
    let mut g = c.benchmark_group("template");
    g.throughput(Throughput::Elements(messages.len() as u64));
    g.bench_function("mine_known", |b| {
        b.iter_batched_ref(
            || {
                let mut m = TemplateMiner::new(&MinerConfig::default()).expect("default miner");
                for s in &messages {
                    m.mine(s);
                }
                m
            },
            |m| {
                for s in &messages {
                    black_box(m.mine(black_box(s)));
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(pipeline, benches);
criterion_main!(pipeline);
