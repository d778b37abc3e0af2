//! `GET /entities/search`, `/entities/{uuid}/timeline`, `/risk-history` and `/baseline`.

use crate::answer::Json;
use crate::error::ApiError;
use crate::fanout::{ENTITY_HASH_HEADER, Fanout, FirstPages, Target, merge_events};
use crate::query::{DEFAULT_LIMIT, MAX_LIMIT, Params, page_of};
use crate::state::AppState;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use watchpost_outbound::Method;
use watchpost_proto::{
    EntityKind, Event, ListResponse, SensorCoverage, Uuid, hash64_seeded, now_ns,
};
use watchpost_store::{EntityFilter, EntityHit, EventQuery, Store, StoreError};

/// Entities by name or UUID, best match first.
pub async fn search(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListResponse<EntityHit>>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let q = p
        .text("q", 256)?
        .ok_or_else(|| ApiError::invalid_parameter("q", "is required (1 to 256 characters)"))?;
    let page = p.int("page", 1, 1, 1_000_000)?;
    let limit = p.int("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
    if let Some(targets) = Fanout::targets(st.fanout.as_deref(), st.cluster.as_deref(), &headers) {
        return fleet_search(&st, targets, raw.as_deref(), page, limit).await;
    }
    let store = st.store.clone();
    let hits = tokio::task::spawn_blocking(move || {
        if let Ok(u) = Uuid::parse_str(&q) {
            return Ok(store
                .entity(u.as_bytes())?
                .and_then(|(kind, first_seen_ns, value)| {
                    Some(vec![EntityHit {
                        uuid: u,
                        kind: EntityKind::from_u8(kind)?,
                        value,
                        first_seen_ns,
                        relevance: 1.0,
                    }])
                })
                .unwrap_or_default());
        }
        store.search_entities(&q, 10_000)
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(page_of(hits, page, limit)))
}

/// A console's entity search: each sensor's best `page * limit` hits, one per entity (its
/// highest relevance, its earliest sighting), best first.
async fn fleet_search(
    st: &AppState,
    targets: Vec<Target>,
    raw: Option<&str>,
    page: u32,
    limit: u32,
) -> Result<Json<ListResponse<EntityHit>>, ApiError> {
    let fanout = super::console_fanout(st)?;
    let FirstPages {
        answers, coverage, ..
    } = fanout
        .first_pages::<EntityHit>(targets, "/entities/search", raw, page, limit)
        .await?;
    let (mut unfetched, mut largest) = (0, 0);
    let mut merged: BTreeMap<Uuid, EntityHit> = BTreeMap::new();
    for (_, a) in answers {
        unfetched += a.meta.total.saturating_sub(a.items.len() as u64);
        largest = largest.max(a.meta.total);
        for hit in a.items {
            merged
                .entry(hit.uuid)
                .and_modify(|h| {
                    h.relevance = h.relevance.max(hit.relevance);
                    h.first_seen_ns = h.first_seen_ns.min(hit.first_seen_ns);
                })
                .or_insert(hit);
        }
    }
    let mut hits: Vec<EntityHit> = merged.into_values().collect();
    hits.sort_by(|a, b| {
        b.relevance
            .total_cmp(&a.relevance)
            .then_with(|| a.value.len().cmp(&b.value.len()))
            .then_with(|| a.value.cmp(&b.value))
    });
    let mut answer = page_of(hits, page, limit);
    // Past the first items asked of each sensor, which entities two sensors share is unknown:
    // the total is then a lower bound (the most any one sensor has), and says so.
    if unfetched > 0 {
        answer.meta.total = answer.meta.total.max(largest);
        answer.meta.total_exact = false;
    }
    answer.meta.sensors = Some(coverage);
    Ok(Json(answer))
}

/// An entity's UUID as the path gives it; 404 (no such entity) when it is not one.
fn entity_uuid(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| ApiError::not_found(format!("no entity {text} (not a UUID)")))
}

/// The kind, name and name hash of a known entity; 404 otherwise.
fn known(store: &Store, uuid: &str) -> Result<(Uuid, EntityKind, String, u64, i64), ApiError> {
    let u = entity_uuid(uuid)?;
    let (kind, first_seen, name) = store
        .entity(u.as_bytes())?
        .ok_or_else(|| ApiError::not_found(format!("no entity {uuid}")))?;
    let kind = EntityKind::from_u8(kind).ok_or_else(|| StoreError::Decode {
        what: "entity",
        reason: format!("unknown kind {kind}"),
    })?;
    let hash = hash64_seeded(name.as_bytes(), kind as u64);
    Ok((u, kind, name, hash, first_seen))
}

/// The entity an answer is about.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct EntitySummary {
    /// UUID5 of the canonical name in the kind's namespace.
    uuid: Uuid,
    /// What kind of entity.
    kind: EntityKind,
    /// The canonical name.
    value: String,
    /// First receive time, ns (on the timeline).
    #[serde(skip_serializing_if = "Option::is_none")]
    first_seen_ns: Option<i64>,
}

