//! One module per API area; each handler is thin and calls into the store or the counters.

pub mod alerts;
pub mod anomaly;
pub mod attack;
pub mod entities;
pub mod events;
pub mod exceptions;
pub mod ingest;
pub mod ioc;
pub mod llm;
pub mod metrics;
pub mod notifications;
pub mod otlp;
pub mod sigma;
pub mod system;

use crate::error::ApiError;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;

/// Reads a request body of at most `limit` bytes (`api_max_body_bytes`); 413 beyond.
pub async fn read_body(body: Body, limit: u64) -> Result<Bytes, ApiError> {
    let limit = limit as usize;
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than api_max_body_bytes ({limit} bytes)"),
        )
    })
}
