//! `GET /ioc`: what the indicator feed holds (per file: format, indicators added, duplicates,
//! skipped entries, errors with their line), and `POST /ioc/reload` to read the folder now
//! rather than at the next poll.

use crate::answer::Json;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use std::sync::Arc;
use watchpost_dataplane::IocStatus;

/// `GET /ioc`.
pub async fn status(State(st): State<AppState>) -> Result<Json<IocStatus>, ApiError> {
    Ok(Json(st.iocs.status()))
}

/// `POST /ioc/reload`: reads the folder now (on a blocking thread: a million indicators take a
/// second) and answers with the new status.
pub async fn reload(State(st): State<AppState>) -> Result<Json<IocStatus>, ApiError> {
    let f = Arc::clone(&st.iocs);
    let status = tokio::task::spawn_blocking(move || {
        f.reload();
        f.status()
    })
    .await
    .map_err(ApiError::internal)?;
    Ok(Json(status))
}
