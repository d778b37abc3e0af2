//! What an operation of `/api/v1` is ([`Route`]), and the OpenAPI 3.1 document of a table of
//! them.
//!
//! The table itself is the router's (`crate::router::ROUTES`): the router mounts exactly its
//! entries (with their rate-limit family) and [`document`] describes exactly those entries, so the
//! routes served and the routes described cannot drift apart. The handlers' own parameter checks (unknown query
//! parameters are a 422) are held to the described parameters by `tests/openapi.rs`, which calls
//! every route of the served document with every parameter it lists.
//!
//! The component schemas are derived from the types the handlers serialise and deserialise
//! (`schemars`, following their serde attributes; see `derived_schemas`), so the document changes
//! with the code. Only three are written by hand: the triage and ingest bodies, which the
//! handlers check field by field rather than deserialise, and the OpenAPI document itself.
//! `tests/openapi.rs` holds every GET answer of the running service to its schema.

use crate::query::Param;
use crate::ratelimit::Family;
use crate::state::AppState;
use axum::routing::MethodRouter;
use serde_json::{Map, Value, json};

/// One operation of the API.
pub struct Route {
    /// `GET`, `POST`, `PATCH` or `DELETE`.
    pub method: &'static str,
    /// Path under `/api/v1`, in axum's and OpenAPI's shared `{name}` syntax.
    pub path: &'static str,
    /// The rate-limit family that guards it; `None` for routes not limited: system routes,
    /// ingest (it has backpressure), the stream. Every write is in the detail family.
    pub family: Option<Family>,
    /// One line.
    pub summary: &'static str,
    /// Query parameters (a request naming any other is refused with 422).
    pub query: &'static [Param],
    /// Name of the request body's schema in `components.schemas`.
    pub body: Option<&'static str>,
    /// Success answers: status and schema name (`""` for no body).
    pub ok: &'static [(u16, &'static str)],
    /// Error statuses beyond the ones every route may give (403 on writes, 429 where limited,
    /// 421 for a `Host` that is not the service's, 500).
    pub errors: &'static [u16],
    /// Builds the handler.
    pub(crate) handler: fn() -> MethodRouter<AppState>,
}

/// The OpenAPI 3.1 document of `routes` (the router's table, `crate::router::ROUTES`).
pub fn document(routes: &[Route]) -> Value {
    let mut paths = Map::new();
    for r in routes {
        let item = paths
            .entry(r.path)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("path items are objects");
        item.insert(r.method.to_ascii_lowercase(), operation(r));
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Watchpost API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Threat detection over logs: events, alerts, entities and rules. Conventions (pagination, errors, rate limits) are in docs/api.md.",
            "license": {"name": "See the repository's licence"},
        },
        "servers": [{"url": "/api/v1"}],
        "paths": paths,
        "components": {"schemas": schemas(), "responses": error_responses()},
    })
}

fn operation(r: &Route) -> Value {
    let mut params: Vec<Value> = path_params(r.path)
        .map(|name| {
            let (description, format) = match name {
                "alert_id" => ("Alert id (UUIDv7)", Some("uuid")),
                "entity_uuid" => ("Entity UUID (UUID5)", Some("uuid")),
                "exception_id" => ("Exception id (UUID)", Some("uuid")),
                "signal_id" => ("Signal id (UUIDv7)", Some("uuid")),
                "pattern_key" => ("Pattern key (16 hex digits)", None),
                _ => ("Rule id", None),
            };
            let mut schema = json!({"type": "string"});
            if let Some(f) = format {
                schema["format"] = json!(f);
            }
            json!({"name": name, "in": "path", "required": true, "description": description, "schema": schema})
        })
        .collect();
    params.extend(r.query.iter().map(|q| {
        json!({
            "name": q.name,
            "in": "query",
            "required": r.path == "/entities/search" && q.name == "q",
            "description": q.description,
            "schema": {"type": q.kind},
            "example": typed_example(q),
        })
    }));
    let mut responses = Map::new();
    for (status, schema) in r.ok {
        let mut resp =
            json!({"description": if *status == 101 { "Switching protocols" } else { "Success" }});
        if !schema.is_empty() {
            resp["content"] = json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}});
        }
        responses.insert(status.to_string(), resp);
    }
    let limited = r.family.is_some();
    // Writes from a browser page of another origin are refused by the browser layer.
    let write = !matches!(r.method, "GET" | "HEAD" | "OPTIONS");
    for status in r
        .errors
        .iter()
        .copied()
        .chain(write.then_some(403))
        .chain(limited.then_some(429))
        .chain([421, 500])
    {
        responses.insert(
            status.to_string(),
            json!({"$ref": format!("#/components/responses/E{status}")}),
        );
    }
    if r.path == "/health" {
        // Degraded health answers the health body, not the error shape.
        responses.insert(
            "503".into(),
            json!({"description": "A component is degraded", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}),
        );
    }
    let mut op = json!({
        "operationId": operation_id(r),
        "summary": r.summary,
        "parameters": params,
        "responses": responses,
    });
    if let Some(b) = r.body {
        op["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{b}")}}},
        });
    }
    if let Some(family) = r.family {
        op["x-rate-limit-family"] = json!(family.name());
    }
    op
}

