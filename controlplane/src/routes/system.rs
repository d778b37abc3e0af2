//! `GET /health`, `GET /stats`, `GET /config`.

use crate::answer::Json;
use crate::error::ApiError;
use crate::state::AppState;
use crate::state::Rates;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use watchpost_dataplane::{INPUTS, StatsSnapshot, ThreadState};
use watchpost_llm::LlmHealth;
use watchpost_proto::{ThresholdChange, Verdict, now_ns};
use watchpost_store::{ReadHealth, StoreError};

/// The store shows degraded for this long after a read failed. Reads that fail answer 500 at
/// once; this keeps a failure visible to a probe that polls between them.
pub(crate) const READ_ERROR_DEGRADES_NS: i64 = 60_000_000_000;

/// Health of every component; 503 when any is degraded.
pub async fn health(State(st): State<AppState>) -> Response {
    let cfg = &st.config.inputs;
    let mut degraded = Vec::new();
    let mut inputs = BTreeMap::new();
    for input in &INPUTS {
        let id = input.id();
        let enabled = input.enabled(cfg);
        let c = st.stats.input(id);
        let up = c.up.load(Ordering::Relaxed);
        let error = c.error.lock().ok().and_then(|e| e.clone());
        let status = match (enabled, up) {
            (false, _) => "disabled",
            (true, true) => "ok",
            (true, false) => {
                degraded.push(format!("input {}", id.name()));
                "degraded"
            }
        };
        inputs.insert(
            id.name(),
            InputHealth {
                status,
                delivery: input.delivery().name(),
                error,
                dropped: c.dropped.get(),
            },
        );
    }
    let now = now_ns();
    // With no input the pipeline's threads have nothing to read and end at once (a fleet's
    // detector or console): idle, not failed.
    let idle = INPUTS.iter().all(|input| !input.enabled(cfg));
    let workers = thread_health(&st.stats.parse_threads(now), "worker", idle, &mut degraded);
    let detectors = thread_health(
        &st.stats.detect_threads(now),
        "detector",
        idle,
        &mut degraded,
    );
    let d = &st.stats.detect;
    let detection = DetectionHealth {
        workers: detectors,
        ml_enabled: st.config.detection.ml_enabled,
        ueba_enabled: st.config.ueba.enabled,
        ueba_entities: d.ueba_entities.load(Ordering::Relaxed),
        sources: d.sources.load(Ordering::Relaxed),
        model_saves: d.saves.get(),
        model_save_errors: d.save_errors.get(),
        last_model_save_ns: d.last_save_ns.load(Ordering::Relaxed),
        alert_write_errors: d.alert_errors.get(),
        unwritten_alerts: d.unwritten.load(Ordering::Relaxed),
        series_write_errors: d.series_errors.get(),
    };
    if detection.unwritten_alerts > 0 {
        degraded.push("alert writes".into());
    }
    let writer_alive = st.stats.writer_alive.load(Ordering::Relaxed);
    let writer_error = st
        .stats
        .writer
        .last_error
        .lock()
        .ok()
        .and_then(|e| e.clone());
    let writer_ok = (writer_alive || idle) && writer_error.is_none();
    if !writer_ok {
        degraded.push("store writer".into());
    }
    let reads = st.store.read_health();
    let reads_ok =
        reads.read_errors == 0 || now - reads.last_read_error_ns > READ_ERROR_DEGRADES_NS;
    if !reads_ok {
        degraded.push("store reads".into());
    }
    let rate_limit_store = match &st.limits.store {
        None => RateLimitStoreHealth::Disabled { status: "disabled" },
        Some(store) => {
            let h = store.ping().await;
            if h.status != "ok" {
                degraded.push("rate-limit store".into());
            }
            RateLimitStoreHealth::Store(h)
        }
    };
    let llm = st.llm.health().await;
    if llm.is_degraded() {
        degraded.push("llm".into());
    }
    let cluster = crate::routes::cluster::health(&st);
    if cluster.status == "degraded" {
        degraded.push("cluster".into());
    }
    let notify = st.notifier.snapshot();
    for c in notify.channels.iter().filter(|c| c.status != "ok") {
        degraded.push(format!("notifications {}", c.name));
    }
    if notify.outbox_error.is_some() {
        degraded.push("notification outbox".into());
    }
    let notifications = NotificationHealth {
        status: if notify.outbox_error.is_none() && notify.channels.iter().all(|c| c.status == "ok")
        {
            "ok"
        } else {
            "degraded"
        },
        outbox_error: notify.outbox_error,
        channels: notify
            .channels
            .into_iter()
            .map(|c| ChannelHealth {
                name: c.name,
                kind: c.kind,
                status: c.status,
                pending: c.pending,
                consecutive_failures: c.consecutive_failures,
                last_error: c.last_error,
                last_delivery_ns: c.last_delivery_ns,
            })
            .collect(),
    };
    let code = if degraded.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = HealthAnswer {
        status: if degraded.is_empty() {
            "ok"
        } else {
            "degraded"
        },
        degraded,
        version: env!("CARGO_PKG_VERSION"),
        uptime_s: st.started.elapsed().as_secs(),
        components: Components {
            inputs,
            workers,
            detection,
            store: StoreHealth {
                status: if writer_ok && reads_ok {
                    "ok"
                } else {
                    "degraded"
                },
                path: st.store.path().display().to_string(),
                writer_running: writer_alive,
                last_error: writer_error,
                write_errors: st.stats.writer.errors.get(),
                read_errors: reads.read_errors,
                last_read_error: reads.last_read_error,
                last_read_error_ns: reads.last_read_error_ns,
            },
            rate_limit_store,
            llm,
            notifications,
            cluster,
        },
    };
    (code, Json(body)).into_response()
}

