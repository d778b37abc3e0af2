//! Correlation, indicators and kill-chain progression end to end, as an operator meets them: an
//! address that guesses passwords, then logs in, and is on a threat feed raises an `ioc` alert,
//! the brute-force and brute-force-then-success `correlation` alerts listing the events they
//! join, and a kill-chain alert joining those alerts; the feed reloads when a file changes.

mod common;

use common::{Service, free_port, http, json, send_lines, stamp, wait_for};

fn alerts_by(v: &serde_json::Value, detector: &str) -> Vec<serde_json::Value> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["detector"] == detector)
        .cloned()
        .collect()
}

fn rule_id(api: u16, title: &str) -> String {
    let v = json(
        &http(
            api,
            "GET",
            "/api/v1/sigma/rules?kind=correlation&limit=100",
            "",
        )
        .1,
    );
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["title"] == title)
        .unwrap_or_else(|| panic!("{title}: {v}"))["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn brute_force_then_login_from_a_listed_address_correlates_into_a_kill_chain() {
    let dir = tempfile::tempdir().unwrap();
    let ioc = dir.path().join("feeds");
    std::fs::create_dir(&ioc).unwrap();
    std::fs::write(
        ioc.join("blocklist.csv"),
        "indicator,type,description\n203.0.113.9,ipv4,known SSH scanner\n",
    )
    .unwrap();
    let (api, tcp) = (free_port(), free_port());
    let config = dir.path().join("watchpost.toml");
    std::fs::write(
        &config,
        format!(
            "dashboard_port = {api}\nhealth_port = 0\napi_list_rate_limit = \"100000/minute\"\napi_detail_rate_limit = \"100000/minute\"\n[inputs.syslog_udp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n[inputs.syslog_tcp]\naddress = \"127.0.0.1:{tcp}\"\n[dataplane]\npin_workers = false\n[detection]\nioc_dir = \"{}\"\nioc_reload_interval_seconds = 1\n",
            ioc.display()
        ),
    )
    .unwrap();
    let svc = Service::start(dir.path(), &config, api);

    let status = wait_for(api, "/api/v1/ioc", |v| v["indicators"] == 1);
    assert_eq!(status["files"][0]["format"], "csv", "{status}");

    let brute = rule_id(api, "Password Guessing from One Address");
    let then = rule_id(api, "Password Guessing Followed by a Successful Login");

    // Twelve wrong passwords in twelve seconds, then the right one.
    let mut lines: String = (0..12)
        .map(|i| {
            let t = stamp(i - 21);
            format!("<38>{t} web-01 sshd[30{i:02}]: Failed password for alice from 203.0.113.9 port 400{i:02} ssh2\n")
        })
        .collect();
    let t = stamp(-1);
    lines.push_str(&format!(
        "<38>{t} web-01 sshd[3100]: Accepted password for alice from 203.0.113.9 port 40100 ssh2\n"
    ));
    send_lines(tcp, &lines);

    let all = wait_for(api, "/api/v1/alerts?limit=100", |v| {
        !alerts_by(v, "killchain").is_empty() && !alerts_by(v, &then).is_empty()
    });
    // Guessing alone is internet background (a low rule): a signal on the address, not an
    // alert; the guessing that succeeded is the alert.
    assert!(alerts_by(&all, &brute).is_empty(), "{all}");
    let (_, body) = http(api, "GET", &format!("/api/v1/signals?detector={brute}"), "");
    let signals = json(&body);
    let b = &signals["items"][0];
    assert_eq!(
        b["title"], "Password Guessing from One Address",
        "{signals}"
    );
    assert_eq!(b["attack"][0]["technique_id"], "T1110.001");
    let t = &alerts_by(&all, &then)[0];
    assert_eq!(t["severity"], 4, "level high: {t}");
    assert_eq!(t["contributing_events"].as_array().unwrap().len(), 2, "{t}");

    let iocs: Vec<_> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "ioc")
        .collect();
    assert_eq!(iocs.len(), 1, "one alert per indicator and subject: {all}");
    assert_eq!(
        iocs[0]["title"],
        "IOC match: ipv4 203.0.113.9 (known SSH scanner)"
    );
    assert_eq!(iocs[0]["detector"], "ioc:blocklist.csv");
    assert_eq!(iocs[0]["attack"][0]["tactic"], "Command and Control");
    // The heatmap counts the feed's match under its technique, though no rule fired there.
    let cov = json(
        &http(
            api,
            "GET",
            "/api/v1/attack/coverage?since=2000-01-01T00:00:00Z",
            "",
        )
        .1,
    );
    let c2 = cov["tactics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "TA0011")
        .unwrap();
    let t1071 = c2["techniques"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == iocs[0]["attack"][0]["technique_id"])
        .unwrap();
    assert!(t1071["ioc_hits"].as_u64() >= Some(1), "{t1071}");
    assert!(
        c2["ioc_hits"].as_u64() >= t1071["ioc_hits"].as_u64(),
        "{c2}"
    );

    let k = &alerts_by(&all, "killchain")[0];
    let related = k["related_alerts"].as_array().unwrap();
    // The indicator's alert and the guessing that succeeded (guessing alone is a signal).
    assert!(related.len() >= 2, "{k}");
    let tactics: Vec<&str> = k["attack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["tactic"].as_str().unwrap())
        .collect();
    assert!(tactics.contains(&"Credential Access"), "{tactics:?}");
    assert!(tactics.contains(&"Command and Control"), "{tactics:?}");
    // The kill-chain alert is readable by id and lists alerts that exist.
    let one = json(
        &http(
            api,
            "GET",
            &format!("/api/v1/alerts/{}", related[0].as_str().unwrap()),
            "",
        )
        .1,
    );
    assert!(one["id"].is_string(), "{one}");

    // Fires of correlations count like rules'; the counters show the work.
    wait_for(api, &format!("/api/v1/sigma/rules/{brute}"), |v| {
        v["fires_24h"].as_u64() >= Some(1)
    });
    let stats = json(&http(api, "GET", "/api/v1/stats", "").1);
    let d = &stats["detection"];
    assert!(d["correlation_hits"].as_u64().unwrap() >= 13, "{d}");
    assert!(d["ioc_matches"].as_u64().unwrap() >= 13, "{d}");

    // A new feed file is picked up without a restart; a bad line is reported with its place.
    std::fs::write(
        ioc.join("domains.txt"),
        "# c2\nevil.example\nnot an indicator\n",
    )
    .unwrap();
    let status = wait_for(api, "/api/v1/ioc", |v| v["indicators"] == 2);
    assert_eq!(status["by_kind"]["domain"], 1, "{status}");
    assert_eq!(status["errors"][0]["line"], 3, "{status}");
    let (code, body) = http(api, "POST", "/api/v1/ioc/reload", "");
    assert_eq!(code, 200, "{body}");
    drop(svc);
}