/// An example as the JSON value its schema type says (`1`, not `"1"`).
fn typed_example(q: &Param) -> Value {
    match q.kind {
        "integer" => q
            .example
            .parse::<i64>()
            .map_or_else(|_| json!(q.example), |n| json!(n)),
        "boolean" => json!(q.example == "true"),
        _ => json!(q.example),
    }
}

/// Names of the `{name}` segments of a path.
pub fn path_params(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
}

/// `get_alerts_alert_id_feedback`-style ids: unique because method and path are.
fn operation_id(r: &Route) -> String {
    let mut id = r.method.to_ascii_lowercase();
    for part in r.path.split('/').filter(|s| !s.is_empty()) {
        id.push('_');
        id.extend(
            part.chars()
                .filter(|c| !matches!(c, '{' | '}'))
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
        );
    }
    id
}

/// Every error status the API gives, each with the one error shape.
fn error_responses() -> Value {
    let mut out = Map::new();
    for (status, meaning) in [
        (
            400,
            "Malformed request (an ingest body that is not well-formed JSON, a bad WebSocket handshake, no Host header); a hunt query that is empty, over llm.hunt_max_query_chars or not a hunt body",
        ),
        (
            421,
            "Host not allowed: the Host header is not one of this listener's names (localhost, its address at its port, api_allowed_hosts); the DNS-rebinding defence",
        ),
        (
            403,
            "Origin not allowed: a WebSocket upgrade, or a write, from an origin that is neither this listener nor listed",
        ),
        (404, "No such resource or route"),
        (409, "Identifier collision: the rule id exists"),
        (413, "Body over api_max_body_bytes"),
        (426, "WebSocket only: the request did not ask to upgrade"),
        (
            422,
            "Invalid parameter or body; `parameter` or `field` names it",
        ),
        (
            429,
            "Rate limited; `Retry-After` and `family` say when and which",
        ),
        (
            500,
            "Internal error, or a store read that failed (`store_error`, never answered as 404)",
        ),
        (
            502,
            "The LLM backend was reached and failed: timeout, error status or unreadable answer",
        ),
        (
            503,
            "Unavailable: the component is off, busy or not running (the LLM: disabled or its backend not ready)",
        ),
        (507, "The custom rule folder is full"),
    ] {
        let mut r = json!({
            "description": meaning,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        });
        if status == 429 {
            r["headers"] = json!({"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}});
        }
        out.insert(format!("E{status}"), r);
    }
    Value::Object(out)
}

/// Schemas derived from the types the handlers serialise (answers) and deserialise (bodies), so a
/// field added, renamed or retyped in the code changes the document with it; their descriptions
/// are the types' doc comments. Answers use serde's serialising contract (a field is required
/// when it is always written), bodies the deserialising one (a field is required when it has no
/// default).
fn derived_schemas() -> Map<String, Value> {
    use crate::routes::alerts::{AlertDetail, FeedbackBody, SignalDetail};
    use crate::routes::attack::Coverage;
    use crate::routes::llm::{HuntBody, RefreshBody};
    use crate::routes::sigma::{DryRun, RuleDetail, RuleSummary, Timeline, Toggle, Upload};
    use schemars::generate::{SchemaGenerator, SchemaSettings};
    use watchpost_llm::Explanation;
    use watchpost_llm::hunt::HuntAnswer;
    use watchpost_llm::suggest::{Pattern, Suggestion};
    use watchpost_proto::{Alert, ErrorBody, Event, Feedback, ListResponse};
    use watchpost_store::EntityHit;

    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    });
    let mut answers = SchemaGenerator::new(settings.clone().for_serialize());
    answers.subschema_for::<ErrorBody>();
    answers.subschema_for::<ListResponse<Event>>();
    answers.subschema_for::<ListResponse<Alert>>();
    answers.subschema_for::<AlertDetail>();
    answers.subschema_for::<SignalDetail>();
    answers.subschema_for::<crate::routes::alerts::BulkTriage>();
    answers.subschema_for::<crate::routes::alerts::FeedbackRepeat>();
    answers.subschema_for::<ListResponse<Feedback>>();
    answers.subschema_for::<ListResponse<EntityHit>>();
    answers.subschema_for::<HuntAnswer>();
    answers.subschema_for::<Explanation>();
    answers.subschema_for::<ListResponse<Pattern>>();
    answers.subschema_for::<Suggestion>();
    answers.subschema_for::<ListResponse<RuleSummary>>();
    answers.subschema_for::<RuleDetail>();
    answers.subschema_for::<DryRun>();
    answers.subschema_for::<Timeline>();
    answers.subschema_for::<Coverage>();
    answers.subschema_for::<crate::routes::system::StatsAnswer>();
    answers.subschema_for::<crate::routes::notifications::TestAnswer>();
    answers.subschema_for::<crate::reload::ReloadReport>();
    answers.subschema_for::<crate::routes::system::HealthAnswer>();
    answers.subschema_for::<crate::routes::cluster::ClusterAnswer>();
    answers.subschema_for::<crate::routes::entities::EntityTimeline>();
    answers.subschema_for::<crate::routes::entities::RiskHistory>();
    answers.subschema_for::<crate::routes::entities::Baseline>();
    answers.subschema_for::<crate::routes::anomaly::AnomalyTimeline>();
    answers.subschema_for::<watchpost_dataplane::IngestReceipt>();
    // As `/config` shows it: the same shape, credentials replaced by `********`.
    answers.subschema_for::<watchpost_proto::Config>();
    answers.subschema_for::<watchpost_dataplane::IocStatus>();
    answers.subschema_for::<ListResponse<watchpost_proto::Exception>>();
    answers.subschema_for::<watchpost_proto::Exception>();
    let mut schemas = answers.take_definitions(true);

    let mut bodies = SchemaGenerator::new(settings.for_deserialize());
    bodies.subschema_for::<FeedbackBody>();
    bodies.subschema_for::<RefreshBody>();
    bodies.subschema_for::<HuntBody>();
    bodies.subschema_for::<crate::routes::notifications::TestBody>();
    bodies.subschema_for::<Toggle>();
    bodies.subschema_for::<Upload>();
    bodies.subschema_for::<watchpost_proto::ExceptionDraft>();
    bodies.subschema_for::<watchpost_proto::ExceptionPatch>();
    for (name, schema) in bodies.take_definitions(true) {
        // A type both sent and received (a triage status) is described as it is sent.
        schemas.entry(name).or_insert(schema);
    }
    schemas
}

