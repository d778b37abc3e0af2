//! `GET /alerts`, `GET /alerts/{id}`, triage (`PATCH /alerts/{id}`), and the feedback routes.

use crate::answer::Json;
use crate::benign::{Benign, History, reading};
use crate::error::ApiError;
use crate::query::{DEFAULT_LIMIT, DeclaredQuery, MAX_LIMIT, Params, page_of};
use crate::routes::read_body;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use watchpost_proto::{
    Alert, AlertType, CloseReason, EntityKind, Event, Feedback, ListMeta, ListResponse,
    TriageStatus, Uuid, Verdict, entity_uuid_of, hash64_seeded, now_ns,
};
use watchpost_store::{AlertOrder, AlertQuery, Store, StoreError, TriageError, TriageUpdate};

/// `GET /signals`: latest activity first (or `sort=first_seen`), with the alert listing's
/// filters (docs/risk.md).
pub async fn signals(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListResponse<Alert>>, ApiError> {
    records(&st, raw.as_deref(), Store::search_signals).await
}

/// A signal with its contributing events (what an analyst reads to judge it; signals take no
/// feedback or triage).
#[derive(Serialize, schemars::JsonSchema)]
pub struct SignalDetail {
    /// The signal.
    #[serde(flatten)]
    pub signal: Alert,
    /// The contributing events still in the store (retention may have removed some).
    pub events: Vec<Event>,
}

/// `GET /signals/{id}`: one signal, with its events.
pub async fn signal(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SignalDetail>, ApiError> {
    let store = st.store.clone();
    let key = id.clone();
    tokio::task::spawn_blocking(move || {
        let Some(mut signal) = store.signal(&key)? else {
            return Ok(None);
        };
        store.name_alert(&mut signal)?;
        let events = stored_events(&store, &signal, usize::MAX)?;
        Ok::<_, ApiError>(Some(SignalDetail { signal, events }))
    })
    .await
    .map_err(ApiError::internal)??
    .map(Json)
    .ok_or_else(|| ApiError::not_found(format!("no signal {id}")))
}

/// Most alerts one bulk change touches; a filter that selects more changes the newest this many
/// and says so (`truncated`), and the same call again takes the next ones when the change moves
/// them out of the filter (a `status=open` filter with a close, say).
const BULK_MAX: u32 = 10_000;

/// Alerts, latest activity first (or newest first with `sort=first_seen`), filtered.
pub async fn list(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListResponse<Alert>>, ApiError> {
    records(&st, raw.as_deref(), Store::search_alerts).await
}

/// A listing of alert records (alerts or signals): the page and the filters the route declares,
/// from the query, the entity by UUID or value, names resolved, newest first.
async fn records(
    st: &AppState,
    raw: Option<&str>,
    search: fn(&Store, &AlertQuery) -> Result<watchpost_store::AlertPage, StoreError>,
) -> Result<Json<ListResponse<Alert>>, ApiError> {
    let p = Params::read(raw)?;
    let q = AlertQuery {
        page: p.int("page", 1, 1, 1_000_000)?,
        limit: p.int("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?,
        ..filters(&p)?
    };
    let entity = p.text("entity", 256)?;
    let store = st.store.clone();
    let (page, limit, order) = (q.page, q.limit, q.order);
    let found = tokio::task::spawn_blocking(move || {
        let mut q = q;
        if let Some(e) = entity {
            q.entities = Some(entity_uuids(&e));
        }
        let mut found = search(&store, &q)?;
        for a in &mut found.items {
            store.name_alert(a)?;
        }
        Ok::<_, ApiError>(found)
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(ListResponse {
        items: found.items,
        meta: ListMeta {
            total_exact: found.total_exact,
            sort: Some(order.name().to_string()),
            ..ListMeta::exact(found.total, page, limit)
        },
    }))
}

/// The filters shared by the listing and bulk triage (no paging, no entity lookup).
fn filters(p: &Params) -> Result<AlertQuery, ApiError> {
    let alert_type = match p.get("type") {
        None => None,
        Some(t) => Some(AlertType::parse(t).ok_or_else(|| {
            ApiError::invalid_parameter(
                "type",
                format!("`{t}` is not one of ml, sigma, correlation, ueba, ioc"),
            )
        })?),
    };
    let q = AlertQuery {
        since_ns: p.time("since")?,
        until_ns: p.time("until")?,
        alert_type,
        min_severity: p.severity("severity")?,
        detector: p.text("detector", 256)?,
        dedup_key: p.text("dedup_key", 512)?,
        entities: None,
        tactic: p.text("tactic", 128)?,
        technique: p.text("technique", 32)?,
        status: match p.get("status") {
            None => None,
            Some(list) => Some(statuses(list)?),
        },
        assignee: p.text("assignee", MAX_ASSIGNEE_CHARS)?,
        sensor: p.text("sensor", 64)?,
        without_triage: false,
        order: match p.get("sort") {
            // Latest activity first: the order of the Time column a feed shows, and the one in
            // which a repeating alert rises.
            None => AlertOrder::LastSeen,
            Some(s) => AlertOrder::parse(s).ok_or_else(|| {
                ApiError::invalid_parameter(
                    "sort",
                    format!("`{s}` is not one of last_seen, first_seen"),
                )
            })?,
        },
        page: 1,
        limit: 1,
    };
    if let (Some(s), Some(u)) = (q.since_ns, q.until_ns)
        && s >= u
    {
        return Err(ApiError::invalid_parameter(
            "until",
            "`until` must be later than `since`",
        ));
    }
    Ok(q)
}

/// What a bulk triage change did.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct BulkTriage {
    /// Alerts the filters select (a lower bound when `total_exact` is false).
    pub matched: u64,
    /// Whether `matched` is exact.
    pub total_exact: bool,
    /// Alerts changed: the newest of the matched, at most 10,000.
    pub changed: u64,
    /// More alerts matched than one call changes.
    pub truncated: bool,
    /// Ids of the alerts changed, newest first.
    pub ids: Vec<String>,
}

/// `PATCH /alerts?<filters>`: the same triage change (the body of `PATCH /alerts/{id}`) to every
/// alert the filters select, newest first and at most [`BULK_MAX`]: acknowledge a rule's
/// alerts (`detector=`), close a sweep (`dedup_key=sigma:<rule>:*`), reassign a queue. At
/// least one filter is required, so a bare call cannot close everything. A change the first
/// alert refuses (closing without a reason) answers 422 with nothing changed; a later alert whose
/// own state refuses it (changed meanwhile by someone else) is left as it is.
pub async fn patch_many(
    State(st): State<AppState>,
    Extension(declared): Extension<DeclaredQuery>,
    RawQuery(raw): RawQuery,
    body: Body,
) -> Result<Json<BulkTriage>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    if p.is_empty() {
        return Err(ApiError::invalid_parameter(
            "filter",
            format!(
                "a bulk change needs at least one filter: {}",
                declared.names()
            ),
        ));
    }
    let q = AlertQuery {
        page: 1,
        limit: BULK_MAX,
        // The newest 10,000 by first event, whatever their activity since.
        order: AlertOrder::FirstSeen,
        ..filters(&p)?
    };
    let entity = p.text("entity", 256)?;
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let change = triage_update(&bytes)?;
    let store = st.store.clone();
    let (answer, changed) = tokio::task::spawn_blocking(move || {
        // The items' triage is read again by each change; the listing need not read it (it still
        // reads triage to filter on `status` or `assignee`).
        let mut q = AlertQuery {
            without_triage: true,
            ..q
        };
        if let Some(e) = entity {
            q.entities = Some(entity_uuids(&e));
        }
        let found = store.search_alerts(&q)?;
        let now = now_ns();
        let mut changed = Vec::with_capacity(found.items.len());
        for a in &found.items {
            match store.update_triage(&a.id, &change, now) {
                Ok(Some(mut a)) => {
                    store.name_alert(&mut a)?;
                    changed.push(a);
                }
                // Removed by retention since the search.
                Ok(None) => {}
                Err(TriageError::Refused(field, why)) if changed.is_empty() => {
                    return Err(ApiError::invalid_body(field, why));
                }
                // The first alert took the change, so the change is sound; an alert whose
                // state refuses it now (closed meanwhile by someone else) is left as it is.
                Err(TriageError::Refused(..)) => {}
                Err(TriageError::Store(e)) => return Err(ApiError::from(e)),
                Err(TriageError::Unsaved(e)) => {
                    return Err(ApiError::unsaved(
                        &format!(
                            "the change of alert {} (after {} others)",
                            a.id,
                            changed.len()
                        ),
                        e,
                    ));
                }
            }
        }
        let answer = BulkTriage {
            matched: found.total,
            total_exact: found.total_exact,
            changed: changed.len() as u64,
            truncated: found.total > u64::from(BULK_MAX),
            ids: changed.iter().map(|a| a.id.clone()).collect(),
        };
        Ok::<_, ApiError>((answer, changed))
    })
    .await
    .map_err(ApiError::internal)??;
    // WebSocket clients see the changes in their next alert_batch.
    for alert in changed {
        st.ws.publish_update(alert);
    }
    Ok(Json(answer))
}

/// A `status` parameter: one status or several, comma-separated.
fn statuses(list: &str) -> Result<Vec<TriageStatus>, ApiError> {
    list.split(',')
        .map(|s| {
            TriageStatus::parse(s.trim()).ok_or_else(|| {
                ApiError::invalid_parameter(
                    "status",
                    format!("`{s}` is not one of open, acknowledged, closed"),
                )
            })
        })
        .collect()
}

/// Longest assignee name.
const MAX_ASSIGNEE_CHARS: usize = 128;

/// Sets an alert's triage status, close reason and assignee (each optional, at least one, or a
/// note alone) and answers the alert as it now is.
pub async fn patch(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Body,
) -> Result<Json<Alert>, ApiError> {
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let change = triage_update(&bytes)?;
    let store = st.store.clone();
    let alert =
        tokio::task::spawn_blocking(move || match store.update_triage(&id, &change, now_ns()) {
            Ok(Some(mut a)) => {
                store.name_alert(&mut a)?;
                Ok(a)
            }
            Ok(None) => Err(ApiError::not_found(format!("no alert {id}"))),
            Err(TriageError::Refused(field, why)) => Err(ApiError::invalid_body(field, why)),
            Err(TriageError::Store(e)) => Err(ApiError::from(e)),
            Err(TriageError::Unsaved(e)) => Err(ApiError::unsaved("the triage change", e)),
        })
        .await
        .map_err(ApiError::internal)??;
    // WebSocket clients see the change in their next alert_batch.
    st.ws.publish_update(alert.clone());
    Ok(Json(alert))
}

/// Reads a triage body: an object of `status`, `reason`, `assignee` (a name, or null to
/// unassign) and `note`, nothing else. `null` is told apart from absent, hence no derive.
fn triage_update(bytes: &[u8]) -> Result<TriageUpdate, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::invalid_body("body", format!("the body is not JSON: {e}")))?;
    let serde_json::Value::Object(fields) = value else {
        return Err(ApiError::invalid_body(
            "body",
            "the body must be a JSON object",
        ));
    };
    let mut change = TriageUpdate::default();
    for (key, v) in &fields {
        let text = || {
            v.as_str()
                .ok_or_else(|| ApiError::invalid_body(key, "must be a string"))
        };
        match key.as_str() {
            "status" => {
                let s = text()?;
                change.status = Some(TriageStatus::parse(s).ok_or_else(|| {
                    ApiError::invalid_body(
                        "status",
                        format!("`{s}` is not one of open, acknowledged, closed"),
                    )
                })?);
            }
            "reason" => {
                let s = text()?;
                change.reason = Some(CloseReason::parse(s).ok_or_else(|| {
                    ApiError::invalid_body(
                        "reason",
                        format!(
                            "`{s}` is not one of true_positive, benign_positive, false_positive, duplicate, other"
                        ),
                    )
                })?);
            }
            "assignee" if v.is_null() => change.assignee = Some(None),
            "assignee" => {
                let s = text()?.trim();
                if s.is_empty()
                    || s.chars().count() > MAX_ASSIGNEE_CHARS
                    || s.chars().any(char::is_control)
                {
                    return Err(ApiError::invalid_body(
                        "assignee",
                        format!(
                            "1 to {MAX_ASSIGNEE_CHARS} characters, no control characters; null unassigns"
                        ),
                    ));
                }
                change.assignee = Some(Some(s.to_string()));
            }
            "note" => {
                let s = text()?;
                if s.chars().count() > MAX_NOTE_CHARS {
                    return Err(ApiError::invalid_body(
                        "note",
                        format!("at most {MAX_NOTE_CHARS} characters"),
                    ));
                }
                change.note = s.to_string();
            }
            other => {
                return Err(ApiError::invalid_body(
                    other,
                    "unknown field: use status, reason, assignee, note",
                ));
            }
        }
    }
    if fields.is_empty() {
        return Err(ApiError::invalid_body(
            "body",
            "nothing to change: give status, reason, assignee or note",
        ));
    }
    Ok(change)
}

/// The UUIDs an `entity` parameter may mean: the UUID itself, or the value read as every kind
/// that accepts it.
pub fn entity_uuids(value: &str) -> Vec<Uuid> {
    if let Ok(u) = Uuid::parse_str(value) {
        return vec![u];
    }
    EntityKind::ALL
        .iter()
        .filter_map(|k| entity_uuid_of(*k, value))
        .collect()
}

/// An alert with its contributing events.
#[derive(Serialize, schemars::JsonSchema)]
pub struct AlertDetail {
    /// The alert.
    #[serde(flatten)]
    pub alert: Alert,
    /// The contributing events still in the store (retention may have removed some).
    pub events: Vec<Event>,
    /// Feedback received, newest first.
    pub feedback: Vec<Feedback>,
    /// Why it may be benign: the nearest innocent story in the entity's own history, the facts
    /// it rests on, and what would confirm it (docs/alerts.md, "Why it may be benign").
    pub benign: Benign,
}

/// An alert with names resolved and at most `max_events` of its contributing events still
/// stored; `None` when there is no such alert. Blocking (reads the store).
pub fn with_events(
    store: &Store,
    id: &str,
    max_events: usize,
) -> Result<Option<(Alert, Vec<Event>)>, StoreError> {
    let Some(mut alert) = store.alert(id)? else {
        return Ok(None);
    };
    store.name_alert(&mut alert)?;
    let events = stored_events(store, &alert, max_events)?;
    Ok(Some((alert, events)))
}

/// At most `max_events` of an alert's (or signal's) contributing events still stored.
fn stored_events(
    store: &Store,
    alert: &Alert,
    max_events: usize,
) -> Result<Vec<Event>, StoreError> {
    let mut events = Vec::new();
    for e in &alert.contributing_events {
        if events.len() == max_events {
            break;
        }
        // Retention may have removed an event; a failed read is an error.
        if let Some(e) = store.event(e)? {
            events.push(e);
        }
    }
    Ok(events)
}

/// One alert, with its events.
pub async fn get(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<AlertDetail>, ApiError> {
    let store = st.store.clone();
    let detect = st.detect.clone();
    let catalog = st.catalog.clone();
    tokio::task::spawn_blocking(move || {
        let (alert, events) = with_events(&store, &id, usize::MAX)?
            .ok_or_else(|| ApiError::not_found(format!("no alert {id}")))?;
        let feedback = store.feedback_for(&id)?;
        // The entity's baseline as the data plane holds it now (none on a console, whose
        // detectors hold the baselines, nor for an entity still warming up).
        let history = alert
            .entity
            .as_ref()
            .and_then(|e| detect.baseline(hash64_seeded(e.value.as_bytes(), e.kind as u64)))
            .filter(|v| !v.warming_up)
            .map(|v| History {
                hours_active: v.hours_active,
                top_sources: v.top_source_ips,
                event_count: v.event_count,
                volume_per_minute: v.volume_ema_minute,
            });
        let falsepositives = catalog
            .find(&alert.detector)
            .map(|e| e.rule.falsepositives.clone())
            .unwrap_or_default();
        let benign = reading(&alert, history.as_ref(), &falsepositives);
        Ok(Json(AlertDetail {
            alert,
            events,
            feedback,
            benign,
        }))
    })
    .await
    .map_err(ApiError::internal)?
}

/// The body of `POST /alerts/{id}/feedback`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeedbackBody {
    /// The verdict: `tp` (true positive) or `fp` (false positive).
    #[schemars(extend("enum" = ["tp", "fp"]))]
    feedback: String,
    /// Free text, at most 4,096 characters.
    #[serde(default)]
    #[schemars(length(max = 4096))]
    note: Option<String>,
    /// Where it came from (`dashboard`, a SOAR's name...), 1 to 64 characters; `api` when absent.
    #[serde(default)]
    #[schemars(length(min = 1, max = 64))]
    origin: Option<String>,
    /// Who gives it (free text, 1 to 64 characters, as a triage assignee). Feedback is
    /// idempotent per alert and sender: the analyst, or without one the origin.
    #[serde(default)]
    #[schemars(length(min = 1, max = 64))]
    analyst: Option<String>,
}

/// The answer to feedback that repeats the sender's latest verdict on the alert: nothing was
/// recorded and no threshold moved.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct FeedbackRepeat {
    /// Always false.
    pub recorded: bool,
    /// Why.
    pub message: String,
}

