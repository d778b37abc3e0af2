//! What a notification says, per kind of receiver: a webhook's JSON document, a Slack or Teams
//! message, an e-mail's subject and text, a syslog line in CEF or JSON.
//!
//! Each message carries its delivery id (stable across retries and restarts), so that a receiver
//! that gets one twice (at-least-once delivery) can drop the second.

use serde_json::{Value, json};
use watchpost_proto::{Alert, Severity, Uuid};

/// Alerts listed one by one in a chat or e-mail digest; the rest are counted.
const DIGEST_LISTED: usize = 20;

/// What one message carries.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload<'a> {
    /// One alert.
    Alert(&'a Alert),
    /// Alerts past the channel's rate limit, sent together when the period ended.
    Digest(&'a [Alert]),
    /// `POST /notifications/test`.
    Test,
}

/// Namespace of delivery ids (UUIDv5): a fixed random UUID, so ids are the same on every host.
const DELIVERY_NAMESPACE: Uuid = Uuid::from_u128(0x6c1f_4b9e_2a7d_4e0c_9d5b_8f3a_1e27_c604);

/// The delivery id of `payload` on `channel`: one per alert and channel, one per digest (from
/// the alerts it holds), a fresh one per test.
pub(crate) fn delivery_id(channel: &str, payload: Payload<'_>) -> String {
    let mut name = format!("{channel}\n");
    match payload {
        Payload::Alert(a) => name.push_str(&a.id),
        Payload::Digest(alerts) => {
            name.push_str("digest");
            for a in alerts {
                name.push('\n');
                name.push_str(&a.id);
            }
        }
        Payload::Test => {
            name.push_str("test\n");
            name.push_str(&watchpost_proto::now_ns().to_string());
        }
    }
    Uuid::new_v5(&DELIVERY_NAMESPACE, name.as_bytes()).to_string()
}

fn severity_name(severity: u8) -> &'static str {
    Severity::try_from(severity).map_or("unknown", Severity::name)
}

/// `T1059.001 Command and Scripting Interpreter: PowerShell (Execution)`, comma-joined.
fn techniques(alert: &Alert) -> String {
    alert
        .attack
        .iter()
        .map(|m| format!("{} {} ({})", m.technique_id, m.technique, m.tactic))
        .collect::<Vec<_>>()
        .join(", ")
}

fn entity(alert: &Alert) -> String {
    alert
        .entity
        .as_ref()
        .map(|e| format!("{} {}", e.kind.name(), e.value))
        .unwrap_or_default()
}

/// RFC 3339 time of a nanosecond timestamp.
fn time(ns: i64) -> String {
    watchpost_normalize::Rfc3339(ns).to_string()
}

/// One line about an alert, for digests and e-mail bodies.
fn line(alert: &Alert) -> String {
    let mut s = format!(
        "[{}] {} ({}, {})",
        severity_name(alert.severity),
        alert.title,
        alert.alert_type.name(),
        alert.detector_label()
    );
    let e = entity(alert);
    if !e.is_empty() {
        s.push_str(" - ");
        s.push_str(&e);
    }
    s
}

/// A headline for the message.
pub(crate) fn headline(payload: Payload<'_>) -> String {
    match payload {
        Payload::Alert(a) => format!("Watchpost {}: {}", severity_name(a.severity), a.title),
        Payload::Digest(alerts) => format!(
            "Watchpost digest: {} alerts past the channel's rate limit",
            alerts.len()
        ),
        Payload::Test => "Watchpost test notification".into(),
    }
}

