//! Exceptions: an operator's standing decision that what a detector flags under some conditions
//! is expected (a vulnerability scanner's address, a backup account's night runs, a monitoring
//! host's probes). Applied before alerting: an event that matches raises no alert and joins
//! none, and counts as a hit of the exception, so a suppression is never silent.
//!
//! The detector sees an event as its entities (users, hosts, addresses, domains), its source
//! address, its log source and its template, not its raw text (that stays in the ingest stage,
//! so that detection copies nothing per event): those are the fields a condition can name.

use crate::entity::{EntityKind, canonicalize_into};
use crate::error::ParseError;
use serde::{Deserialize, Deserializer, Serialize};
use uuid::Uuid;

/// Most values in one condition list.
pub const MAX_CONDITION_VALUES: usize = 100;
/// Longest reason, author or detector.
pub const MAX_TEXT_CHARS: usize = 1024;

/// What an exception applies to.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ExceptionScope {
    /// The alerts of one detector, named by `detector`: a Sigma or correlation rule's id,
    /// `ensemble`, `ioc`, `ueba:user` (`ueba:host`, `ueba:ip`, `ueba:service_account`), or a
    /// prefix ending in `*` (`ueba:*`).
    #[default]
    Detector,
    /// The alerts of every detector. Needs at least one condition, so that no exception can
    /// silence everything.
    Global,
}

/// What an event must show for an exception to apply: every list given must have a value the
/// event shows (any one of it); a list left empty asks nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ExceptionConditions {
    /// User names, compared in canonical form (lower case, `DOMAIN\user` and `user@domain` as the
    /// entity extractor writes them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// Host names: a host entity of the event or the host that reported it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// IP addresses among the event's entities, in any role.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// DNS domains among the event's entities.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
    /// Networks (`203.0.113.0/24`, `2001:db8::/32`, or one address) holding the event's source
    /// address.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_cidrs: Vec<String>,
    /// Log sources (the program or dataset: `sshd`, `nginx`), exactly.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub log_sources: Vec<String>,
    /// Template ids (16 hex digits, as `/events` and the baselines show them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<String>,
}

impl ExceptionConditions {
    /// No condition at all.
    pub fn is_empty(&self) -> bool {
        self.lists().iter().all(|(_, l)| l.is_empty())
    }

    fn lists(&self) -> [(&'static str, &Vec<String>); 7] {
        [
            ("users", &self.users),
            ("hosts", &self.hosts),
            ("ips", &self.ips),
            ("domains", &self.domains),
            ("source_cidrs", &self.source_cidrs),
            ("log_sources", &self.log_sources),
            ("templates", &self.templates),
        ]
    }
}

/// An exception as stored and answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Exception {
    /// Its id.
    pub id: Uuid,
    /// One detector or all.
    pub scope: ExceptionScope,
    /// The detector, with scope `detector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detector: Option<String>,
    /// What the event must show.
    #[serde(default)]
    pub conditions: ExceptionConditions,
    /// Why: shown to every analyst who wonders where an alert went.
    pub reason: String,
    /// Who decided.
    pub author: String,
    /// When it stops applying (event time, ns since the epoch); absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ns: Option<i64>,
    /// Applied (a disabled exception is kept with its hits, and suppresses nothing).
    pub enabled: bool,
    /// The alert it was made from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_alert: Option<String>,
    /// Created, ns.
    pub created_ns: i64,
    /// Last changed, ns.
    pub updated_ns: i64,
    /// Events it kept from raising or joining an alert.
    pub hits: u64,
    /// Event time of the latest hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_hit_ns: Option<i64>,
}

/// The body of `POST /exceptions`.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExceptionDraft {
    /// One detector (default) or all.
    #[serde(default)]
    pub scope: ExceptionScope,
    /// Required with scope `detector`; refused with scope `global`.
    #[serde(default)]
    pub detector: Option<String>,
    /// What the event must show.
    #[serde(default)]
    pub conditions: ExceptionConditions,
    /// Why (required, at most 1,024 characters).
    pub reason: String,
    /// Who (required, at most 1,024 characters).
    pub author: String,
    /// When it stops applying, ns since the epoch; must lie in the future.
    #[serde(default)]
    pub expires_ns: Option<i64>,
    /// Applied from the start (default true).
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// The alert it is made from.
    #[serde(default)]
    pub from_alert: Option<String>,
}

fn enabled_by_default() -> bool {
    true
}