/// `/health`: every component's state; the answer is 503 when `degraded` is not empty.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "Health")]
pub(crate) struct HealthAnswer {
    /// `ok`, or `degraded` when any component is.
    status: &'static str,
    /// The degraded components, named (`input syslog_udp`, `worker 2`, `store reads`...).
    degraded: Vec<String>,
    /// The service's version.
    version: &'static str,
    /// Seconds since the service started.
    uptime_s: u64,
    /// Each component.
    components: Components,
}

/// The components `/health` judges.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "HealthComponents")]
struct Components {
    /// Each input, by name.
    inputs: BTreeMap<&'static str, InputHealth>,
    /// The pinned parsing workers.
    workers: Vec<ThreadHealth>,
    /// Detection (stage B) and its models.
    detection: DetectionHealth,
    /// The RocksDB store.
    store: StoreHealth,
    /// The shared rate-limit store (`api_rate_limit_store_url`).
    rate_limit_store: RateLimitStoreHealth,
    /// The LLM backend.
    llm: LlmHealth,
    /// The notification channels and their outbox.
    notifications: NotificationHealth,
    /// The fleet (`[cluster]`): this node's link to it.
    cluster: crate::routes::cluster::ClusterHealth,
}

/// The notification channels.
#[derive(Serialize, schemars::JsonSchema)]
struct NotificationHealth {
    /// `ok`, or `degraded` when a channel is or the outbox cannot be read.
    status: &'static str,
    /// The outbox's last store error, until a pass succeeds.
    outbox_error: Option<String>,
    /// Each channel.
    channels: Vec<ChannelHealth>,
}

/// One notification channel.
#[derive(Serialize, schemars::JsonSchema)]
struct ChannelHealth {
    /// Its name.
    name: String,
    /// Its kind.
    kind: String,
    /// `ok`, or `degraded` after `failures_before_degraded` failed deliveries in a row.
    status: &'static str,
    /// Alerts waiting for it.
    pending: u64,
    /// Failed deliveries since the last success.
    consecutive_failures: u64,
    /// The last failure.
    last_error: Option<String>,
    /// Time of the last acknowledged delivery, ns (0 = none yet).
    last_delivery_ns: u64,
}