/// `GET /entities/{uuid}/timeline`: the entity's events across sources.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct EntityTimeline {
    /// The entity.
    entity: EntitySummary,
    /// Events matching, over all pages.
    total: u64,
    /// `total` is exact (false: a lower bound, the count stopped at its bound).
    total_exact: bool,
    /// The search stopped at `api_query_timeout_ms`; the events are those found by then.
    timed_out: bool,
    /// The page's events, newest first.
    events: Vec<Event>,
    /// Events of the page by source.
    sources: BTreeMap<String, u64>,
    /// Other entities of the page's events, most frequent first.
    related_entities: Vec<RelatedEntity>,
    /// On a fleet's console, the sensors asked and those that did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sensors: Option<SensorCoverage>,
}

/// An entity seen in the same events.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct RelatedEntity {
    /// Its UUID.
    uuid: Uuid,
    /// Its kind.
    kind: EntityKind,
    /// Its canonical name.
    value: String,
    /// Events of the page that name both.
    events: u64,
}

/// `GET /entities/{uuid}/risk-history`: the highest UEBA score per hour.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct RiskHistory {
    /// The entity.
    entity: EntitySummary,
    /// `1h`, `6h`, `24h` or `7d`.
    range: String,
    /// Always `1h`.
    resolution: &'static str,
    /// Hours with a score, oldest first.
    points: Vec<RiskPoint>,
}

/// One hour's highest UEBA score.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "RiskHistoryPoint")]
struct RiskPoint {
    /// Start of the hour, ns.
    ts_ns: i64,
    /// The highest score in it.
    max_score: f64,
}

/// `GET /entities/{uuid}/baseline`: a UEBA baseline (the spec's fields, plus entity_type and
/// value).
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct Baseline {
    /// The entity.
    entity_uuid: Uuid,
    /// `user`, `ip` or `host`.
    entity_type: String,
    /// Its canonical name.
    value: String,
    /// First event, ns.
    first_seen_ns: i64,
    /// Events scored.
    event_count: u64,
    /// Hours of the day (0-23, UTC) it is usually active in.
    hours_active: Vec<u8>,
    /// The source addresses it is most often seen with.
    top_source_ips: Vec<String>,
    /// Its most frequent templates, with their weights.
    top_templates: Vec<TemplateWeight>,
    /// Its events per minute, exponentially averaged.
    volume_ema_minute: f64,
    /// Always false here: a baseline still warming up answers 404 with its progress.
    warming_up: bool,
}

/// A template and its weight in a baseline.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct TemplateWeight {
    /// The template id.
    template_id: String,
    /// Its share of the entity's events.
    weight: f64,
}

/// Events of the entity across sources, newest first, with the entities seen alongside it.
pub async fn timeline(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(uuid): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<EntityTimeline>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let ns = |name: &str| -> Result<Option<i64>, ApiError> {
        match p.get(name) {
            None => Ok(None),
            Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
                ApiError::invalid_parameter(
                    name,
                    format!("`{v}` is not a whole number of nanoseconds"),
                )
            }),
        }
    };
    let start = ns("start_ns")?;
    let end = ns("end_ns")?;
    if let (Some(s), Some(e)) = (start, end)
        && s >= e
    {
        return Err(ApiError::invalid_parameter(
            "end_ns",
            "`end_ns` must be later than `start_ns`",
        ));
    }
    let severity_min = p.severity("severity_min")?;
    let source = p.text("source_type", 256)?;
    let limit = p.int("limit", 100, 1, 10_000)?;
    if let Some(targets) = Fanout::targets(st.fanout.as_deref(), st.cluster.as_deref(), &headers) {
        return fleet_timeline(&st, targets, &uuid, raw.as_deref(), limit).await;
    }
    let store = st.store.clone();
    let retention_days = st.config.storage.retention_days;
    let deadline = crate::routes::events::search_deadline(&st);
    tokio::task::spawn_blocking(move || {
        let (u, kind, name, _, first_seen) = known(&store, &uuid)?;
        let q = EventQuery {
            since_ns: start,
            until_ns: end,
            source,
            min_severity: severity_min,
            entity: Some(EntityFilter {
                alternatives: vec![(kind, name.clone())],
            }),
            page: 1,
            limit,
            retention_days,
            deadline,
            ..EventQuery::default()
        };
        let page = store.search_events(&q)?;
        let (sources, related_entities) = summarise(u, &page.items);
        Ok(Json(EntityTimeline {
            entity: EntitySummary {
                uuid: u,
                kind,
                value: name,
                first_seen_ns: Some(first_seen),
            },
            total: page.total,
            total_exact: page.total_exact,
            timed_out: page.timed_out,
            events: page.items,
            sources,
            related_entities,
            sensors: None,
        }))
    })
    .await
    .map_err(ApiError::internal)?
}