/// The body of `PATCH /exceptions/{exception_id}`: the fields given replace the stored ones
/// (`conditions` as a whole; `expires_ns: null` removes the expiry). The result is validated as a
/// new exception would be.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExceptionPatch {
    /// See [`ExceptionDraft::scope`].
    #[serde(default)]
    pub scope: Option<ExceptionScope>,
    /// See [`ExceptionDraft::detector`].
    #[serde(default)]
    pub detector: Option<String>,
    /// Replaces the conditions.
    #[serde(default)]
    pub conditions: Option<ExceptionConditions>,
    /// See [`ExceptionDraft::reason`].
    #[serde(default)]
    pub reason: Option<String>,
    /// Who changed it (becomes the author).
    #[serde(default)]
    pub author: Option<String>,
    /// A new expiry, or `null` for none.
    #[serde(default, deserialize_with = "present")]
    #[schemars(with = "Option<i64>")]
    pub expires_ns: Option<Option<i64>>,
    /// Apply it or not.
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// A field that is present (even as `null`) is `Some`; absent stays `None` (the default).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    Option::<i64>::deserialize(d).map(Some)
}

/// A field of an exception body that is not acceptable, with what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ExceptionProblem {
    /// The field, dotted (`conditions.source_cidrs`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

fn problem(field: &str, message: impl Into<String>) -> ExceptionProblem {
    ExceptionProblem {
        field: field.to_string(),
        message: message.into(),
    }
}

impl Exception {
    /// A new exception from `draft`, checked, created at `now_ns`.
    pub fn create(
        draft: ExceptionDraft,
        id: Uuid,
        now_ns: i64,
    ) -> Result<Exception, ExceptionProblem> {
        let e = Exception {
            id,
            scope: draft.scope,
            detector: draft.detector,
            conditions: draft.conditions,
            reason: draft.reason,
            author: draft.author,
            expires_ns: draft.expires_ns,
            enabled: draft.enabled,
            from_alert: draft.from_alert,
            created_ns: now_ns,
            updated_ns: now_ns,
            hits: 0,
            last_hit_ns: None,
        };
        e.check(now_ns, true)?;
        Ok(e)
    }

    /// This exception with `patch` applied, checked, changed at `now_ns`.
    pub fn patched(
        &self,
        patch: ExceptionPatch,
        now_ns: i64,
    ) -> Result<Exception, ExceptionProblem> {
        let mut e = self.clone();
        if let Some(scope) = patch.scope {
            e.scope = scope;
            if scope == ExceptionScope::Global && patch.detector.is_none() {
                e.detector = None;
            }
        }
        if patch.detector.is_some() {
            e.detector = patch.detector;
        }
        if let Some(c) = patch.conditions {
            e.conditions = c;
        }
        if let Some(r) = patch.reason {
            e.reason = r;
        }
        if let Some(a) = patch.author {
            e.author = a;
        }
        let new_expiry = patch.expires_ns.is_some();
        if let Some(x) = patch.expires_ns {
            e.expires_ns = x;
        }
        if let Some(on) = patch.enabled {
            e.enabled = on;
        }
        e.updated_ns = now_ns;
        e.check(now_ns, new_expiry)?;
        Ok(e)
    }

    /// Whether it applies to an event at `ts_ns`.
    pub fn active_at(&self, ts_ns: i64) -> bool {
        self.enabled && self.expires_ns.is_none_or(|x| ts_ns < x)
    }

    /// Every rule of a valid exception; `new_expiry` also asks an expiry to lie after `now_ns`
    /// (an unchanged past expiry stays acceptable on a patch of another field).
    fn check(&self, now_ns: i64, new_expiry: bool) -> Result<(), ExceptionProblem> {
        text("reason", &self.reason)?;
        text("author", &self.author)?;
        match (self.scope, &self.detector) {
            (ExceptionScope::Detector, None) => {
                return Err(problem(
                    "detector",
                    "required with scope `detector` (a rule id, `ensemble`, `ioc`, `ueba:user`, or a prefix ending in `*`)",
                ));
            }
            (ExceptionScope::Detector, Some(d)) => {
                text("detector", d)?;
                if d == "*" {
                    return Err(problem(
                        "detector",
                        "`*` names every detector: use scope `global` with a condition",
                    ));
                }
            }
            (ExceptionScope::Global, Some(_)) => {
                return Err(problem(
                    "detector",
                    "scope `global` applies to every detector: leave `detector` out",
                ));
            }
            (ExceptionScope::Global, None) => {
                if self.conditions.is_empty() {
                    return Err(problem(
                        "conditions",
                        "scope `global` needs at least one condition, or it would silence every alert",
                    ));
                }
            }
        }
        if new_expiry
            && let Some(x) = self.expires_ns
            && x <= now_ns
        {
            return Err(problem(
                "expires_ns",
                format!("{x} is not in the future (now is {now_ns})"),
            ));
        }
        if let Some(a) = &self.from_alert {
            text("from_alert", a)?;
        }
        self.conditions.check()
    }
}

