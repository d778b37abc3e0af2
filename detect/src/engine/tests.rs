use super::*;
use crate::record::RecordEntity;
use crate::risk::RiskParams;
use crate::ueba::UebaParams;
use std::collections::BTreeMap;
use watchpost_proto::Role;
use watchpost_proto::{DeviationSignal as Signal, EntityKind, Uuid};
use watchpost_rules::Level;

const HOUR: i64 = 3_600_000_000_000;
const DAY: i64 = 24 * HOUR;

fn params() -> DetectorParams {
    DetectorParams {
        ml_enabled: true,
        ml_risk: 1e-4,
        ml_alert_risk: 1e-4,
        ml_cooldown_ns: 300_000_000_000,
        sigma_cooldown_ns: 300_000_000_000,
        correlation_cooldown_ns: 300_000_000_000,
        ioc_cooldown_ns: 3_600_000_000_000,
        ioc_per_indicator: true,
        ioc_min_confidence: 50,
        group_after: 3,
        group_window_ns: HOUR,
        correlation_max_groups: 1000,
        persistence_min_periods: 12,
        killchain_min_tactics: 3,
        killchain_window_ns: 24 * 3_600_000_000_000,
        ueba: UebaParams {
            warmup_ns: 2 * DAY,
            warmup_min_events: 50,
            ..UebaParams::default()
        },
        sigma_alert_min_level: Level::Medium,
        sigma_alert_rules: Default::default(),
        sigma_signal_rules: Default::default(),
        risk: RiskParams {
            threshold: 60.0,
            window_ns: DAY,
            max_entities: 1000,
            level_weights: Default::default(),
        },
    }
}

/// Issue 50, item 6: the last minute before traffic went quiet showed 0 events on the
/// timeline for minutes (until a restart), as a minute was handed out only once closed.
#[test]
fn the_open_minute_is_handed_out_as_it_changes_and_replaced_when_it_closes() {
    let mut d = Detector::new(params());
    let mut sink = Collect::default();
    let minute = 60_000_000_000;
    let base = 1_700_000_040 * 1_000_000_000 - 1_700_000_040 * 1_000_000_000 % minute;
    let mut out = Vec::new();
    for i in 0..5 {
        d.process(&login(base + i * 1_000_000_000, 1, OFFICE, 1), &mut sink);
    }
    d.take_minutes(&mut out);
    let got: Vec<(i64, u32)> = out.iter().map(|m| (m.minute_ns, m.events)).collect();
    assert_eq!(got, [(base, 5)], "the open minute, as it is now");
    // Nothing new: nothing handed out again.
    out.clear();
    d.take_minutes(&mut out);
    assert!(out.is_empty(), "{out:?}");
    // More events in it: the copy again, with them.
    d.process(&login(base + 30_000_000_000, 1, OFFICE, 1), &mut sink);
    d.take_minutes(&mut out);
    let got: Vec<(i64, u32)> = out.iter().map(|m| (m.minute_ns, m.events)).collect();
    assert_eq!(got, [(base, 6)]);
    // The next minute closes it: the closed minute (same key, every event), then the new
    // open one.
    out.clear();
    d.process(&login(base + minute + 1, 1, OFFICE, 1), &mut sink);
    d.take_minutes(&mut out);
    let got: Vec<(i64, u32)> = out.iter().map(|m| (m.minute_ns, m.events)).collect();
    assert_eq!(got, [(base, 6), (base + minute, 1)]);
}

fn login(ts: i64, user: u64, ip: u128, template: u64) -> DetectRecord {
    let mut r = DetectRecord {
        ts_ns: ts,
        source: 7,
        template,
        client_ip: ip,
        message_len: 60,
        severity: 1,
        entity_count: 1,
        n_entities: 1,
        owned: u8::MAX,
        ..DetectRecord::default()
    };
    r.set_source_name("sshd");
    r.entities[0] = RecordEntity {
        hash: user,
        uuid: [user as u8; 16],
        kind: EntityKind::User as u8,
        role: 2,
        ueba: UebaType::User as u8,
    };
    r
}

const OFFICE: u128 = 0xffff_0a01_0203;