/// Every component schema: the derived ones, and the bodies checked by hand, with the RFC 3339
/// sibling of each `_ns` field described ([`crate::times`]).
pub(crate) fn schemas() -> Value {
    let mut s = derived_schemas();
    let mut put = |name: &str, v: Value| {
        s.insert(name.to_string(), v);
    };
    put(
        "TriageBody",
        json!({
            "type": "object",
            "description": "At least one field; a reason is required to close and kept only while closed",
            "minProperties": 1,
            "additionalProperties": false,
            "properties": {
                "status": {"$ref": "#/components/schemas/TriageStatus"},
                "reason": {"$ref": "#/components/schemas/CloseReason"},
                "assignee": {"type": ["string", "null"], "minLength": 1, "maxLength": 128},
                "note": {"type": "string", "maxLength": 4096},
            },
        }),
    );
    put(
        "IngestBody",
        json!({"description": "A JSON array of objects, or JSON lines (one object per line)", "oneOf": [{"type": "array", "items": {"type": "object"}}, {"type": "string"}]}),
    );
    put(
        "OpenApi",
        json!({"type": "object", "description": "An OpenAPI 3.1 document"}),
    );
    let mut schemas = Value::Object(s);
    describe_readable_times(&mut schemas);
    schemas
}

/// The `_ns` properties of `schemas`: the fields of the answers that get a readable sibling.
pub(crate) fn nanosecond_fields(schemas: &Value) -> std::collections::HashSet<String> {
    fn collect(schema: &Value, names: &mut std::collections::HashSet<String>) {
        match schema {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    names.extend(props.keys().filter(|k| k.ends_with("_ns")).cloned());
                }
                map.values().for_each(|v| collect(v, names));
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, names)),
            _ => {}
        }
    }
    let mut names = std::collections::HashSet::new();
    collect(schemas, &mut names);
    names
}

