//! Watchpost's control plane: the HTTP API under `/api/v1`, on its own tokio runtime.
//!
//! It reads the data plane's atomic counters and the RocksDB store and never touches worker
//! state, so no request can slow ingestion beyond the CPU it uses. Every error has one JSON shape
//! ([`error::ApiError`]); routes are listed in one place, [`openapi::ROUTES`], which both
//! [`router`] and the OpenAPI document are built from.
#![deny(missing_docs)]

pub mod browser;
pub mod dashboard;
pub mod error;
pub mod host;
pub mod llm;
pub mod metrics;
pub mod openapi;
pub mod query;
pub mod ratelimit;
pub mod routes;
pub mod state;
pub mod ws;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::get;
use error::ApiError;
pub use state::{AppState, RateSampler};
use std::future::Future;

/// Every route of the API ([`openapi::ROUTES`]), each in its rate-limit family (see
/// [`ratelimit`]), plus `/metrics` and the dashboard ([`dashboard`]) at the root; only for the
/// `Host` names of the listener at `dashboard_bind_address:dashboard_port` ([`host`]).
pub fn router(state: AppState) -> Router {
    let c = &state.config;
    let hosts = host_guard(&state, &c.dashboard_bind_address, c.dashboard_port);
    use axum::middleware::from_fn_with_state;
    use openapi::Family;
    let mut api = Router::new();
    for r in openapi::ROUTES {
        let mut handler = (r.handler)();
        if r.query.is_empty() {
            // Routes with parameters refuse unknown ones in their handler; these take none.
            handler = handler.route_layer(axum::middleware::from_fn(no_query_parameters));
        }
        let handler = match r.family {
            Family::None => handler,
            Family::List => {
                handler.route_layer(from_fn_with_state(state.limits.clone(), ratelimit::list))
            }
            Family::Detail => {
                handler.route_layer(from_fn_with_state(state.limits.clone(), ratelimit::detail))
            }
            Family::Coverage => handler.route_layer(from_fn_with_state(
                state.limits.clone(),
                ratelimit::coverage,
            )),
        };
        // Routes of one path with other methods merge into one method router.
        api = api.route(r.path, handler);
    }
    let api = api
        .route_layer(from_fn_with_state(
            state.api_metrics.clone(),
            metrics::track,
        ))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    Router::new()
        .nest("/api/v1", api)
        .route("/metrics", get(routes::metrics::scrape))
        .route("/", get(dashboard::index))
        .route("/assets/{name}", get(dashboard::asset))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.config.clone(),
            browser::layer,
        ))
        // Bodies are bounded by the ingest handler itself (api_max_body_bytes) with our error shape.
        .layer(DefaultBodyLimit::disable())
        // Outermost: a request for another Host reaches nothing, not even CORS preflights.
        .layer(axum::middleware::from_fn_with_state(hosts, host::layer))
        .with_state(state)
}

/// The `Host` check of the listener at `bind_address:port` (a configured port: validation keeps
/// it in 1-65535).
fn host_guard(state: &AppState, bind_address: &str, port: u32) -> host::HostGuard {
    let allowed = watchpost_proto::AllowedHosts::for_listener(
        bind_address,
        u16::try_from(port).unwrap_or(0),
        &state.config.api_allowed_hosts,
    );
    host::HostGuard::new(allowed, state.api_metrics.clone())
}

/// Refuses any query parameter with the same 422 as a handler's own parsing.
async fn no_query_parameters(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match query::Params::parse(req.uri().query(), &[]) {
        Ok(_) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}

/// The probe listener's routes (`health_bind_address:health_port`): health and metrics only, no
/// rate limits (a probe must never be refused for asking often), no CORS (no browser calls it),
/// and the `Host` check of its own address and port ([`host`]).
pub fn probe_router(state: AppState) -> Router {
    let c = &state.config;
    let hosts = host_guard(&state, &c.health_bind_address, c.health_port);
    Router::new()
        .route("/health", get(routes::system::health))
        .route("/api/v1/health", get(routes::system::health))
        .route("/metrics", get(routes::metrics::scrape))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(hosts, host::layer))
        .with_state(state)
}

/// Serves the API on `listener`, and the probes on `probes` when given, until `shutdown`
/// completes; then both finish their in-flight requests.
pub async fn serve(
    listener: tokio::net::TcpListener,
    probes: Option<tokio::net::TcpListener>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    state.rates.spawn(state.stats.clone());
    state.ws.spawn();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop_tx = std::sync::Arc::new(stop_tx);
    let on_signal = stop_tx.clone();
    tokio::spawn(async move {
        shutdown.await;
        let _ = on_signal.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let probe_server = probes.map(|l| {
        let app = probe_router(state.clone());
        let stop = stopped(stop_rx.clone());
        tokio::spawn(async move { axum::serve(l, app).with_graceful_shutdown(stop).await })
    });
    // The peer address identifies the client for rate limits.
    let served = axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(stopped(stop_rx))
    .await;
    // However the API server ended, the probes end with it; its error is the one reported.
    let _ = stop_tx.send(true);
    let probed = match probe_server {
        Some(p) => p.await.map_err(std::io::Error::other).and_then(|r| r),
        None => Ok(()),
    };
    served.and(probed)
}