/// Ten office days of twelve colleagues, so the user type's threshold has calibrated
/// (2,000 scores).
fn office_logins(d: &mut Detector, sink: &mut Collect) {
    for day in 0..10 {
        for h in 9..17 {
            for m in 0..6 {
                for user in 1..=12 {
                    let ts = day * DAY + h * HOUR + m * 600_000_000_000 + user as i64;
                    d.process(&login(ts, user, OFFICE, 1 + (m as u64 % 3)), sink);
                }
            }
        }
    }
    d.flush(sink);
}

#[test]
fn an_exception_keeps_the_alert_back_and_counts_every_event_it_held() {
    let t = 10 * DAY + 10 * HOUR;
    // Five logins of user 1 from networks of 203.0/16, then one of user 2 from elsewhere.
    let run = |exceptions: Option<Arc<ExceptionSet>>| {
        let mut d = Detector::new(params());
        let mut sink = Collect::default();
        office_logins(&mut d, &mut sink);
        if let Some(set) = exceptions {
            d.set_exceptions(set);
        }
        for k in 0..5u16 {
            let ip = 0xffff_cb00_7101 + (u128::from(k) << 8);
            let mut r = login(t + i64::from(k) * 1_000_000_000, 1, ip, 1);
            r.pos = k;
            d.process(&r, &mut sink);
        }
        d.process(
            &login(t + 10_000_000_000, 2, 0xffff_c633_6401, 1),
            &mut sink,
        );
        d.flush(&mut sink);
        sink.alerts.into_values().collect::<Vec<Alert>>()
    };
    let without = run(None);
    let held = without
        .iter()
        .find(|a| a.first_seen_ns < t + 10_000_000_000)
        .expect("user 1's alert without the exception");
    let draft: watchpost_proto::ExceptionDraft = serde_json::from_value(serde_json::json!({
        "detector": "ueba:*", "reason": "the partner's network", "author": "ana",
        "conditions": {"source_cidrs": ["203.0.0.0/16"]}
    }))
    .unwrap();
    let e = watchpost_proto::Exception::create(draft, Uuid::nil(), 0).unwrap();
    let hits = Arc::new(crate::ExceptionHits::default());
    let with = run(Some(Arc::new(ExceptionSet::compile(&[e], |_| {
        hits.clone()
    }))));
    // Only user 2's alert is left.
    assert_eq!(with.len(), without.len() - 1, "{with:#?}");
    assert!(with.iter().all(|a| a.first_seen_ns >= t + 10_000_000_000));
    // Every event that raised or joined the alert without the exception is a hit with it.
    assert_eq!(hits.count(), held.count);
    assert_eq!(hits.last_ns(), Some(held.last_seen_ns));
}

#[test]
fn a_login_from_a_new_network_alerts_once_and_repeats_bump_the_count() {
    let mut d = Detector::new(params());
    let mut sink = Collect::default();
    office_logins(&mut d, &mut sink);
    assert!(sink.alerts.is_empty(), "{:?}", sink.alerts.values().next());
    let t = 10 * DAY + 10 * HOUR;
    let far: u128 = 0xffff_cb00_7101;
    // Five logins, each from another unknown network (one the baseline has since learned
    // is no longer news).
    for k in 0..5 {
        let ip = far + (u128::from(k as u8) << 8);
        let mut r = login(t + k * 1_000_000_000, 1, ip, 1);
        r.pos = k as u16;
        d.process(&r, &mut sink);
    }
    d.flush(&mut sink);
    let ueba: Vec<&Alert> = sink
        .alerts
        .values()
        .filter(|a| a.alert_type == AlertType::Ueba)
        .collect();
    assert_eq!(ueba.len(), 1, "one alert, repeats folded in");
    let a = ueba[0];
    // Each further unknown network is less news than the last (the account now meets new
    // networks often: `Novelty::new_item_chance`), so the last ones no longer alarm.
    assert!(a.count >= 2 && a.count <= 5, "{a:?}");
    assert_eq!(a.contributing_events.len() as u64, a.count);
    assert_eq!(a.detector, "ueba:user");
    assert!(a.contributions["source_novelty"] > 0.0);
    assert_eq!(
        a.deviation.map(|d| d.signal),
        Some(Signal::NewSource),
        "a first new network for a settled account: {a:?}"
    );
    assert_eq!(a.attack[0].technique_id, "T1078");
    assert!(a.score > a.threshold);
    // Time-ordered id of the triggering event's millisecond.
    let id = Uuid::parse_str(&a.id).unwrap();
    assert_eq!(id.get_version_num(), 7);
}

