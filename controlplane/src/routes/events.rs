//! `GET /events`: paginated event search served from the store.

use crate::answer::Json;
use crate::error::ApiError;
use crate::fanout::{Fanout, FirstPages, merge_events};
use crate::query::{DEFAULT_LIMIT, MAX_LIMIT, Params};
use crate::state::AppState;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use watchpost_proto::{EntityKind, Event, ListMeta, ListResponse, Uuid, canonicalize_into};
use watchpost_store::{EntityFilter, EventQuery};

/// Newest events first, filtered; on a fleet's console, from every sensor.
pub async fn list(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListResponse<Event>>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let mut q = EventQuery {
        since_ns: p.time("since")?,
        until_ns: p.time("until")?,
        source: p.text("source", 256)?,
        min_severity: p.severity("severity")?,
        template_id: template_id(&p)?,
        entity: None,
        text: p.text("q", 256)?,
        page: p.int("page", 1, 1, 1_000_000)?,
        limit: p.int("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?,
        retention_days: st.config.storage.retention_days,
        deadline: search_deadline(&st),
    };
    if let (Some(s), Some(u)) = (q.since_ns, q.until_ns)
        && s >= u
    {
        return Err(ApiError::invalid_parameter(
            "until",
            "`until` must be later than `since`",
        ));
    }
    let entity = p.text("entity", 256)?;
    let (page, limit) = (q.page, q.limit);
    if let Some(targets) = Fanout::targets(st.fanout.as_deref(), st.cluster.as_deref(), &headers) {
        return fleet_events(&st, targets, raw.as_deref(), page, limit).await;
    }
    let store = st.store.clone();
    let result = tokio::task::spawn_blocking(move || {
        if let Some(e) = entity {
            match entity_filter(&store, &e)? {
                Some(f) => q.entity = Some(f),
                // A UUID the store has never seen, or a value no kind accepts: nothing matches.
                None => return Ok(None),
            }
        }
        store.search_events(&q).map(Some).map_err(ApiError::from)
    })
    .await
    .map_err(ApiError::internal)??;
    let meta = match &result {
        None => ListMeta::exact(0, page, limit),
        Some(r) => ListMeta {
            total_exact: r.total_exact,
            timed_out: r.timed_out,
            ..ListMeta::exact(r.total, page, limit)
        },
    };
    let items = result.map_or_else(Vec::new, |r| r.items);
    Ok(Json(ListResponse { items, meta }))
}

/// A console's `/events`: each sensor's first `page * limit` matches, merged newest first.
async fn fleet_events(
    st: &AppState,
    targets: Vec<crate::fanout::Target>,
    raw: Option<&str>,
    page: u32,
    limit: u32,
) -> Result<Json<ListResponse<Event>>, ApiError> {
    let fanout = super::console_fanout(st)?;
    let FirstPages {
        answers,
        coverage,
        first,
    } = fanout
        .first_pages::<Event>(targets, "/events", raw, page, limit)
        .await?;
    let mut meta = ListMeta::exact(0, page, limit);
    for (_, a) in &answers {
        meta.total += a.meta.total;
        meta.total_exact &= a.meta.total_exact;
        meta.timed_out |= a.meta.timed_out;
    }
    let skip = (first - u64::from(limit)) as usize;
    let items = merge_events(
        answers.into_iter().map(|(s, a)| (s, a.items)),
        skip,
        limit as usize,
    );
    meta.sensors = Some(coverage);
    Ok(Json(ListResponse { items, meta }))
}

/// When an event search started now must answer (`api_search_timeout_ms`; 0 = never).
pub fn search_deadline(st: &AppState) -> Option<std::time::Instant> {
    let ms = st.config.api_search_timeout_ms;
    (ms > 0).then(|| std::time::Instant::now() + std::time::Duration::from_millis(ms))
}

fn template_id(p: &Params) -> Result<Option<u64>, ApiError> {
    let Some(v) = p.get("template_id") else {
        return Ok(None);
    };
    match u64::from_str_radix(v, 16) {
        Ok(id) if !v.is_empty() && v.len() <= 16 => Ok(Some(id)),
        _ => Err(ApiError::invalid_parameter(
            "template_id",
            format!("`{v}` is not a template id (16 hex digits)"),
        )),
    }
}

/// An entity given as a UUID (looked up in the store) or as a value (every kind it can be).
pub(crate) fn entity_filter(
    store: &watchpost_store::Store,
    v: &str,
) -> Result<Option<EntityFilter>, watchpost_store::StoreError> {
    if let Ok(uuid) = Uuid::parse_str(v) {
        let Some((kind, _, name)) = store.entity(uuid.as_bytes())? else {
            return Ok(None);
        };
        return Ok(EntityKind::from_u8(kind).map(|kind| EntityFilter {
            alternatives: vec![(kind, name)],
        }));
    }
    let mut alternatives = Vec::new();
    let mut buf = String::new();
    for kind in EntityKind::ALL {
        if canonicalize_into(kind, v, &mut buf) {
            alternatives.push((kind, buf.clone()));
        }
    }
    // An address is only ever an IP entity.
    if alternatives.iter().any(|(k, _)| *k == EntityKind::Ip) {
        alternatives.retain(|(k, _)| *k == EntityKind::Ip);
    }
    Ok((!alternatives.is_empty()).then_some(EntityFilter { alternatives }))
}
