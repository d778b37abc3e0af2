//! `POST /ingest`: events as a JSON array of objects or as JSON lines.

use crate::answer::Json;
use crate::error::ApiError;
use crate::routes::read_body;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use std::sync::atomic::Ordering;
use watchpost_dataplane::{CheckedBody, Error, IngestReceipt};

/// Memory an event of an ingest body takes besides its bytes while it is framed into the spool
/// record and handed to the workers (its length prefix, its place in the batch).
const SPLIT_BYTES_PER_EVENT: u64 = 48;

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
    // The body is read before an ingest slot is taken: while it arrives it is held to the
    // bodies' deadline, rate and memory budget (crate::body), so a client that stalls holds
    // neither a slot nor more memory than it sent. (Taken first, sixteen stalled bodies held
    // every slot for as long as they stayed connected.)
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    // Held until the events are durable: at most `api_ingest_max_in_flight` bodies are framed
    // and spooled at once.
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
    // Counted before anything is built per event: past the bound the request is refused, and
    // what the events cost to frame for the spool and to split is budgeted first.
    let body = CheckedBody::new(bytes)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", e.to_string()))?;
    let events = body.events();
    let max = u64::from(st.config.api_ingest_max_events);
    if events as u64 > max {
        st.bodies
            .counters
            .too_many_events
            .fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_events",
            format!(
                "the body holds {events} events, more than one request may carry \
                 (api_ingest_max_events, {max}); send smaller batches"
            ),
        )
        .with("limit", max));
    }
    let _framing = st.bodies.reserve(
        body.len() as u64 + events as u64 * SPLIT_BYTES_PER_EVENT,
        "framing the events",
    )?;
    let receipt = tokio::task::spawn_blocking(move || ingest.submit_checked(body))
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| match e {
            Error::InvalidBody(e) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", e.to_string())
            }
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