/// A login of `user` on server `host` (the reporter) from `ip`.
fn login_on(ts: i64, user: u64, host: u64, ip: u128) -> DetectRecord {
    let mut r = login(ts, user, ip, 1);
    r.reporter = host;
    r.entities[1] = RecordEntity {
        hash: host,
        uuid: [host as u8; 16],
        kind: EntityKind::Host as u8,
        role: Role::Reporter as u8,
        ueba: UebaType::Host as u8,
    };
    r.n_entities = 2;
    r.entity_count = 2;
    r
}

/// Ten office days of twelve colleagues on server `host`, 09:00-17:00.
fn office_logins_on(d: &mut Detector, sink: &mut Collect, host: u64) {
    for day in 0..10 {
        for h in 9..17 {
            for m in 0..6 {
                for user in 1..=12 {
                    let ts = day * DAY + h * HOUR + m * 600_000_000_000 + user as i64;
                    d.process(&login_on(ts, user, host, OFFICE), sink);
                }
            }
        }
    }
    d.flush(sink);
}

#[test]
fn a_server_and_an_account_alarmed_from_one_address_are_one_alert_two_accounts_are_not() {
    const SERVER: u64 = 100;
    let mut d = Detector::new(params());
    let mut sink = Collect::default();
    office_logins_on(&mut d, &mut sink, SERVER);
    assert!(sink.alerts.is_empty(), "{:?}", sink.alerts.values().next());
    // 03:00: an hour neither the accounts nor the server have ever been active in.
    let t = 10 * DAY + 3 * HOUR;
    d.process(&login_on(t, 1, SERVER, OFFICE), &mut sink);
    d.process(&login_on(t + 60_000_000_000, 2, SERVER, OFFICE), &mut sink);
    d.flush(&mut sink);
    // The server alarmed too (it is in its cooldown) ...
    let server = d.ueba().baseline(SERVER).expect("the server's baseline");
    assert_eq!(
        server.lifecycle(t, d.ueba().params()),
        crate::ueba::Lifecycle::Cooldown
    );
    // ... and joined account 1's alert; account 2 has an alert of its own.
    let ueba: Vec<&Alert> = sink
        .alerts
        .values()
        .filter(|a| a.alert_type == AlertType::Ueba)
        .collect();
    assert_eq!(ueba.len(), 2, "{ueba:#?}");
    let first = ueba.iter().find(|a| a.first_seen_ns == t).unwrap();
    assert_eq!(
        first.entity.as_ref().unwrap().uuid,
        Uuid::from_bytes([1; 16])
    );
    assert!(
        first
            .related_entities
            .iter()
            .any(|e| e.uuid == Uuid::from_bytes([SERVER as u8; 16])),
        "{first:#?}"
    );
    let second = ueba.iter().find(|a| a.first_seen_ns > t).unwrap();
    assert_eq!(
        second.entity.as_ref().unwrap().uuid,
        Uuid::from_bytes([2; 16])
    );
}

