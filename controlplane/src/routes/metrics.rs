//! `GET /metrics`: the Prometheus exposition of the data plane's counters, ring depths and
//! latency histograms, and of the API's own requests, latencies, refusals and WebSocket counters.
//!
//! The exposition is rendered on each scrape from the same atomics `/stats` reads, so scraping
//! costs the data plane nothing. Names and labels are listed in `docs/metrics.md`.

use crate::state::AppState;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use watchpost_dataplane::{Histogram, LATENCY_BOUNDS_S, StatsSnapshot};

/// `GET /metrics`, in the Prometheus text format 0.0.4.
pub async fn scrape(State(st): State<AppState>) -> Response {
    st.api_metrics.scrapes.fetch_add(1, Ordering::Relaxed);
    let body = render(&st);
    let mut resp = body.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// Writes families one after another, each with its `# HELP` and `# TYPE` once.
struct Exposition {
    out: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"");
                escape_label(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// One unlabelled sample under its own family.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let (cumulative, sum) = h.cumulative();
        let mut with_le: Vec<(&str, &str)> = labels.to_vec();
        let bounds: Vec<String> = LATENCY_BOUNDS_S.iter().map(|b| b.to_string()).collect();
        for (i, count) in cumulative.iter().enumerate() {
            let le = bounds.get(i).map_or("+Inf", String::as_str);
            with_le.push(("le", le));
            self.sample(&format!("{name}_bucket"), &with_le, count);
            with_le.pop();
        }
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(
            &format!("{name}_count"),
            labels,
            cumulative[LATENCY_BOUNDS_S.len()],
        );
    }
}

/// Label values may hold anything; the format escapes backslash, quote and newline.
fn escape_label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// The whole exposition: one function per part, in the order `docs/metrics.md` lists them.
fn render(st: &AppState) -> String {
    let s = st.stats.snapshot();
    let mut e = Exposition {
        out: String::with_capacity(16 << 10),
    };
    build_info(&mut e, st);
    inputs(&mut e, &s);
    pipeline(&mut e, st, &s);
    let suppressed = st.exceptions.total_hits();
    detection(&mut e, &s, suppressed);
    api(&mut e, st);
    stream(&mut e, st);
    llm(&mut e, st);
    notifications(&mut e, st);
    cluster(&mut e, st);
    e.out
}