fn text(field: &str, value: &str) -> Result<(), ExceptionProblem> {
    if value.trim().is_empty() {
        return Err(problem(field, "required, and not blank"));
    }
    // One line of plain text: an author of `\x1b[2J` or a reason with a newline would write
    // into the terminal or forge a line of the log that records the change.
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(problem(
            field,
            format!("{c:?} is a control character: one line of text, please"),
        ));
    }
    if value.chars().count() > MAX_TEXT_CHARS {
        return Err(problem(
            field,
            format!("at most {MAX_TEXT_CHARS} characters"),
        ));
    }
    Ok(())
}

impl ExceptionConditions {
    fn check(&self) -> Result<(), ExceptionProblem> {
        for (name, list) in self.lists() {
            let field = format!("conditions.{name}");
            if list.len() > MAX_CONDITION_VALUES {
                return Err(problem(
                    &field,
                    format!("at most {MAX_CONDITION_VALUES} values"),
                ));
            }
            for v in list {
                text(&field, v)?;
            }
        }
        let mut canon = String::new();
        for (name, kind, list) in [
            ("users", EntityKind::User, &self.users),
            ("hosts", EntityKind::Host, &self.hosts),
            ("ips", EntityKind::Ip, &self.ips),
            ("domains", EntityKind::Domain, &self.domains),
        ] {
            for v in list {
                if !canonicalize_into(kind, v, &mut canon) {
                    return Err(problem(
                        &format!("conditions.{name}"),
                        format!("`{v}` is not a {}", kind.name()),
                    ));
                }
            }
        }
        for v in &self.source_cidrs {
            let (_, bits) =
                parse_cidr(v).map_err(|e| problem("conditions.source_cidrs", e.to_string()))?;
            // `0.0.0.0/0` or `::/0` names every address: as a condition it narrows nothing,
            // and a global exception of it would silence everything the rule above forbids.
            if bits == 96 || bits == 0 {
                return Err(problem(
                    "conditions.source_cidrs",
                    format!(
                        "`{v}` is every address: a condition must narrow what the exception \
                         holds back (leave it out, or name the networks meant)"
                    ),
                ));
            }
        }
        for v in &self.templates {
            parse_template(v).map_err(|e| problem("conditions.templates", e.to_string()))?;
        }
        Ok(())
    }
}

/// A network as (address, prefix length), both over IPv6 (IPv4 mapped: `/24` becomes `/120`).
pub fn parse_cidr(text: &str) -> Result<(u128, u32), ParseError> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (text, None),
    };
    let ip: std::net::IpAddr = addr
        .trim()
        .parse()
        .map_err(|_| ParseError::Network(text.to_string()))?;
    let (value, max, offset) = match ip {
        std::net::IpAddr::V4(v4) => (u128::from(v4.to_ipv6_mapped()), 32, 96),
        std::net::IpAddr::V6(v6) => (u128::from(v6), 128, 0),
    };
    let len = match len {
        None => max,
        Some(l) => l
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&l| l <= max)
            .ok_or_else(|| ParseError::PrefixLength {
                text: text.to_string(),
                max,
            })?,
    };
    let bits = len + offset;
    let mask = if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    };
    if value & !mask != 0 {
        return Err(ParseError::HostBits(text.to_string()));
    }
    Ok((value, bits))
}

