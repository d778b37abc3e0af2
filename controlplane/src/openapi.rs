//! What an operation of `/api/v1` is ([`Route`]), and the OpenAPI 3.1 document of a table of
//! them.
//!
//! The table itself is the router's (`crate::router::ROUTES`): the router mounts exactly its
//! entries (with their rate-limit family) and [`document`] describes exactly those entries, so the
//! routes served and the routes described cannot drift apart. The handlers' own parameter checks (unknown query
//! parameters are a 422) are held to the described parameters by `tests/openapi.rs`, which calls
//! every route of the served document with every parameter it lists.

use crate::ratelimit::Family;
use crate::state::AppState;
use axum::routing::MethodRouter;
use serde_json::{Map, Value, json};

/// A query parameter.
#[derive(Debug)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// JSON Schema type: `string`, `integer` or `boolean`.
    pub kind: &'static str,
    /// What it does.
    pub description: &'static str,
    /// A valid value (the route tests send it).
    pub example: &'static str,
}

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

fn list_of(item: &str) -> Value {
    json!({
        "type": "object",
        "required": ["items", "meta"],
        "properties": {
            "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{item}")}},
            "meta": {"$ref": "#/components/schemas/ListMeta"},
        },
    })
}

/// An object schema whose properties are named with a short description each (the long form is
/// in the `docs/` page the description names).
fn object(description: &str, props: &[(&str, &str)]) -> Value {
    let properties: Map<String, Value> = props
        .iter()
        .map(|(name, kind)| {
            let schema = match *kind {
                "string" | "integer" | "number" | "boolean" | "object" | "array" => {
                    json!({"type": kind})
                }
                "string?" => json!({"type": ["string", "null"]}),
                "integer?" => json!({"type": ["integer", "null"]}),
                "object?" => json!({"type": ["object", "null"]}),
                r if r.starts_with('[') => json!({"type": "array", "items": {"$ref": format!("#/components/schemas/{}", r.trim_matches(['[', ']']))}}),
                r => json!({"$ref": format!("#/components/schemas/{r}")}),
            };
            (name.to_string(), schema)
        })
        .collect();
    json!({"type": "object", "description": description, "properties": properties})
}

