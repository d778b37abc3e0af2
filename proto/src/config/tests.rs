use super::*;

fn problems(text: &str) -> Vec<String> {
    match Config::from_toml(text) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.key, p.problem))
            .collect(),
    }
}

#[test]
fn defaults_are_valid_and_match_the_spec() {
    let c = Config::default();
    c.validate().unwrap();
    assert_eq!(c.dashboard_port, 8080);
    assert_eq!(c.ws_max_connections, 20);
    assert_eq!(c.ws_filter_min_interval_ms, 100);
    assert_eq!(c.api_coverage_rate_limit, "10/minute");
    assert_eq!(c.ueba.source_ip_cap, 64);
    assert_eq!(c.ueba.template_top_k, 32);
    assert_eq!(c.ueba.ema_alpha, 0.05);
    assert_eq!(c.ueba.alert_cooldown_seconds, 900);
    assert_eq!(c.ueba.max_entities, 100_000);
    assert_eq!(c.ueba.dspot_risk, 0.0001);
    assert_eq!(c.ueba.strong_deviation_bits, 9.0);
    assert_eq!(c.ueba.dormancy_days, 14.0);
    assert_eq!(c.llm.backend, "");
    assert_eq!(c.llm.explanation_max_contributing_events, 8);
    assert_eq!(c.llm.explanation_timeout_s, 12.0);
    assert_eq!(c.llm.hunt_timeout_s, 12.0);
    assert_eq!(c.llm.rule_suggestion_timeout_s, 30.0);
    assert_eq!(c.llm.hunt_max_query_chars, 512);
    assert_eq!(c.llm.rule_suggestion_min_tp, 3);
    assert_eq!(c.llm.rule_suggestion_window_days, 0);
    assert_eq!(c.llm.rule_suggestion_cache_ttl_s, 21_600);
    assert_eq!(Config::from_toml("").unwrap(), c);
}

#[test]
fn the_example_file_documents_exactly_the_defaults() {
    let example = Config::from_toml(include_str!("../../../deploy/watchpost.toml")).unwrap();
    assert_eq!(example, Config::default());
}

#[test]
fn weights_must_sum_to_one() {
    let got = problems("[ueba.sub_score_weights]\ntime_of_day = 0.5\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("ueba.sub_score_weights: the four weights must sum to 1.0"),
        "{got:?}"
    );
}

#[test]
fn the_single_deviation_bar_is_off_or_a_sensible_surprisal() {
    assert!(problems("[ueba]\nstrong_deviation_bits = 0\n").is_empty());
    let got = problems("[ueba]\nstrong_deviation_bits = 2\n");
    assert_eq!(
        got,
        ["ueba.strong_deviation_bits: 2 must be 0 (off) or from 4 to 40"],
        "{got:?}"
    );
    let got = problems("[ueba]\ndormancy_days = -1\n");
    assert!(
        got[0].starts_with("ueba.dormancy_days: -1 is out of range"),
        "{got:?}"
    );
}

#[test]
fn informational_can_never_be_the_alerting_level() {
    assert!(problems("[detection]\nsigma_alert_min_level = \"low\"\n").is_empty());
    let got = problems("[detection]\nsigma_alert_min_level = \"informational\"\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("detection.sigma_alert_min_level: `informational` must be low"),
        "{got:?}"
    );
}

#[test]
fn an_ml_alert_must_be_rarer_than_an_anomaly() {
    assert!(problems("[detection]\nml_alert_risk = 0.0001\n").is_empty());
    let got = problems("[detection]\nml_risk = 0.0001\nml_alert_risk = 0.001\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("detection.ml_alert_risk: 0.001 is above detection.ml_risk (0.0001)"),
        "{got:?}"
    );
}

#[test]
fn a_risk_level_weight_is_a_number_of_points_named_by_its_level() {
    let c = Config::from_toml("[detection.risk_level_weights]\nlow = 20\n").unwrap();
    assert_eq!(c.detection.risk_level_weights.low, 20.0);
    assert_eq!(c.detection.risk_level_weights.medium, 30.0);
    let got = problems("[detection.risk_level_weights]\nhigh = -1\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("detection.risk_level_weights.high: -1 is out of range"),
        "{got:?}"
    );
    assert!(Config::from_toml("[detection.risk_level_weights]\nsevere = 1\n").is_err());
}

#[test]
fn a_ueba_signal_is_a_deviation_short_of_an_alert() {
    assert!(problems("[ueba]\nsignal_bits = 0\n").is_empty());
    let got = problems("[ueba]\nsignal_bits = 9\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("ueba.signal_bits: 9 is not below ueba.strong_deviation_bits (9)"),
        "{got:?}"
    );
    // With the alerting path off, signals may take any bar.
    assert!(problems("[ueba]\nstrong_deviation_bits = 0\nsignal_bits = 12\n").is_empty());
    assert_eq!(problems("[ueba]\nsignal_bits = 2\n").len(), 1);
}