/// One input.
#[derive(Serialize, schemars::JsonSchema)]
struct InputHealth {
    /// `ok`, `degraded` (enabled but not listening) or `disabled`.
    status: &'static str,
    /// What its acknowledgement promises (docs/guarantees.md): `unacknowledged` (UDP),
    /// `transport` (TCP), `checkpointed` (files), `durable` (HTTP ingest, RELP).
    delivery: &'static str,
    /// Why it is down, when it is.
    error: Option<String>,
    /// Lines it dropped (UDP datagrams that met a full ring).
    dropped: u64,
}

/// One pinned thread.
#[derive(Serialize, schemars::JsonSchema)]
struct ThreadHealth {
    /// Its index.
    worker: usize,
    /// `ok`, `degraded` when it stopped or has not reported for ten seconds, or `idle` when
    /// the node reads no input (a fleet's detector or console) and it has nothing to do.
    status: &'static str,
    /// Milliseconds since it last reported.
    last_heartbeat_ms_ago: i64,
}

/// Detection and its models.
#[derive(Serialize, schemars::JsonSchema)]
struct DetectionHealth {
    /// The detection workers.
    workers: Vec<ThreadHealth>,
    /// `detection.ml_enabled`.
    ml_enabled: bool,
    /// `ueba.enabled`.
    ueba_enabled: bool,
    /// Entities with a baseline in memory.
    ueba_entities: u64,
    /// Sources with an ensemble in memory.
    sources: u64,
    /// Model and baseline saves completed.
    model_saves: u64,
    /// Saves that failed.
    model_save_errors: u64,
    /// Time of the last completed save, ns (0 = none yet).
    last_model_save_ns: i64,
    /// Alert write attempts that failed.
    alert_write_errors: u64,
    /// Alerts and signals the store refused, kept and retried: `/health` is degraded while any
    /// wait.
    unwritten_alerts: u64,
    /// Writes of series points and rule fire counts that failed.
    series_write_errors: u64,
}

/// The RocksDB store: the writer thread and reads.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "StoreComponentHealth")]
struct StoreHealth {
    /// `ok`, or `degraded` when the writer stopped or failed, or a read failed in the last minute.
    status: &'static str,
    /// `storage.data_dir`, resolved.
    path: String,
    /// The writer thread is running.
    writer_running: bool,
    /// The writer's last commit error, until a commit succeeds.
    last_error: Option<String>,
    /// Failed commits.
    write_errors: u64,
    /// Failed reads since start.
    read_errors: u64,
    /// The last failed read.
    last_read_error: Option<String>,
    /// When it happened, ns (0 when none).
    last_read_error_ns: i64,
}

/// The shared rate-limit store: disabled, or its state.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
enum RateLimitStoreHealth {
    /// No `api_rate_limit_store_url`: limits are per instance.
    Disabled {
        /// `disabled`.
        status: &'static str,
    },
    /// The store's state after a `PING`.
    Store(crate::ratelimit::store::StoreHealth),
}

/// The status of each pinned thread of one kind: degraded when it stopped or has not reported for
/// [`STALE_THREAD_NS`](watchpost_dataplane::STALE_THREAD_NS) (named in `degraded` as
/// `<label> <index>`).
fn thread_health(
    threads: &[ThreadState],
    label: &str,
    idle: bool,
    degraded: &mut Vec<String>,
) -> Vec<ThreadHealth> {
    threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if !t.up && !idle {
                degraded.push(format!("{label} {i}"));
            }
            ThreadHealth {
                worker: i,
                status: match (t.up, idle) {
                    (true, _) => "ok",
                    (false, true) => "idle",
                    (false, false) => "degraded",
                },
                last_heartbeat_ms_ago: t.since_heartbeat_ns / 1_000_000,
            }
        })
        .collect()
}