/// The webhook's JSON document: the whole alert, or for a digest each alert whole.
pub(crate) fn webhook(channel: &str, delivery: &str, payload: Payload<'_>) -> Vec<u8> {
    let mut doc = json!({
        "delivery_id": delivery,
        "channel": channel,
        "sent_at": time(watchpost_proto::now_ns()),
        "summary": headline(payload),
    });
    match payload {
        Payload::Alert(a) => {
            doc["kind"] = "alert".into();
            doc["alert"] = serde_json::to_value(a).unwrap_or(Value::Null);
        }
        Payload::Digest(alerts) => {
            doc["kind"] = "digest".into();
            doc["alerts"] = serde_json::to_value(alerts).unwrap_or(Value::Null);
        }
        Payload::Test => doc["kind"] = "test".into(),
    }
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// The facts of an alert as (label, value) pairs, for chat cards.
fn facts(a: &Alert) -> Vec<(&'static str, String)> {
    let mut f = vec![
        ("Severity", severity_name(a.severity).to_string()),
        ("Type", a.alert_type.name().to_string()),
        ("Detector", a.detector_label()),
        ("Source", a.source.clone()),
        ("First seen", time(a.first_seen_ns)),
        ("Alert id", a.id.clone()),
    ];
    let e = entity(a);
    if !e.is_empty() {
        f.insert(3, ("Entity", e));
    }
    let t = techniques(a);
    if !t.is_empty() {
        f.push(("ATT&CK", t));
    }
    if a.count > 1 {
        f.push(("Count", a.count.to_string()));
    }
    f
}

/// The body lines of a digest: the first alerts, then how many more.
fn digest_lines(alerts: &[Alert]) -> Vec<String> {
    let mut lines: Vec<String> = alerts.iter().take(DIGEST_LISTED).map(line).collect();
    if alerts.len() > DIGEST_LISTED {
        lines.push(format!("... and {} more", alerts.len() - DIGEST_LISTED));
    }
    lines
}

/// Slack's incoming-webhook message: a text (what notifications show) and blocks.
pub(crate) fn slack(delivery: &str, payload: Payload<'_>) -> Vec<u8> {
    let text = headline(payload);
    let detail = match payload {
        Payload::Alert(a) => facts(a)
            .into_iter()
            .map(|(k, v)| format!("*{k}:* {}", slack_escape(&v)))
            .collect::<Vec<_>>()
            .join("\n"),
        Payload::Digest(alerts) => digest_lines(alerts)
            .iter()
            .map(|l| format!("• {}", slack_escape(l)))
            .collect::<Vec<_>>()
            .join("\n"),
        Payload::Test => "The channel is configured and reachable.".into(),
    };
    let doc = json!({
        "text": slack_escape(&text),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": clip(&text, 150)}},
            {"type": "section", "text": {"type": "mrkdwn", "text": clip(&detail, 2900)}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": format!("delivery {delivery}")}]}
        ]
    });
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// Slack reads `&`, `<` and `>` as markup.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `text` cut to at most `max` characters (chat APIs refuse longer fields).
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if text.len() > at + 1 => format!("{}…", &text[..at]),
        _ => text.to_string(),
    }
}

/// A Teams message with an Adaptive Card, as Teams' Workflows webhooks take it.
pub(crate) fn teams(delivery: &str, payload: Payload<'_>) -> Vec<u8> {
    let mut body = vec![json!({
        "type": "TextBlock", "text": headline(payload), "weight": "Bolder",
        "size": "Medium", "wrap": true
    })];
    match payload {
        Payload::Alert(a) => body.push(json!({
            "type": "FactSet",
            "facts": facts(a).into_iter().map(|(k, v)| json!({"title": k, "value": v})).collect::<Vec<_>>()
        })),
        Payload::Digest(alerts) => {
            for l in digest_lines(alerts) {
                body.push(json!({"type": "TextBlock", "text": l, "wrap": true, "spacing": "None"}));
            }
        }
        Payload::Test => body.push(json!({
            "type": "TextBlock", "text": "The channel is configured and reachable.", "wrap": true
        })),
    }
    body.push(json!({
        "type": "TextBlock", "text": format!("delivery {delivery}"), "isSubtle": true,
        "size": "Small"
    }));
    let doc = json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": body
            }
        }]
    });
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// An e-mail's subject and plain-text body.
pub(crate) fn email(delivery: &str, payload: Payload<'_>) -> (String, String) {
    let subject = headline(payload);
    let mut body = String::new();
    match payload {
        Payload::Alert(a) => {
            for (k, v) in facts(a) {
                body.push_str(&format!("{k}: {v}\n"));
            }
            if !a.contributing_events.is_empty() {
                body.push_str(&format!("Events: {}\n", a.contributing_events.join(", ")));
            }
        }
        Payload::Digest(alerts) => {
            for a in alerts {
                body.push_str(&line(a));
                body.push_str(&format!("  ({})\n", a.id));
            }
        }
        Payload::Test => body.push_str("The channel is configured and reachable.\n"),
    }
    body.push_str(&format!("\nDelivery id: {delivery}\n"));
    (subject, body)
}

/// CEF severity (0 to 10) of an alert severity (0 to 5).
fn cef_severity(severity: u8) -> u8 {
    (severity.min(5)) * 2
}

/// A CEF header field: `\` and `|` escaped, no line breaks.
fn cef_header(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\r', '\n'], " ")
}

/// A CEF extension value: `\` and `=` escaped, line breaks as `\n`.
fn cef_value(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('=', "\\=")
        .replace("\r\n", "\\n")
        .replace(['\n', '\r'], "\\n")
}