#[test]
fn an_alert_closed_by_an_analyst_takes_no_repeats_the_next_firing_opens_a_new_one() {
    let far: u128 = 0xffff_cb00_7101;
    let t = 10 * DAY + 10 * HOUR;
    // Logins from five unknown networks a second apart, inside the cooldown (as in
    // `a_login_from_a_new_network_alerts_once_and_repeats_bump_the_count`); with `close`,
    // the first alert is closed after the first login.
    let run = |close: bool| {
        let mut d = Detector::new(params());
        let mut sink = Collect::default();
        office_logins(&mut d, &mut sink);
        d.process(&login(t, 1, far, 1), &mut sink);
        d.flush(&mut sink);
        let first = sink.alerts.keys().next().expect("the first alert").clone();
        if close {
            d.forget_closed(std::slice::from_ref(&first), &mut sink);
        }
        for k in 1..5u16 {
            let mut r = login(
                t + i64::from(k) * 1_000_000_000,
                1,
                far + (u128::from(k) << 8),
                1,
            );
            r.pos = k;
            d.process(&r, &mut sink);
        }
        d.flush(&mut sink);
        (first, sink.alerts)
    };
    let (first, open) = run(false);
    assert_eq!(open.len(), 1);
    assert!(open[&first].count >= 2, "repeats fold into the open alert");
    let (first, closed) = run(true);
    assert_eq!(closed.len(), 2, "{closed:#?}");
    assert_eq!(closed[&first].count, 1, "the closed alert took no repeat");
    let next = closed.values().find(|a| a.id != first).unwrap();
    assert_eq!(next.count, open[&first].count - 1, "{next:#?}");
    assert_eq!(next.detector, "ueba:user");
}

#[test]
fn replays_are_deterministic() {
    let run = || {
        let mut d = Detector::new(params());
        let mut sink = Collect::default();
        let mut rng = crate::rng::SplitMix64::new(3);
        for i in 0..40_000i64 {
            let user = 1 + rng.below(20);
            // The last thousand logins come from addresses all over the place.
            let ip = OFFICE + (u128::from(rng.below(if i > 39_000 { 200 } else { 3 })) << 8);
            d.process(
                &login(i * 30_000_000_000, user, ip, rng.below(4)),
                &mut sink,
            );
        }
        d.flush(&mut sink);
        sink.alerts
    };
    let a = run();
    assert!(!a.is_empty());
    assert_eq!(a, run());
}

#[test]
fn a_rare_hour_short_of_an_alert_is_a_signal_about_the_account_alone() {
    let mut d = Detector::new(params());
    let mut sink = Collect::default();
    // Three office days of one account (144 logins), then one at 03:00: log2(145 / 0.5) =
    // 8.2 bits, past the signal's 7 and short of the alert's 9.
    for day in 0..3 {
        for h in 9..17 {
            for m in 0..6 {
                let ts = day * DAY + h * HOUR + m * 600_000_000_000;
                d.process(&login(ts, 1, OFFICE, 1), &mut sink);
            }
        }
    }
    d.process(&login(3 * DAY + 3 * HOUR, 1, OFFICE, 1), &mut sink);
    d.flush(&mut sink);
    assert!(
        sink.alerts
            .values()
            .all(|a| a.alert_type != AlertType::Ueba),
        "{:?}",
        sink.alerts
    );
    let signals: Vec<&Alert> = sink
        .signals
        .values()
        .filter(|s| s.detector == "ueba:user")
        .collect();
    assert_eq!(signals.len(), 1, "{signals:?}");
    let s = signals[0];
    assert_eq!(
        s.title,
        "User active at 03:00 UTC, an hour it is rarely active in"
    );
    assert_eq!(s.deviation.map(|x| x.signal), Some(Signal::NewHour));
    assert!(
        s.dedup_key.starts_with("signal:ueba:user:"),
        "{}",
        s.dedup_key
    );
    assert_eq!(s.attack[0].technique_id, "T1078");
}

/// Three quiet hours of one source, then a minute's burst of its usual lines, then a line
/// of a kind it never logged; with ml alerts at `alert_risk`.
fn burst_then_novel_line(alert_risk: f64) -> Collect {
    let mut d = Detector::new(DetectorParams {
        ml_alert_risk: alert_risk,
        ..params()
    });
    let mut sink = Collect::default();
    let mut ts = 0;
    for i in 0..10_800i64 {
        ts = i * 1_000_000_000;
        d.process(
            &login(ts, 1 + (i % 5) as u64, OFFICE, (i % 3) as u64),
            &mut sink,
        );
    }
    for i in 0..600i64 {
        ts += 100_000_000;
        d.process(
            &login(ts, 1 + (i % 5) as u64, OFFICE, (i % 3) as u64),
            &mut sink,
        );
    }
    ts += 3_600_000_000_000;
    for i in 0..1_200i64 {
        ts += 1_000_000_000;
        let mut r = login(ts, 1 + (i % 5) as u64, OFFICE, (i % 3) as u64);
        if i == 900 {
            // A long, severe line of a template the source never logged.
            r.template = 99;
            r.severity = 5;
            r.message_len = 900;
        }
        d.process(&r, &mut sink);
    }
    d.flush(&mut sink);
    sink
}