/// The fleet's data path on this node (absent when it stands alone).
fn cluster(e: &mut Exposition, st: &AppState) {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(fleet) = &st.fleet else { return };
    let c = fleet.counters();
    let families: [(&str, &str, &str, u64); 22] = [
        (
            "watchpost_cluster_records_published_total",
            "counter",
            "Detection records the stream acknowledged (sensor).",
            c.records_published.load(Relaxed),
        ),
        (
            "watchpost_cluster_records_dropped_total",
            "counter",
            "Detection records dropped: the spool was full (sensor).",
            c.records_dropped.load(Relaxed),
        ),
        (
            "watchpost_cluster_spool_bytes",
            "gauge",
            "Bytes of detection records waiting for the stream (sensor).",
            c.spool_bytes.load(Relaxed),
        ),
        (
            "watchpost_cluster_publish_failures_total",
            "counter",
            "Publications the stream did not acknowledge, each sent again.",
            c.publish_failures.load(Relaxed),
        ),
        (
            "watchpost_cluster_records_scored_total",
            "counter",
            "Detection records scored (detector).",
            c.records_scored.load(Relaxed),
        ),
        (
            "watchpost_cluster_messages_refused_total",
            "counter",
            "Stream messages refused: another format, damaged (detector).",
            c.messages_refused.load(Relaxed),
        ),
        (
            "watchpost_cluster_content_unresolved_total",
            "counter",
            "Matches of rules, correlations or indicators this detector does not hold, dropped \
             (detector).",
            c.content_unresolved.load(Relaxed),
        ),
        (
            "watchpost_cluster_partitions_owned",
            "gauge",
            "Partitions this detector owns.",
            c.partitions().len() as u64,
        ),
        (
            "watchpost_cluster_partition_lag_records",
            "gauge",
            "Records of this detector's partitions in the stream not yet scored.",
            c.partitions().iter().map(|p| p.pending).sum::<u64>(),
        ),
        (
            "watchpost_cluster_partitions_taken_total",
            "counter",
            "Partitions this detector took.",
            c.partitions_taken.load(Relaxed),
        ),
        (
            "watchpost_cluster_partitions_released_total",
            "counter",
            "Partitions this detector gave up.",
            c.partitions_released.load(Relaxed),
        ),
        (
            "watchpost_cluster_snapshots_written_total",
            "counter",
            "Partition snapshots written.",
            c.snapshots_written.load(Relaxed),
        ),
        (
            "watchpost_cluster_snapshot_errors_total",
            "counter",
            "Partition snapshots not written or not readable.",
            c.snapshot_errors.load(Relaxed),
        ),
        (
            "watchpost_cluster_alerts_published_total",
            "counter",
            "Alerts and signals published to the fleet's queue (detector).",
            c.alerts_published.load(Relaxed),
        ),
        (
            "watchpost_cluster_alerts_dropped_total",
            "counter",
            "Alerts and signals dropped: the queue to the stream was full (detector).",
            c.alerts_dropped.load(Relaxed),
        ),
        (
            "watchpost_cluster_alerts_received_total",
            "counter",
            "Alerts and signals stored from the fleet's queue (console).",
            c.alerts_received.load(Relaxed),
        ),
        (
            "watchpost_cluster_feedback_sent_total",
            "counter",
            "Analysts' verdicts sent to the detectors' partitions (console).",
            c.feedback_sent.load(Relaxed),
        ),
        (
            "watchpost_cluster_feedback_dropped_total",
            "counter",
            "Analysts' verdicts dropped: the queue to the stream was full (console).",
            c.feedback_dropped.load(Relaxed),
        ),
        (
            "watchpost_cluster_feedback_applied_total",
            "counter",
            "Analysts' verdicts applied to a partition's thresholds (detector).",
            c.feedback_applied.load(Relaxed),
        ),
        (
            "watchpost_cluster_series_errors_total",
            "counter",
            "Writes of the partitions' minutes, hourly risk and rule fires the store refused \
             (detector).",
            c.series_errors.load(Relaxed),
        ),
        (
            "watchpost_cluster_content_changes_total",
            "counter",
            "Shared content written to the fleet's (console) or applied here (other nodes).",
            c.content_changes.load(Relaxed),
        ),
        (
            "watchpost_cluster_content_errors_total",
            "counter",
            "Shared content that could not be written or applied.",
            c.content_errors.load(Relaxed),
        ),
    ];
    for (name, kind, help, value) in families {
        e.single(name, kind, help, value);
    }
}

