//! `/sigma/rules`: the rule catalogue, its fire counts, toggles and uploads.
//!
//! Fire counts are read from the store's hourly rule series (written by the stage B workers once
//! a second), so the list and the timelines show what fired whether or not the rule's alerts
//! were folded into one by the cooldown. Changes go through the data plane's
//! [`Catalog`], which stage A picks up at its next batch: an upload is live without a restart.

use crate::answer::Json;
use crate::error::ApiError;
use crate::fanout::Fanout;
use crate::query::{DEFAULT_LIMIT, MAX_LIMIT, Params, page_of};
use crate::routes::read_body;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use watchpost_dataplane::{Catalog, Error};
use watchpost_outbound::Method;
use watchpost_proto::{AttackMapping, ListResponse, now_ns};
use watchpost_rules::{Body as RuleBody, RuleEntry};

/// Nanoseconds per hour.
const HOUR_NS: i64 = 3_600_000_000_000;
/// Stored events a dry run reads at most (newest first, last 24 h).
const DRY_RUN_MAX_EVENTS: u64 = 200_000;
/// Event ids a dry run lists.
const DRY_RUN_SAMPLE: usize = 20;

/// A rule as listed.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "SigmaRule")]
pub struct RuleSummary {
    /// Rule id.
    pub id: String,
    /// Title.
    pub title: String,
    /// `informational` to `critical`, when set.
    pub level: Option<&'static str>,
    /// Alert severity 0 to 5.
    pub severity: u8,
    /// `stable`, `test`, `experimental`, `deprecated`, `unsupported`, when set.
    pub status: Option<String>,
    /// Applied to events.
    pub enabled: bool,
    /// `bundled`, `directory` or `custom`.
    pub source: &'static str,
    /// `detection` or `correlation`.
    pub kind: &'static str,
    /// Its logsource maps onto events (an unmapped rule can never fire).
    pub mapped: bool,
    /// `product`, `category`, `service` of its logsource.
    pub logsource: HashMap<&'static str, String>,
    /// Tags as written.
    pub tags: Vec<String>,
    /// ATT&CK mappings of its tags.
    pub attack: Vec<AttackMapping>,
    /// Fires in the last 24 hours.
    pub fires_24h: u64,
}

/// A rule with its text.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "SigmaRuleDetail")]
pub struct RuleDetail {
    /// Everything the list shows.
    #[serde(flatten)]
    pub summary: RuleSummary,
    /// Description.
    pub description: Option<String>,
    /// Author.
    pub author: Option<String>,
    /// Known false positives.
    pub falsepositives: Vec<String>,
    /// References.
    pub references: Vec<String>,
    /// Parser warnings (unusual but valid constructs).
    pub warnings: Vec<String>,
    /// The file it was loaded from (bundled: its path under `rules/sigma/`).
    pub path: String,
    /// The YAML text.
    pub yaml: String,
    /// On a fleet's console, the detectors whose fire counts `fires_24h` sums, and those that
    /// did not answer (`partial`). Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detectors: Option<watchpost_proto::SensorCoverage>,
}

fn summary(e: &RuleEntry, fires_24h: u64) -> RuleSummary {
    let r = &e.rule;
    let mut logsource = HashMap::new();
    for (k, v) in [
        ("product", &r.logsource.product),
        ("category", &r.logsource.category),
        ("service", &r.logsource.service),
    ] {
        if let Some(v) = v {
            logsource.insert(k, v.clone());
        }
    }
    RuleSummary {
        id: r.id.clone(),
        title: r.title.clone(),
        level: r.level.map(|l| l.as_str()),
        severity: e.severity,
        status: r.status.clone(),
        enabled: e.enabled(),
        source: e.origin.name(),
        kind: match r.body {
            RuleBody::Detection { .. } => "detection",
            RuleBody::Correlation(_) => "correlation",
        },
        mapped: e.mapped,
        logsource,
        tags: r.tags.clone(),
        attack: e.attack.clone(),
        fires_24h,
    }
}