/// The sources of a timeline's events, and the other entities they name, most frequent first.
fn summarise(u: Uuid, events: &[Event]) -> (BTreeMap<String, u64>, Vec<RelatedEntity>) {
    let mut related: BTreeMap<Uuid, (EntityKind, String, u64)> = BTreeMap::new();
    let mut sources: BTreeMap<String, u64> = BTreeMap::new();
    for e in events {
        *sources.entry(e.source.clone()).or_default() += 1;
        for r in &e.entities {
            if r.uuid != u {
                related
                    .entry(r.uuid)
                    .or_insert((r.kind, r.value.clone(), 0))
                    .2 += 1;
            }
        }
    }
    let mut related: Vec<RelatedEntity> = related
        .into_iter()
        .map(|(uuid, (kind, value, events))| RelatedEntity {
            uuid,
            kind,
            value,
            events,
        })
        .collect();
    related.sort_by_key(|r| std::cmp::Reverse(r.events));
    (sources, related)
}

/// A console's timeline: the entity's events on every sensor, merged newest first. A sensor
/// that never saw the entity answers 404 and adds nothing; the answer is 404 only when none
/// saw it and every sensor answered.
async fn fleet_timeline(
    st: &AppState,
    targets: Vec<Target>,
    uuid: &str,
    raw: Option<&str>,
    limit: u32,
) -> Result<Json<EntityTimeline>, ApiError> {
    let u = entity_uuid(uuid)?;
    let fanout = super::console_fanout(st)?;
    let path = format!("/api/v1/entities/{u}/timeline?{}", raw.unwrap_or(""));
    let mut gathered = fanout.ask(targets, Method::GET, &path, None).await;
    let answers = gathered.parsed::<EntityTimeline>(&[404]);
    let coverage = gathered.coverage;
    let Some(first) = answers.first() else {
        let missing: Vec<&str> = coverage.missing.iter().map(|m| m.sensor.as_str()).collect();
        let why = if missing.is_empty() {
            String::new()
        } else {
            format!(" (not answering: {})", missing.join(", "))
        };
        return Err(ApiError::not_found(format!(
            "no entity {uuid} on the fleet's sensors{why}"
        )));
    };
    let entity = EntitySummary {
        uuid: u,
        kind: first.1.entity.kind,
        value: first.1.entity.value.clone(),
        first_seen_ns: answers
            .iter()
            .filter_map(|(_, t)| t.entity.first_seen_ns)
            .min(),
    };
    let (mut total, mut total_exact, mut timed_out) = (0, true, false);
    for (_, t) in &answers {
        total += t.total;
        total_exact &= t.total_exact;
        timed_out |= t.timed_out;
    }
    let events = merge_events(
        answers.into_iter().map(|(s, t)| (s, t.events)),
        0,
        limit as usize,
    );
    let (sources, related_entities) = summarise(u, &events);
    Ok(Json(EntityTimeline {
        entity,
        total,
        total_exact,
        timed_out,
        events,
        sources,
        related_entities,
        sensors: Some(coverage),
    }))
}

/// A `range` value in ns.
pub fn range_ns(params: &Params, default: &str) -> Result<(String, i64), ApiError> {
    let r = params.get("range").unwrap_or(default).to_string();
    let ns = match r.as_str() {
        "1h" => 3_600,
        "6h" => 6 * 3_600,
        "24h" => 24 * 3_600,
        "7d" => 7 * 24 * 3_600,
        other => {
            return Err(ApiError::invalid_parameter(
                "range",
                format!("`{other}` is not one of 1h, 6h, 24h, 7d"),
            ));
        }
    } as i64
        * 1_000_000_000;
    Ok((r, ns))
}

