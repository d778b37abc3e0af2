//! Property tests of the rules crate's parsers on adversarial input (seeded mutations of valid
//! examples, `watchpost_proto::mutate`): Sigma rules (YAML and conditions) and indicator feeds
//! (lists, CSV, STIX bundles and patterns) answer with a value or an error, never a panic,
//! whatever bytes they are given.

use std::time::SystemTime;
use watchpost_proto::mutate::Mutations;
use watchpost_rules::{IocSet, parse_rule};

const RULE: &str = "title: Suspicious shell\nid: 4f0b2c8e-1d7a-4e1b-9a3c-7e5d2b1f0a9c\nstatus: test\nlogsource:\n    product: linux\n    service: auth\ndetection:\n    sel:\n        message|contains|all:\n            - 'sudo'\n            - '/bin/bash'\n    filter:\n        user|re: '^(root|svc_.*)$'\n    other:\n        - 'x*y?z'\n    condition: (sel and not filter) or 1 of other*\nfields:\n    - user\nlevel: high\ntags:\n    - attack.t1059.004\n";

const CORRELATION: &str = "title: Many\nid: 5a1c9d3e-0000-4000-8000-000000000001\nstatus: test\ncorrelation:\n    type: event_count\n    rules:\n        - 4f0b2c8e-1d7a-4e1b-9a3c-7e5d2b1f0a9c\n    group-by:\n        - host\n    timespan: 5m\n    condition:\n        gte: 10\nlevel: high\n";

#[test]
fn mangled_sigma_rules_are_errors_never_panics() {
    let examples: [&[u8]; 2] = [RULE.as_bytes(), CORRELATION.as_bytes()];
    let mut inputs = Mutations::new(&examples, 11, 256 << 10);
    let (mut parsed, mut refused) = (0, 0);
    for _ in 0..4_000 {
        let bytes = inputs.next_input();
        match parse_rule(&String::from_utf8_lossy(&bytes)) {
            Ok(_) => parsed += 1,
            Err(e) => {
                assert!(!e.message.is_empty());
                refused += 1;
            }
        }
    }
    // Both outcomes occur: the mutations reach past the first check.
    assert!(
        parsed > 0 && refused > 0,
        "{parsed} parsed, {refused} refused"
    );
}

const LIST: &str = "# C2\n198.51.100.7 # label\n0.0.0.0 evil.example\nhttp://bad.example/x#frag\n44d88612fea8a8f36de82e1278abb02f\n2001:db8::/32\n";
const CSV: &str = "indicator,type,confidence,label\n198.51.100.8,ipv4,80,\"quoted, label\"\nbad.example,domain,high,\"multi\nline\"\n";
const STIX: &str = r#"{"type":"bundle","id":"bundle--1","objects":[{"type":"indicator","id":"indicator--a","pattern_type":"stix","pattern":"[ipv4-addr:value = '198.51.100.7'] OR [file:hashes.'SHA-256' = 'E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855' AND domain-name:value = 'x.example']","valid_from":"2024-01-01T00:00:00Z","confidence":70}]}"#;

#[test]
fn mangled_indicator_feeds_are_errors_never_panics() {
    for (name, example) in [("feed.txt", LIST), ("feed.csv", CSV), ("feed.json", STIX)] {
        let examples: [&[u8]; 1] = [example.as_bytes()];
        let mut inputs = Mutations::new(&examples, 17, 256 << 10);
        for _ in 0..2_000 {
            let bytes = inputs.next_input();
            let mut set = IocSet::new();
            let (_stats, errors) = set.add_file(name, &bytes, SystemTime::now());
            for e in errors {
                assert!(!e.to_string().is_empty(), "{name}");
            }
        }
    }
}
