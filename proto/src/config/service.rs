//! The top-level keys: listeners, the API's limits and origins, the stream, the log level.

use super::Config;
use super::problems::Problems;
use super::rate_limit::RateLimit;

/// Checks the top-level keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    p.port("dashboard_port", config.dashboard_port);
    p.ip("dashboard_bind_address", &config.dashboard_bind_address);
    p.ip("health_bind_address", &config.health_bind_address);
    if config.health_port != 0 {
        p.port("health_port", config.health_port);
        if config.health_port == config.dashboard_port {
            p.add(
                "health_port",
                format!(
                    "{} is dashboard_port too: the probe listener needs its own port (0 = no probe listener)",
                    config.health_port
                ),
            );
        }
    }
    for (i, o) in config.api_allowed_origins.iter().enumerate() {
        p.origin(&format!("api_allowed_origins[{i}]"), o);
    }
    for (i, o) in config.ws_allowed_origins.iter().enumerate() {
        p.origin(&format!("ws_allowed_origins[{i}]"), o);
    }
    for (i, h) in config.api_allowed_hosts.iter().enumerate() {
        if let Err(e) = crate::Authority::parse(h) {
            p.add(&format!("api_allowed_hosts[{i}]"), e.to_string());
        }
    }
    rate_limit_store(config, p);
    for (key, v) in [
        ("api_list_rate_limit", &config.api_list_rate_limit),
        ("api_detail_rate_limit", &config.api_detail_rate_limit),
        ("api_coverage_rate_limit", &config.api_coverage_rate_limit),
    ] {
        if let Err(e) = RateLimit::parse(v) {
            p.add(key, e.to_string());
        }
    }
    p.range_u64(
        "api_max_body_bytes",
        config.api_max_body_bytes,
        1024,
        1 << 30,
    );
    p.range_u64(
        "api_search_timeout_ms",
        config.api_search_timeout_ms,
        0,
        600_000,
    );
    p.range_u64(
        "ws_max_connections",
        config.ws_max_connections.into(),
        1,
        10_000,
    );
    p.range_u64(
        "api_header_read_timeout_seconds",
        config.api_header_read_timeout_seconds,
        1,
        300,
    );
    p.range_u64(
        "api_max_connections_per_client",
        config.api_max_connections_per_client.into(),
        1,
        65_535,
    );
    p.range_u64(
        "api_max_connections",
        config.api_max_connections.into(),
        1,
        65_535,
    );
    p.range_u64(
        "api_ingest_max_in_flight",
        config.api_ingest_max_in_flight.into(),
        1,
        1024,
    );
    p.range_u64(
        "api_body_read_timeout_seconds",
        config.api_body_read_timeout_seconds,
        1,
        3600,
    );
    p.range_u64(
        "api_body_min_bytes_per_second",
        config.api_body_min_bytes_per_second,
        0,
        1 << 30,
    );
    p.range_u64(
        "api_max_bodies_per_client",
        config.api_max_bodies_per_client.into(),
        1,
        1024,
    );
    p.range_u64(
        "api_ingest_max_events",
        config.api_ingest_max_events.into(),
        1,
        10_000_000,
    );
    // One largest ingest body, and its copy framed for the spool, must fit.
    let least = (2 * config.api_max_body_bytes).div_ceil(1 << 20).max(1);
    if u64::from(config.api_body_memory_mb) < least || config.api_body_memory_mb > 1 << 20 {
        p.add(
            "api_body_memory_mb",
            format!(
                "{} is out of range ({least} to {}: at least twice api_max_body_bytes, in MiB)",
                config.api_body_memory_mb,
                1 << 20
            ),
        );
    }
    if config.api_max_connections_per_client > config.api_max_connections {
        p.add(
            "api_max_connections_per_client",
            format!(
                "{} is above api_max_connections ({})",
                config.api_max_connections_per_client, config.api_max_connections
            ),
        );
    }
    if config.ws_max_connections > config.api_max_connections {
        p.add(
            "ws_max_connections",
            format!(
                "{} is above api_max_connections ({}): each WebSocket client holds a connection",
                config.ws_max_connections, config.api_max_connections
            ),
        );
    }
    p.range_u64(
        "ws_batch_max_events",
        config.ws_batch_max_events.into(),
        1,
        10_000,
    );
    p.range_f64("ws_tick_interval_s", config.ws_tick_interval_s, 0.01, 60.0);
    p.range_f64(
        "ws_status_interval_s",
        config.ws_status_interval_s,
        0.1,
        3600.0,
    );
    p.range_u64(
        "ws_filter_min_interval_ms",
        config.ws_filter_min_interval_ms,
        0,
        60_000,
    );
    p.range_u64(
        "ws_queue_maxlen",
        config.ws_queue_maxlen.into(),
        1,
        1_000_000,
    );
    p.range_u64(
        "ws_queue_max_bytes",
        config.ws_queue_max_bytes,
        64 << 10,
        1 << 30,
    );
    p.range_u64(
        "ws_frame_max_bytes",
        config.ws_frame_max_bytes,
        16 << 10,
        64 << 20,
    );
    if config.ws_frame_max_bytes > config.ws_queue_max_bytes {
        p.add(
            "ws_frame_max_bytes",
            format!(
                "{} is above ws_queue_max_bytes ({}): a frame must fit in a client's queue",
                config.ws_frame_max_bytes, config.ws_queue_max_bytes
            ),
        );
    }
    p.one_of(
        "log_level",
        &config.log_level,
        &["error", "warn", "info", "debug", "trace"],
    );
}

/// The shared rate-limit store: its URL (unless still an `env:` reference, checked again once
/// resolved) and the TLS files, which only a TLS URL uses and which come as a pair for a client
/// certificate.
fn rate_limit_store(config: &Config, p: &mut Problems) {
    let url = &config.api_rate_limit_store_url;
    let tls = if url.is_empty() || url.starts_with("env:") {
        None
    } else {
        match crate::store_url::StoreUrl::parse(url) {
            Ok(u) => Some(u.tls),
            Err(e) => {
                p.add("api_rate_limit_store_url", e.to_string());
                None
            }
        }
    };
    let files = [
        (
            "api_rate_limit_store_ca_file",
            &config.api_rate_limit_store_ca_file,
        ),
        (
            "api_rate_limit_store_cert_file",
            &config.api_rate_limit_store_cert_file,
        ),
        (
            "api_rate_limit_store_key_file",
            &config.api_rate_limit_store_key_file,
        ),
    ];
    for (key, path) in files {
        if path.is_empty() {
            continue;
        }
        if !std::path::Path::new(path).is_file() {
            p.add(key, format!("{path:?} is not a readable file"));
        } else if tls == Some(false) {
            p.add(
                key,
                "applies to a TLS store only (rediss:// or rediss+sentinel://)",
            );
        }
    }
    let (cert, key) = (
        &config.api_rate_limit_store_cert_file,
        &config.api_rate_limit_store_key_file,
    );
    p.pair(
        "a client certificate",
        ("api_rate_limit_store_cert_file", !cert.is_empty()),
        ("api_rate_limit_store_key_file", !key.is_empty()),
    );
}