/// Hourly highest UEBA score of the entity over `range` (default 7d).
pub async fn risk_history(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(uuid): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<RiskHistory>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let (range, span) = range_ns(&p, "7d")?;
    if let Some(targets) = Fanout::targets(st.fanout.as_deref(), st.cluster.as_deref(), &headers) {
        return fleet_risk_history(&st, targets, &uuid, range).await;
    }
    // A fleet's detector asked by its console: the entity named by its hash and kind (its
    // store keeps the partitions' hourly risk by hash, and no names; the console fills the
    // name in).
    let by_hash = headers
        .get(ENTITY_HASH_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once('/'))
        .and_then(|(hash, kind)| {
            let kind = EntityKind::from_u8(kind.parse().ok()?)?;
            Some((u64::from_str_radix(hash, 16).ok()?, kind))
        });
    let store = st.store.clone();
    tokio::task::spawn_blocking(move || {
        let (u, kind, name, hash) = match by_hash {
            Some((hash, kind)) if st.fleet.is_some() => {
                (entity_uuid(&uuid)?, kind, String::new(), hash)
            }
            _ => {
                let (u, kind, name, hash, _) = known(&store, &uuid)?;
                (u, kind, name, hash)
            }
        };
        let points = store
            .risk_history(hash, now_ns() - span, i64::MAX)?
            .into_iter()
            .map(|(ts_ns, max)| RiskPoint {
                ts_ns,
                max_score: f64::from(max),
            })
            .collect();
        Ok(Json(RiskHistory {
            entity: EntitySummary {
                uuid: u,
                kind,
                value: name,
                first_seen_ns: None,
            },
            range,
            resolution: "1h",
            points,
        }))
    })
    .await
    .map_err(ApiError::internal)?
}

/// The entity's live UEBA baseline.
pub async fn baseline(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(uuid): Path<String>,
) -> Result<Json<Baseline>, ApiError> {
    if !st.config.ueba.enabled {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ueba_disabled",
            "UEBA is disabled (ueba.enabled = false); baselines are kept but not served",
        ));
    }
    if let Some(targets) = Fanout::targets(st.fanout.as_deref(), st.cluster.as_deref(), &headers) {
        return fleet_baseline(&st, targets, &uuid).await;
    }
    // A fleet's detector asked by its console: the entity named by its hash, as the detector's
    // partitions hold baselines (it has no entity names; the console fills the name in).
    if let Some(fleet) = &st.fleet
        && let Some(hash) = headers
            .get(ENTITY_HASH_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| u64::from_str_radix(v, 16).ok())
    {
        let u = entity_uuid(&uuid)?;
        let view = fleet.baseline(hash).await.ok_or_else(|| {
            ApiError::not_found(format!(
                "no UEBA baseline of {uuid} in partition {} here (never scored, evicted, or \
                 the partition moved)",
                fleet.partition_of(hash)
            ))
        })?;
        return baseline_answer(u, String::new(), view).map(Json);
    }
    let store = st.store.clone();
    let detect = st.detect.clone();
    tokio::task::spawn_blocking(move || {
        let (u, kind, name, hash, _) = known(&store, &uuid)?;
        let view = detect.baseline(hash).ok_or_else(|| {
            ApiError::not_found(format!(
                "{} {name} has no UEBA baseline (never scored, or evicted)",
                kind.name()
            ))
        })?;
        baseline_answer(u, name, view).map(Json)
    })
    .await
    .map_err(ApiError::internal)?
}

/// The answer about baseline `view` of entity `u` named `name`: 404 with its progress while
/// it warms up.
fn baseline_answer(
    u: Uuid,
    name: String,
    view: watchpost_dataplane::BaselineView,
) -> Result<Baseline, ApiError> {
    if view.warming_up {
        let e = ApiError::not_found(format!("the baseline of {name} is still warming up"))
            .with("status", "warming_up")
            .with("entity_uuid", u.to_string())
            .with("event_count", view.event_count)
            .with("warmup_min_events", view.warmup_min_events)
            .with("events_remaining", view.warmup_events_remaining)
            .with("warmup_days", view.warmup_days)
            .with("seconds_remaining", view.warmup_seconds_remaining)
            .with("first_seen_ns", view.first_seen_ns);
        return Err(e);
    }
    Ok(Baseline {
        entity_uuid: u,
        entity_type: view.entity_type.to_string(),
        value: name,
        first_seen_ns: view.first_seen_ns,
        event_count: view.event_count,
        hours_active: view.hours_active,
        top_source_ips: view.top_source_ips,
        top_templates: view
            .top_templates
            .into_iter()
            .map(|(template_id, weight)| TemplateWeight {
                template_id,
                weight,
            })
            .collect(),
        volume_ema_minute: view.volume_ema_minute,
        warming_up: false,
    })
}

