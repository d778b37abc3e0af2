//! The OpenAPI document against the running service: every operation it describes is served
//! (neither the "no such route" fallback nor 405), every query parameter it lists is accepted,
//! and one it does not list is refused with 422. The other direction, no route served
//! without a description, holds by construction: the router is built from the same table.

mod common;

use common::{
    Service, free_port, http, invalid_user_lines, json, send_lines, syslog_config, wait_for,
};
use serde_json::Value;

#[test]
fn every_described_operation_is_served_with_its_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let api = free_port();
    let config = dir.path().join("watchpost.toml");
    std::fs::write(
        &config,
        format!(
            "dashboard_port = {api}\nhealth_port = 0\napi_list_rate_limit = \"100000/minute\"\napi_detail_rate_limit = \"100000/minute\"\n[inputs.syslog_udp]\nenabled = false\n[inputs.syslog_tcp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[dataplane]\npin_workers = false\n"
        ),
    )
    .unwrap();
    let _svc = Service::start(dir.path(), &config, api);

    let (status, body) = http(api, "GET", "/api/v1/openapi.json", "");
    assert_eq!(status, 200);
    let doc = json(&body);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["servers"][0]["url"], "/api/v1");

    // What the fallback says, so that a described-but-unserved route would be told apart from a
    // served one answering 404 for an unknown id.
    let (status, body) = http(api, "GET", "/api/v1/no-such-thing", "");
    assert_eq!(
        (status, json(&body)["message"].as_str()),
        (404, Some("no such route"))
    );

    // A real rule id, so rule routes answer 200.
    let (_, body) = http(api, "GET", "/api/v1/sigma/rules?limit=1", "");
    let rule_id = json(&body)["items"][0]["id"].as_str().unwrap().to_string();

    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let method = method.to_ascii_uppercase();
            let mut url = format!("/api/v1{path}")
                .replace("{alert_id}", "0190a000-0000-7000-8000-000000000000")
                .replace("{entity_uuid}", "00000000-0000-5000-8000-000000000000")
                .replace("{exception_id}", "0190a000-0000-7000-8000-000000000001")
                .replace("{signal_id}", "0190a000-0000-7000-8000-000000000002")
                .replace("{rule_id}", &rule_id);
            let query: Vec<String> = op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["in"] == "query")
                .map(|p| {
                    let v = match &p["example"] {
                        serde_json::Value::String(s) => s.replace(',', "%2C"),
                        other => other.to_string(),
                    };
                    format!("{}={v}", p["name"].as_str().unwrap())
                })
                .collect();
            if !query.is_empty() {
                url = format!("{url}?{}", query.join("&"));
            }
            let body = if op.get("requestBody").is_some() {
                "{}"
            } else {
                ""
            };
            let (status, answer) = http(api, &method, &url, body);
            let what = format!("{method} {url}: {status} {answer}");
            assert_ne!(status, 405, "{what}");
            if status == 404 {
                assert_ne!(json(&answer)["message"], "no such route", "{what}");
            }
            let described = op["responses"]
                .as_object()
                .unwrap()
                .contains_key(&status.to_string());
            assert!(described, "status not in the document: {what}");
            if method == "GET" {
                // Every listed parameter, with its example, is accepted...
                assert_ne!(status, 422, "{what}");
                // ...and one the document does not list is refused.
                let sep = if query.is_empty() { '?' } else { '&' };
                let (status, answer) = http(api, &method, &format!("{url}{sep}bogus=1"), "");
                assert_eq!(
                    (status, json(&answer)["parameter"].as_str()),
                    (422, Some("bogus")),
                    "{method} {url} with an unknown parameter: {answer}"
                );
            }
        }
    }
    assert!(operations >= 25, "{operations}");
}

