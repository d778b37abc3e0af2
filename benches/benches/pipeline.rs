//! Per-event cost of the stage A hot path on one core: syslog parsing, JSON scanning, template
//! mining, and the whole normalise-and-encode step a worker runs for every event.
//!
//! Inputs are the load generator's seeded realistic traffic, so figures are comparable run to run.
//! `cargo bench -p watchpost-benches --bench pipeline`

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use watchpost_benches::Traffic;
use watchpost_normalize::{
    Format, LineMeta, MinerConfig, Normalizer, Tally, TemplateMiner, parse_syslog,
};
use watchpost_proto::InputId;
use watchpost_rules::IocSet;
use watchpost_store::EncodedBlock;

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

/// A million indicators of every kind, none of them in the traffic (the common case: a feed of
/// bad addresses and names that the sensor's events mostly do not contain) plus one that is.
fn million_indicators() -> Arc<IocSet> {
    let mut set = IocSet::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..1_000_000u32 {
        let r = next();
        let text = match i % 4 {
            0 => std::net::Ipv4Addr::from((r as u32) | 0x0100_0000).to_string(),
            1 => format!("h{:x}.bad{}.example", r >> 20, r % 997),
            2 => format!("{:032x}", u128::from(r) << 64 | u128::from(next())),
            _ => format!("{:016x}{:016x}{:016x}{:016x}", r, next(), next(), next()),
        };
        let _ = set.add(&text, None, "bench.txt", None);
    }
    let _ = set.add("203.0.113.77", None, "bench.txt", Some("in the traffic"));
    set.shrink_to_fit();
    Arc::new(set)
}

fn normalize(c: &mut Criterion, name: &str, json: bool, iocs: Option<Arc<IocSet>>) {
    let lines = lines(json);
    let mut n =
        Normalizer::new(TemplateMiner::new(&MinerConfig::default()).expect("default miner"));
    n.set_iocs(1, iocs);
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
            n.detect_batch().clear();
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
                    n.detect_batch().clear();
                }
            }
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    normalize(c, "syslog", false, None);
    normalize(c, "json", true, None);
    let iocs = million_indicators();
    normalize(c, "syslog_1m_iocs", false, Some(Arc::clone(&iocs)));
    normalize(c, "json_1m_iocs", true, Some(iocs));

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