/// Notification channels, by channel.
fn notifications(e: &mut Exposition, st: &AppState) {
    use watchpost_notify::ChannelSnapshot;
    let snap = st.notifier.snapshot();
    type Value = fn(&ChannelSnapshot) -> u64;
    let families: [(&str, &str, &str, Value); 10] = [
        (
            "watchpost_notify_queued_total",
            "counter",
            "Alerts queued for the channel.",
            |c| c.queued,
        ),
        (
            "watchpost_notify_filtered_total",
            "counter",
            "Alerts the channel's filters passed over.",
            |c| c.filtered,
        ),
        (
            "watchpost_notify_messages_total",
            "counter",
            "Messages the receiver acknowledged (alerts, digests, tests).",
            |c| c.messages,
        ),
        (
            "watchpost_notify_digested_total",
            "counter",
            "Alerts sent inside digests (past the channel's rate limit).",
            |c| c.digested_alerts,
        ),
        (
            "watchpost_notify_failures_total",
            "counter",
            "Failed deliveries, each retry counted.",
            |c| c.failures,
        ),
        (
            "watchpost_notify_dropped_total",
            "counter",
            "Alerts discarded because max_pending already waited.",
            |c| c.dropped,
        ),
        (
            "watchpost_notify_undeliverable_total",
            "counter",
            "Alerts discarded because no receiver could take their message (a UDP datagram too large).",
            |c| c.undeliverable,
        ),
        (
            "watchpost_notify_pending",
            "gauge",
            "Alerts waiting for the channel.",
            |c| c.pending,
        ),
        (
            "watchpost_notify_consecutive_failures",
            "gauge",
            "Failed deliveries since the last success.",
            |c| c.consecutive_failures,
        ),
        (
            "watchpost_notify_up",
            "gauge",
            "1 unless the channel is degraded (failures_before_degraded in a row).",
            |c| u64::from(c.status == "ok"),
        ),
    ];
    for (name, kind, help, get) in families {
        e.family(name, kind, help);
        for c in &snap.channels {
            e.sample(name, &[("channel", &c.name), ("kind", &c.kind)], get(c));
        }
    }
    e.single(
        "watchpost_notify_discarded_total",
        "counter",
        "Queued alerts discarded with their channel (removed from the configuration) or gone from the store.",
        snap.discarded_removed + snap.vanished,
    );
    e.family(
        "watchpost_notify_latency_seconds",
        "histogram",
        "Time from an alert being queued to the receiver acknowledging it, by channel.",
    );
    st.notifier.latencies(|name, h| {
        e.histogram("watchpost_notify_latency_seconds", &[("channel", name)], h);
    });
}

/// LLM calls per feature.
fn llm(e: &mut Exposition, st: &AppState) {
    use watchpost_llm::usage::{Feature, FeatureUsage};
    type Counter = fn(&FeatureUsage) -> &AtomicU64;
    let counters: [(&str, &str, Counter); 3] = [
        (
            "watchpost_llm_calls_total",
            "Model calls made, by feature.",
            |u| &u.calls,
        ),
        (
            "watchpost_llm_failures_total",
            "Model calls that failed (not ready, upstream failure, timeout), by feature.",
            |u| &u.failures,
        ),
        (
            "watchpost_llm_cache_hits_total",
            "Answers served from the LLM caches without a call, by feature.",
            |u| &u.cache_hits,
        ),
    ];
    for (name, help, get) in counters {
        e.family(name, "counter", help);
        for f in Feature::ALL {
            let value = get(st.llm.usage.of(f)).load(Ordering::Relaxed);
            e.sample(name, &[("feature", f.name())], value);
        }
    }
    e.family(
        "watchpost_llm_call_seconds",
        "histogram",
        "Time of each model call, by feature.",
    );
    for f in Feature::ALL {
        e.histogram(
            "watchpost_llm_call_seconds",
            &[("feature", f.name())],
            &st.llm.usage.of(f).latency,
        );
    }
}

/// The build and the uptime.
fn build_info(e: &mut Exposition, st: &AppState) {
    e.family(
        "watchpost_build_info",
        "gauge",
        "Always 1; the version is a label.",
    );
    e.sample(
        "watchpost_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    e.single(
        "watchpost_uptime_seconds",
        "gauge",
        "Seconds since the API started.",
        st.started.elapsed().as_secs(),
    );
}

/// Per-input counters.
fn inputs(e: &mut Exposition, s: &StatsSnapshot) {
    // Inputs.
    type InputField = fn(&watchpost_dataplane::InputSnapshot) -> u64;
    let input_counters: [(&str, &str, InputField); 11] = [
        ("received", "Lines taken in.", |i| i.received),
        ("bytes", "Bytes of the lines taken in.", |i| i.bytes),
        ("parsed", "Lines parsed as their format says.", |i| i.parsed),
        (
            "malformed",
            "Lines that did not parse (kept as free text).",
            |i| i.malformed,
        ),
        (
            "invalid_utf8",
            "Lines with invalid UTF-8 (kept, bytes replaced).",
            |i| i.invalid_utf8,
        ),
        (
            "truncated",
            "Lines cut at dataplane.max_line_bytes (kept, flagged).",
            |i| i.truncated,
        ),
        (
            "dropped",
            "Lines dropped: UDP datagrams that met a full ring.",
            |i| i.dropped,
        ),
        ("connections", "Connections accepted.", |i| i.connections),
        (
            "connections_refused",
            "Connections refused over max_connections.",
            |i| i.connections_refused,
        ),
        ("connection_errors", "Connections ended by an error.", |i| {
            i.connection_errors
        }),
        (
            "connections_idle_closed",
            "Connections closed after idle_timeout_s.",
            |i| i.connections_idle_closed,
        ),
    ];
    for (field, help, get) in input_counters {
        let name = format!("watchpost_input_{field}_total");
        e.family(&name, "counter", help);
        for i in &s.inputs {
            e.sample(&name, &[("input", i.name)], get(i));
        }
    }
    e.family(
        "watchpost_input_up",
        "gauge",
        "1 while the input listens (or tails).",
    );
    for i in &s.inputs {
        e.sample("watchpost_input_up", &[("input", i.name)], u8::from(i.up));
    }
}

