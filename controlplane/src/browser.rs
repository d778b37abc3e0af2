//! What browsers are told: CORS exactly per `api_allowed_origins`, and security headers on every
//! response.
//!
//! CORS: an `Origin` in `api_allowed_origins` gets `Access-Control-Allow-Origin` with that origin
//! (never `*`) and `Vary: Origin`; its preflight (`OPTIONS` with `Access-Control-Request-Method`)
//! is answered 204 here. Any other origin gets no CORS header, so the browser keeps the answer
//! from the page, and its preflight is refused 403 `origin_not_allowed`. Empty (the default)
//! means same origin only: the dashboard, served by this listener, needs no CORS at all.
//!
//! Cross-origin writes: a page on another site can send a "simple" POST (a `text/plain` body needs
//! no preflight) that the browser delivers with the analyst's network position, and CORS only
//! keeps the answer from that page, not the write from happening. So a request with an unsafe
//! method (anything but GET, HEAD, OPTIONS) whose `Origin` is neither listed nor this listener's
//! own is refused 403 `origin_not_allowed` before any handler runs. Requests without `Origin`
//! (curl, log shippers, scripts) are not browsers' cross-site requests and pass.
//!
//! API answers are JSON, so their policy forbids everything a document could load or frame.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use watchpost_proto::Config;

/// Methods the API answers, for preflights.
const METHODS: &str = "GET, POST, PATCH, DELETE, OPTIONS";
/// Request headers a cross-origin page may send.
const HEADERS: &str = "content-type";
/// How long a browser may cache a preflight answer, seconds.
const PREFLIGHT_MAX_AGE: &str = "600";

/// An origin as compared: trimmed, lower case, without a trailing slash (CORS here and the
/// WebSocket Origin check alike).
pub fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

fn allowed(config: &Config, origin: &str) -> bool {
    let o = normalize_origin(origin);
    config
        .api_allowed_origins
        .iter()
        .any(|a| normalize_origin(a) == o)
}

/// The headers every answer carries, refusals before routing included.
pub(crate) fn security_headers(h: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, k: header::HeaderName, v: &'static str| {
        h.entry(k).or_insert(HeaderValue::from_static(v));
    };
    set(h, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(h, header::X_FRAME_OPTIONS, "DENY");
    set(h, header::REFERRER_POLICY, "no-referrer");
    set(
        h,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    );
    set(h, header::CACHE_CONTROL, "no-store");
}

/// The probe listener's layer: the same security headers on every answer (health, metrics,
/// refusals), without CORS (probes are for scrapers and orchestrators, never pages).
pub async fn headers_only(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    security_headers(response.headers_mut());
    response
}

/// `origin` is this listener's own: its host and port are the request's `Host` (a browser sends
/// both for a same-origin request; the scheme is the reverse proxy's business).
fn same_origin(origin: &str, headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let o = normalize_origin(origin);
    let authority = o
        .strip_prefix("http://")
        .or_else(|| o.strip_prefix("https://"));
    authority == Some(host.trim().to_ascii_lowercase().as_str())
}

/// The layer over every route.
pub async fn layer(State(config): State<Arc<Config>>, req: Request, next: Next) -> Response {
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_string);
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let cors = origin
        .as_deref()
        .filter(|o| allowed(&config, o))
        .map(str::to_string);
    let unsafe_method = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let cross_site_write = unsafe_method
        && cors.is_none()
        && origin
            .as_deref()
            .is_some_and(|o| !same_origin(o, req.headers()));
    let mut res = if cross_site_write {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            format!(
                "a {} from origin `{}`, which is neither this listener nor in api_allowed_origins",
                req.method(),
                origin.as_deref().unwrap_or("")
            ),
        )
        .into_response()
    } else {
        match (preflight, &cors) {
            (true, Some(_)) => {
                let mut r = StatusCode::NO_CONTENT.into_response();
                let h = r.headers_mut();
                h.insert(
                    header::ACCESS_CONTROL_ALLOW_METHODS,
                    HeaderValue::from_static(METHODS),
                );
                h.insert(
                    header::ACCESS_CONTROL_ALLOW_HEADERS,
                    HeaderValue::from_static(HEADERS),
                );
                h.insert(
                    header::ACCESS_CONTROL_MAX_AGE,
                    HeaderValue::from_static(PREFLIGHT_MAX_AGE),
                );
                r
            }
            (true, None) => ApiError::new(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                format!(
                    "Origin `{}` is not in api_allowed_origins",
                    origin.as_deref().unwrap_or("")
                ),
            )
            .into_response(),
            (false, _) => next.run(req).await,
        }
    };
    let h = res.headers_mut();
    if let Some(o) = cors
        && let Ok(v) = HeaderValue::from_str(&o)
    {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("retry-after"),
        );
    }
    if origin.is_some() {
        h.append(header::VARY, HeaderValue::from_static("origin"));
    }
    security_headers(h);
    res
}