/// Pipeline counters and rates.
pub async fn stats(State(st): State<AppState>) -> Result<Json<StatsAnswer>, ApiError> {
    let refused = |i: usize| st.limits.refused[i].load(Ordering::Relaxed);
    let c = &st.ws.counters;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let store = st.store.clone();
    let feedback = tokio::task::spawn_blocking(move || feedback_summary(&store))
        .await
        .map_err(ApiError::internal)??;
    Ok(Json(StatsAnswer {
        pipeline: st.stats.snapshot(),
        rates: st.rates.rates(),
        uptime_s: st.started.elapsed().as_secs(),
        api: ApiStats {
            rate_limited: RateLimited {
                list: refused(0),
                detail: refused(1),
                coverage: refused(2),
            },
            refused_host: st.api_metrics.refused_host.load(Ordering::Relaxed),
            otlp_records: st.api_metrics.otlp_records.load(Ordering::Relaxed),
            bodies: {
                let c = &st.bodies.counters;
                BodyStats {
                    too_large: c.too_large.load(Ordering::Relaxed),
                    too_many_events: c.too_many_events.load(Ordering::Relaxed),
                    per_client: c.per_client.load(Ordering::Relaxed),
                    busy: c.busy.load(Ordering::Relaxed),
                    timed_out: c.timed_out.load(Ordering::Relaxed),
                    held_bytes: st.bodies.in_use(),
                }
            },
            connections: {
                let c = &st.api_metrics.connections;
                ConnectionStats {
                    open: c.open.load(Ordering::Relaxed),
                    refused_per_client: c.refused_per_client.load(Ordering::Relaxed),
                    refused_total: c.refused_total.load(Ordering::Relaxed),
                    refused_malformed: c.refused_malformed.load(Ordering::Relaxed),
                }
            },
        },
        store_reads: st.store.read_health(),
        websocket: StreamStats {
            connections: st.ws.connections.load(Ordering::Relaxed),
            max_connections: st.ws.config.max_connections,
            accepted: n(&c.accepted),
            refused_origin: n(&c.refused_origin),
            refused_capacity: n(&c.refused_capacity),
            frames_sent: n(&c.frames_sent),
            frames_dropped: n(&c.frames_dropped),
            filters_applied: n(&c.filters_applied),
            filters_throttled: n(&c.filters_throttled),
            invalid_frames: n(&c.invalid_frames),
            tail_skipped_events: n(&c.tail_skipped),
        },
        feedback,
        exceptions: exception_stats(&st),
        memory: crate::memory::stats(&st.config),
        llm: st.llm.usage.snapshot(),
        notifications: st.notifier.snapshot(),
        reload: st.reloader.stats(),
        syslog_udp_kernel: syslog_udp_kernel(&st),
        cluster: crate::routes::cluster::data_path(&st),
    }))
}

fn exception_stats(st: &AppState) -> ExceptionStats {
    let list = st.exceptions.list();
    let now = watchpost_proto::now_ns();
    ExceptionStats {
        total: list.len() as u64,
        in_force: list.iter().filter(|e| e.active_at(now)).count() as u64,
        suppressed_events: st.exceptions.total_hits(),
    }
}

/// `/stats`: the data plane's counters and the control plane's own.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "Stats")]
pub(crate) struct StatsAnswer {
    /// Ingest, storage, detection, per input and per ring.
    #[serde(flatten)]
    pipeline: StatsSnapshot,
    /// Rates over the last minute.
    rates: Rates,
    /// Seconds since the service started.
    uptime_s: u64,
    /// The API's refusals.
    api: ApiStats,
    /// Failed store reads (`/health` degrades for a while after one).
    store_reads: ReadHealth,
    /// The WebSocket stream.
    websocket: StreamStats,
    /// Analysts' verdicts and what they moved.
    feedback: FeedbackSummary,
    /// The operators' exceptions and what they held back.
    exceptions: ExceptionStats,
    /// Resident memory, and the budget the configuration sets, part by part.
    memory: crate::memory::MemoryStats,
    /// LLM calls, failures, cache hits and latency per feature.
    llm: watchpost_llm::usage::UsageSnapshot,
    /// The notification channels: queued, sent, digests, failures, latency.
    notifications: watchpost_notify::NotifySnapshot,
    /// Configuration reloads (SIGHUP, `POST /config/reload`).
    reload: crate::reload::ReloadStats,
    /// What the kernel counts of the syslog UDP socket: datagrams it dropped for a full receive
    /// buffer, and bytes waiting (null when the input is off or `/proc` cannot be read).
    syslog_udp_kernel: Option<watchpost_dataplane::UdpKernel>,
    /// The fleet's data path on this node (its sensor link, partitions, alerts); null when
    /// the node stands alone.
    cluster: Option<crate::routes::cluster::DataPath>,
}