fn detail(e: &RuleEntry, fires_24h: u64) -> RuleDetail {
    let r = &e.rule;
    RuleDetail {
        summary: summary(e, fires_24h),
        description: r.description.clone(),
        author: r.author.clone(),
        falsepositives: r.falsepositives.clone(),
        references: r.references.clone(),
        warnings: r.warnings.clone(),
        path: e.path.clone(),
        yaml: e.yaml.clone(),
        detectors: None,
    }
}

/// The 24 whole hours a rule's "last 24 h" covers: from the start of the hour 23 hours before
/// the current one to the end of the current one. The list's counts and the timeline use the
/// same window, so a rule's `fires_24h` is its timeline's total.
fn last_24_hours() -> (i64, i64) {
    let first = (now_ns().div_euclid(HOUR_NS) - 23) * HOUR_NS;
    (first, first + 24 * HOUR_NS)
}

/// Fire counts over [`last_24_hours`]: this node's own, or on a fleet's console the sum of
/// what the detectors answered (each holds the fires of the partitions it scored, as for the
/// timeline), with who was asked and who did not answer.
struct Fires {
    /// This node's counts, by rule key.
    by_key: HashMap<u64, u64>,
    /// The detectors' counts, by rule id: a console's catalogue and a detector's share their ids
    /// (content is set once for the fleet), not necessarily their keys.
    by_id: HashMap<String, u64>,
    /// On a console, the detectors asked; `None` on a node answering alone.
    detectors: Option<watchpost_proto::SensorCoverage>,
}

/// What a console reads of a detector's rule listing: ids and counts.
#[derive(Deserialize)]
struct FiredRule {
    id: String,
    fires_24h: u64,
}

impl Fires {
    fn of(&self, e: &RuleEntry) -> u64 {
        self.by_key
            .get(&e.key)
            .or_else(|| self.by_id.get(&e.rule.id))
            .copied()
            .unwrap_or(0)
    }

    /// The counts for what `path_and_query` (a rule listing, or one rule, under `/api/v1`) shows:
    /// on a console, that same request is sent to every detector and their counts summed by rule
    /// id; elsewhere, this node's store is read. Asking the detectors the same query (filters,
    /// page) rather than for every rule keeps each answer one page long.
    async fn read(
        st: &AppState,
        headers: &HeaderMap,
        path_and_query: &str,
        one_rule: bool,
    ) -> Result<Fires, ApiError> {
        let Some(targets) =
            Fanout::detector_targets(st.fanout.as_deref(), st.cluster.as_deref(), headers)
        else {
            return Ok(Fires {
                by_key: own_fires(st).await?,
                by_id: HashMap::new(),
                detectors: None,
            });
        };
        let mut gathered = super::console_fanout(st)?
            .ask(targets, Method::GET, path_and_query, None)
            .await;
        let mut by_id = HashMap::new();
        let rules: Vec<FiredRule> = if one_rule {
            gathered
                .parsed::<FiredRule>(&[404])
                .into_iter()
                .map(|(_, r)| r)
                .collect()
        } else {
            gathered
                .parsed::<ListResponse<FiredRule>>(&[])
                .into_iter()
                .flat_map(|(_, page)| page.items)
                .collect()
        };
        for r in rules {
            *by_id.entry(r.id).or_insert(0) += r.fires_24h;
        }
        Ok(Fires {
            by_key: HashMap::new(),
            by_id,
            detectors: Some(gathered.coverage),
        })
    }
}

/// This node's fires per rule key over [`last_24_hours`].
async fn own_fires(st: &AppState) -> Result<HashMap<u64, u64>, ApiError> {
    let store = st.store.clone();
    let (since, until) = last_24_hours();
    let rows = tokio::task::spawn_blocking(move || store.rule_fires(since, until))
        .await
        .map_err(ApiError::internal)??;
    let mut out = HashMap::new();
    for (rule, _, n) in rows {
        *out.entry(rule).or_insert(0) += u64::from(n);
    }
    Ok(out)
}

