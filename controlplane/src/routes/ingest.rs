//! `POST /ingest`: events as a JSON array of objects or as JSON lines.

use crate::error::ApiError;
use crate::routes::read_body;
use crate::state::AppState;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use watchpost_dataplane::{Error, IngestReceipt};

/// Accepts a body of events; 202 with how many were accepted, once they are durable (in the
/// store's write-ahead log); 503 with `Retry-After` while the store cannot take them.
pub async fn ingest(
    State(st): State<AppState>,
    body: Body,
) -> Result<(StatusCode, Json<IngestReceipt>), ApiError> {
    let Some(ingest) = st.ingest.clone() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "input_disabled",
            "inputs.http.enabled is false",
        ));
    };
    // Taken before the body is read and held until it is durable: at most
    // `api_ingest_max_in_flight` bodies are in memory (docs/guarantees.md, memory budget).
    let Ok(_permit) = std::sync::Arc::clone(&st.ingest_permits).try_acquire_owned() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "{} ingest requests are being served, api_ingest_max_in_flight; retry shortly",
                st.config.api_ingest_max_in_flight
            ),
        )
        .retry_after(1));
    };
    let bytes = read_body(body, st.config.api_max_body_bytes)
        .await
        .map_err(|e| e.retry_after(0))?;
    let receipt = tokio::task::spawn_blocking(move || ingest.submit(bytes.to_vec()))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| match e {
            Error::InvalidBody(m) => ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", m),
            Error::IngestBusy => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "ingestion is saturated; retry shortly",
            )
            .retry_after(1),
            Error::NotDurable(m) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                format!("nothing was accepted: {m}"),
            )
            .retry_after(5),
            Error::Stopped => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "stopping",
                "the service is shutting down",
            )
            .retry_after(5),
            other => ApiError::internal(other),
        })?;
    Ok((StatusCode::ACCEPTED, Json(receipt)))
}