/// The kernel's counters of the syslog UDP input's socket.
pub(crate) fn syslog_udp_kernel(st: &AppState) -> Option<watchpost_dataplane::UdpKernel> {
    let udp = &st.config.inputs.syslog_udp;
    if !udp.enabled {
        return None;
    }
    let port = udp.address.parse::<std::net::SocketAddr>().ok()?.port();
    watchpost_dataplane::udp_kernel(port)
}

/// The operators' exceptions and what they held back.
#[derive(Serialize, schemars::JsonSchema)]
struct ExceptionStats {
    /// Exceptions kept.
    total: u64,
    /// Of those, in force (enabled and not expired by the wall clock).
    in_force: u64,
    /// Events they kept from raising or joining an alert, all exceptions together (deleted ones
    /// included, since start).
    suppressed_events: u64,
}

/// The API's refusals.
#[derive(Serialize, schemars::JsonSchema)]
struct ApiStats {
    /// Requests refused with 429, by rate-limit family.
    rate_limited: RateLimited,
    /// Requests refused for a `Host` that is not the service's (421).
    refused_host: u64,
    /// OTLP log records accepted (`POST /v1/logs`), each durable when counted.
    otlp_records: u64,
    /// Request bodies: what their bounds refused (docs/api.md, "Request bodies").
    bodies: BodyStats,
    /// Connections of both listeners.
    connections: ConnectionStats,
}

/// The request bodies' refusals, and the memory they hold now.
#[derive(Serialize, schemars::JsonSchema)]
struct BodyStats {
    /// Declared or found longer than their route takes (413).
    too_large: u64,
    /// Ingest or OTLP bodies of more than `api_ingest_max_events` events (413
    /// `too_many_events`, OTLP `RESOURCE_EXHAUSTED`).
    too_many_events: u64,
    /// Over `api_max_bodies_per_client` (429 `too_many_bodies`).
    per_client: u64,
    /// Past `api_body_memory_mb` with what splitting or decoding them takes (503 `busy`).
    busy: u64,
    /// Not arrived within `api_body_read_timeout_seconds` or at `api_body_min_bytes_per_second`
    /// (408 `body_timeout`).
    timed_out: u64,
    /// Bytes of the bodies' budget held now.
    held_bytes: u64,
}

/// The listeners' connections and what the accept loop refused.
#[derive(Serialize, schemars::JsonSchema)]
struct ConnectionStats {
    /// Open now.
    open: u64,
    /// Refused over `api_max_connections_per_client` (503 `too_many_connections`).
    refused_per_client: u64,
    /// Refused over `api_max_connections`.
    refused_total: u64,
    /// Requests refused before routing as not parseable (414, 431, 400), in the error shape.
    refused_malformed: u64,
}

/// Requests refused with 429, by family.
#[derive(Serialize, schemars::JsonSchema)]
struct RateLimited {
    /// `api_rate_limit_list`.
    list: u64,
    /// `api_rate_limit_detail`.
    detail: u64,
    /// `api_rate_limit_coverage`.
    coverage: u64,
}

/// The WebSocket stream's counters (docs/websocket.md).
#[derive(Serialize, schemars::JsonSchema)]
struct StreamStats {
    /// Connections open now.
    connections: usize,
    /// `ws_max_connections`.
    max_connections: usize,
    /// Connections accepted.
    accepted: u64,
    /// Upgrades refused for their Origin (403).
    refused_origin: u64,
    /// Upgrades refused at `ws_max_connections` (503).
    refused_capacity: u64,
    /// Frames written to sockets.
    frames_sent: u64,
    /// Frames dropped from full client queues.
    frames_dropped: u64,
    /// Filter frames applied.
    filters_applied: u64,
    /// Filter frames held back by `ws_filter_min_interval_ms` (the latest is applied later).
    filters_throttled: u64,
    /// Client frames that were not a valid filter.
    invalid_frames: u64,
    /// Events not read by the tail (over its per-tick budget).
    tail_skipped_events: u64,
}