#[test]
fn a_volume_anomaly_short_of_the_alert_quantile_is_a_signal_a_novel_line_still_alerts() {
    let ml = |c: &Collect| -> Vec<Alert> {
        c.alerts
            .values()
            .filter(|a| a.detector == "ensemble")
            .cloned()
            .collect()
    };
    // Every anomaly alerts when the two risks are one.
    let all = burst_then_novel_line(1e-4);
    assert!(
        ml(&all).iter().any(|a| a.title.ends_with("unusual volume")),
        "{:?}",
        ml(&all)
    );
    assert!(all.signals.values().all(|s| s.detector != "ensemble"));
    // With alerts rarer than anomalies, the burst is a signal of the source's anomalies
    // (risk for its entity), and the never-seen line still alerts.
    let split = burst_then_novel_line(1e-9);
    let signals: Vec<&Alert> = split
        .signals
        .values()
        .filter(|s| s.detector == "ensemble")
        .collect();
    assert!(
        signals
            .iter()
            .any(|s| s.title == "Anomaly in sshd: unusual volume"
                && s.dedup_key.starts_with("signal:ml:sshd")),
        "{signals:?}"
    );
    assert!(
        ml(&split)
            .iter()
            .all(|a| !a.title.ends_with("unusual volume")),
        "{:?}",
        ml(&split)
    );
    assert!(
        ml(&split)
            .iter()
            .any(|a| a.title.ends_with("unusual event content")
                || a.title.ends_with("unusual sequence of messages")),
        "{:?}",
        ml(&split)
    );
}

#[test]
fn feedback_moves_the_threshold_that_fired_within_bounds() {
    let mut d = Detector::new(params());
    let mut sink = Collect::default();
    for i in 0..5_000i64 {
        d.process(
            &login(i * 1_000_000_000, 1, OFFICE, (i % 3) as u64),
            &mut sink,
        );
    }
    let alert = Alert {
        id: String::new(),
        alert_type: AlertType::Ml,
        severity: 3,
        title: String::new(),
        detector: "ensemble".into(),
        detector_name: String::new(),
        dedup_key: String::new(),
        first_seen_ns: 0,
        last_seen_ns: 0,
        count: 1,
        source: "sshd".into(),
        entity: None,
        score: 0.0,
        threshold: 0.0,
        contributions: BTreeMap::new(),
        attack: Vec::new(),
        contributing_events: Vec::new(),
        related_entities: Vec::new(),
        related_alerts: Vec::new(),
        entity_count: 0,
        deviation: None,
        triage: Default::default(),
        sensor: String::new(),
    };
    // "sshd" hashes to the source key only if the record's source is that hash.
    let mut r = login(5_000_000_000_000, 1, OFFICE, 1);
    r.source = watchpost_proto::hash64(b"sshd");
    for i in 0..3_000i64 {
        r.ts_ns += 1_000_000_000;
        r.template = (i % 3) as u64;
        d.process(&r, &mut sink);
    }
    let c = d.feedback(&alert, Verdict::Fp).expect("owned");
    assert!(c.new_risk < c.old_risk);
    assert!(c.new_threshold >= c.old_threshold, "{c:?}");
    for _ in 0..100 {
        d.feedback(&alert, Verdict::Fp);
    }
    let c = d.feedback(&alert, Verdict::Fp).unwrap();
    assert!((c.new_risk - 1e-6).abs() < 1e-12, "floor at risk/100");
    let mut ueba = alert.clone();
    ueba.alert_type = AlertType::Ueba;
    ueba.detector = "ueba:host".into();
    let c = d.feedback(&ueba, Verdict::Tp).unwrap();
    assert!(c.new_risk > c.old_risk);
}