/// Describes, in the OpenAPI schemas, the field each `_ns` property gets beside it (written into
/// the answers by `crate::times`).
fn describe_readable_times(schemas: &mut Value) {
    match schemas {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get_mut("properties") {
                let added: Vec<(String, Value)> = props
                    .iter()
                    .filter(|(k, _)| k.ends_with("_ns"))
                    .map(|(k, _)| {
                        (
                            k.trim_end_matches("_ns").to_string(),
                            serde_json::json!({
                                "type": ["string", "null"],
                                "format": "date-time",
                                "description": format!("`{k}` as RFC 3339, UTC, nine fraction digits; null when it is null or 0 (never)"),
                            }),
                        )
                    })
                    .collect();
                for (k, v) in added {
                    props.entry(k).or_insert(v);
                }
            }
            map.values_mut().for_each(describe_readable_times);
        }
        Value::Array(items) => items.iter_mut().for_each(describe_readable_times),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::ROUTES;
    use std::collections::BTreeSet;

    /// Every `$ref` in `v`.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => refs(x, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }

    #[test]
    fn the_document_describes_the_added_fields() {
        let schemas = schemas();
        let alert = &schemas["Alert"]["properties"];
        assert_eq!(alert["first_seen"]["format"], "date-time", "{alert}");
        let names = nanosecond_fields(&schemas);
        assert!(names.contains("first_seen_ns"));
        assert!(names.contains("timestamp_ns"));
    }

    #[test]
    fn every_route_is_described_once_and_every_reference_resolves() {
        let doc = document(ROUTES);
        let described: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(move |m| (m.to_ascii_uppercase(), path.clone()))
            })
            .collect();
        let table: BTreeSet<(String, String)> = ROUTES
            .iter()
            .map(|r| (r.method.to_string(), r.path.to_string()))
            .collect();
        assert_eq!(table.len(), ROUTES.len(), "a route is listed twice");
        assert_eq!(described, table);
        let mut all = Vec::new();
        refs(&doc, &mut all);
        for r in all {
            let ptr = r.strip_prefix('#').unwrap();
            assert!(doc.pointer(ptr).is_some(), "dangling {r}");
        }
        let ids: BTreeSet<&str> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|i| i.as_object().unwrap().values())
            .map(|op| op["operationId"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), ROUTES.len(), "operation ids must be unique");
    }

    #[test]
    fn limited_routes_say_so_and_every_route_can_fail_with_the_error_shape() {
        let doc = document(ROUTES);
        for r in ROUTES {
            let op = &doc["paths"][r.path][r.method.to_ascii_lowercase()];
            assert_eq!(
                op["responses"].get("429").is_some(),
                r.family.is_some(),
                "{} {}",
                r.method,
                r.path
            );
            assert!(op["responses"].get("500").is_some());
            let names: Vec<&str> = op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, path_params(r.path).collect::<Vec<_>>());
        }
    }
}