/// A template id from its 16 hex digits.
pub fn parse_template(text: &str) -> Result<u64, ParseError> {
    match u64::from_str_radix(text, 16) {
        Ok(id) if text.len() <= 16 => Ok(id),
        _ => Err(ParseError::TemplateId(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(json: serde_json::Value) -> Result<Exception, ExceptionProblem> {
        let d: ExceptionDraft = serde_json::from_value(json).unwrap();
        Exception::create(d, Uuid::nil(), 1_000)
    }

    /// Issue 51, item 7: a global exception of every address got around the rule that no
    /// exception may silence everything; text fields took ESC, NUL and newlines.
    #[test]
    fn every_address_is_no_condition_and_text_is_one_line() {
        let field = |j| draft(j).unwrap_err().field;
        for all in [vec!["0.0.0.0/0"], vec!["::/0"], vec!["0.0.0.0/0", "::/0"]] {
            let got = field(
                serde_json::json!({"scope": "global", "reason": "x", "author": "a",
                "conditions": {"source_cidrs": all}}),
            );
            assert_eq!(got, "conditions.source_cidrs", "{all:?}");
        }
        assert!(
            draft(
                serde_json::json!({"scope": "global", "reason": "x", "author": "a",
                "conditions": {"source_cidrs": ["0.0.0.0/1", "10.0.0.0/8"]}})
            )
            .is_ok()
        );
        for (name, bad) in [
            ("author", "ana\u{1b}[2J"),
            ("author", "ana\u{0}"),
            ("reason", "ok\nFORGED: exception removed by admin"),
        ] {
            let mut body = serde_json::json!({"detector": "ioc", "reason": "r", "author": "a"});
            body[name] = bad.into();
            assert_eq!(field(body), name, "{bad:?}");
        }
    }

    #[test]
    fn a_draft_needs_a_reason_an_author_and_a_detector_or_a_condition() {
        let ok = draft(serde_json::json!({
            "detector": "ueba:user", "reason": "backup runs at night", "author": "ana",
            "conditions": {"users": ["svc_backup"]}
        }))
        .unwrap();
        assert!(ok.enabled && ok.hits == 0 && ok.scope == ExceptionScope::Detector);
        let field = |j| draft(j).unwrap_err().field;
        assert_eq!(
            field(serde_json::json!({"reason": "x", "author": "a"})),
            "detector"
        );
        assert_eq!(
            field(serde_json::json!({"detector": "ioc", "reason": " ", "author": "a"})),
            "reason"
        );
        assert_eq!(
            field(serde_json::json!({"scope": "global", "reason": "x", "author": "a"})),
            "conditions"
        );
        assert_eq!(
            field(
                serde_json::json!({"scope": "global", "detector": "ioc", "reason": "x", "author": "a",
                "conditions": {"users": ["a"]}})
            ),
            "detector"
        );
        assert_eq!(
            field(
                serde_json::json!({"detector": "ioc", "reason": "x", "author": "a", "expires_ns": 5})
            ),
            "expires_ns"
        );
    }

    #[test]
    fn conditions_are_checked_value_by_value() {
        let bad = |c| {
            draft(
                serde_json::json!({"detector": "d", "reason": "r", "author": "a", "conditions": c}),
            )
            .unwrap_err()
        };
        let e = bad(serde_json::json!({"source_cidrs": ["10.0.0.1/24"]}));
        assert_eq!(e.field, "conditions.source_cidrs");
        assert!(e.message.contains("past its prefix"), "{e}");
        assert_eq!(
            bad(serde_json::json!({"templates": ["xyz"]})).field,
            "conditions.templates"
        );
        assert_eq!(
            bad(serde_json::json!({"ips": ["not-an-ip"]})).field,
            "conditions.ips"
        );
        assert!(
            serde_json::from_value::<ExceptionDraft>(serde_json::json!({
                "detector": "d", "reason": "r", "author": "a", "conditions": {"user": ["x"]}
            }))
            .is_err(),
            "unknown fields are refused"
        );
    }

    #[test]
    fn networks_parse_over_ipv6_with_ipv4_mapped() {
        assert_eq!(parse_cidr("10.1.0.0/16").unwrap().1, 112);
        assert_eq!(parse_cidr("10.1.2.3").unwrap().1, 128);
        assert_eq!(parse_cidr("2001:db8::/32").unwrap().1, 32);
        assert_eq!(parse_cidr("0.0.0.0/0").unwrap().1, 96);
        assert!(parse_cidr("10.0.0.0/33").is_err());
    }

    #[test]
    fn a_patch_replaces_what_it_names_and_null_removes_the_expiry() {
        let e = draft(serde_json::json!({
            "detector": "ioc", "reason": "r", "author": "a", "expires_ns": 5_000
        }))
        .unwrap();
        let p: ExceptionPatch =
            serde_json::from_value(serde_json::json!({"expires_ns": null, "author": "bo"}))
                .unwrap();
        let back = e.patched(p, 2_000).unwrap();
        assert_eq!((back.expires_ns, back.author.as_str()), (None, "bo"));
        assert_eq!((back.created_ns, back.updated_ns), (1_000, 2_000));
        let p: ExceptionPatch =
            serde_json::from_value(serde_json::json!({"enabled": false})).unwrap();
        // An expiry already past is no reason to refuse turning the exception off.
        assert!(!e.patched(p, 9_000).unwrap().enabled);
        let p: ExceptionPatch =
            serde_json::from_value(serde_json::json!({"scope": "global"})).unwrap();
        assert_eq!(e.patched(p, 2_000).unwrap_err().field, "conditions");
    }
}
