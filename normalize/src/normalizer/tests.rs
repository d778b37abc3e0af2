use super::*;
use crate::{LineMeta, MinerConfig};
use watchpost_detect::UebaType;
use watchpost_proto::{EntityKind, Role, Severity, SeverityScale};

/// Normalises `line` as one taken in by `input` at a fixed time.
fn push(n: &mut Normalizer, line: &str, input: InputId, format: Format) {
    let mut block = EncodedBlock::with_capacity(0, 16);
    let meta = LineMeta {
        start: 0,
        len: line.len() as u32,
        received_ns: 1_795_255_200_000_000_000,
        truncated: false,
    };
    n.push_line(
        line.as_bytes(),
        &meta,
        input,
        format,
        &mut block,
        &mut Tally::default(),
    );
}

/// The UEBA types of the users of one normalised line, by role name.
fn scored_users(line: &str, format: Format) -> Vec<(&'static str, Option<UebaType>)> {
    let mut n = Normalizer::new(TemplateMiner::new(&MinerConfig::default()).unwrap());
    push(&mut n, line, InputId::SyslogTcp, format);
    let rec = n.detect_batch().records[0];
    rec.entities()
        .iter()
        .filter(|e| e.kind == EntityKind::User as u8)
        .map(|e| (Role::from_u8(e.role).name(), e.ueba_type()))
        .collect()
}

/// The severity each line is stored with, normalised by one normaliser on `scales`.
fn severities(lines: &[&str], scales: &SeverityConfig) -> Vec<Severity> {
    let mut n = Normalizer::new(TemplateMiner::new(&MinerConfig::default()).unwrap());
    n.set_severity_scales(scales);
    for line in lines {
        push(&mut n, line, InputId::JsonTcp, Format::Auto);
    }
    n.detect_batch()
        .records
        .iter()
        .map(|r| Severity::try_from(r.severity).unwrap())
        .collect()
}

/// Issue 50, item 1: the load generator (like many shippers) writes syslog's 6 for
/// informational in `event.severity` beside `log.level`; read on Watchpost's 0-5 it was
/// critical, and 58% of a realistic day was stored as critical.
#[test]
fn a_number_on_an_unknown_scale_never_outranks_the_level_word_or_makes_an_event_critical() {
    let lines = [
        // The load generator's shape: the word wins.
        r#"{"message":"User alice logged in","log":{"level":"info"},"event":{"dataset":"app.auth","severity":6}}"#,
        r#"{"message":"GET /api/v1/search 200","event":{"severity":6,"dataset":"nginx.access"},"log.level":"info"}"#,
        r#"{"message":"db timeout","event":{"severity":3,"dataset":"app.db"},"log.level":"error"}"#,
        // A bare number on no configured scale sets nothing, however large.
        r#"{"message":"no word","event":{"severity":2,"dataset":"app.auth"}}"#,
        r#"{"message":"pino","level":60,"service.name":"checkout"}"#,
        r#"{"message":"huge","severity":99}"#,
        // Syslog's own code and Windows' Level are on known scales.
        r#"{"message":"code","log.syslog.severity.code":2}"#,
        r#"{"message":"win","Channel":"Security","Level":2}"#,
        // Watchpost's own scale, as the OTLP input writes it, wins over everything.
        r#"{"message":"otlp","watchpost.severity":4,"log.level":"INFO","event.severity":1}"#,
    ];
    let defaults = SeverityConfig::default();
    assert_eq!(
        severities(&lines, &defaults),
        [
            Severity::Info,
            Severity::Info,
            Severity::High,
            Severity::Info,
            Severity::Info,
            Severity::Info,
            Severity::Critical,
            Severity::High,
            Severity::High,
        ]
    );
    // Declared per source, a bare number is read on that source's scale (and only there);
    // a word still wins over it.
    let mut declared = SeverityConfig::default();
    declared
        .sources
        .insert("app.auth".into(), SeverityScale::Syslog);
    declared
        .sources
        .insert("checkout".into(), SeverityScale::Bunyan);
    let got = severities(&lines[..6], &declared);
    assert_eq!(
        got,
        [
            Severity::Info,
            Severity::Info,
            Severity::High,
            Severity::Critical,
            Severity::Critical,
            Severity::Info,
        ]
    );
    // The default scale covers every source not listed; a value off the scale stays unread.
    let all_syslog = SeverityConfig {
        default_scale: SeverityScale::Syslog,
        ..SeverityConfig::default()
    };
    assert_eq!(
        severities(&[lines[3], lines[5]], &all_syslog),
        [Severity::Critical, Severity::Info]
    );
}

#[test]
fn an_account_a_person_acts_on_is_left_to_the_person() {
    let sudo = "<86>Nov  3 12:00:50 srv-05 sudo[47235]: marco.evans : TTY=pts/5 ; \
                    PWD=/home/marco.evans ; USER=root ; COMMAND=/usr/bin/journalctl -u app";
    assert_eq!(
        scored_users(sudo, Format::Syslog),
        [("subject", Some(UebaType::User)), ("target", None)]
    );
    // A logon whose subject is the machine account: the target is the one logging on.
    let logon = r#"{"@timestamp":"2026-11-03T12:00:00Z","host":{"name":"dc-01"},"EventID":4624,"SubjectUserName":"DC-01$","TargetUserName":"alice"}"#;
    assert_eq!(
        scored_users(logon, Format::Json),
        [
            ("subject", Some(UebaType::ServiceAccount)),
            ("target", Some(UebaType::User))
        ]
    );
}

/// What stage A hands stage B survives the wire encoding a cluster sends between hosts: the
/// records of real lines (entities, matches, an indicator) decode to themselves.
#[test]
fn the_detection_batch_of_real_lines_survives_its_wire_encoding() {
    let mut n = Normalizer::new(TemplateMiner::new(&MinerConfig::default()).unwrap());
    for line in [
        "<38>1 2026-11-30T10:00:00Z web1 sshd 42 - - Failed password for root from 203.0.113.9 port 22 ssh2",
        r#"{"@timestamp":"2026-11-30T10:00:01Z","event.dataset":"auth","user.name":"alice","source.ip":"198.51.100.7","message":"login ok"}"#,
        "<86>Nov 30 10:00:02 db1 sudo: bob : TTY=pts/0 ; PWD=/home/bob ; USER=root ; COMMAND=/bin/ls",
    ] {
        push(&mut n, line, InputId::SyslogTcp, Format::Auto);
    }
    let batch = n.detect_batch();
    assert_eq!(batch.records.len(), 3);
    assert!(batch.records.iter().any(|r| r.n_entities >= 2));
    let mut bytes = Vec::new();
    batch.encode_into(&mut bytes, &mut watchpost_detect::SameHost);
    let mut back = DetectBatch::default();
    let dropped = back
        .decode_from(&bytes, &mut watchpost_detect::SameHost)
        .unwrap();
    assert_eq!(dropped.total(), 0);
    assert_eq!(back.records, batch.records);
    assert_eq!(back.sigma, batch.sigma);
}
