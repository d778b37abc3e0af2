//! `POST /v1/logs`: OTLP/HTTP logs, where collectors and SDKs send them (their endpoint plus
//! `/v1/logs`), in protobuf or JSON, gzip-compressed or not. Each log record becomes one JSON
//! event on the HTTP ingest path, so a 200 means every record is durable (docs/otlp.md).
//!
//! Answers follow OTLP/HTTP rather than the API's error shape, since exporters read them: 200
//! with an `ExportLogsServiceResponse`, and errors with a `google.rpc.Status` in the request's
//! encoding; 503 (busy, or the store cannot take the records) carries `Retry-After`, which
//! exporters honour, and 400 and 413 tell them not to retry.

use crate::routes::read_body;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::atomic::Ordering;
use watchpost_dataplane::{
    Error, OtlpEncoding, OtlpError, gunzip, otlp_events, otlp_messages, status_body, success_body,
};

/// Memory one decoded OTLP message may take, with the JSON event made of it: an empty record
/// is about 200 bytes decoded and 300 as a JSON object (499,000 empty records in a 1 MB body
/// took 320 MB before requests were budgeted).
const DECODED_BYTES_PER_MESSAGE: u64 = 640;

/// google.rpc.Code values used here.
const INVALID_ARGUMENT: i32 = 3;
const UNIMPLEMENTED: i32 = 12;
const RESOURCE_EXHAUSTED: i32 = 8;
const UNAVAILABLE: i32 = 14;

fn answer(status: StatusCode, encoding: OtlpEncoding, body: Vec<u8>) -> Response {
    let mut resp = (status, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(match encoding {
            OtlpEncoding::Protobuf => "application/x-protobuf",
            OtlpEncoding::Json => "application/json",
        }),
    );
    resp
}

fn refuse(status: StatusCode, encoding: OtlpEncoding, code: i32, message: &str) -> Response {
    answer(status, encoding, status_body(code, message, encoding))
}

fn unavailable(encoding: OtlpEncoding, message: &str, retry_after_s: u32) -> Response {
    let mut resp = refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        encoding,
        UNAVAILABLE,
        message,
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    resp
}

/// See the module's documentation.
pub async fn logs(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let encoding = match content_type.as_str() {
        "application/x-protobuf" | "application/protobuf" => OtlpEncoding::Protobuf,
        "application/json" => OtlpEncoding::Json,
        _ => {
            return refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                OtlpEncoding::Json,
                INVALID_ARGUMENT,
                "Content-Type must be application/x-protobuf or application/json",
            );
        }
    };
    let Some(ingest) = st.ingest.clone() else {
        // Permanent until the configuration changes: an exporter must not retry it.
        return refuse(
            StatusCode::NOT_FOUND,
            encoding,
            UNIMPLEMENTED,
            "HTTP ingest is off (inputs.http.enabled = false)",
        );
    };
    let limit = st.config.api_max_body_bytes;
    let raw = match read_body(body, limit).await {
        Ok(raw) => raw,
        // Too large (413, not to be retried as it is) or too slow (408, which exporters retry).
        Err(e) => {
            let code = if e.status == StatusCode::PAYLOAD_TOO_LARGE {
                RESOURCE_EXHAUSTED
            } else {
                UNAVAILABLE
            };
            return refuse(e.status, encoding, code, &e.body.message);
        }
    };
    // As for POST /ingest, a slot is taken once the body is in (crate::body bounds it while it
    // arrives): at most api_ingest_max_in_flight requests are decoded and spooled at once.
    let Ok(_permit) = std::sync::Arc::clone(&st.ingest_permits).try_acquire_owned() else {
        return unavailable(
            encoding,
            "too many ingest requests at once; retry shortly",
            1,
        );
    };
    let gzip = match headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("identity") | Some("") => false,
        Some("gzip") => true,
        Some(other) => {
            return refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                encoding,
                INVALID_ARGUMENT,
                &format!("Content-Encoding `{other}` is not supported (gzip or none)"),
            );
        }
    };
    // Decoded, a message costs far more than its bytes on the wire (an empty record is 2 bytes
    // of protobuf): the request is refused past five messages per event it may carry, and what
    // decoding it builds is taken from the bodies' memory budget first.
    let max_messages = 5 * st.config.api_ingest_max_events as usize;
    let bodies = st.bodies.clone();
    let decoded = tokio::task::spawn_blocking(move || {
        let body = if gzip {
            match gunzip(&raw, limit) {
                Ok(b) => b,
                Err(e) => return Ok(Err(e)),
            }
        } else {
            raw.to_vec()
        };
        let messages = otlp_messages(&body, encoding);
        if messages > max_messages {
            return Ok(Err(OtlpError::TooMany(max_messages)));
        }
        let cost = body.len() as u64 * 2 + messages as u64 * DECODED_BYTES_PER_MESSAGE;
        let held = match bodies.reserve(cost, "decoding the request") {
            Ok(held) => held,
            Err(busy) => return Err(busy),
        };
        Ok(otlp_events(&body, encoding).map(|events| (events, held)))
    })
    .await;
    let (events, _held) = match decoded {
        Ok(Ok(Ok(events))) => events,
        Ok(Err(busy)) => return unavailable(encoding, &busy.body.message, 1),
        Ok(Ok(Err(e @ (OtlpError::TooLarge(_) | OtlpError::TooMany(_))))) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                encoding,
                RESOURCE_EXHAUSTED,
                &e.to_string(),
            );
        }
        Ok(Ok(Err(e))) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                encoding,
                INVALID_ARGUMENT,
                &e.to_string(),
            );
        }
        Err(e) => {
            tracing::error!("OTLP decoding: {e}");
            return unavailable(encoding, "internal error; see the service log", 5);
        }
    };
    if events.records == 0 {
        return answer(StatusCode::OK, encoding, success_body(encoding));
    }
    // The same bound as `POST /ingest`: the messages' bound above leaves room for five times as
    // many records, each of them an event to store and score.
    let max_events = u64::from(st.config.api_ingest_max_events);
    if events.records > max_events {
        st.bodies
            .counters
            .too_many_events
            .fetch_add(1, Ordering::Relaxed);
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            encoding,
            RESOURCE_EXHAUSTED,
            &format!(
                "the request carries {} log records, more than one request may carry \
                 (api_ingest_max_events, {max_events}); send smaller batches",
                events.records
            ),
        );
    }
    let records = events.records;
    let submitted = tokio::task::spawn_blocking(move || ingest.submit(events.lines)).await;
    match submitted {
        Ok(Ok(_receipt)) => {
            st.api_metrics
                .otlp_records
                .fetch_add(records, Ordering::Relaxed);
            answer(StatusCode::OK, encoding, success_body(encoding))
        }
        Ok(Err(Error::IngestBusy)) => {
            unavailable(encoding, "ingestion is saturated; retry shortly", 1)
        }
        Ok(Err(Error::NotDurable(m))) => {
            unavailable(encoding, &format!("nothing was accepted: {m}"), 5)
        }
        Ok(Err(Error::Stopped)) => unavailable(encoding, "the service is shutting down", 5),
        Ok(Err(e)) => {
            tracing::error!("OTLP ingest: {e}");
            unavailable(encoding, "internal error; see the service log", 5)
        }
        Err(e) => {
            tracing::error!("OTLP ingest: {e}");
            unavailable(encoding, "internal error; see the service log", 5)
        }
    }
}
