//! `POST /v1/logs`: OTLP/HTTP logs, where collectors and SDKs send them (their endpoint plus
//! `/v1/logs`), in protobuf or JSON, gzip-compressed or not. Each log record becomes one JSON
//! event on the HTTP ingest path, so a 200 means every record is durable (docs/otlp.md).
//!
//! Answers follow OTLP/HTTP rather than the API's error shape, since exporters read them: 200
//! with an `ExportLogsServiceResponse`, and errors with a `google.rpc.Status` in the request's
//! encoding; 503 (busy, or the store cannot take the records) carries `Retry-After`, which
//! exporters honour, and 400 and 413 tell them not to retry. Which outcome gets which answer is
//! the data plane's (`OtlpAnswer`, beside the decoder); this handler reads, budgets and hands on.

use crate::routes::read_body;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::atomic::Ordering;
use watchpost_dataplane::{
    OtlpAnswer, OtlpEncoding, OtlpError, gunzip, otlp_events, otlp_gzip, otlp_messages,
};

/// Memory one decoded OTLP message may take, with the JSON event made of it: an empty record
/// is about 200 bytes decoded and 300 as a JSON object (499,000 empty records in a 1 MB body
/// took 320 MB before requests were budgeted).
const DECODED_BYTES_PER_MESSAGE: u64 = 640;

/// `answer` as an HTTP response, its body in the request's `encoding`.
fn respond(encoding: OtlpEncoding, answer: OtlpAnswer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, answer.body(encoding)).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type()),
    );
    if let Some(s) = answer.retry_after_s {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    resp
}

/// See the module's documentation.
pub async fn logs(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let Some(encoding) = OtlpEncoding::from_content_type(text(header::CONTENT_TYPE).unwrap_or(""))
    else {
        return respond(OtlpEncoding::Json, OtlpAnswer::unsupported_content_type());
    };
    let Some(ingest) = st.ingest.clone() else {
        return respond(encoding, OtlpAnswer::ingest_off());
    };
    let limit = st.config.api_max_body_bytes;
    let raw = match read_body(body, limit).await {
        Ok(raw) => raw,
        Err(e) => {
            return respond(
                encoding,
                OtlpAnswer::unread(e.status.as_u16(), &e.body.message),
            );
        }
    };
    // As for POST /ingest, a slot is taken once the body is in (crate::body bounds it while it
    // arrives): at most api_ingest_max_in_flight requests are decoded and spooled at once.
    let Ok(_permit) = std::sync::Arc::clone(&st.ingest_permits).try_acquire_owned() else {
        return respond(
            encoding,
            OtlpAnswer::unavailable("too many ingest requests at once; retry shortly", 1),
        );
    };
    let gzip = match otlp_gzip(text(header::CONTENT_ENCODING)) {
        Ok(gzip) => gzip,
        Err(refused) => return respond(encoding, refused),
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
        Ok(Err(busy)) => {
            return respond(encoding, OtlpAnswer::unavailable(&busy.body.message, 1));
        }
        Ok(Ok(Err(e))) => return respond(encoding, OtlpAnswer::undecodable(&e)),
        Err(e) => return respond(encoding, OtlpAnswer::internal(&e)),
    };
    if events.records == 0 {
        return respond(encoding, OtlpAnswer::ok());
    }
    // The same bound as `POST /ingest`: the messages' bound above leaves room for five times as
    // many records, each of them an event to store and score.
    let max_events = u64::from(st.config.api_ingest_max_events);
    if events.records > max_events {
        st.bodies
            .counters
            .too_many_events
            .fetch_add(1, Ordering::Relaxed);
        return respond(
            encoding,
            OtlpAnswer::too_many_records(events.records, max_events),
        );
    }
    let records = events.records;
    let submitted = tokio::task::spawn_blocking(move || ingest.submit(events.lines)).await;
    match submitted {
        Ok(Ok(_receipt)) => {
            st.api_metrics
                .otlp_records
                .fetch_add(records, Ordering::Relaxed);
            respond(encoding, OtlpAnswer::ok())
        }
        Ok(Err(e)) => respond(encoding, OtlpAnswer::not_ingested(&e)),
        Err(e) => respond(encoding, OtlpAnswer::internal(&e)),
    }
}