/// The pipeline and the store: totals, rings, latencies, thread health.
fn pipeline(e: &mut Exposition, st: &AppState, s: &StatsSnapshot) {
    // Pipeline and store.
    e.single(
        "watchpost_events_parsed_total",
        "counter",
        "Events parsed and normalised.",
        s.parsed_total,
    );
    e.single(
        "watchpost_events_stored_total",
        "counter",
        "Events committed to the store.",
        s.stored_total,
    );
    e.single(
        "watchpost_store_bytes_total",
        "counter",
        "Encoded bytes committed.",
        s.stored_bytes,
    );
    e.single(
        "watchpost_store_commits_total",
        "counter",
        "RocksDB write batches committed.",
        s.commits,
    );
    e.single(
        "watchpost_store_write_errors_total",
        "counter",
        "Failed commits (retried; accepted events are never dropped).",
        s.write_errors,
    );
    e.single(
        "watchpost_spool_requests_total",
        "counter",
        "Acknowledging-input requests written to the ingest spool (each then acknowledged).",
        s.spool.requests,
    );
    e.single(
        "watchpost_spool_failures_total",
        "counter",
        "Ingest spool writes that failed: their requests were answered 503, nothing accepted.",
        s.spool.failures,
    );
    e.single(
        "watchpost_spool_replayed_total",
        "counter",
        "Spooled requests replayed at start-up (acknowledged, not yet stored at the last stop).",
        s.spool.replayed,
    );
    e.single(
        "watchpost_spool_orphaned",
        "gauge",
        "Spooled requests kept for an input that is disabled now.",
        s.spool.orphaned,
    );
    e.single(
        "watchpost_templates",
        "gauge",
        "Templates the miners know.",
        s.templates,
    );
    e.family(
        "watchpost_store_commit_seconds",
        "histogram",
        "Time of each successful RocksDB write batch.",
    );
    e.histogram(
        "watchpost_store_commit_seconds",
        &[],
        &st.stats.writer.commit_latency,
    );
    e.family(
        "watchpost_ingest_to_store_seconds",
        "histogram",
        "Per committed block, from its first event's arrival to the commit.",
    );
    e.histogram(
        "watchpost_ingest_to_store_seconds",
        &[],
        &st.stats.writer.ingest_to_store,
    );
    e.family(
        "watchpost_ring_depth",
        "gauge",
        "Batches waiting in each ring.",
    );
    for r in &s.rings {
        e.sample("watchpost_ring_depth", &[("ring", &r.name)], r.depth);
    }
    e.family("watchpost_ring_capacity", "gauge", "Slots of each ring.");
    for r in &s.rings {
        e.sample("watchpost_ring_capacity", &[("ring", &r.name)], r.capacity);
    }
    e.family(
        "watchpost_worker_up",
        "gauge",
        "1 while a pinned worker (stage parse or detect) runs and reported in the last 10 s, as /health judges it.",
    );
    let now = watchpost_proto::now_ns();
    for (stage, threads) in [
        ("parse", st.stats.parse_threads(now)),
        ("detect", st.stats.detect_threads(now)),
    ] {
        for (i, thread) in threads.iter().enumerate() {
            e.sample(
                "watchpost_worker_up",
                &[("stage", stage), ("worker", &i.to_string())],
                u8::from(thread.up),
            );
        }
    }
    e.single(
        "watchpost_store_writer_up",
        "gauge",
        "1 while the store writer runs and its last commit succeeded, as /health judges it.",
        u8::from(
            st.stats.writer_alive.load(Ordering::Relaxed)
                && st.stats.writer.last_error.lock().is_ok_and(|e| e.is_none()),
        ),
    );
}