#[test]
fn an_indicator_confidence_bar_is_a_percentage() {
    assert!(problems("[detection]\nioc_alert_min_confidence = 100\n").is_empty());
    let got = problems("[detection]\nioc_alert_min_confidence = 300\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("detection.ioc_alert_min_confidence: 300 is out of range (0 to 100)"),
        "{got:?}"
    );
}

#[test]
fn the_probe_listener_needs_its_own_port() {
    let got = problems("dashboard_port = 9000\nhealth_port = 9000\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("health_port: 9000 is dashboard_port too"),
        "{got:?}"
    );
    assert!(problems("health_port = 70000\n")[0].starts_with("health_port: port 70000"));
    assert!(problems("health_port = 0\n").is_empty());
    assert_eq!(Config::default().health_port, 8081);
}

#[test]
fn allowed_hosts_must_be_host_and_port() {
    assert!(problems("api_allowed_hosts = [\"soc.corp.example\", \"[::1]:9000\"]\n").is_empty());
    let got = problems("api_allowed_hosts = [\"ok.example\", \"https://soc.corp.example\"]\n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("api_allowed_hosts[1]: `https://soc.corp.example` is not a host[:port]"),
        "{got:?}"
    );
}

#[test]
fn nested_values_are_parse_errors_with_their_place_and_short_lines() {
    let nested = |depth: usize| {
        format!(
            "log_level = \"info\"\ndashboard_port = {}1{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    let got = problems(&nested(70));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("dashboard_port: line 2: an array is not an integer from 0 to"),
        "within the bound it parses: {got:?}"
    );
    assert!(got[0].contains("line 2: "), "{got:?}");
    let got = problems(&nested(100_000));
    assert!(got[0].starts_with("(file): TOML parse error"), "{got:?}");
    assert!(got[0].contains("max recursion depth"), "{}", &got[0][..300]);
    assert!(
        got[0].lines().all(|l| l.chars().count() <= 201),
        "lines are clipped"
    );
}

#[test]
fn unknown_keys_are_errors_that_name_the_key() {
    let got = problems("dashbord_port = 80\n");
    assert_eq!(got.len(), 1);
    assert!(got[0].contains("dashbord_port"), "{got:?}");
    let got = problems("[ueba]\nwarmup = 3\n");
    assert!(got[0].contains("warmup"), "{got:?}");
}

#[test]
fn every_problem_is_reported_at_once() {
    let got = problems(
        "dashboard_port = 70000\napi_list_rate_limit = \"ten/minute\"\n[llm]\nbackend = \"cloud\"\n[inputs.syslog_tcp]\naddress = \"nowhere\"\n",
    );
    let keys: Vec<&str> = got.iter().map(|g| g.split(':').next().unwrap()).collect();
    assert_eq!(
        keys,
        vec![
            "dashboard_port",
            "api_list_rate_limit",
            "llm.cloud_provider",
            "llm.cloud_model",
            "llm.cloud_api_key",
            "inputs.syslog_tcp.address"
        ],
        "{got:?}"
    );
}

#[test]
fn wrong_types_are_reported_with_their_line() {
    let got = problems("[storage]\nretention_days = \"forever\"\n");
    assert!(got[0].contains("line 2"), "{got:?}");
}

/// Issue 50, item 8: `config check` stopped at the first syntax or type error, cut the list of
/// valid keys mid-word ("api_trust_proxy_he...") and had no "did you mean" for `warmup_dayz`.
#[test]
fn syntax_type_and_key_errors_are_all_reported_with_the_closest_key_and_every_valid_one() {
    let got = problems(concat!(
        "dashboard_port = \"eighty\"\n",
        "api_trust_proxy_headrs = true\n",
        "log_level = \"info\"\n",
        "[ueba]\n",
        "warmup_dayz = 3\n",
        "ema_alpha = \"fast\"\n",
        "[storage]\n",
        "retention_days = -1\n",
        "retention_days = 5\n",
    ));
    // The duplicate key is a syntax error; the walk still reports every key and type problem.
    assert!(
        got.iter()
            .any(|g| g.starts_with("(file): TOML parse error")),
        "{got:#?}"
    );
    let find = |key: &str| {
        got.iter()
            .find(|g| g.starts_with(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no problem for {key}: {got:#?}"))
            .clone()
    };
    let port = find("dashboard_port");
    assert!(
        port.starts_with("dashboard_port: line 1: the string \"eighty\" is not an integer"),
        "{port}"
    );
    let proxy = find("api_trust_proxy_headrs");
    assert!(
        proxy.contains("did you mean `api_trust_proxy_headers`?"),
        "{proxy}"
    );
    // Every key of the table, none cut.
    for key in [
        "dashboard_port",
        "api_trust_proxy_headers",
        "ws_frame_max_bytes",
        "log_level",
    ] {
        assert!(proxy.contains(key), "{key} missing from {proxy}");
    }
    let warmup = find("ueba.warmup_dayz");
    assert!(warmup.contains("did you mean `warmup_days`?"), "{warmup}");
    assert!(warmup.starts_with("ueba.warmup_dayz: line 5: "), "{warmup}");
    assert!(find("ueba.ema_alpha").contains("is not a number"));
    assert!(find("storage.retention_days").contains("the integer -1 is not an integer from 0"));

    // Without the syntax error, the values that are fine are checked too, in the same pass.
    let got = problems(concat!(
        "warmup_days = 3\n",
        "dashboard_port = 70000\n",
        "[ueba]\n",
        "warmup_dayz = 3\n",
    ));
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(
        got[0].starts_with("warmup_days: line 1: unknown key; `ueba.warmup_days` is a key"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("ueba.warmup_dayz: line 4: unknown key; did you mean"),
        "{got:#?}"
    );
    assert!(
        got[2].starts_with("dashboard_port: port 70000 is out of range"),
        "{got:#?}"
    );
}

#[test]
fn credentials_are_masked_and_env_references_resolved() {
    let mut c = Config::from_toml(
        "api_rate_limit_store_url = \"redis://:hunter2@10.0.0.1:6379/0\"\n[llm]\nbackend = \"cloud\"\ncloud_provider = \"openai\"\ncloud_model = \"m\"\ncloud_api_key = \"env:WATCHPOST_TEST_KEY_UNSET\"\n",
    )
    .unwrap();
    let err = c.resolve_secrets().unwrap_err();
    assert_eq!(err.problems[0].key, "llm.cloud_api_key");
    c.llm.cloud_api_key = "sk-secret".into();
    let shown = c.masked_toml();
    assert!(
        !shown.contains("hunter2") && !shown.contains("sk-secret"),
        "{shown}"
    );
    assert_eq!(c.masked_json()["llm"]["cloud_api_key"], MASK);
    // Masking must not touch the running value.
    assert_eq!(c.llm.cloud_api_key.expose(), "sk-secret");
}

#[test]
fn rate_limits_parse() {
    assert_eq!(
        RateLimit::parse("60/minute").unwrap(),
        RateLimit {
            count: 60,
            per_seconds: 60
        }
    );
    assert!(RateLimit::parse("0/minute").is_err());
    assert!(RateLimit::parse("5/fortnight").is_err());
}

/// Property: any bytes given as a configuration file give a configuration or an error that
/// names a key or a position, never a panic.
#[test]
fn mangled_configuration_files_are_errors_never_panics() {
    let example = include_str!("../../../deploy/watchpost.toml");
    let examples: [&[u8]; 2] = [example.as_bytes(), b"[storage]\nretention_days = 30\n"];
    let mut inputs = crate::mutate::Mutations::new(&examples, 25, 64 << 10);
    for _ in 0..3_000 {
        let bytes = inputs.next_input();
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = Config::from_toml(&text) {
            assert!(!e.to_string().is_empty());
        }
    }
}

/// The commented `[[notifications]]` example of `deploy/watchpost.toml`, uncommented.
fn notification_example() -> String {
    let file = include_str!("../../../deploy/watchpost.toml");
    let start = file.find("# --- notifications example ---").unwrap();
    let end = file.find("# --- end of notifications example ---").unwrap();
    file[start..end]
        .lines()
        .skip(1)
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_example_channel_lists_every_key_with_its_default() {
    let text = notification_example();
    let value: toml::Value = toml::from_str(&text).unwrap();
    let listed = value["notifications"][0].as_table().unwrap();
    let defaults = serde_json::to_value(crate::config::NotificationChannel::default()).unwrap();
    for (key, default) in defaults.as_object().unwrap() {
        let shown = listed.get(key).unwrap_or_else(|| {
            panic!("deploy/watchpost.toml does not document notifications.{key}")
        });
        if !["name", "kind", "url"].contains(&key.as_str()) {
            assert_eq!(
                serde_json::to_value(shown).unwrap(),
                *default,
                "notifications.{key}"
            );
        }
    }
    assert_eq!(listed.len(), defaults.as_object().unwrap().len());
    // With the variable set, the example is a valid configuration.
    let mut c: Config = toml::from_str(&text).unwrap();
    c.notifications[0].url = "https://hooks.slack.com/services/T0/B0/x".into();
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn channel_keys_are_checked_with_their_position() {
    let got = problems(
        "[[notifications]]\nname = \"a\"\nkind = \"slack\"\nurl = \"http://hooks.example.com/x\"\nsmtp_host = \"mx\"\n\
         [[notifications]]\nname = \"a\"\nkind = \"email\"\nsmtp_host = \"mx\"\nemail_from = \"nobody\"\nmin_severity = 9\n\
         [[notifications]]\nname = \"s\"\nkind = \"syslog\"\nsyslog_address = \"siem\"\nsyslog_transport = \"quic\"\nrate_limit = \"5/week\"\n",
    );
    let want = [
        "notifications[0].url: plain http:// is allowed only to loopback",
        "notifications[0].smtp_host: is not a key of a `slack` channel",
        "notifications[1].name: `a` names two channels",
        "notifications[1].email_from: `nobody` is not an e-mail address",
        "notifications[1].email_to: an email channel needs a recipient",
        "notifications[1].min_severity: 9 is out of range",
        "notifications[2].syslog_address: `siem` is not a host:port address",
        "notifications[2].syslog_transport: `quic` is not one of",
        "notifications[2].rate_limit: ",
    ];
    for w in want {
        assert!(
            got.iter().any(|g| g.starts_with(w)),
            "missing {w:?} in {got:?}"
        );
    }
    assert_eq!(got.len(), want.len(), "{got:?}");
    // The URL, a credential, is never quoted in a problem.
    assert!(
        !got.iter().any(|g| g.contains("hooks.example.com/x")),
        "{got:?}"
    );
}

#[test]
fn channel_credentials_come_from_the_environment_and_are_masked() {
    let mut c = Config::from_toml(
        "[[notifications]]\nname = \"hook\"\nkind = \"webhook\"\nurl = \"env:WATCHPOST_TEST_HOOK_UNSET\"\nsecret = \"k3y\"\n",
    )
    .unwrap();
    let err = c.resolve_secrets().unwrap_err();
    assert_eq!(err.problems[0].key, "notifications[0].url");
    c.notifications[0].url = "https://example.org/hook/t0ken".into();
    let shown = c.masked_json();
    assert_eq!(shown["notifications"][0]["url"], MASK);
    assert_eq!(shown["notifications"][0]["secret"], MASK);
    assert_eq!(shown["notifications"][0]["smtp_password"], "");
    assert!(!format!("{c:?}").contains("t0ken"));
}

#[test]
fn channel_filters_take_severity_type_tactic_and_rule() {
    let alert: crate::Alert = serde_json::from_value(serde_json::json!({
        "id": "a", "type": "sigma", "severity": 4, "title": "t", "detector": "rule-1",
        "dedup_key": "k", "first_seen_ns": 0, "last_seen_ns": 0, "count": 1, "source": "s",
        "entity": null, "score": 0.0, "threshold": 0.0, "contributions": {},
        "attack": [{"tactic_id": "TA0006", "tactic": "Credential Access",
                    "technique_id": "T1003", "technique": "OS Credential Dumping"}],
        "contributing_events": [], "related_entities": []
    }))
    .unwrap();
    let c = |f: &dyn Fn(&mut crate::config::NotificationChannel)| {
        let mut c = crate::config::NotificationChannel::default();
        f(&mut c);
        c.accepts(&alert)
    };
    assert!(c(&|_| {}));
    assert!(!c(&|c| c.min_severity = 5));
    assert!(c(&|c| c.alert_types = vec!["ioc".into(), "sigma".into()]));
    assert!(!c(&|c| c.alert_types = vec!["ueba".into()]));
    assert!(c(&|c| c.tactics = vec!["credential access".into()]));
    assert!(c(&|c| c.tactics = vec!["TA0006".into()]));
    assert!(!c(&|c| c.tactics = vec!["TA0008".into()]));
    assert!(c(&|c| c.rule_ids = vec!["rule-1".into()]));
    assert!(!c(&|c| c.rule_ids = vec!["rule-2".into()]));
}

#[test]
fn a_url_from_the_environment_is_held_to_the_same_rules() {
    // SAFETY: a variable only this test reads.
    unsafe {
        std::env::set_var(
            "WATCHPOST_TEST_PLAIN_HOOK",
            "http://hooks.example.com/t0ken",
        )
    };
    let mut c = Config::from_toml(
        "[[notifications]]\nname = \"hook\"\nkind = \"webhook\"\nurl = \"env:WATCHPOST_TEST_PLAIN_HOOK\"\n",
    )
    .unwrap();
    let err = c.resolve_secrets().unwrap_err();
    assert_eq!(err.problems.len(), 1, "{err}");
    assert_eq!(err.problems[0].key, "notifications[0].url");
    assert!(
        err.problems[0].problem.contains("only to loopback"),
        "{err}"
    );
    assert!(!err.to_string().contains("t0ken"), "{err}");
}

#[test]
fn plain_smtp_and_other_kinds_keys_are_refused() {
    let got = problems(
        "[[notifications]]\nname = \"m\"\nkind = \"email\"\nsmtp_host = \"mx.example.org\"\nsmtp_security = \"none\"\n\
         email_from = \"w@example.org\"\nemail_to = [\"soc@example.org\"]\nsyslog_format = \"json\"\n",
    );
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("notifications[0].syslog_format: is not a key of a `email` channel"),
        "{got:?}"
    );
    assert!(
        got[1].starts_with("notifications[0].smtp_security: \"none\" sends alerts"),
        "{got:?}"
    );
    assert!(
        problems(
            "[[notifications]]\nname = \"m\"\nkind = \"email\"\nsmtp_host = \"127.0.0.1\"\nsmtp_security = \"none\"\n\
             email_from = \"w@example.org\"\nemail_to = [\"soc@example.org\"]\n",
        )
        .is_empty()
    );
}

#[test]
fn the_store_tls_files_must_exist_come_in_pairs_and_need_a_tls_url() {
    let dir = std::env::temp_dir().join(format!("wp-store-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pem = dir.join("ca.pem");
    std::fs::write(&pem, "not checked here").unwrap();
    let pem = pem.display().to_string();
    let found = problems(&format!(
        "api_rate_limit_store_url = \"rediss://cache:6380\"\n\
         api_rate_limit_store_ca_file = \"{pem}\"\napi_rate_limit_store_cert_file = \"{pem}\"\n"
    ));
    assert_eq!(
        found,
        vec![
            "api_rate_limit_store_key_file: a client certificate needs both \
             api_rate_limit_store_cert_file and api_rate_limit_store_key_file"
        ]
    );
    let found = problems(&format!(
        "api_rate_limit_store_url = \"redis://cache\"\napi_rate_limit_store_ca_file = \"{pem}\"\n"
    ));
    assert!(found[0].starts_with("api_rate_limit_store_ca_file: applies to a TLS store only"));
    let found = problems("api_rate_limit_store_ca_file = \"/nonexistent/ca.pem\"\n");
    assert!(found[0].contains("is not a readable file"), "{found:?}");
    assert!(
        problems(&format!(
            "api_rate_limit_store_url = \"rediss+sentinel://s1,s2/cache\"\n\
             api_rate_limit_store_ca_file = \"{pem}\"\n"
        ))
        .is_empty()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_servers_is_stand_alone_and_valid() {
    let c = ClusterConfig::default();
    assert!(!c.enabled());
    assert_eq!(c.roles, ["sensor", "detector", "console"]);
    assert!(problems("").is_empty());
}

#[test]
fn servers_roles_names_and_credentials_are_checked_with_their_keys() {
    let found = problems(
        "[cluster]\nservers = [\"nats://n1:4222\", \"http://n2:4222\", \"tls://n3\"]\n\
         node_name = \"sensor 1\"\nroles = [\"sensor\", \"router\", \"sensor\"]\n\
         user = \"wp\"\nheartbeat_seconds = 0\n",
    );
    for expected in [
        "cluster.servers[1]: `http://n2:4222` must start with nats:// or tls://",
        "cluster.servers[2]: `tls://n3` needs its port (4222 by default)",
        "cluster.node_name: `sensor 1` must be 1 to 64 letters, digits, `-` or `_`",
        "cluster.roles[1]: `router` is not one of \"sensor\", \"detector\", \"console\"",
        "cluster.roles[2]: `sensor` is named twice",
        "cluster.password: a NATS user needs both cluster.user and cluster.password",
        "cluster.heartbeat_seconds: 0 is out of range (1 to 60)",
    ] {
        assert!(
            found.iter().any(|f| f == expected),
            "{expected}\n{found:#?}"
        );
    }
    assert_eq!(found.len(), 7, "{found:#?}");
    assert!(
        problems(
            "[cluster]\nservers = [\"tls://n1:4222\", \"tls://[::1]:4223\"]\n\
             node_name = \"sensor-eu_1\"\nroles = [\"detector\"]\ntoken = \"t\"\n"
        )
        .is_empty()
    );
}