/// The CEF record of a payload (the MSG part of the syslog line).
pub(crate) fn cef(delivery: &str, payload: Payload<'_>) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let (signature, name, severity, mut ext) = match payload {
        Payload::Alert(a) => {
            let mut ext = vec![
                ("rt", (a.first_seen_ns / 1_000_000).to_string()),
                ("cat", a.alert_type.name().to_string()),
                ("cs1Label", "alertId".into()),
                ("cs1", a.id.clone()),
                ("cs2Label", "source".into()),
                ("cs2", a.source.clone()),
                ("cnt", a.count.to_string()),
            ];
            let t = techniques(a);
            if !t.is_empty() {
                ext.push(("cs3Label", "attack".into()));
                ext.push(("cs3", t));
            }
            if let Some(e) = &a.entity {
                ext.push(("cs4Label", format!("entity.{}", e.kind.name())));
                ext.push(("cs4", e.value.clone()));
            }
            (
                a.detector.clone(),
                a.title.clone(),
                cef_severity(a.severity),
                ext,
            )
        }
        Payload::Digest(alerts) => {
            let ids: Vec<&str> = alerts.iter().take(50).map(|a| a.id.as_str()).collect();
            let top = alerts.iter().map(|a| a.severity).max().unwrap_or(0);
            (
                "digest".into(),
                headline(payload),
                cef_severity(top),
                vec![
                    ("cnt", alerts.len().to_string()),
                    ("cs1Label", "alertIds".into()),
                    ("cs1", ids.join(",")),
                ],
            )
        }
        Payload::Test => ("test".into(), headline(payload), 0, Vec::new()),
    };
    ext.push(("externalId", delivery.to_string()));
    let ext: Vec<String> = ext
        .into_iter()
        .map(|(k, v)| format!("{k}={}", cef_value(&v)))
        .collect();
    format!(
        "CEF:0|Watchpost|Watchpost|{version}|{}|{}|{severity}|{}",
        cef_header(&signature),
        cef_header(&name),
        ext.join(" ")
    )
}

/// The JSON record of a payload for syslog: the webhook document on one line.
pub(crate) fn syslog_json(channel: &str, delivery: &str, payload: Payload<'_>) -> String {
    String::from_utf8(webhook(channel, delivery, payload)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert() -> Alert {
        serde_json::from_value(json!({
            "id": "0190f5a1-0000-7000-8000-000000000001", "type": "sigma", "severity": 4,
            "title": "Mimikatz | sekurlsa=logonpasswords", "detector": "rule-1",
            "dedup_key": "k", "first_seen_ns": 1_700_000_000_000_000_000i64,
            "last_seen_ns": 0, "count": 1, "source": "sysmon",
            "entity": null, "score": 0.0, "threshold": 0.0, "contributions": {},
            "attack": [{"tactic_id": "TA0006", "tactic": "Credential Access",
                        "technique_id": "T1003.001", "technique": "LSASS Memory"}],
            "contributing_events": [], "related_entities": []
        }))
        .unwrap()
    }

    #[test]
    fn cef_escapes_pipes_in_the_header_and_equals_in_extensions() {
        let a = alert();
        let line = cef("d-1", Payload::Alert(&a));
        assert!(line.starts_with("CEF:0|Watchpost|Watchpost|"), "{line}");
        assert!(
            line.contains("|rule-1|Mimikatz \\| sekurlsa=logonpasswords|8|"),
            "{line}"
        );
        assert!(line.contains("cs3=T1003.001 LSASS Memory (Credential Access)"));
        assert!(line.ends_with("externalId=d-1"), "{line}");
    }

    #[test]
    fn a_delivery_id_is_stable_per_alert_and_channel() {
        let a = alert();
        let one = delivery_id("slack", Payload::Alert(&a));
        assert_eq!(one, delivery_id("slack", Payload::Alert(&a)));
        assert_ne!(one, delivery_id("mail", Payload::Alert(&a)));
        let digest = [a.clone(), a];
        assert_ne!(one, delivery_id("slack", Payload::Digest(&digest)));
    }

    #[test]
    fn a_digest_lists_twenty_alerts_and_counts_the_rest() {
        let alerts = vec![alert(); 25];
        let (subject, _) = email("d", Payload::Digest(&alerts));
        assert!(subject.contains("25 alerts"), "{subject}");
        let slack: Value = serde_json::from_slice(&slack("d", Payload::Digest(&alerts))).unwrap();
        let text = slack["blocks"][1]["text"]["text"].as_str().unwrap();
        assert_eq!(text.matches('•').count(), 21);
        assert!(text.contains("and 5 more"));
    }
}