/// Detection and rules.
fn detection(e: &mut Exposition, s: &StatsSnapshot, suppressed: u64) {
    // Detection and rules.
    let d = &s.detection;
    e.single(
        "watchpost_events_scored_total",
        "counter",
        "Records scored by detection.",
        d.scored,
    );
    e.family("watchpost_alerts_total", "counter", "New alerts by type.");
    for (t, n) in &d.alerts {
        e.sample("watchpost_alerts_total", &[("type", t)], n);
    }
    e.single(
        "watchpost_alert_updates_total",
        "counter",
        "Repeats folded into open alerts inside their cooldown.",
        d.alert_updates,
    );
    e.single(
        "watchpost_alert_write_errors_total",
        "counter",
        "Alert write attempts that failed (the alert is kept and retried).",
        d.alert_errors,
    );
    e.single(
        "watchpost_alerts_unwritten",
        "gauge",
        "Alerts and signals the store refused, waiting for a retry.",
        d.unwritten,
    );
    e.single(
        "watchpost_alerts_unwritten_dropped_total",
        "counter",
        "Alerts and signals dropped because too many already waited for the store.",
        d.unwritten_dropped,
    );
    e.single(
        "watchpost_signals_total",
        "counter",
        "New signals: matches below the alerting level that add risk to their entities.",
        d.signals,
    );
    e.single(
        "watchpost_signal_write_errors_total",
        "counter",
        "Signal writes that failed.",
        d.signal_errors,
    );
    e.single(
        "watchpost_risk_evicted_total",
        "counter",
        "Entities whose risk was dropped at the bound.",
        d.risk_evicted,
    );
    e.single(
        "watchpost_peer_board_displaced_total",
        "counter",
        "Hosts whose slot on the board of who uses each host another host took.",
        d.peer_board_displaced,
    );
    e.single(
        "watchpost_exception_suppressed_events_total",
        "counter",
        "Events the operators' exceptions kept from raising or joining an alert.",
        suppressed,
    );
    e.family(
        "watchpost_rule_matches_total",
        "counter",
        "Rule matches by engine (sigma, ioc, correlation).",
    );
    for (engine, n) in [
        ("sigma", d.sigma_matches),
        ("ioc", d.ioc_matches),
        ("correlation", d.correlation_hits),
    ] {
        e.sample("watchpost_rule_matches_total", &[("engine", engine)], n);
    }
    e.family(
        "watchpost_rule_matches_dropped_total",
        "counter",
        "Matches counted but not alerted on, by engine and reason.",
    );
    e.sample(
        "watchpost_rule_matches_dropped_total",
        &[("engine", "sigma"), ("reason", "per_event_cap")],
        d.sigma_dropped,
    );
    e.sample(
        "watchpost_rule_matches_dropped_total",
        &[("engine", "correlation"), ("reason", "max_groups")],
        d.correlation_dropped,
    );
    e.sample(
        "watchpost_rule_matches_dropped_total",
        &[("engine", "persistence"), ("reason", "max_entities")],
        d.persistence_dropped,
    );
    e.single(
        "watchpost_correlation_groups",
        "gauge",
        "Correlation groups with an open window.",
        d.correlation_groups,
    );
    e.single(
        "watchpost_ueba_entities",
        "gauge",
        "Entities with a baseline in memory.",
        d.ueba_entities,
    );
    e.single(
        "watchpost_ueba_evicted_total",
        "counter",
        "Baselines evicted by the LRU sweep.",
        d.ueba_evicted,
    );
    e.single(
        "watchpost_sources",
        "gauge",
        "Sources with an ensemble in memory.",
        d.sources,
    );
    e.single(
        "watchpost_model_saves_total",
        "counter",
        "Model and baseline saves completed.",
        d.saves,
    );
    e.single(
        "watchpost_model_save_errors_total",
        "counter",
        "Model and baseline saves that failed.",
        d.save_errors,
    );
    e.single(
        "watchpost_series_write_errors_total",
        "counter",
        "Writes of closed anomaly and risk series points and rule fire counts that failed (those points are lost).",
        d.series_errors,
    );
}