fn enumeration(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

fn schemas() -> Value {
    let mut s = Map::new();
    let mut put = |name: &str, v: Value| {
        s.insert(name.to_string(), v);
    };
    put(
        "Error",
        json!({
            "type": "object",
            "description": "The one error shape: a code, a message, and the case's fields (`parameter`, `field`, `family`, `line`, `column`...)",
            "required": ["error", "message"],
            "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
            "additionalProperties": true,
        }),
    );
    put(
        "ListMeta",
        object(
            "Pagination; total_exact and timed_out appear only when false and true (docs/api.md, Lists)",
            &[
                ("total", "integer"),
                ("page", "integer"),
                ("limit", "integer"),
                ("total_exact", "boolean"),
                ("timed_out", "boolean"),
            ],
        ),
    );
    put(
        "EntityRef",
        object(
            "An entity named by an event or alert (docs/entities.md)",
            &[
                ("kind", "string"),
                ("role", "string"),
                ("value", "string"),
                ("uuid", "string"),
            ],
        ),
    );
    put(
        "Event",
        object(
            "A stored event (docs/event.md)",
            &[
                ("id", "string"),
                ("timestamp_ns", "integer"),
                ("received_ns", "integer"),
                ("input", "string"),
                ("source", "string"),
                ("host", "string"),
                ("severity", "integer"),
                ("message", "string"),
                ("template_id", "string"),
                ("entities", "[EntityRef]"),
                ("attributes", "object"),
            ],
        ),
    );
    put("EventList", list_of("Event"));
    put(
        "AttackMapping",
        object(
            "An ATT&CK technique with its tactic",
            &[
                ("tactic_id", "string"),
                ("tactic", "string"),
                ("technique_id", "string"),
                ("technique", "string"),
            ],
        ),
    );
    put(
        "TriageChange",
        object(
            "One triage change",
            &[
                ("at_ns", "integer"),
                ("status", "TriageStatus"),
                ("reason", "string?"),
                ("assignee", "string?"),
                ("note", "string"),
            ],
        ),
    );
    put(
        "TriageStatus",
        enumeration(&["open", "acknowledged", "closed"]),
    );
    put(
        "CloseReason",
        enumeration(&[
            "true_positive",
            "benign_positive",
            "false_positive",
            "duplicate",
            "other",
        ]),
    );
    put(
        "Triage",
        object(
            "Where people are with an alert (docs/api.md, PATCH /alerts/{id})",
            &[
                ("status", "TriageStatus"),
                ("reason", "string?"),
                ("assignee", "string?"),
                ("updated_ns", "integer?"),
                ("history", "[TriageChange]"),
            ],
        ),
    );
    let alert_fields: &[(&str, &str)] = &[
        ("id", "string"),
        ("type", "string"),
        ("severity", "integer"),
        ("title", "string"),
        ("detector", "string"),
        ("dedup_key", "string"),
        ("first_seen_ns", "integer"),
        ("last_seen_ns", "integer"),
        ("count", "integer"),
        ("source", "string"),
        ("entity", "object?"),
        ("score", "number"),
        ("threshold", "number"),
        ("contributions", "object"),
        ("attack", "[AttackMapping]"),
        ("contributing_events", "array"),
        ("related_entities", "[EntityRef]"),
        ("related_alerts", "array"),
        ("triage", "Triage"),
    ];
    put("Alert", object("An alert (docs/alerts.md)", alert_fields));
    put("AlertList", list_of("Alert"));
    let mut detail: Vec<(&str, &str)> = alert_fields.to_vec();
    detail.extend([("events", "[Event]"), ("feedback", "[Feedback]")]);
    put(
        "AlertDetail",
        object(
            "An alert with its contributing events still stored and its feedback",
            &detail,
        ),
    );
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
        "Feedback",
        object(
            "A verdict on an alert",
            &[
                ("alert_id", "string"),
                ("feedback", "string"),
                ("note", "string"),
                ("origin", "string"),
                ("created_ns", "integer"),
                ("threshold_change", "object?"),
            ],
        ),
    );
    put("FeedbackList", list_of("Feedback"));
    put(
        "RefreshBody",
        json!({
            "type": "object",
            "description": "Optional; an empty body is the same as `{}`",
            "additionalProperties": false,
            "properties": {
                "refresh": {"type": "boolean", "description": "Ask the LLM again even when an answer is cached"},
            },
        }),
    );
    put(
        "HuntBody",
        json!({
            "type": "object",
            "required": ["query"],
            "additionalProperties": false,
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "The question; at most llm.hunt_max_query_chars characters (400 beyond)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Most events returned: 1 to llm.hunt_max_results, the default"},
                "refresh": {"type": "boolean", "description": "Run again even when an answer is cached"},
            },
        }),
    );
    put(
        "HuntEntity",
        object(
            "An entity named by a hunt question",
            &[
                ("kind", "string?"),
                ("value", "string"),
                ("uuid", "string"),
                ("known", "boolean"),
            ],
        ),
    );
    put(
        "HuntQuery",
        object(
            "The event query a hunt ran (translated by the LLM, or the entities of the question)",
            &[
                ("entities", "array"),
                ("source", "string?"),
                ("min_severity", "integer?"),
                ("text", "string?"),
                ("since_ns", "integer?"),
                ("until_ns", "integer?"),
            ],
        ),
    );
    put(
        "HuntAnswer",
        object(
            "A hunt's results (docs/llm.md): mode `entity` (no LLM) or `llm`",
            &[
                ("query", "string"),
                ("mode", "string"),
                ("entities", "[HuntEntity]"),
                ("executed", "HuntQuery"),
                ("limit", "integer"),
                ("events", "[Event]"),
                ("total", "integer"),
                ("total_exact", "boolean"),
                ("timed_out", "boolean"),
                ("backend", "string?"),
                ("model", "string?"),
                ("generated_ns", "integer"),
                ("cached", "boolean"),
                ("expires_in_s", "integer"),
            ],
        ),
    );
    put(
        "RulePattern",
        object(
            "A pattern of alerts confirmed as true positives, eligible for a Sigma draft",
            &[
                ("pattern_key", "string"),
                ("alert_type", "string"),
                ("detector", "string"),
                ("source", "string"),
                ("template_id", "string?"),
                ("template", "string?"),
                ("title", "string"),
                ("tp_count", "integer"),
                ("min_tp", "integer"),
                ("alert_ids", "array"),
                ("first_tp_ns", "integer"),
                ("last_tp_ns", "integer"),
                ("attack", "array"),
                ("suggestion_cached", "boolean"),
            ],
        ),
    );
    put("RulePatternList", list_of("RulePattern"));
    put(
        "RuleDraft",
        object(
            "A drafted rule that passed validation",
            &[
                ("yaml", "string"),
                ("rule_id", "string"),
                ("title", "string"),
                ("level", "string?"),
                ("matched_events", "integer"),
                ("events_checked", "integer"),
                ("warnings", "array"),
            ],
        ),
    );
    put(
        "RuleSuggestionEvidence",
        object(
            "What supports a draft",
            &[("feedback", "[Feedback]"), ("events", "[Event]")],
        ),
    );
    put(
        "RuleSuggestion",
        object(
            "A Sigma rule drafted by the LLM for a pattern (docs/llm.md)",
            &[
                ("pattern_key", "string"),
                ("pattern", "RulePattern"),
                ("draft", "RuleDraft"),
                ("evidence", "RuleSuggestionEvidence"),
                ("repaired", "boolean"),
                ("backend", "string"),
                ("model", "string"),
                ("generated_ns", "integer"),
                ("cached", "boolean"),
                ("expires_in_s", "integer"),
            ],
        ),
    );
    put(
        "Explanation",
        object(
            "An alert explained by the LLM (docs/llm.md)",
            &[
                ("alert_id", "string"),
                ("markdown", "string"),
                ("backend", "string"),
                ("model", "string"),
                ("generated_ns", "integer"),
                ("events_in_prompt", "integer"),
                ("prompt_chars", "integer"),
                ("cached", "boolean"),
                ("expires_in_s", "integer"),
            ],
        ),
    );
    put(
        "FeedbackBody",
        json!({
            "type": "object",
            "required": ["feedback"],
            "additionalProperties": false,
            "properties": {
                "feedback": {"type": "string", "enum": ["tp", "fp"]},
                "note": {"type": "string", "maxLength": 4096},
                "origin": {"type": "string", "minLength": 1, "maxLength": 64},
            },
        }),
    );
    put(
        "IngestBody",
        json!({"description": "A JSON array of objects, or JSON lines (one object per line)", "oneOf": [{"type": "array", "items": {"type": "object"}}, {"type": "string"}]}),
    );
    put(
        "IngestResult",
        object(
            "Events handed to the pipeline",
            &[("accepted", "integer"), ("truncated", "integer")],
        ),
    );
    put(
        "EntityHit",
        object(
            "An entity found by search",
            &[
                ("uuid", "string"),
                ("kind", "string"),
                ("value", "string"),
                ("first_seen_ns", "integer"),
                ("relevance", "number"),
            ],
        ),
    );
    put("EntityList", list_of("EntityHit"));
    put(
        "EntitySummary",
        object(
            "The entity a response is about",
            &[
                ("uuid", "string"),
                ("kind", "string"),
                ("value", "string"),
                ("first_seen_ns", "integer"),
            ],
        ),
    );
    put(
        "EntityTimeline",
        object(
            "An entity's events across sources",
            &[
                ("entity", "EntitySummary"),
                ("total", "integer"),
                ("total_exact", "boolean"),
                ("timed_out", "boolean"),
                ("events", "[Event]"),
                ("sources", "object"),
                ("related_entities", "array"),
            ],
        ),
    );
    put(
        "RiskHistory",
        object(
            "Highest UEBA score per hour",
            &[
                ("entity", "EntitySummary"),
                ("range", "string"),
                ("resolution", "string"),
                ("points", "array"),
            ],
        ),
    );
    put(
        "Baseline",
        object(
            "A UEBA baseline (the spec's fields, plus entity_type and value)",
            &[
                ("entity_uuid", "string"),
                ("entity_type", "string"),
                ("value", "string"),
                ("first_seen_ns", "integer"),
                ("event_count", "integer"),
                ("hours_active", "array"),
                ("top_source_ips", "array"),
                ("top_templates", "array"),
                ("volume_ema_minute", "number"),
                ("warming_up", "boolean"),
            ],
        ),
    );
    put(
        "AnomalyTimeline",
        object(
            "Buckets oldest first, every bucket present",
            &[
                ("range", "string"),
                ("resolution", "string"),
                ("source", "string?"),
                ("buckets", "array"),
            ],
        ),
    );
    let rule_fields: &[(&str, &str)] = &[
        ("id", "string"),
        ("title", "string"),
        ("level", "string"),
        ("severity", "integer"),
        ("status", "string"),
        ("enabled", "boolean"),
        ("source", "string"),
        ("kind", "string"),
        ("mapped", "boolean"),
        ("logsource", "object"),
        ("tags", "array"),
        ("attack", "[AttackMapping]"),
        ("fires_24h", "integer"),
    ];
    put("SigmaRule", object("A loaded Sigma rule", rule_fields));
    put("SigmaRuleList", list_of("SigmaRule"));
    let mut rule_detail = rule_fields.to_vec();
    rule_detail.extend([
        ("description", "string"),
        ("author", "string"),
        ("falsepositives", "array"),
        ("references", "array"),
        ("warnings", "array"),
        ("path", "string"),
        ("yaml", "string"),
    ]);
    put(
        "SigmaRuleDetail",
        object("A rule with its text", &rule_detail),
    );
    put(
        "SigmaUpload",
        json!({
            "type": "object",
            "required": ["yaml"],
            "properties": {"yaml": {"type": "string"}, "dry_run": {"type": "boolean", "default": false}},
        }),
    );
    put(
        "SigmaDryRun",
        object(
            "A dry run: validated and matched against the last 24 hours, nothing written",
            &[
                ("valid", "boolean"),
                ("rule", "SigmaRule"),
                ("events_scanned", "integer"),
                ("matched", "integer"),
                ("sample_event_ids", "array"),
                ("truncated", "boolean"),
            ],
        ),
    );
    put(
        "SigmaToggle",
        json!({
            "type": "object",
            "required": ["enabled"],
            "additionalProperties": false,
            "properties": {"enabled": {"type": "boolean"}},
        }),
    );
    put(
        "RuleTimeline",
        object(
            "Matches per hour, 24 buckets, oldest first",
            &[
                ("rule_id", "string"),
                ("buckets", "array"),
                ("total", "integer"),
            ],
        ),
    );
    put(
        "Coverage",
        object(
            "The ATT&CK Enterprise matrix with coverage (docs/api.md)",
            &[
                ("attack_version", "string"),
                ("since_ns", "integer"),
                ("until_ns", "integer"),
                ("techniques_covered", "integer"),
                ("techniques_total", "integer"),
                ("tactics", "array"),
            ],
        ),
    );
    put(
        "IocStatus",
        object(
            "The indicator feed (docs/ioc.md)",
            &[
                ("dir", "string"),
                ("version", "integer"),
                ("loaded_ns", "integer"),
                ("indicators", "integer"),
                ("by_kind", "object"),
                ("files", "array"),
                ("errors", "array"),
            ],
        ),
    );
    put(
        "Health",
        object(
            "Health of each component (docs/api.md)",
            &[
                ("status", "string"),
                ("degraded", "array"),
                ("version", "string"),
                ("uptime_s", "integer"),
                ("components", "object"),
            ],
        ),
    );
    put(
        "Stats",
        object(
            "Pipeline counters and rates (docs/api.md)",
            &[
                ("received_total", "integer"),
                ("parsed_total", "integer"),
                ("stored_total", "integer"),
                ("dropped_total", "integer"),
                ("stored_bytes", "integer"),
                ("commits", "integer"),
                ("write_errors", "integer"),
                ("templates", "integer"),
                ("uptime_s", "integer"),
                ("store_reads", "StoreReads"),
                ("inputs", "[InputStats]"),
                ("rings", "[RingStats]"),
                ("rates", "Rates"),
                ("detection", "DetectionStats"),
                ("feedback", "object"),
                ("api", "ApiStats"),
                ("websocket", "StreamStats"),
            ],
        ),
    );
    put(
        "StoreReads",
        object(
            "Failed store reads (docs/api.md, errors)",
            &[
                ("read_errors", "integer"),
                ("last_read_error", "string?"),
                ("last_read_error_ns", "integer"),
            ],
        ),
    );
    put(
        "InputStats",
        object(
            "One input's counters",
            &[
                ("name", "string"),
                ("up", "boolean"),
                ("received", "integer"),
                ("bytes", "integer"),
                ("parsed", "integer"),
                ("malformed", "integer"),
                ("invalid_utf8", "integer"),
                ("truncated", "integer"),
                ("dropped", "integer"),
                ("connections", "integer"),
                ("connections_refused", "integer"),
                ("connection_errors", "integer"),
                ("connections_idle_closed", "integer"),
            ],
        ),
    );
    put(
        "RingStats",
        object(
            "One ring between pipeline stages",
            &[
                ("name", "string"),
                ("depth", "integer"),
                ("capacity", "integer"),
            ],
        ),
    );
    put(
        "Rates",
        object(
            "Events per second over the last seconds",
            &[
                ("received_per_s", "number"),
                ("stored_per_s", "number"),
                ("window_s", "number"),
            ],
        ),
    );
    put(
        "DetectionStats",
        object(
            "Detection counters (docs/api.md)",
            &[
                ("scored", "integer"),
                ("alerts", "object"),
                ("alert_updates", "integer"),
                ("alert_errors", "integer"),
                ("sigma_matches", "integer"),
                ("sigma_dropped", "integer"),
                ("ioc_matches", "integer"),
                ("correlation_hits", "integer"),
                ("correlation_groups", "integer"),
                ("correlation_dropped", "integer"),
                ("ueba_entities", "integer"),
                ("ueba_evicted", "integer"),
                ("sources", "integer"),
                ("saves", "integer"),
                ("save_errors", "integer"),
                ("series_errors", "integer"),
                ("last_save_ns", "integer"),
            ],
        ),
    );
    put(
        "ApiStats",
        object(
            "The API's refusals",
            &[("rate_limited", "object"), ("refused_host", "integer")],
        ),
    );
    put(
        "StreamStats",
        object(
            "The WebSocket stream's counters (docs/websocket.md)",
            &[
                ("connections", "integer"),
                ("max_connections", "integer"),
                ("accepted", "integer"),
                ("refused_capacity", "integer"),
                ("refused_origin", "integer"),
                ("frames_sent", "integer"),
                ("frames_dropped", "integer"),
                ("filters_applied", "integer"),
                ("filters_throttled", "integer"),
                ("invalid_frames", "integer"),
                ("tail_skipped_events", "integer"),
            ],
        ),
    );
    put(
        "Config",
        json!({"type": "object", "description": "The configuration as deploy/watchpost.toml documents it, credentials as ********"}),
    );
    put(
        "OpenApi",
        json!({"type": "object", "description": "An OpenAPI 3.1 document"}),
    );
    Value::Object(s)
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