/// `GET /sigma/rules`: rules in catalogue order, filtered, with their 24 h fire counts.
pub async fn list(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListResponse<RuleSummary>>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let enabled = p.boolean("enabled")?;
    let level = match p.get("level") {
        None => None,
        Some(v) => Some(watchpost_rules::Level::parse(v).ok_or_else(|| {
            ApiError::invalid_parameter(
                "level",
                format!("`{v}` is not informational, low, medium, high or critical"),
            )
        })?),
    };
    let source = p.get("source");
    if let Some(s) = source
        && !["bundled", "directory", "custom"].contains(&s)
    {
        return Err(ApiError::invalid_parameter(
            "source",
            format!("`{s}` is not bundled, directory or custom"),
        ));
    }
    let kind = p.get("kind");
    if let Some(k) = kind
        && !["detection", "correlation"].contains(&k)
    {
        return Err(ApiError::invalid_parameter(
            "kind",
            format!("`{k}` is not detection or correlation"),
        ));
    }
    // A tactic by id, name or shortname (`TA0006`, `Credential Access`, `credential-access`).
    let tactic = match p.text("tactic", 128)? {
        None => None,
        Some(t) => Some(
            watchpost_rules::Attack::get()
                .tactic(&t)
                .map(|x| x.id.clone())
                .ok_or_else(|| {
                    ApiError::invalid_parameter("tactic", format!("`{t}` is not an ATT&CK tactic"))
                })?,
        ),
    };
    let technique = p.text("technique", 32)?;
    let text = p.text("q", 256)?.map(|t| t.to_lowercase());
    let page = p.int("page", 1, 1, 1_000_000)?;
    let limit = p.int("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
    let cat = Arc::clone(&st.catalog);
    let query = raw.as_deref().map(|q| format!("?{q}")).unwrap_or_default();
    let fires = Fires::read(&st, &headers, &format!("/api/v1/sigma/rules{query}"), false).await?;
    let items: Vec<RuleSummary> = cat
        .all()
        .iter()
        .filter(|e| enabled.is_none_or(|on| e.enabled() == on))
        .filter(|e| level.is_none_or(|l| e.rule.level == Some(l)))
        .filter(|e| source.is_none_or(|s| e.origin.name() == s))
        .filter(|e| kind.is_none_or(|k| e.is_detection() == (k == "detection")))
        .filter(|e| {
            tactic
                .as_ref()
                .is_none_or(|t| e.attack.iter().any(|m| &m.tactic_id == t))
        })
        .filter(|e| {
            technique.as_ref().is_none_or(|t| {
                let t = t.to_ascii_uppercase();
                e.attack.iter().any(|m| m.technique_id.starts_with(&t))
            })
        })
        .filter(|e| {
            text.as_ref().is_none_or(|t| {
                let r = &e.rule;
                r.id.to_lowercase().contains(t)
                    || r.title.to_lowercase().contains(t)
                    || r.description
                        .as_ref()
                        .is_some_and(|d| d.to_lowercase().contains(t))
                    || r.tags.iter().any(|g| g.to_lowercase().contains(t))
            })
        })
        .map(|e| summary(e, fires.of(e)))
        .collect();
    let mut listed = page_of(items, page, limit);
    listed.meta.detectors = fires.detectors;
    Ok(Json(listed))
}

/// [`Fires::read`] for one rule.
async fn one_rule_fires(
    st: &AppState,
    headers: &HeaderMap,
    e: &RuleEntry,
) -> Result<Fires, ApiError> {
    let path = format!(
        "/api/v1/sigma/rules/{}",
        crate::fanout::path_segment(&e.rule.id)
    );
    Fires::read(st, headers, &path, true).await
}

fn find(cat: &Catalog, id: &str) -> Result<Arc<RuleEntry>, ApiError> {
    cat.find(id)
        .ok_or_else(|| ApiError::not_found(format!("no rule {id}")))
}

/// `GET /sigma/rules/{id}`: one rule with its YAML.
pub async fn get(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<RuleDetail>, ApiError> {
    let cat = Arc::clone(&st.catalog);
    let e = find(&cat, &id)?;
    let fires = one_rule_fires(&st, &headers, &e).await?;
    let mut d = detail(&e, fires.of(&e));
    d.detectors = fires.detectors;
    Ok(Json(d))
}

/// One hour of a rule's timeline.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HourBucket {
    /// Start of the hour, ns.
    pub hour_ns: i64,
    /// Fires in it.
    pub count: u64,
}

/// A rule's last 24 hours.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "RuleTimeline")]
pub struct Timeline {
    /// Rule id.
    pub rule_id: String,
    /// 24 buckets, oldest first; the last is the current (partial) hour.
    pub buckets: Vec<HourBucket>,
    /// Sum of the buckets.
    pub total: u64,
    /// On a fleet's console: the detectors asked for their counts (each holds the fires of
    /// the partitions it scored), and those that did not answer (`partial`: the counts are
    /// those of the detectors that did). Absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectors: Option<watchpost_proto::SensorCoverage>,
}

/// `GET /sigma/rules/{id}/timeline`: 24 hourly fire counts ending with the current hour.
pub async fn timeline(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Timeline>, ApiError> {
    let cat = Arc::clone(&st.catalog);
    let e = find(&cat, &id)?;
    let (first, until) = last_24_hours();
    let mut buckets: Vec<HourBucket> = (0..24)
        .map(|h| HourBucket {
            hour_ns: first + h * HOUR_NS,
            count: 0,
        })
        .collect();
    let mut add = |hour_ns: i64, n: u64| {
        if let Ok(i) = usize::try_from((hour_ns - first).div_euclid(HOUR_NS))
            && let Some(b) = buckets.get_mut(i)
        {
            b.count += n;
        }
    };
    let mut detectors = None;
    // A console: the detectors' counts, by hour (one that is also this node answers for
    // itself through the fan-out).
    if let Some(targets) =
        Fanout::detector_targets(st.fanout.as_deref(), st.cluster.as_deref(), &headers)
    {
        let path = format!(
            "/api/v1/sigma/rules/{}/timeline",
            crate::fanout::path_segment(&e.rule.id)
        );
        let mut gathered = super::console_fanout(&st)?
            .ask(targets, Method::GET, &path, None)
            .await;
        for (_, t) in gathered.parsed::<Timeline>(&[404]) {
            for b in t.buckets {
                add(b.hour_ns, b.count);
            }
        }
        detectors = Some(gathered.coverage);
    } else {
        let store = st.store.clone();
        let rows = tokio::task::spawn_blocking(move || store.rule_fires(first, until))
            .await
            .map_err(ApiError::internal)??;
        for (rule, hour_ns, n) in rows {
            if rule == e.key {
                add(hour_ns, u64::from(n));
            }
        }
    }
    let total = buckets.iter().map(|b| b.count).sum();
    Ok(Json(Timeline {
        rule_id: e.rule.id.clone(),
        buckets,
        total,
        detectors,
    }))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SigmaToggle")]
#[serde(deny_unknown_fields)]
pub(crate) struct Toggle {
    /// Whether the rule is applied to events.
    enabled: bool,
}

/// `PATCH /sigma/rules/{id}` with `{"enabled": bool}`: turns the rule on or off, persistently.
pub async fn patch(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Result<Json<RuleSummary>, ApiError> {
    crate::fanout::content_set_here(&st.config.cluster)?;
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let t: Toggle = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_body(
            "enabled",
            format!("the body must be {{\"enabled\": true|false}}: {e}"),
        )
    })?;
    let cat = Arc::clone(&st.catalog);
    let c = cat.clone();
    let key = id.clone();
    let e = tokio::task::spawn_blocking(move || c.set_enabled(&key, t.enabled))
        .await
        .map_err(ApiError::internal)??
        .ok_or_else(|| ApiError::not_found(format!("no rule {id}")))?;
    let fires = one_rule_fires(&st, &headers, &e).await?;
    Ok(Json(summary(&e, fires.of(&e))))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SigmaUpload")]
#[serde(deny_unknown_fields)]
pub(crate) struct Upload {
    /// The rule's YAML text.
    yaml: String,
    /// Validate and match the last 24 hours without saving.
    #[serde(default)]
    dry_run: bool,
}

/// What a dry run found.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "SigmaDryRun")]
pub struct DryRun {
    /// Always true: an invalid rule answers 422.
    pub valid: bool,
    /// The rule as it would be listed.
    pub rule: RuleSummary,
    /// What the parser would warn about (unusual constructs, ATT&CK ids it does not know), as
    /// `GET /sigma/rules/{id}` shows them once uploaded.
    pub warnings: Vec<String>,
    /// Stored events of the last 24 h that were read.
    pub events_scanned: u64,
    /// Of those, how many the rule matches.
    pub matched: u64,
    /// Ids of the newest matches (at most 20).
    pub sample_event_ids: Vec<String>,
    /// The scan stopped at its bound before reaching 24 h back.
    pub truncated: bool,
}

fn upload_error(e: Error) -> ApiError {
    match e {
        Error::InvalidRule(err) => {
            let mut a = ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_rule",
                err.message.clone(),
            );
            a = a.with("kind", err.kind.as_str());
            if let Some(p) = err.pos {
                a = a.with("line", p.line).with("column", p.column);
            }
            a
        }
        Error::RuleFileTaken(path) => ApiError::new(
            StatusCode::CONFLICT,
            "rule_file_exists",
            format!(
                "{} exists and holds no loaded rule; remove it, or upload under another id",
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
        ),
        Error::RuleCollision(id) => {
            ApiError::new(
                StatusCode::CONFLICT,
                "rule_exists",
                format!("a rule with id {id} is already loaded"),
            )
            .with("rule_id", id)
        }
        e @ Error::RulesFull(_) => ApiError::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "upload_dir_full",
            e.to_string(),
        ),
        Error::RulesTooLarge {
            stored,
            upload,
            max,
        } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "custom_rules_too_large",
            format!(
                "the custom rules hold {stored} bytes and this one {upload}: together over detection.sigma_custom_max_total_bytes ({max}); delete rules or raise the bound"
            ),
        )
        .with("limit", "detection.sigma_custom_max_total_bytes")
        .with("max", max),
        other => ApiError::internal(other),
    }
}

/// `POST /sigma/rules` with `{"yaml": "...", "dry_run": bool}`. 201 with the rule once it is
/// stored and live; with `dry_run`, 200 with what it would have matched in the stored events
/// of the last 24 hours, nothing written. 409 on an id collision, 422 with line and column
/// for an invalid rule (one past the size or value bounds of every rule included), 507 when the
/// upload folder is full, 413 when the custom rules would pass their total size bound.
pub async fn post(
    State(st): State<AppState>,
    body: Body,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let u: Upload = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_body(
            "yaml",
            format!("the body must be {{\"yaml\": \"...\", \"dry_run\": false}}: {e}"),
        )
    })?;
    let cat = Arc::clone(&st.catalog);
    if !u.dry_run {
        crate::fanout::content_set_here(&st.config.cluster)?;
        let c = cat.clone();
        let e = tokio::task::spawn_blocking(move || c.upload(&u.yaml))
            .await
            .map_err(ApiError::internal)?
            .map_err(upload_error)?;
        tracing::info!("sigma: custom rule {} uploaded ({})", e.rule.id, e.path);
        let v = serde_json::to_value(detail(&e, 0)).map_err(ApiError::internal)?;
        return Ok((StatusCode::CREATED, Json(v)));
    }
    let store = st.store.clone();
    let c = cat.clone();
    let run = tokio::task::spawn_blocking(move || -> Result<DryRun, ApiError> {
        let rule = c.check_upload(&u.yaml).map_err(upload_error)?;
        let entry = c.preview(rule.clone(), u.yaml.clone());
        let set = c.compile_one(rule);
        let now = now_ns();
        let mut matched = 0u64;
        let mut sample = Vec::new();
        let mut hits = Vec::with_capacity(1);
        let scanned =
            store.scan_events(now - 24 * HOUR_NS, now + 1, DRY_RUN_MAX_EVENTS, |id, ev| {
                hits.clear();
                set.matches(&ev.into_plain(), &mut hits);
                if !hits.is_empty() {
                    matched += 1;
                    if sample.len() < DRY_RUN_SAMPLE {
                        sample.push(id.to_string());
                    }
                }
                true
            })?;
        Ok(DryRun {
            valid: true,
            rule: summary(&entry, 0),
            warnings: entry.rule.warnings.clone(),
            events_scanned: scanned,
            matched,
            sample_event_ids: sample,
            truncated: scanned >= DRY_RUN_MAX_EVENTS,
        })
    })
    .await
    .map_err(ApiError::internal)??;
    let v = serde_json::to_value(run).map_err(ApiError::internal)?;
    Ok((StatusCode::OK, Json(v)))
}