/// What the document says each answer looks like is what the service sends: every 2xx JSON answer
/// of a GET, over a store holding events and a Sigma alert, is checked against its described
/// schema. An object may not carry a field its schema does not list (unless the schema allows
/// any), must carry its required ones, and every value must have the described type. So a field
/// added, renamed or retyped in the code without the document fails here.
#[test]
fn every_answer_matches_its_described_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = syslog_config(dir.path(), api, Some(tcp), "");
    let _svc = Service::start(dir.path(), &config, api);
    send_lines(tcp, &invalid_user_lines());
    let alerts = wait_for(api, "/api/v1/alerts?type=sigma", |v| {
        v["items"].as_array().is_some_and(|a| !a.is_empty())
    });
    let alert = &alerts["items"][0];
    let alert_id = alert["id"].as_str().unwrap().to_string();
    let entity_uuid = alert["entity"]["uuid"].as_str().unwrap().to_string();
    let (_, body) = http(api, "GET", "/api/v1/sigma/rules?limit=1", "");
    let rule_id = json(&body)["items"][0]["id"].as_str().unwrap().to_string();

    // An exception (that matches nothing here), so its routes answer with a body.
    let (status, body) = http(
        api,
        "POST",
        "/api/v1/exceptions",
        r#"{"detector": "ueba:user", "reason": "scanner", "author": "ana", "conditions": {"users": ["nobody"]}}"#,
    );
    assert_eq!(status, 201, "{body}");
    let exception_id = json(&body)["id"].as_str().unwrap().to_string();

    let (_, body) = http(api, "GET", "/api/v1/openapi.json", "");
    let doc = json(&body);
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut times = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(op) = item.get("get") else { continue };
        let url = format!("/api/v1{path}")
            .replace("{alert_id}", &alert_id)
            .replace("{entity_uuid}", &entity_uuid)
            .replace("{exception_id}", &exception_id)
            .replace("{rule_id}", &rule_id);
        let (status, answer) = http(api, "GET", &url, "");
        let Some(schema) =
            op["responses"][status.to_string()].pointer("/content/application~1json/schema")
        else {
            continue;
        };
        if !(200..300).contains(&status) {
            continue;
        }
        checked += 1;
        conforms(
            &doc,
            schema,
            &json(&answer),
            &format!("GET {url}"),
            &mut problems,
        );
        times += readable_times(&json(&answer), &format!("GET {url}"), &mut problems);
    }
    assert!(checked >= 15, "only {checked} answers had a described body");
    assert!(times >= 10, "only {times} nanosecond fields were seen");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Checks that every `X_ns` integer of `value` (producers' `attributes` aside) has its readable
/// sibling `X`, RFC 3339 text (or null for 0, "never"); counts the integers seen.
fn readable_times(value: &Value, place: &str, problems: &mut Vec<String>) -> usize {
    let mut seen = 0;
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "attributes" {
                    continue;
                }
                let sibling = k.strip_suffix("_ns").map(|name| map.get(name));
                match (sibling, v.as_i64()) {
                    (Some(readable), Some(ns)) => {
                        seen += 1;
                        let fine = match readable {
                            Some(Value::String(text)) => ns != 0 && text.ends_with('Z'),
                            Some(Value::Null) => ns == 0,
                            _ => false,
                        };
                        if !fine {
                            problems
                                .push(format!("{place}: {k} = {ns} has {readable:?} beside it"));
                        }
                    }
                    _ => seen += readable_times(v, &format!("{place}.{k}"), problems),
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                seen += readable_times(v, &format!("{place}[{i}]"), problems);
            }
        }
        _ => {}
    }
    seen
}

/// Checks `value` against `schema` (the subset the document uses: `$ref`, `type` (one or a list),
/// `anyOf`, `oneOf`, `allOf`, `const`, `properties`, `required`, `additionalProperties`,
/// `items`, `enum`), naming each mismatch by its place.
fn conforms(
    doc: &serde_json::Value,
    schema: &serde_json::Value,
    value: &serde_json::Value,
    at: &str,
    problems: &mut Vec<String>,
) {
    use serde_json::Value;
    if let Some(r) = schema["$ref"].as_str() {
        let target = doc
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling {r}"));
        return conforms(doc, target, value, at, problems);
    }
    for all in schema["allOf"].as_array().into_iter().flatten() {
        conforms(doc, all, value, at, problems);
    }
    // `anyOf` and `oneOf` alike: the value must fit one of the alternatives (the derived
    // schemas' alternatives never overlap, so "one" and "exactly one" do not differ here).
    if let Some(alternatives) = schema["anyOf"].as_array().or(schema["oneOf"].as_array()) {
        let fitting = alternatives.iter().any(|alt| {
            let mut scratch = Vec::new();
            conforms(doc, alt, value, at, &mut scratch);
            scratch.is_empty()
        });
        if !fitting {
            problems.push(format!("{at}: {value} fits none of {alternatives:?}"));
            return;
        }
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        problems.push(format!("{at}: {value} is not {expected}"));
    }
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let allowed: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let fits = |t: &&str| *t == kind || (*t == "number" && kind == "integer");
    if !allowed.is_empty() && !allowed.iter().any(fits) {
        problems.push(format!("{at}: a {kind}, described as {allowed:?}"));
        return;
    }
    if let Some(values) = schema["enum"].as_array()
        && !values.contains(value)
    {
        problems.push(format!("{at}: {value} is not one of {values:?}"));
    }
    match value {
        Value::Object(map) => {
            let properties = schema["properties"].as_object();
            if let Some(required) = schema["required"].as_array() {
                for r in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(r) {
                        problems.push(format!("{at}: required `{r}` is missing"));
                    }
                }
            }
            let open = schema["additionalProperties"] == Value::Bool(true);
            for (k, v) in map {
                match properties.and_then(|p| p.get(k)) {
                    Some(s) => conforms(doc, s, v, &format!("{at}.{k}"), problems),
                    None if properties.is_some() && !open => {
                        problems.push(format!("{at}: `{k}` is not described"))
                    }
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().take(5).enumerate() {
                    conforms(doc, s, v, &format!("{at}[{i}]"), problems);
                }
            }
        }
        _ => {}
    }
}
