//! `[[notifications]]`: the channels alerts are sent out on (docs/notifications.md).
//!
//! One table per channel, every key of every kind on one type: TOML has no tagged unions that
//! `deny_unknown_fields` could check, and a flat table is what operators write. Keys of another
//! kind than the channel's are refused by [`check`], so a `smtp_host` left on a webhook channel
//! is an error that names it, not a setting silently ignored.

use super::problems::Problems;
use super::rate_limit::RateLimit;
use super::{Config, Secret};
use serde::{Deserialize, Serialize};

/// The kinds of channel.
pub const CHANNEL_KINDS: &[&str] = &["webhook", "slack", "teams", "email", "syslog"];

/// One `[[notifications]]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationChannel {
    /// Unique name: letters, digits, `-` and `_`; it keys the channel's outbox, so renaming a
    /// channel discards what still waited for it under the old name.
    pub name: String,
    /// `webhook`, `slack`, `teams`, `email` or `syslog`.
    pub kind: String,
    /// Off: nothing is queued for it (what waited stays until it is on again or removed).
    pub enabled: bool,
    /// webhook, slack, teams: the URL posted to (`https://`, or `http://` to loopback). A
    /// credential: incoming-webhook URLs carry their token.
    pub url: Secret,
    /// webhook: key of the `X-Watchpost-Signature` HMAC-SHA256 header; empty = unsigned. A
    /// credential.
    pub secret: Secret,
    /// email: SMTP server host name.
    pub smtp_host: String,
    /// email: SMTP port; 0 = by `smtp_security` (587 for `starttls`, 465 for `tls`, 25).
    pub smtp_port: u32,
    /// email: `starttls` (required, not opportunistic), `tls` (implicit TLS) or `none`
    /// (loopback relays only).
    pub smtp_security: String,
    /// email: user name for SMTP AUTH; empty = no authentication.
    pub smtp_username: String,
    /// email: password for SMTP AUTH, or `env:VAR`. A credential.
    pub smtp_password: Secret,
    /// email: the `From` address.
    pub email_from: String,
    /// email: recipients.
    pub email_to: Vec<String>,
    /// syslog: the collector, `host:port`.
    pub syslog_address: String,
    /// syslog: `udp`, `tcp` (octet-counted frames, RFC 6587) or `tls` (RFC 5425).
    pub syslog_transport: String,
    /// syslog: `cef` (ArcSight CEF in an RFC 5424 message) or `json` (the alert as JSON).
    pub syslog_format: String,
    /// Extra CA certificates (PEM) trusted besides the system's, for this channel's TLS.
    pub tls_ca_file: String,
    /// Lowest severity sent (0 to 5).
    pub min_severity: u8,
    /// Alert types sent (`ml`, `sigma`, `correlation`, `ueba`, `ioc`); empty = all.
    pub alert_types: Vec<String>,
    /// ATT&CK tactics sent, by id (`TA0006`) or name (`Credential Access`); empty = all. An
    /// alert with no ATT&CK mapping passes only an empty list.
    pub tactics: Vec<String>,
    /// Detectors sent: Sigma or correlation rule ids, `ensemble`, `ueba:user`...; empty = all.
    pub rule_ids: Vec<String>,
    /// Most messages per period, `N/second|minute|hour`; the alerts past it go out together as
    /// one digest when the period ends. Empty: the kind's own ([`NotificationChannel::rate`]).
    pub rate_limit: String,
    /// Alerts waiting for this channel at most (a receiver down for long); past it the oldest
    /// are discarded, counted and logged.
    pub max_pending: u64,
    /// Seconds one delivery may take.
    pub timeout_s: f64,
    /// Longest wait between retries, seconds (the wait doubles from one second).
    pub max_backoff_s: f64,
    /// Failed deliveries in a row after which `/health` shows the channel degraded.
    pub failures_before_degraded: u32,
}

