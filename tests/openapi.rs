//! The OpenAPI document against the running service: every operation it describes is served
//! (neither the "no such route" fallback nor 405), every query parameter it lists is accepted,
//! and one it does not list is refused with 422. The other direction, no route served
//! without a description, holds by construction: the router is built from the same table.

mod common;

use common::{Service, free_port, http, json};

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
