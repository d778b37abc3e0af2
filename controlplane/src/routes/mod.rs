//! One module per API area; each handler is thin and calls into the store or the counters.

pub mod alerts;
pub mod anomaly;
pub mod attack;
pub mod cluster;
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

/// Reads a request body of at most `limit` bytes (`api_max_body_bytes`); 413 beyond, and 408
/// when it did not arrive in time or fast enough (`crate::body`, which has refused a body
/// declared longer than its route takes before this reads a byte).
pub async fn read_body(body: Body, limit: u64) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, usize::try_from(limit).unwrap_or(usize::MAX))
        .await
        .map_err(|e| {
            let inner = e.into_inner();
            let fault =
                std::iter::successors(Some(&*inner as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                })
                .find_map(|e| e.downcast_ref::<crate::body::BodyFault>());
            match fault {
                Some(f) => f.answer(),
                None => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("the body is larger than api_max_body_bytes ({limit} bytes)"),
                ),
            }
        })
}

/// A console's fan-out to the sensors (`crate::fanout`); a handler asks for it only once
/// `Fanout::targets` said this node fans out, so its absence is the code's fault.
pub(crate) fn console_fanout(
    st: &crate::state::AppState,
) -> Result<&crate::fanout::Fanout, ApiError> {
    st.fanout
        .as_deref()
        .ok_or_else(|| ApiError::internal("a search fanned out on a node without a fan-out"))
}