impl Default for NotificationChannel {
    fn default() -> NotificationChannel {
        NotificationChannel {
            name: String::new(),
            kind: String::new(),
            enabled: true,
            url: Secret::default(),
            secret: Secret::default(),
            smtp_host: String::new(),
            smtp_port: 0,
            smtp_security: "starttls".into(),
            smtp_username: String::new(),
            smtp_password: Secret::default(),
            email_from: String::new(),
            email_to: Vec::new(),
            syslog_address: String::new(),
            syslog_transport: "tcp".into(),
            syslog_format: "cef".into(),
            tls_ca_file: String::new(),
            min_severity: 3,
            alert_types: Vec::new(),
            tactics: Vec::new(),
            rule_ids: Vec::new(),
            rate_limit: String::new(),
            max_pending: 10_000,
            timeout_s: 10.0,
            max_backoff_s: 300.0,
            failures_before_degraded: 3,
        }
    }
}

impl NotificationChannel {
    /// The rate limit in force: `rate_limit`, or by kind what a person reading (chat, mail) can
    /// follow, 30 a minute; a webhook's program, 600 a minute; a SIEM, 100 a second (a SIEM
    /// wants each alert as its own event, not a digest).
    pub fn rate(&self) -> &str {
        if !self.rate_limit.is_empty() {
            return &self.rate_limit;
        }
        match self.kind.as_str() {
            "webhook" => "600/minute",
            "syslog" => "100/second",
            _ => "30/minute",
        }
    }

    /// The SMTP port: `smtp_port`, or the usual one of `smtp_security`.
    pub fn smtp_port(&self) -> u16 {
        match (self.smtp_port, self.smtp_security.as_str()) {
            (0, "tls") => 465,
            (0, "none") => 25,
            (0, _) => 587,
            (port, _) => u16::try_from(port).unwrap_or(587),
        }
    }

    /// Whether an alert with these properties passes the channel's filters.
    pub fn accepts(&self, alert: &crate::Alert) -> bool {
        alert.severity >= self.min_severity
            && (self.alert_types.is_empty()
                || self
                    .alert_types
                    .iter()
                    .any(|t| t == alert.alert_type.name()))
            && (self.rule_ids.is_empty() || self.rule_ids.contains(&alert.detector))
            && (self.tactics.is_empty()
                || alert.attack.iter().any(|m| {
                    self.tactics.iter().any(|t| {
                        t.eq_ignore_ascii_case(&m.tactic_id) || t.eq_ignore_ascii_case(&m.tactic)
                    })
                }))
    }
}

