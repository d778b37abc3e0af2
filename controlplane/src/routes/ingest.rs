//! `POST /ingest`: events as a JSON array of objects or as JSON lines.

use crate::error::ApiError;
use crate::state::AppState;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use watchpost_dataplane::input::IngestError;

/// Accepts a body of events; 202 with how many were accepted.
pub async fn ingest(
    State(st): State<AppState>,
    body: Body,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Some(ingest) = st.ingest.clone() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "input_disabled",
            "inputs.http.enabled is false",
        ));
    };
    let limit = st.config.api_max_body_bytes as usize;
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than api_max_body_bytes ({limit} bytes)"),
        )
        .retry_after(0)
    })?;
    let receipt = tokio::task::spawn_blocking(move || ingest.submit(bytes.to_vec()))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| match e {
            IngestError::Invalid(m) => ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", m),
            IngestError::Busy => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "ingestion is saturated; retry shortly",
            )
            .retry_after(1),
            IngestError::Stopped => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "stopping",
                "the service is shutting down",
            )
            .retry_after(5),
        })?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"accepted": receipt.accepted, "truncated": receipt.truncated})),
    ))
}