/// The detector that owns an entity's partition, as a console finds it: the entity's name
/// from the sensors (the detectors keep hashes, not names), hashed as the records are, its
/// partition's owner from the node list.
struct PartitionOwner {
    uuid: Uuid,
    kind: EntityKind,
    name: String,
    hash: u64,
    detector: Target,
}

async fn partition_owner(
    st: &AppState,
    targets: Vec<Target>,
    uuid: &str,
    what: &str,
) -> Result<PartitionOwner, ApiError> {
    let u = entity_uuid(uuid)?;
    let fanout = super::console_fanout(st)?;
    let fleet = st
        .fleet
        .as_ref()
        .ok_or_else(|| ApiError::internal("no fleet"))?;
    let membership = st
        .cluster
        .as_ref()
        .ok_or_else(|| ApiError::internal("no fleet"))?;
    let path = format!("/api/v1/entities/{u}/timeline?limit=1");
    let mut named = fanout.ask(targets, Method::GET, &path, None).await;
    let Some((_, t)) = named.parsed::<EntityTimeline>(&[404]).into_iter().next() else {
        return Err(ApiError::not_found(format!(
            "no entity {uuid} on the fleet's sensors"
        )));
    };
    let (kind, name) = (t.entity.kind, t.entity.value);
    let hash = hash64_seeded(name.as_bytes(), kind as u64);
    let partition = fleet.partition_of(hash);
    let owner = membership
        .snapshot()
        .nodes
        .into_iter()
        .find(|n| n.record.partitions.contains(&partition))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "partition_unowned",
                format!(
                    "partition {partition}, which holds the {what} of {name}, has no detector \
                     now (one takes it over within cluster.lease_seconds)"
                ),
            )
            .retry_after(5)
        })?;
    Ok(PartitionOwner {
        uuid: u,
        kind,
        name,
        hash,
        detector: Target::new(&owner.record.name, &owner.record.api),
    })
}
/// A console's baseline: the entity's name from the sensors, then its baseline from the
/// detector that owns its partition now (the node list says which).
async fn fleet_baseline(
    st: &AppState,
    targets: Vec<Target>,
    uuid: &str,
) -> Result<Json<Baseline>, ApiError> {
    let o = partition_owner(st, targets, uuid, "baseline").await?;
    let header = Some((ENTITY_HASH_HEADER, format!("{:016x}", o.hash)));
    let path = format!("/api/v1/entities/{}/baseline", o.uuid);
    let mut baseline: Baseline = super::console_fanout(st)?
        .ask_with(vec![o.detector], Method::GET, &path, None, header)
        .await
        .only()?;
    baseline.value = o.name;
    Ok(Json(baseline))
}

/// A console's risk history of an entity: the hours the owner of its partition scored.
/// The owner's store holds the hours since it took the partition over; the hours an earlier
/// owner scored stay in that detector's store (docs/cluster.md).
async fn fleet_risk_history(
    st: &AppState,
    targets: Vec<Target>,
    uuid: &str,
    range: String,
) -> Result<Json<RiskHistory>, ApiError> {
    /// What the owner answers of it.
    #[derive(Deserialize)]
    struct Points {
        points: Vec<RiskPoint>,
    }
    let o = partition_owner(st, targets, uuid, "risk history").await?;
    let header = Some((
        ENTITY_HASH_HEADER,
        format!("{:016x}/{}", o.hash, o.kind as u8),
    ));
    let path = format!("/api/v1/entities/{}/risk-history?range={range}", o.uuid);
    let answer: Points = super::console_fanout(st)?
        .ask_with(vec![o.detector], Method::GET, &path, None, header)
        .await
        .only()?;
    Ok(Json(RiskHistory {
        entity: EntitySummary {
            uuid: o.uuid,
            kind: o.kind,
            value: o.name,
            first_seen_ns: None,
        },
        range,
        resolution: "1h",
        points: answer.points,
    }))
}