/// Keys that belong to one kind only, with that kind.
fn kind_keys(c: &NotificationChannel) -> [(&'static str, &'static [&'static str], bool); 12] {
    let d = NotificationChannel::default();
    [
        ("url", &["webhook", "slack", "teams"], !c.url.is_empty()),
        ("secret", &["webhook"], !c.secret.is_empty()),
        ("smtp_host", &["email"], !c.smtp_host.is_empty()),
        ("smtp_port", &["email"], c.smtp_port != d.smtp_port),
        (
            "smtp_security",
            &["email"],
            c.smtp_security != d.smtp_security,
        ),
        ("smtp_username", &["email"], !c.smtp_username.is_empty()),
        ("smtp_password", &["email"], !c.smtp_password.is_empty()),
        ("email_from", &["email"], !c.email_from.is_empty()),
        ("email_to", &["email"], !c.email_to.is_empty()),
        ("syslog_address", &["syslog"], !c.syslog_address.is_empty()),
        (
            "syslog_transport",
            &["syslog"],
            c.syslog_transport != d.syslog_transport,
        ),
        (
            "syslog_format",
            &["syslog"],
            c.syslog_format != d.syslog_format,
        ),
    ]
}

/// Checks every `[[notifications]]` table.
pub(super) fn check(config: &Config, p: &mut Problems) {
    let mut names = std::collections::HashSet::new();
    for (i, c) in config.notifications.iter().enumerate() {
        let key = |k: &str| format!("notifications[{i}].{k}");
        if c.name.is_empty()
            || c.name.len() > 64
            || !c
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            p.add(
                &key("name"),
                format!(
                    "`{}` is not a channel name (1 to 64 letters, digits, `-` or `_`)",
                    c.name
                ),
            );
        } else if !names.insert(c.name.as_str()) {
            p.add(&key("name"), format!("`{}` names two channels", c.name));
        }
        p.one_of(&key("kind"), &c.kind, CHANNEL_KINDS);
        for (name, kinds, set) in kind_keys(c) {
            if set && !kinds.contains(&c.kind.as_str()) {
                p.add(
                    &key(name),
                    format!("is not a key of a `{}` channel", c.kind),
                );
            }
        }
        match c.kind.as_str() {
            "webhook" | "slack" | "teams" => check_url(&key("url"), c.url.expose(), p),
            "email" => {
                if c.smtp_host.is_empty() {
                    p.add(&key("smtp_host"), "an email channel needs its SMTP server");
                }
                if c.smtp_port > 65_535 {
                    p.port(&key("smtp_port"), c.smtp_port);
                }
                p.one_of(
                    &key("smtp_security"),
                    &c.smtp_security,
                    &["starttls", "tls", "none"],
                );
                if c.smtp_security == "none"
                    && !c.smtp_host.is_empty()
                    && !is_loopback(&c.smtp_host)
                {
                    p.add(
                        &key("smtp_security"),
                        format!(
                            "\"none\" sends alerts (and any password) in clear: allowed only to a loopback relay, not to `{}`",
                            c.smtp_host
                        ),
                    );
                }
                if !c.smtp_password.is_empty() && c.smtp_username.is_empty() {
                    p.add(
                        &key("smtp_password"),
                        "a password without smtp_username is never sent",
                    );
                }
                if !is_address(&c.email_from) {
                    p.add(
                        &key("email_from"),
                        format!("`{}` is not an e-mail address", c.email_from),
                    );
                }
                if c.email_to.is_empty() {
                    p.add(&key("email_to"), "an email channel needs a recipient");
                }
                for (j, to) in c.email_to.iter().enumerate() {
                    if !is_address(to) {
                        p.add(
                            &key(&format!("email_to[{j}]")),
                            format!("`{to}` is not an e-mail address"),
                        );
                    }
                }
            }
            "syslog" => {
                if crate::Authority::parse(&c.syslog_address).is_err()
                    || !c.syslog_address.contains(':')
                {
                    p.add(
                        &key("syslog_address"),
                        format!("`{}` is not a host:port address", c.syslog_address),
                    );
                }
                p.one_of(
                    &key("syslog_transport"),
                    &c.syslog_transport,
                    &["udp", "tcp", "tls"],
                );
                p.one_of(&key("syslog_format"), &c.syslog_format, &["cef", "json"]);
            }
            _ => {}
        }
        p.range_u64(&key("min_severity"), c.min_severity.into(), 0, 5);
        for (j, t) in c.alert_types.iter().enumerate() {
            if crate::AlertType::parse(t).is_none() {
                p.add(
                    &key(&format!("alert_types[{j}]")),
                    format!("`{t}` is not one of ml, sigma, correlation, ueba, ioc"),
                );
            }
        }
        if let Err(e) = RateLimit::parse(c.rate()) {
            p.add(&key("rate_limit"), e.to_string());
        }
        p.range_u64(&key("max_pending"), c.max_pending, 1, 10_000_000);
        p.range_f64(&key("timeout_s"), c.timeout_s, 0.1, 300.0);
        p.range_f64(&key("max_backoff_s"), c.max_backoff_s, 1.0, 86_400.0);
        p.range_u64(
            &key("failures_before_degraded"),
            c.failures_before_degraded.into(),
            1,
            1_000_000,
        );
    }
}

/// `http(s)://host...`; plain HTTP only to loopback, since the URL and the alert would cross the
/// network in clear.
fn check_url(key: &str, url: &str, p: &mut Problems) {
    if url.is_empty() {
        p.add(key, "this kind of channel needs the URL it posts to");
        return;
    }
    if url.starts_with("env:") {
        return;
    }
    let rest = url
        .strip_prefix("https://")
        .map(|r| (r, true))
        .or_else(|| url.strip_prefix("http://").map(|r| (r, false)));
    let Some((rest, tls)) = rest else {
        // The URL itself is a credential: not echoed.
        p.add(
            key,
            "must start with https:// (or http:// to a loopback address)",
        );
        return;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host_only = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    if host_only.is_empty() {
        p.add(key, "the URL has no host");
    } else if !tls && !is_loopback(host_only) {
        p.add(
            key,
            format!(
                "plain http:// is allowed only to loopback, not to `{host_only}`: use https://"
            ),
        );
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A plain `local@domain` address (display names are not accepted here).
fn is_address(text: &str) -> bool {
    match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !text
                    .chars()
                    .any(|c| c.is_whitespace() || c == '<' || c == '>')
        }
        None => false,
    }
}