/// Feedback received, by detector and alert type, and the latest threshold moves.
#[derive(Serialize, schemars::JsonSchema)]
struct FeedbackSummary {
    /// Feedback entries stored.
    total: usize,
    /// Verdicts by detector (`(alert deleted)` when the alert is gone).
    by_detector: BTreeMap<String, VerdictCounts>,
    /// Verdicts by alert type (`unknown` when the alert is gone).
    by_type: BTreeMap<&'static str, VerdictCounts>,
    /// The 20 latest threshold changes that feedback caused, newest first.
    threshold_changes: Vec<FeedbackThresholdChange>,
}

/// True and false positives of one detector or alert type.
#[derive(Default, Serialize, schemars::JsonSchema)]
struct VerdictCounts {
    /// Confirmed.
    tp: u64,
    /// Refuted.
    fp: u64,
    /// `fp / (tp + fp)`, 0 with no verdicts.
    fp_rate: f64,
}

/// A threshold move, with the verdict that caused it.
#[derive(Serialize, schemars::JsonSchema)]
struct FeedbackThresholdChange {
    /// When the feedback arrived, ns.
    created_ns: i64,
    /// The alert judged.
    alert_id: String,
    /// The verdict.
    feedback: Verdict,
    /// The move.
    change: ThresholdChange,
}

fn feedback_summary(store: &watchpost_store::Store) -> Result<FeedbackSummary, StoreError> {
    let mut by_detector: BTreeMap<String, VerdictCounts> = BTreeMap::new();
    let mut by_type: BTreeMap<&'static str, VerdictCounts> = BTreeMap::new();
    let mut changes = Vec::new();
    let all = store.all_feedback()?;
    for (f, a) in &all {
        let (detector, kind) = match a {
            Some(a) => (a.detector.clone(), a.alert_type.name()),
            None => ("(alert deleted)".to_string(), "unknown"),
        };
        for slot in [
            by_detector.entry(detector).or_default(),
            by_type.entry(kind).or_default(),
        ] {
            match f.feedback {
                Verdict::Tp => slot.tp += 1,
                Verdict::Fp => slot.fp += 1,
            }
            slot.fp_rate = slot.fp as f64 / (slot.tp + slot.fp) as f64;
        }
        if let Some(change) = &f.threshold_change {
            changes.push(FeedbackThresholdChange {
                created_ns: f.created_ns,
                alert_id: f.alert_id.clone(),
                feedback: f.feedback,
                change: change.clone(),
            });
        }
    }
    changes.sort_by_key(|c| std::cmp::Reverse(c.created_ns));
    changes.truncate(20);
    Ok(FeedbackSummary {
        total: all.len(),
        by_detector,
        by_type,
        threshold_changes: changes,
    })
}

/// The running configuration, credentials masked.
pub async fn config(State(st): State<AppState>) -> Json<Value> {
    Json(st.reloader.running().masked_json())
}

/// `POST /config/reload`: reads the configuration file again and applies what can change
/// without a restart (docs/reload.md); 422 naming each key and problem when the file is
/// refused, the running configuration kept.
pub async fn reload(
    State(st): State<AppState>,
) -> Result<Json<crate::reload::ReloadReport>, ApiError> {
    st.reloader.reload().await.map(Json).map_err(|e| {
        let problems: Vec<Value> = e
            .problems()
            .into_iter()
            .map(|(key, problem)| serde_json::json!({"key": key, "problem": problem}))
            .collect();
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_config",
            format!("the configuration was not reloaded (the running one is kept): {e}"),
        )
        .with("problems", problems)
    })
}