/// The API itself: requests, latencies, refusals, scrapes.
fn api(e: &mut Exposition, st: &AppState) {
    if let Some(k) = crate::routes::system::syslog_udp_kernel(st) {
        e.single(
            "watchpost_syslog_udp_kernel_drops_total",
            "counter",
            "Datagrams the kernel dropped at the syslog UDP socket for a full receive buffer.",
            k.drops,
        );
    }
    e.single(
        "watchpost_otlp_records_total",
        "counter",
        "OTLP log records accepted on POST /v1/logs (durable when counted).",
        st.api_metrics
            .otlp_records
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    // The API.
    e.family(
        "watchpost_api_requests_total",
        "counter",
        "Routed API requests by method, route template and status.",
    );
    if let Ok(routes) = st.api_metrics.routes.lock() {
        // Two passes: each family's header and samples form one group, as the format wants.
        for ((method, route), m) in routes.iter() {
            for (status, n) in &m.by_status {
                e.sample(
                    "watchpost_api_requests_total",
                    &[
                        ("method", method),
                        ("route", route),
                        ("status", &status.to_string()),
                    ],
                    n,
                );
            }
        }
        e.family(
            "watchpost_api_request_duration_seconds",
            "histogram",
            "Time to answer routed API requests, by method and route template.",
        );
        for ((method, route), m) in routes.iter() {
            e.histogram(
                "watchpost_api_request_duration_seconds",
                &[("method", method), ("route", route)],
                &m.latency,
            );
        }
    }
    e.family(
        "watchpost_api_rate_limited_total",
        "counter",
        "Requests refused with 429, by rate-limit family.",
    );
    for (i, family) in ["list", "detail", "coverage"].iter().enumerate() {
        e.sample(
            "watchpost_api_rate_limited_total",
            &[("family", family)],
            st.limits.refused[i].load(Ordering::Relaxed),
        );
    }
    e.single(
        "watchpost_store_read_errors_total",
        "counter",
        "Store reads that failed (answered 500; /health shows the store degraded for a minute).",
        st.store.read_health().read_errors,
    );
    e.single(
        "watchpost_api_refused_host_total",
        "counter",
        "Requests refused for their Host: 421 for one that is not a name of the service (DNS rebinding), 400 for none.",
        st.api_metrics.refused_host.load(Ordering::Relaxed),
    );
    e.family(
        "watchpost_api_bodies_refused_total",
        "counter",
        "Request bodies refused, by reason: too_large (413), too_many_events (413), per_client (429), busy (503, the bodies' memory budget), timed_out (408).",
    );
    let b = &st.bodies.counters;
    for (reason, n) in [
        ("too_large", &b.too_large),
        ("too_many_events", &b.too_many_events),
        ("per_client", &b.per_client),
        ("busy", &b.busy),
        ("timed_out", &b.timed_out),
    ] {
        e.sample(
            "watchpost_api_bodies_refused_total",
            &[("reason", reason)],
            n.load(Ordering::Relaxed),
        );
    }
    e.single(
        "watchpost_api_body_bytes",
        "gauge",
        "Bytes of the request bodies' memory budget (api_body_memory_mb) held now.",
        st.bodies.in_use(),
    );
    let memory = crate::memory::stats(&st.config);
    e.single(
        "watchpost_memory_resident_bytes",
        "gauge",
        "Resident memory of the process.",
        memory.resident_bytes,
    );
    e.single(
        "watchpost_memory_budget_bytes",
        "gauge",
        "The most the bounded parts may hold at the configured limits (/stats memory.parts).",
        memory.budget_bytes,
    );
    let c = &st.api_metrics.connections;
    e.single(
        "watchpost_api_connections",
        "gauge",
        "Connections open on the API and probe listeners.",
        c.open.load(Ordering::Relaxed),
    );
    e.single(
        "watchpost_api_connections_refused_per_client_total",
        "counter",
        "Connections refused over api_max_connections_per_client (503 too_many_connections).",
        c.refused_per_client.load(Ordering::Relaxed),
    );
    e.single(
        "watchpost_api_connections_refused_total",
        "counter",
        "Connections refused over api_max_connections (503 too_many_connections).",
        c.refused_total.load(Ordering::Relaxed),
    );
    e.single(
        "watchpost_api_requests_malformed_total",
        "counter",
        "Requests refused before routing (414, 431, 400), answered in the error shape.",
        c.refused_malformed.load(Ordering::Relaxed),
    );
    e.single(
        "watchpost_metrics_scrapes_total",
        "counter",
        "Scrapes of this endpoint.",
        st.api_metrics.scrapes.load(Ordering::Relaxed),
    );
}

/// The WebSocket stream.
fn stream(e: &mut Exposition, st: &AppState) {
    // The WebSocket stream.
    let c = &st.ws.counters;
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    e.single(
        "watchpost_ws_connections",
        "gauge",
        "Open WebSocket connections.",
        st.ws.connections.load(Ordering::Relaxed),
    );
    e.single(
        "watchpost_ws_accepted_total",
        "counter",
        "WebSocket connections accepted.",
        n(&c.accepted),
    );
    e.family(
        "watchpost_ws_refused_total",
        "counter",
        "WebSocket upgrades refused, by reason (origin 403, capacity 503).",
    );
    e.sample(
        "watchpost_ws_refused_total",
        &[("reason", "origin")],
        n(&c.refused_origin),
    );
    e.sample(
        "watchpost_ws_refused_total",
        &[("reason", "capacity")],
        n(&c.refused_capacity),
    );
    for (name, help, value) in [
        (
            "watchpost_ws_frames_sent_total",
            "Frames written to WebSocket clients.",
            &c.frames_sent,
        ),
        (
            "watchpost_ws_frames_dropped_total",
            "Frames dropped from full client queues (oldest first).",
            &c.frames_dropped,
        ),
        (
            "watchpost_ws_invalid_frames_total",
            "Client frames that were not a valid filter.",
            &c.invalid_frames,
        ),
        (
            "watchpost_ws_tail_skipped_events_total",
            "Events the stream's store tail skipped over its per-tick budget.",
            &c.tail_skipped,
        ),
    ] {
        e.single(name, "counter", help, n(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        escape_label(&mut out, "a\"b\\c\nd");
        assert_eq!(out, "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn histograms_are_cumulative_and_end_in_the_count() {
        let h = Histogram::default();
        for ms in [0u64, 3, 3, 40, 20_000] {
            h.observe_ns(ms * 1_000_000);
        }
        let mut e = Exposition { out: String::new() };
        e.histogram("x_seconds", &[("route", "/a")], &h);
        let lines: Vec<&str> = e.out.lines().collect();
        assert_eq!(lines[0], "x_seconds_bucket{route=\"/a\",le=\"0.0005\"} 1");
        assert!(lines.contains(&"x_seconds_bucket{route=\"/a\",le=\"0.005\"} 3"));
        assert!(lines.contains(&"x_seconds_bucket{route=\"/a\",le=\"10\"} 4"));
        assert!(lines.contains(&"x_seconds_bucket{route=\"/a\",le=\"+Inf\"} 5"));
        assert!(lines.contains(&"x_seconds_count{route=\"/a\"} 5"));
        let sum = lines
            .iter()
            .find_map(|l| l.strip_prefix("x_seconds_sum{route=\"/a\"} "))
            .unwrap();
        assert!((sum.parse::<f64>().unwrap() - 20.046).abs() < 1e-9, "{sum}");
    }
}
