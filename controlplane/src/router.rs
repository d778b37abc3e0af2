//! The API's routers: the route table of `/api/v1` ([`ROUTES`], the one list of the API, which
//! the OpenAPI document is built from), the main listener's router and the probe listener's.

use crate::error::ApiError;
use crate::openapi::{self, Route};
use crate::query::Param;
use crate::ratelimit::Family;
use crate::state::AppState;
use crate::{browser, dashboard, host, metrics, query, ratelimit, routes};
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{delete, get, patch, post};
use axum::{Json, Router};
use serde_json::Value;
use std::sync::OnceLock;

/// Every route of the API (the route table), each in its rate-limit family, plus `/metrics` and
/// the dashboard at the root; only for the `Host` names of the listener at
/// `dashboard_bind_address:dashboard_port`.
pub fn router(state: AppState) -> Router {
    let c = &state.config;
    let hosts = host_guard(&state, &c.dashboard_bind_address, c.dashboard_port);
    use axum::middleware::from_fn_with_state;
    crate::answer::learn_time_names(|| openapi::nanosecond_fields(&openapi::schemas()));
    let mut api = Router::new();
    for r in ROUTES {
        // Every route's query is checked against what this table declares for it, before its
        // handler runs; the handler reads the values and keeps no list of its own.
        let handler = (r.handler)().route_layer(from_fn_with_state(
            query::DeclaredQuery(r.query),
            declared_query_parameters,
        ));
        let handler = match r.family {
            None => handler,
            Some(Family::List) => {
                handler.route_layer(from_fn_with_state(state.limits.clone(), ratelimit::list))
            }
            Some(Family::Detail) => {
                handler.route_layer(from_fn_with_state(state.limits.clone(), ratelimit::detail))
            }
            Some(Family::Coverage) => handler.route_layer(from_fn_with_state(
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
    // OTLP/HTTP's own path (an exporter's endpoint plus /v1/logs), counted as API requests.
    let otlp = Router::new()
        .route("/v1/logs", post(routes::otlp::logs))
        .route_layer(from_fn_with_state(
            state.api_metrics.clone(),
            metrics::track,
        ));
    Router::new()
        .nest("/api/v1", api)
        .merge(otlp)
        .route("/metrics", get(routes::metrics::scrape))
        .route("/", get(dashboard::index))
        .route("/assets/{name}", get(dashboard::asset))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.config.clone(),
            browser::layer,
        ))
        // Bodies are bounded by crate::body (per route, in time and in memory) and read by the
        // handlers with the error shape.
        .layer(axum::middleware::from_fn_with_state(
            state.bodies.clone(),
            crate::body::layer,
        ))
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
/// Refuses a query parameter the route table does not declare for the route (422), and hands
/// the declared list on to the handler (`DeclaredQuery` in the request's extensions).
async fn declared_query_parameters(
    axum::extract::State(declared): axum::extract::State<query::DeclaredQuery>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match query::Params::check(req.uri().query(), declared) {
        Ok(_) => {
            req.extensions_mut().insert(declared);
            next.run(req).await
        }
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
/// and the `Host` check of its own address and port.
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
        .layer(axum::middleware::from_fn(browser::headers_only))
        .with_state(state)
}

const fn p(
    name: &'static str,
    kind: &'static str,
    description: &'static str,
    example: &'static str,
) -> Param {
    Param {
        name,
        kind,
        description,
        example,
    }
}

const PAGE: Param = p("page", "integer", "1-based page (at most 1,000,000)", "1");
const LIMIT: Param = p(
    "limit",
    "integer",
    "Items per page: default 50, at most 1,000",
    "10",
);
const SINCE: Param = p(
    "since",
    "string",
    "ISO-8601 (RFC 3339) lower bound, inclusive; 422 when malformed",
    "2026-01-01T00:00:00Z",
);
const UNTIL: Param = p(
    "until",
    "string",
    "ISO-8601 upper bound, exclusive; 422 when malformed or not after `since`",
    "2026-01-02T00:00:00Z",
);
const SEVERITY: Param = p(
    "severity",
    "string",
    "Least severity: 0-5 or a name (`info`, `low`, `medium`, `high`, `critical`)",
    "2",
);
const ENTITY: Param = p(
    "entity",
    "string",
    "An entity UUID, or a value (IP address, user, host or domain name)",
    "alice",
);
const DETECTOR: Param = p(
    "detector",
    "string",
    "Exact detector: a Sigma rule id, `ensemble`, `ueba:user`, `ioc:<file>`, `killchain`...",
    "ensemble",
);
const DEDUP_KEY: Param = p(
    "dedup_key",
    "string",
    "Exact dedup key, or a prefix ending in `*` (`sigma:<rule id>:*`: a rule's alerts and its group alerts)",
    "ml:*",
);
const TRIAGE_STATUS: Param = p(
    "status",
    "string",
    "Triage status, one or several comma-separated: `open`, `acknowledged`, `closed`",
    "open,acknowledged",
);
const ASSIGNEE: Param = p("assignee", "string", "Exact assignee", "alice");
const SENSOR: Param = p(
    "sensor",
    "string",
    "Exact sensor: on a fleet's console, the sensor whose event raised the alert",
    "sensor-a",
);
/// The alert listing's parameters; paging last, so that bulk triage takes the rest as filters.
const ALERT_QUERY: &[Param] = &[
    SINCE,
    UNTIL,
    p(
        "type",
        "string",
        "`ml`, `sigma`, `correlation`, `ueba` or `ioc`",
        "sigma",
    ),
    SEVERITY,
    ENTITY,
    DETECTOR,
    DEDUP_KEY,
    TACTIC,
    TECHNIQUE,
    TRIAGE_STATUS,
    ASSIGNEE,
    SENSOR,
    SORT,
    PAGE,
    LIMIT,
];
/// The signal listing's parameters: the alerts', without triage (signals are not triaged).
const SIGNAL_QUERY: &[Param] = &[
    SINCE,
    UNTIL,
    p(
        "type",
        "string",
        "`sigma` (the kinds that signal today)",
        "sigma",
    ),
    SEVERITY,
    ENTITY,
    DETECTOR,
    DEDUP_KEY,
    TACTIC,
    TECHNIQUE,
    SENSOR,
    SORT,
    PAGE,
    LIMIT,
];
const SORT: Param = p(
    "sort",
    "string",
    "`last_seen` (default): latest activity first, so a repeating alert rises; `first_seen`: newest first by the first event. The answer's `meta.sort` says which",
    "first_seen",
);
const TACTIC: Param = p(
    "tactic",
    "string",
    "ATT&CK tactic name or id, case-insensitive",
    "TA0001",
);
const TECHNIQUE: Param = p(
    "technique",
    "string",
    "ATT&CK technique id prefix (`T1078` matches `T1078.003`)",
    "T1078",
);
const RANGE: Param = p("range", "string", "`1h`, `6h`, `24h` or `7d`", "7d");

/// Every route of `/api/v1`.
pub static ROUTES: &[Route] = &[
    Route {
        method: "GET",
        path: "/health",
        family: None,
        summary: "Health of every component; 503 when one is degraded",
        query: &[],
        body: None,
        ok: &[(200, "Health")],
        errors: &[503],
        handler: || get(crate::routes::system::health),
    },
    Route {
        method: "GET",
        path: "/cluster",
        family: None,
        summary: "The fleet as this node sees it: its servers, its link, the live nodes",
        query: &[],
        body: None,
        ok: &[(200, "Cluster")],
        errors: &[],
        handler: || get(crate::routes::cluster::cluster),
    },
    Route {
        method: "GET",
        path: "/stats",
        family: None,
        summary: "Pipeline counters and live rates",
        query: &[],
        body: None,
        ok: &[(200, "Stats")],
        errors: &[],
        handler: || get(crate::routes::system::stats),
    },
    Route {
        method: "GET",
        path: "/config",
        family: None,
        summary: "The running configuration, credentials masked",
        query: &[],
        body: None,
        ok: &[(200, "Config")],
        errors: &[],
        handler: || get(crate::routes::system::config),
    },
    Route {
        method: "POST",
        path: "/config/reload",
        family: Some(Family::Detail),
        summary: "Reads the configuration file again and applies the rule folders, IOC files and notification channels; 422 names each problem of a refused file",
        query: &[],
        body: None,
        ok: &[(200, "ReloadReport")],
        errors: &[422],
        handler: || post(crate::routes::system::reload),
    },
    Route {
        method: "POST",
        path: "/notifications/test",
        family: Some(Family::Detail),
        summary: "Sends a test message on one notification channel or all, now; 502 names each receiver that failed",
        query: &[],
        body: Some("TestBody"),
        ok: &[(200, "TestAnswer")],
        errors: &[404, 413, 422, 502],
        handler: || post(crate::routes::notifications::test),
    },
    Route {
        method: "GET",
        path: "/openapi.json",
        family: None,
        summary: "This document",
        query: &[],
        body: None,
        ok: &[(200, "OpenApi")],
        errors: &[],
        handler: || get(serve_openapi),
    },
    Route {
        method: "GET",
        path: "/events",
        family: Some(Family::List),
        summary: "Stored events, newest received first, filtered",
        query: &[
            SINCE,
            UNTIL,
            p("source", "string", "Exact source (`sshd`)", "sshd"),
            SEVERITY,
            p(
                "template_id",
                "string",
                "Template id, 16 hex digits",
                "00000000000000ff",
            ),
            ENTITY,
            p(
                "q",
                "string",
                "1-256 characters: case-insensitive substring of message, source, host or any attribute",
                "failed",
            ),
            PAGE,
            LIMIT,
        ],
        body: None,
        ok: &[(200, "EventList")],
        errors: &[422],
        handler: || get(crate::routes::events::list),
    },
    Route {
        method: "POST",
        path: "/ingest",
        family: None,
        summary: "Ingest a JSON array of objects or JSON lines",
        query: &[],
        body: Some("IngestBody"),
        ok: &[(202, "IngestResult")],
        errors: &[400, 413, 503],
        handler: || post(crate::routes::ingest::ingest),
    },
    Route {
        method: "GET",
        path: "/alerts",
        family: Some(Family::List),
        summary: "Alerts, latest activity first (or newest first), filtered",
        query: ALERT_QUERY,
        body: None,
        ok: &[(200, "AlertList")],
        errors: &[422],
        handler: || get(crate::routes::alerts::list),
    },
    Route {
        method: "PATCH",
        path: "/alerts",
        family: Some(Family::Detail),
        summary: "Bulk triage: one change to every alert the filters select (newest 10,000; one filter at least)",
        query: ALERT_QUERY.split_at(ALERT_QUERY.len() - 3).0,
        body: Some("TriageBody"),
        ok: &[(200, "BulkTriage")],
        errors: &[413, 422],
        handler: || patch(crate::routes::alerts::patch_many),
    },
    Route {
        method: "GET",
        path: "/signals",
        family: Some(Family::List),
        summary: "Signals, latest activity first: matches below the alerting level that add risk to their entities",
        query: SIGNAL_QUERY,
        body: None,
        ok: &[(200, "AlertList")],
        errors: &[422],
        handler: || get(crate::routes::alerts::signals),
    },
    Route {
        method: "GET",
        path: "/signals/{signal_id}",
        family: Some(Family::Detail),
        summary: "One signal, with its contributing events",
        query: &[],
        body: None,
        ok: &[(200, "SignalDetail")],
        errors: &[404],
        handler: || get(crate::routes::alerts::signal),
    },
    Route {
        method: "GET",
        path: "/alerts/{alert_id}",
        family: Some(Family::Detail),
        summary: "One alert with its contributing events and feedback",
        query: &[],
        body: None,
        ok: &[(200, "AlertDetail")],
        errors: &[404],
        handler: || get(crate::routes::alerts::get),
    },
    Route {
        method: "PATCH",
        path: "/alerts/{alert_id}",
        family: Some(Family::Detail),
        summary: "Triage: status, close reason, assignee, note",
        query: &[],
        body: Some("TriageBody"),
        ok: &[(200, "Alert")],
        errors: &[404, 413, 422],
        handler: || patch(crate::routes::alerts::patch),
    },
    Route {
        method: "POST",
        path: "/alerts/{alert_id}/feedback",
        family: Some(Family::Detail),
        summary: "A tp/fp verdict; moves the threshold that raised the alert (a sender's repeat records nothing: 200)",
        query: &[],
        body: Some("FeedbackBody"),
        ok: &[(204, ""), (200, "FeedbackRepeat")],
        errors: &[404, 413, 422],
        handler: || post(crate::routes::alerts::post_feedback),
    },
    Route {
        method: "GET",
        path: "/alerts/{alert_id}/feedback",
        family: Some(Family::List),
        summary: "Feedback on one alert, newest first",
        query: &[PAGE, LIMIT],
        body: None,
        ok: &[(200, "FeedbackList")],
        errors: &[404, 422],
        handler: || get(crate::routes::alerts::get_feedback),
    },
    Route {
        method: "POST",
        path: "/alerts/{alert_id}/explain",
        family: Some(Family::Detail),
        summary: "The alert explained in Markdown by the LLM: the cached explanation while it lives, else a new one",
        query: &[],
        body: Some("RefreshBody"),
        ok: &[(200, "Explanation")],
        errors: &[404, 413, 422, 502, 503],
        handler: || post(crate::routes::llm::explain),
    },
    Route {
        method: "GET",
        path: "/alerts/{alert_id}/explanation",
        family: Some(Family::Detail),
        summary: "The cached explanation only; never calls the LLM",
        query: &[],
        body: None,
        ok: &[(200, "Explanation")],
        errors: &[404, 503],
        handler: || get(crate::routes::llm::explanation),
    },
    Route {
        method: "GET",
        path: "/entities/search",
        family: Some(Family::List),
        summary: "Entities by UUID or name, best match first",
        query: &[
            p(
                "q",
                "string",
                "Required, 1-256 characters: a UUID or part of a canonical name",
                "alice",
            ),
            PAGE,
            LIMIT,
        ],
        body: None,
        ok: &[(200, "EntityHitList")],
        errors: &[422],
        handler: || get(crate::routes::entities::search),
    },
    Route {
        method: "GET",
        path: "/entities/{entity_uuid}/timeline",
        family: Some(Family::Detail),
        summary: "An entity's events across sources, with the entities seen alongside",
        query: &[
            p(
                "start_ns",
                "integer",
                "Earliest event time, ns",
                "1767225600000000000",
            ),
            p(
                "end_ns",
                "integer",
                "Latest event time (exclusive), ns; after `start_ns`",
                "1767312000000000000",
            ),
            p("source_type", "string", "Exact source", "sshd"),
            p(
                "severity_min",
                "string",
                "Least severity: 0-5 or a name",
                "1",
            ),
            p(
                "limit",
                "integer",
                "Events: default 100, at most 10,000",
                "10",
            ),
        ],
        body: None,
        ok: &[(200, "EntityTimeline")],
        errors: &[404, 422],
        handler: || get(crate::routes::entities::timeline),
    },
    Route {
        method: "GET",
        path: "/entities/{entity_uuid}/risk-history",
        family: Some(Family::Detail),
        summary: "Highest UEBA score per hour",
        query: &[RANGE],
        body: None,
        ok: &[(200, "RiskHistory")],
        errors: &[404, 422],
        handler: || get(crate::routes::entities::risk_history),
    },
    Route {
        method: "GET",
        path: "/entities/{entity_uuid}/baseline",
        family: Some(Family::Detail),
        summary: "The entity's UEBA baseline; 404 with status warming_up inside the warmup",
        query: &[],
        body: None,
        ok: &[(200, "Baseline")],
        errors: &[404, 503],
        handler: || get(crate::routes::entities::baseline),
    },
    Route {
        method: "GET",
        path: "/anomaly/timeline",
        family: Some(Family::List),
        summary: "Ensemble scores, alarms and alerts per time bucket",
        query: &[
            p(
                "range",
                "string",
                "`1h`, `6h`, `24h` or `7d`; default `24h`",
                "24h",
            ),
            p(
                "resolution",
                "string",
                "`1m`, `5m`, `15m` or `1h`; at most 2,016 buckets",
                "1h",
            ),
            p("source", "string", "Exact source", "sshd"),
        ],
        body: None,
        ok: &[(200, "AnomalyTimeline")],
        errors: &[422],
        handler: || get(crate::routes::anomaly::timeline),
    },
    Route {
        method: "POST",
        path: "/hunt",
        family: Some(Family::Detail),
        summary: "Natural-language hunt: a question naming an entity is that entity's events (no LLM); any other is translated by the LLM into an event query that runs against the store",
        query: &[],
        body: Some("HuntBody"),
        ok: &[(200, "HuntAnswer")],
        errors: &[400, 413, 502, 503],
        handler: || post(crate::routes::llm::hunt),
    },
    Route {
        method: "GET",
        path: "/sigma/rule-suggestions",
        family: Some(Family::List),
        summary: "Patterns of confirmed alerts eligible for an LLM Sigma draft, most confirmed first",
        query: &[PAGE, LIMIT],
        body: None,
        ok: &[(200, "RulePatternList")],
        errors: &[422],
        handler: || get(crate::routes::llm::suggestions),
    },
    Route {
        method: "POST",
        path: "/sigma/rule-suggestions/{pattern_key}",
        family: Some(Family::Detail),
        summary: "A validated Sigma draft for an eligible pattern, with its evidence: the cached draft while it lives, else a new one",
        query: &[],
        body: Some("RefreshBody"),
        ok: &[(200, "RuleSuggestion")],
        errors: &[404, 413, 422, 502, 503],
        handler: || post(crate::routes::llm::draft),
    },
    Route {
        method: "DELETE",
        path: "/sigma/rule-suggestions/{pattern_key}",
        family: Some(Family::Detail),
        summary: "Drop a pattern's cached draft",
        query: &[],
        body: None,
        ok: &[(204, "")],
        errors: &[404],
        handler: || delete(crate::routes::llm::forget),
    },
    Route {
        method: "GET",
        path: "/sigma/rules",
        family: Some(Family::List),
        summary: "Loaded Sigma rules in catalogue order, filtered",
        query: &[
            p("enabled", "boolean", "`true` or `false`", "true"),
            p(
                "level",
                "string",
                "`informational`, `low`, `medium`, `high`, `critical`",
                "high",
            ),
            p(
                "tactic",
                "string",
                "ATT&CK tactic by id, name or shortname",
                "credential-access",
            ),
            TECHNIQUE,
            p(
                "source",
                "string",
                "`bundled`, `directory` or `custom`",
                "bundled",
            ),
            p(
                "kind",
                "string",
                "`detection` or `correlation`",
                "detection",
            ),
            p(
                "q",
                "string",
                "Case-insensitive substring of id, title, description or a tag",
                "ssh",
            ),
            PAGE,
            LIMIT,
        ],
        body: None,
        ok: &[(200, "SigmaRuleList")],
        errors: &[422, 503],
        handler: || get(crate::routes::sigma::list),
    },
    Route {
        method: "POST",
        path: "/sigma/rules",
        family: Some(Family::Detail),
        summary: "Upload a custom Sigma rule (or validate and test it with dry_run)",
        query: &[],
        body: Some("SigmaUpload"),
        ok: &[(201, "SigmaRuleDetail"), (200, "SigmaDryRun")],
        errors: &[409, 413, 422, 503, 507],
        handler: || post(crate::routes::sigma::post),
    },
    Route {
        method: "GET",
        path: "/sigma/rules/{rule_id}",
        family: Some(Family::Detail),
        summary: "One rule with its YAML",
        query: &[],
        body: None,
        ok: &[(200, "SigmaRuleDetail")],
        errors: &[404, 503],
        handler: || get(crate::routes::sigma::get),
    },
    Route {
        method: "PATCH",
        path: "/sigma/rules/{rule_id}",
        family: Some(Family::Detail),
        summary: "Enable or disable a rule",
        query: &[],
        body: Some("SigmaToggle"),
        ok: &[(200, "SigmaRule")],
        errors: &[404, 409, 413, 422, 503],
        handler: || patch(crate::routes::sigma::patch),
    },
    Route {
        method: "GET",
        path: "/sigma/rules/{rule_id}/timeline",
        family: Some(Family::Detail),
        summary: "A rule's matches per hour over the last 24 hours",
        query: &[],
        body: None,
        ok: &[(200, "RuleTimeline")],
        errors: &[404, 503],
        handler: || get(crate::routes::sigma::timeline),
    },
    Route {
        method: "GET",
        path: "/attack/coverage",
        family: Some(Family::Coverage),
        summary: "The ATT&CK matrix with rule coverage and fires",
        query: &[SINCE, UNTIL],
        body: None,
        ok: &[(200, "Coverage")],
        errors: &[422, 503],
        handler: || get(crate::routes::attack::coverage),
    },
    Route {
        method: "GET",
        path: "/exceptions",
        family: Some(Family::List),
        summary: "The operators' exceptions, newest first, with their hit counts",
        query: &[
            p(
                "detector",
                "string",
                "Exact detector the exception names (`ueba:user`, a rule id, `ioc:*`)",
                "ueba:user",
            ),
            p("enabled", "boolean", "`true` or `false`", "true"),
            PAGE,
            LIMIT,
        ],
        body: None,
        ok: &[(200, "ExceptionList")],
        errors: &[422, 503],
        handler: || get(crate::routes::exceptions::list),
    },
    Route {
        method: "POST",
        path: "/exceptions",
        family: Some(Family::Detail),
        summary: "A new exception: applied before alerting from the workers' next batch",
        query: &[],
        body: Some("ExceptionDraft"),
        ok: &[(201, "Exception")],
        errors: &[409, 413, 422, 503],
        handler: || post(crate::routes::exceptions::create),
    },
    Route {
        method: "GET",
        path: "/exceptions/{exception_id}",
        family: Some(Family::Detail),
        summary: "One exception with its hit count",
        query: &[],
        body: None,
        ok: &[(200, "Exception")],
        errors: &[404, 422, 503],
        handler: || get(crate::routes::exceptions::get),
    },
    Route {
        method: "PATCH",
        path: "/exceptions/{exception_id}",
        family: Some(Family::Detail),
        summary: "Change an exception (the fields given); validated as a new one",
        query: &[],
        body: Some("ExceptionPatch"),
        ok: &[(200, "Exception")],
        errors: &[404, 409, 413, 422, 503],
        handler: || patch(crate::routes::exceptions::patch),
    },
    Route {
        method: "DELETE",
        path: "/exceptions/{exception_id}",
        family: Some(Family::Detail),
        summary: "Remove an exception",
        query: &[],
        body: None,
        ok: &[(204, "")],
        errors: &[404, 409, 422, 503],
        handler: || delete(crate::routes::exceptions::delete),
    },
    Route {
        method: "GET",
        path: "/ioc",
        family: Some(Family::Detail),
        summary: "The indicator feed's status",
        query: &[],
        body: None,
        ok: &[(200, "IocStatus")],
        errors: &[503],
        handler: || get(crate::routes::ioc::status),
    },
    Route {
        method: "POST",
        path: "/ioc/reload",
        family: Some(Family::Detail),
        summary: "Reload the indicator folder now",
        query: &[],
        body: None,
        ok: &[(200, "IocStatus")],
        errors: &[503],
        handler: || post(crate::routes::ioc::reload),
    },
    Route {
        method: "GET",
        path: "/ws",
        family: None,
        summary: "The WebSocket stream (frames in docs/websocket.md)",
        query: &[],
        body: None,
        ok: &[(101, "")],
        errors: &[400, 403, 426, 503],
        handler: || get(crate::ws::upgrade),
    },
];

/// `GET /api/v1/openapi.json`, built once.
async fn serve_openapi() -> Json<&'static Value> {
    static DOC: OnceLock<Value> = OnceLock::new();
    Json(DOC.get_or_init(|| openapi::document(ROUTES)))
}
