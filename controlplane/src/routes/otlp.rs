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
    Error, OtlpEncoding, OtlpError, gunzip, otlp_events, status_body, success_body,
};

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
    // The same bound as POST /ingest: at most api_ingest_max_in_flight bodies in memory.
    let Ok(_permit) = std::sync::Arc::clone(&st.ingest_permits).try_acquire_owned() else {
        return unavailable(
            encoding,
            "too many ingest requests at once; retry shortly",
            1,
        );
    };
    let limit = st.config.api_max_body_bytes;
    let Ok(raw) = read_body(body, limit).await else {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            encoding,
            RESOURCE_EXHAUSTED,
            &format!("the body is larger than api_max_body_bytes ({limit} bytes)"),
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
    let decoded = tokio::task::spawn_blocking(move || {
        let body = if gzip {
            gunzip(&raw, limit)?
        } else {
            raw.to_vec()
        };
        otlp_events(&body, encoding)
    })
    .await;
    let events = match decoded {
        Ok(Ok(events)) => events,
        Ok(Err(e @ (OtlpError::TooLarge(_) | OtlpError::TooMany(_)))) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                encoding,
                RESOURCE_EXHAUSTED,
                &e.to_string(),
            );
        }
        Ok(Err(e)) => {
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