/// Longest note kept.
const MAX_NOTE_CHARS: usize = 4096;
/// Longest origin.
const MAX_ORIGIN_CHARS: usize = 64;

/// Records a verdict and moves the threshold that raised the alert; 204. The sender's latest
/// verdict on the alert again (a double click, a retry) records nothing and moves nothing: 200
/// with a [`FeedbackRepeat`].
pub async fn post_feedback(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Body,
) -> Result<axum::response::Response, ApiError> {
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let store = st.store.clone();
    let alert = {
        let store = store.clone();
        let key = id.clone();
        tokio::task::spawn_blocking(move || store.alert(&key))
            .await
            .map_err(ApiError::internal)??
            .ok_or_else(|| ApiError::not_found(format!("no alert {id}")))?
    };
    let body: FeedbackBody = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_body("body", format!("the body is not a feedback object: {e}"))
    })?;
    let verdict = match body.feedback.as_str() {
        "tp" => Verdict::Tp,
        "fp" => Verdict::Fp,
        other => {
            return Err(ApiError::invalid_body(
                "feedback",
                format!("`{other}` is not a verdict: use tp or fp"),
            ));
        }
    };
    let note = body.note.unwrap_or_default();
    if note.chars().count() > MAX_NOTE_CHARS {
        return Err(ApiError::invalid_body(
            "note",
            format!("at most {MAX_NOTE_CHARS} characters"),
        ));
    }
    let origin = body.origin.unwrap_or_else(|| "api".into());
    if origin.is_empty() || origin.chars().count() > MAX_ORIGIN_CHARS {
        return Err(ApiError::invalid_body(
            "origin",
            format!("1 to {MAX_ORIGIN_CHARS} characters"),
        ));
    }
    let analyst = body.analyst;
    if analyst
        .as_ref()
        .is_some_and(|a| a.trim().is_empty() || a.chars().count() > MAX_ORIGIN_CHARS)
    {
        return Err(ApiError::invalid_body(
            "analyst",
            format!("1 to {MAX_ORIGIN_CHARS} characters"),
        ));
    }
    let detect = st.detect.clone();
    // A fleet's console holds no thresholds: the verdict goes to the detectors' partitions
    // that own them (docs/cluster.md), which move them in stream order.
    let fleet = st.fleet.as_ref().and_then(|f| f.feedback());
    let recorded = tokio::task::spawn_blocking(move || {
        let probe = Feedback {
            alert_id: alert.id.clone(),
            feedback: verdict,
            note,
            origin,
            analyst,
            created_ns: now_ns(),
            threshold_change: None,
        };
        store.record_feedback(&probe.clone(), move || Feedback {
            // Moved only for a verdict that is recorded.
            threshold_change: match &fleet {
                Some(queue) => {
                    queue.send(&alert, verdict);
                    None
                }
                None => detect.feedback(&alert, verdict),
            },
            ..probe
        })
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|e| ApiError::unsaved("the feedback", e))?;
    use axum::response::IntoResponse;
    Ok(match recorded {
        Some(_) => StatusCode::NO_CONTENT.into_response(),
        None => Json(FeedbackRepeat {
            recorded: false,
            message: "this sender's latest verdict on the alert is already this one: nothing \
                      recorded, no threshold moved"
                .into(),
        })
        .into_response(),
    })
}

/// Feedback on one alert, newest first.
pub async fn get_feedback(
    State(st): State<AppState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListResponse<Feedback>>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let page = p.int("page", 1, 1, 1_000_000)?;
    let limit = p.int("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
    let store = st.store.clone();
    tokio::task::spawn_blocking(move || {
        if store.alert(&id)?.is_none() {
            return Err(ApiError::not_found(format!("no alert {id}")));
        }
        Ok(Json(page_of(store.feedback_for(&id)?, page, limit)))
    })
    .await
    .map_err(ApiError::internal)?
}
