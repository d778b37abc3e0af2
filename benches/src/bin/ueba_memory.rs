//! Memory per UEBA entity at the default caps: fills one engine with 100,000 entities (each with
//! full top-K source and template sets, so the fixed-size slices are all in use) and prints the
//! growth of the process's resident memory divided by the entity count. Sources are IPv4 unless
//! `--ipv6` is given: an entity's IPv6 sources take a second block of full keys. It runs on the
//! system allocator, which hands the entity table's outgrown arrays back to the OS, so the growth
//! is what the entities hold; under the service's mimalloc, which keeps them for reuse, the same
//! run reads 160 to 170 bytes more per entity.
//!
//! `cargo run --release -p watchpost-benches --bin ueba_memory [ENTITIES] [--ipv6]`

use watchpost_detect::{EventTime, Observation, Ueba, UebaParams, UebaType};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ipv6 = args.iter().any(|a| a == "--ipv6");
    let entities: u64 = args.iter().find_map(|s| s.parse().ok()).unwrap_or(100_000);
    let base: u128 = if ipv6 {
        0x2001_0db8_0000_0000_0000_0000_0000_0000
    } else {
        0xffff_0a00_0000
    };
    let params = UebaParams::default();
    let (sources, templates) = (params.source_cap as u64, params.template_k as u64);
    let before = rss_bytes();
    let mut ueba = Ueba::new(params);
    let mut ts = 1_800_000_000_000_000_000i64;
    for e in 0..entities {
        // Enough observations to fill both top-K sets.
        for i in 0..sources.max(templates) {
            ts += 1_000;
            ueba.observe(&Observation {
                time: EventTime::new(ts),
                entity: e.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                kind: UebaType::User,
                source: Some(base + u128::from(i % sources)),
                template: i % templates,
                host: 0,
                account_named: false,
                failed_logon: false,
                person: 0,
            });
        }
    }
    let after = rss_bytes();
    assert_eq!(ueba.len() as u64, entities);
    let per = (after.saturating_sub(before)) as f64 / entities as f64;
    println!(
        "{{\"entities\": {entities}, \"ipv6\": {ipv6}, \"rss_growth_bytes\": {}, \"bytes_per_entity\": {per:.0}}}",
        after - before
    );
}
