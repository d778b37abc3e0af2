//! The dashboard: `GET /` and its files under `/assets/`, embedded by `watchpost-ui`, each with a
//! strict content-security policy and the usual security headers.
//!
//! The policy allows scripts, styles, images and connections from this origin only (the API and
//! the WebSocket stream are same-origin), forbids inline code, plugins, framing, `<base>` and form
//! posts, and enforces Trusted Types with no policy, so no script can turn a string into HTML: a
//! log line that smuggles markup stays text. `docs/dashboard.md` explains each directive.
//!
//! Files are revalidated, not cached blindly (`Cache-Control: no-cache` with an `ETag`): an
//! upgraded binary serves its new dashboard at once, and an unchanged file costs a 304.

use crate::error::ApiError;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use watchpost_ui::Asset;

/// The dashboard's content-security policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self'; connect-src 'self'; manifest-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'";

/// Browser features the dashboard never uses, denied to it and to anything it could embed.
const PERMISSIONS: &str = "camera=(), microphone=(), geolocation=(), payment=(), usb=(), \
serial=(), bluetooth=(), display-capture=()";

/// `GET /`: the dashboard page.
pub async fn index(headers: HeaderMap) -> Response {
    match watchpost_ui::asset(watchpost_ui::INDEX) {
        Some(a) => serve(a, &headers),
        None => ApiError::not_found("the dashboard is not built into this binary").into_response(),
    }
}

/// `GET /assets/{name}`: one of the dashboard's files.
pub async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match watchpost_ui::asset(&name) {
        Some(a) => serve(a, &headers),
        None => ApiError::not_found(format!("no dashboard asset `{name}`")).into_response(),
    }
}

fn serve(a: &'static Asset, request: &HeaderMap) -> Response {
    let etag = format!("\"{:016x}\"", a.etag());
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag
        });
    let mut res = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(a.content_type),
            )],
            a.body,
        )
            .into_response()
    };
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert("permissions-policy", HeaderValue::from_static(PERMISSIONS));
    // nosniff, DENY framing and no-referrer come from the browser layer, as on every answer.
    res
}