/// A fleet's partition moves to another detector through a snapshot: every source model and
/// baseline comes back, and a cut or foreign snapshot is refused whole.
#[test]
fn a_snapshot_restores_every_model_and_baseline() {
    let mut d = Detector::new(params());
    let mut sink = Collect::default();
    for i in 0..500 {
        d.process(
            &login(i * 60_000_000_000, 1 + (i as u64 % 7), OFFICE, 1),
            &mut sink,
        );
    }
    let mut bytes = Vec::new();
    d.snapshot_into(&mut bytes);
    let mut restored = Detector::new(params());
    let read = restored.restore_snapshot(&bytes).expect("restore");
    assert_eq!(read.baselines, 7);
    assert_eq!(restored.ueba().len(), 7);
    assert_eq!(restored.sources().count(), d.sources().count());
    let b = restored.ueba().baseline(3).expect("entity 3");
    assert_eq!(
        b.event_count,
        d.ueba().baseline(3).expect("entity 3").event_count
    );
    let mut again = Vec::new();
    restored.snapshot_into(&mut again);
    // Same size (the tables' order may differ, and what is saved-or-not is no part of it).
    assert_eq!(
        again.len(),
        bytes.len(),
        "the restored state snapshots the same"
    );
    let mut fresh = Detector::new(params());
    assert!(fresh.restore_snapshot(&bytes[..bytes.len() / 2]).is_err());
    assert!(fresh.restore_snapshot(&[9]).is_err());
    assert!(fresh.restore_snapshot(&[]).is_err());
}

/// A partition taken over in the middle of an attack: the new owner, from the snapshot, folds
/// the attack's next records into the alert the old owner raised, so the fleet sees the alert
/// it would have seen with no takeover (same id, same count), not a second one.
#[test]
fn a_snapshot_carries_the_open_alerts_so_an_attack_straddling_it_stays_one_alert() {
    let far: u128 = 0xffff_cb00_7101;
    let attempt = |k: i64| {
        let mut r = login(
            10 * DAY + 10 * HOUR + k * 1_000_000_000,
            1,
            far + ((k as u128) << 8),
            1,
        );
        r.pos = k as u16;
        r
    };
    let mut alone = Detector::new(params());
    let mut sink = Collect::default();
    office_logins(&mut alone, &mut sink);
    alone.process(&attempt(0), &mut sink);
    alone.flush(&mut sink);
    let mut bytes = Vec::new();
    alone.snapshot_into(&mut bytes);
    let mut taken = Detector::new(params());
    let read = taken.restore_snapshot(&bytes).expect("restore");
    assert!(read.open_alerts >= 1, "{read:?}");
    let mut taken_sink = Collect::default();
    for k in 1..5 {
        alone.process(&attempt(k), &mut sink);
        taken.process(&attempt(k), &mut taken_sink);
    }
    alone.flush(&mut sink);
    taken.flush(&mut taken_sink);
    let ueba = |c: &Collect| -> Vec<Alert> {
        c.alerts
            .values()
            .filter(|a| a.alert_type == AlertType::Ueba)
            .cloned()
            .collect()
    };
    let (want, got) = (ueba(&sink), ueba(&taken_sink));
    assert_eq!(want.len(), 1, "{want:?}");
    assert!(want[0].count >= 2, "the attack's repeats fold in: {want:?}");
    assert_eq!(got.len(), 1, "no second alert after the takeover: {got:?}");
    assert_eq!(got[0].id, want[0].id);
    assert_eq!(got[0].count, want[0].count);
    assert_eq!(got[0].contributing_events, want[0].contributing_events);
    // A snapshot of the first format (no open book) is still read: the baselines come back,
    // the alerts do not.
    let book = bincode::encode_to_vec(alone.open_book(), watchpost_proto::bincode_config())
        .expect("encodable");
    let mut first = Vec::new();
    alone.snapshot_into(&mut first);
    first.truncate(first.len() - book.len());
    first[0] = 1;
    let mut older = Detector::new(params());
    assert_eq!(
        older.restore_snapshot(&first).expect("format 1").baselines,
        alone.ueba().len()
    );
    assert!(older.open_book().len() == 0);
}
