//! `GET /ioc`: what the indicator feed holds (per file: format, indicators added, duplicates,
//! skipped entries, errors with their line), and `POST /ioc/reload` to read the folder now
//! rather than at the next poll.

use crate::error::ApiError;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use std::sync::Arc;
use watchpost_dataplane::{IocFeed, IocStatus};

fn feed(st: &AppState) -> Result<Arc<IocFeed>, ApiError> {
    st.iocs.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the indicator feed is not loaded (no running pipeline)",
        )
        .retry_after(5)
    })
}

/// `GET /ioc`.
pub async fn status(State(st): State<AppState>) -> Result<Json<IocStatus>, ApiError> {
    Ok(Json(feed(&st)?.status()))
}

/// `POST /ioc/reload`: reads the folder now (on a blocking thread: a million indicators take a
/// second) and answers with the new status.
pub async fn reload(State(st): State<AppState>) -> Result<Json<IocStatus>, ApiError> {
    let f = feed(&st)?;
    let status = tokio::task::spawn_blocking(move || {
        f.reload();
        f.status()
    })
    .await
    .map_err(ApiError::internal)?;
    Ok(Json(status))
}
