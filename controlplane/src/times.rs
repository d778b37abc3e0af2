//! Readable times beside the nanosecond ones: every `X_ns` field of an API answer gets a sibling
//! `X` with the same instant as RFC 3339 UTC (`first_seen_ns` and `first_seen`), null where the
//! integer is null or 0 (the API's "never"). Integers stay the
//! contract (exact, sortable, what the store keeps); the text is for people and for tools that
//! read dates, such as a spreadsheet or `jq`'s `fromdate`.
//!
//! Added in one place, to the serialised answer, so that no route can forget it; the OpenAPI
//! document describes each added field beside its source (`openapi::describe_readable_times`). Only names the
//! document lists are touched, and producers' own data (`attributes`) never is, so a log field
//! that happens to end in `_ns` is left as it came.

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::OnceLock;
use watchpost_normalize::Rfc3339;

/// Objects whose keys are a producer's, not the API's.
const OPAQUE: &[&str] = &["attributes"];

/// The `_ns` fields of the API's answers, from the OpenAPI document's schemas.
fn known() -> &'static HashSet<String> {
    static KNOWN: OnceLock<HashSet<String>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let mut names = HashSet::new();
        collect(&crate::openapi::schemas(), &mut names);
        names
    })
}

fn collect(schema: &Value, names: &mut HashSet<String>) {
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

/// Adds the RFC 3339 sibling of every known `_ns` field in `value`.
pub(crate) fn annotate(value: &mut Value) {
    annotate_with(value, known());
}

fn annotate_with(value: &mut Value, names: &HashSet<String>) {
    match value {
        Value::Object(map) => {
            let mut added: Vec<(String, Value)> = Vec::new();
            for (k, v) in map.iter_mut() {
                if OPAQUE.contains(&k.as_str()) {
                    continue;
                }
                if names.contains(k) {
                    let text = match v {
                        // 0 is how the API says "never" (a model not yet saved).
                        Value::Number(n) if n.as_i64() == Some(0) => Some(Value::Null),
                        Value::Number(n) => {
                            n.as_i64().map(|ns| Value::from(Rfc3339(ns).to_string()))
                        }
                        Value::Null => Some(Value::Null),
                        _ => None,
                    };
                    if let Some(text) = text {
                        added.push((k.trim_end_matches("_ns").to_string(), text));
                    }
                } else {
                    annotate_with(v, names);
                }
            }
            insert_absent(map, added);
        }
        Value::Array(items) => items.iter_mut().for_each(|v| annotate_with(v, names)),
        _ => {}
    }
}

fn insert_absent(map: &mut Map<String, Value>, added: Vec<(String, Value)>) {
    for (k, v) in added {
        map.entry(k).or_insert(v);
    }
}

/// The layer: JSON answers of the API get their readable times.
pub(crate) async fn layer(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // Answers are built in memory (no route streams JSON), so this reads what is already there.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "could not read an API answer to add its times");
            parts.headers.remove(CONTENT_LENGTH);
            return Response::from_parts(parts, Body::empty());
        }
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    annotate(&mut value);
    match serde_json::to_vec(&value) {
        Ok(out) => {
            parts.headers.remove(CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(out))
        }
        Err(_) => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names() -> HashSet<String> {
        ["first_seen_ns", "timestamp_ns", "expires_ns", "last_hit_ns"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn known_ns_fields_get_their_rfc3339_sibling_at_any_depth() {
        let mut v = json!({"items": [{"first_seen_ns": 1_795_255_200_123_456_789i64,
            "events": [{"timestamp_ns": 1}], "expires_ns": null, "last_hit_ns": 0}]});
        annotate_with(&mut v, &names());
        assert_eq!(
            v["items"][0]["first_seen"],
            "2026-11-21T10:00:00.123456789Z"
        );
        assert_eq!(
            v["items"][0]["events"][0]["timestamp"],
            "1970-01-01T00:00:00.000000001Z"
        );
        assert_eq!(v["items"][0]["expires"], Value::Null);
        assert_eq!(v["items"][0]["last_hit"], Value::Null, "0 is never");
        assert_eq!(
            v["items"][0]["first_seen_ns"], 1_795_255_200_123_456_789i64,
            "kept"
        );
    }

    #[test]
    fn producer_fields_and_unknown_names_are_left_alone() {
        let mut v = json!({"attributes": {"timestamp_ns": 5}, "sources": {"app_ns": 3},
            "timestamp_ns": 5, "timestamp": "the producer's own"});
        annotate_with(&mut v, &names());
        assert!(v["attributes"].get("timestamp").is_none());
        assert!(v["sources"].get("app").is_none());
        assert_eq!(
            v["timestamp"], "the producer's own",
            "an existing field wins"
        );
    }

    #[test]
    fn the_document_describes_the_added_fields() {
        let alert = &crate::openapi::schemas()["Alert"]["properties"];
        assert_eq!(alert["first_seen"]["format"], "date-time", "{alert}");
        assert!(known().contains("first_seen_ns"));
        assert!(known().contains("timestamp_ns"));
    }
}
