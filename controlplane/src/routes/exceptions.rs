//! `/exceptions`: the operators' exceptions (docs/exceptions.md). Each change is saved before
//! it applies and reaches the detection workers at their next batch.

use crate::answer::Json;
use crate::error::ApiError;
use crate::query::{DEFAULT_LIMIT, MAX_LIMIT, Params, page_of};
use crate::routes::read_body;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use std::sync::Arc;
use watchpost_dataplane::ExceptionError;
use watchpost_proto::{Exception, ExceptionDraft, ExceptionPatch, ListResponse, Uuid, now_ns};

fn exception_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| {
        ApiError::invalid_parameter(
            "exception_id",
            format!("`{text}` is not an exception id (a UUID)"),
        )
    })
}

impl From<ExceptionError> for ApiError {
    fn from(e: ExceptionError) -> ApiError {
        match e {
            ExceptionError::Invalid(p) => ApiError::invalid_body(&p.field, p.message),
            ExceptionError::Full => {
                ApiError::new(StatusCode::CONFLICT, "too_many_exceptions", e.to_string())
            }
            ExceptionError::Store(s) => ApiError::internal(s),
        }
    }
}

/// `GET /exceptions`: newest first, with hit counts; `detector` (exact) and `enabled` filter.
pub async fn list(
    State(st): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<ListResponse<Exception>>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let enabled = p.boolean("enabled")?;
    let detector = p.text("detector", 1024)?;
    let page = p.int("page", 1, 1, 1_000_000)?;
    let limit = p.int("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)?;
    let mut items: Vec<Exception> = Arc::clone(&st.exceptions)
        .list()
        .into_iter()
        .filter(|e| enabled.is_none_or(|on| e.enabled == on))
        .filter(|e| {
            detector
                .as_deref()
                .is_none_or(|d| e.detector.as_deref() == Some(d))
        })
        .collect();
    items.reverse();
    Ok(Json(page_of(items, page, limit)))
}

/// `POST /exceptions`: 201 with the exception, applied from the workers' next batch.
pub async fn create(
    State(st): State<AppState>,
    body: Body,
) -> Result<(StatusCode, Json<Exception>), ApiError> {
    crate::fanout::content_set_here(&st.config.cluster)?;
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let draft: ExceptionDraft = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_body("body", format!("the body is not an exception: {e}"))
    })?;
    let book = Arc::clone(&st.exceptions);
    let e = tokio::task::spawn_blocking(move || book.create(draft, now_ns()))
        .await
        .map_err(ApiError::internal)??;
    Ok((StatusCode::CREATED, Json(e)))
}

/// `GET /exceptions/{exception_id}`.
pub async fn get(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Exception>, ApiError> {
    let uuid = exception_id(&id)?;
    Arc::clone(&st.exceptions)
        .get(uuid)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no exception {id}")))
}

/// `PATCH /exceptions/{exception_id}`: the fields given replace the stored ones.
pub async fn patch(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Body,
) -> Result<Json<Exception>, ApiError> {
    crate::fanout::content_set_here(&st.config.cluster)?;
    let uuid = exception_id(&id)?;
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let patch: ExceptionPatch = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_body("body", format!("the body is not an exception change: {e}"))
    })?;
    let book = Arc::clone(&st.exceptions);
    tokio::task::spawn_blocking(move || book.update(uuid, patch, now_ns()))
        .await
        .map_err(ApiError::internal)??
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no exception {id}")))
}

/// `DELETE /exceptions/{exception_id}`: 204; what it suppressed stays suppressed.
pub async fn delete(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    crate::fanout::content_set_here(&st.config.cluster)?;
    let uuid = exception_id(&id)?;
    let book = Arc::clone(&st.exceptions);
    if tokio::task::spawn_blocking(move || book.delete(uuid))
        .await
        .map_err(ApiError::internal)??
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no exception {id}")))
    }
}
