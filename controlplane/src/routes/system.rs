//! `GET /health`, `GET /stats`, `GET /config`.

use crate::error::ApiError;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use watchpost_dataplane::ThreadState;
use watchpost_proto::{InputId, now_ns};

/// The store shows degraded for this long after a read failed. Reads that fail answer 500 at
/// once; this keeps a failure visible to a probe that polls between them.
pub(crate) const READ_ERROR_DEGRADES_NS: i64 = 60_000_000_000;

/// Health of every component; 503 when any is degraded.
pub async fn health(State(st): State<AppState>) -> Response {
    let cfg = &st.config.inputs;
    let mut degraded = Vec::new();
    let mut inputs = serde_json::Map::new();
    for id in InputId::ALL {
        let enabled = match id {
            InputId::SyslogUdp => cfg.syslog_udp.enabled,
            InputId::SyslogTcp => cfg.syslog_tcp.enabled,
            InputId::JsonTcp => cfg.json_tcp.enabled,
            InputId::File => cfg.file.enabled,
            InputId::Http => cfg.http.enabled,
        };
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
            id.name().into(),
            json!({"status": status, "error": error, "dropped": c.dropped.get()}),
        );
    }
    let now = now_ns();
    let workers = thread_health(&st.stats.parse_threads(now), "worker", &mut degraded);
    let detectors = thread_health(&st.stats.detect_threads(now), "detector", &mut degraded);
    let d = &st.stats.detect;
    let detection = json!({
        "workers": detectors,
        "ml_enabled": st.config.detection.ml_enabled,
        "ueba_enabled": st.config.ueba.enabled,
        "ueba_entities": d.ueba_entities.load(Ordering::Relaxed),
        "sources": d.sources.load(Ordering::Relaxed),
        "model_saves": d.saves.get(),
        "model_save_errors": d.save_errors.get(),
        "last_model_save_ns": d.last_save_ns.load(Ordering::Relaxed),
        "alert_write_errors": d.alert_errors.get(),
        "series_write_errors": d.series_errors.get(),
    });
    let writer_alive = st.stats.writer_alive.load(Ordering::Relaxed);
    let writer_error = st
        .stats
        .writer
        .last_error
        .lock()
        .ok()
        .and_then(|e| e.clone());
    let writer_ok = writer_alive && writer_error.is_none();
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
        None => json!({"status": "disabled"}),
        Some(store) => {
            let h = store.ping().await;
            if h.status != "ok" {
                degraded.push("rate-limit store".into());
            }
            json!(h)
        }
    };
    let llm = st.llm.health().await;
    if llm["status"] == "degraded" {
        degraded.push("llm".into());
    }
    let status = if degraded.is_empty() {
        "ok"
    } else {
        "degraded"
    };
    let body = json!({
        "status": status,
        "degraded": degraded,
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": st.started.elapsed().as_secs(),
        "components": {
            "inputs": inputs,
            "workers": workers,
            "detection": detection,
            "store": {
                "status": if writer_ok && reads_ok { "ok" } else { "degraded" },
                "path": st.store.path().display().to_string(),
                "writer_running": writer_alive,
                "last_error": writer_error,
                "write_errors": st.stats.writer.errors.get(),
                "read_errors": reads.read_errors,
                "last_read_error": reads.last_read_error,
                "last_read_error_ns": reads.last_read_error_ns,
            },
            "rate_limit_store": rate_limit_store,
            "llm": llm,
        },
    });
    let code = if degraded.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

/// The status of each pinned thread of one kind: degraded when it stopped or has not reported for
/// [`STALE_THREAD_NS`](watchpost_dataplane::STALE_THREAD_NS) (named in `degraded` as
/// `<label> <index>`).
fn thread_health(threads: &[ThreadState], label: &str, degraded: &mut Vec<String>) -> Vec<Value> {
    threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if !t.up {
                degraded.push(format!("{label} {i}"));
            }
            json!({"worker": i, "status": if t.up { "ok" } else { "degraded" }, "last_heartbeat_ms_ago": t.since_heartbeat_ns / 1_000_000})
        })
        .collect()
}

/// Pipeline counters and rates.
pub async fn stats(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let snap = st.stats.snapshot();
    let mut v = serde_json::to_value(&snap).map_err(ApiError::internal)?;
    v["rates"] = serde_json::to_value(st.rates.rates()).map_err(ApiError::internal)?;
    v["uptime_s"] = json!(st.started.elapsed().as_secs());
    let refused = |i: usize| st.limits.refused[i].load(Ordering::Relaxed);
    v["api"] = json!({
        "rate_limited": {"list": refused(0), "detail": refused(1), "coverage": refused(2)},
        "refused_host": st.api_metrics.refused_host.load(Ordering::Relaxed),
    });
    v["store_reads"] = serde_json::to_value(st.store.read_health()).map_err(ApiError::internal)?;
    let c = &st.ws.counters;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    v["websocket"] = json!({
        "connections": st.ws.connections.load(Ordering::Relaxed),
        "max_connections": st.ws.config.max_connections,
        "accepted": n(&c.accepted),
        "refused_origin": n(&c.refused_origin),
        "refused_capacity": n(&c.refused_capacity),
        "frames_sent": n(&c.frames_sent),
        "frames_dropped": n(&c.frames_dropped),
        "filters_applied": n(&c.filters_applied),
        "filters_throttled": n(&c.filters_throttled),
        "invalid_frames": n(&c.invalid_frames),
        "tail_skipped_events": n(&c.tail_skipped),
    });
    let store = st.store.clone();
    v["feedback"] = tokio::task::spawn_blocking(move || feedback_summary(&store))
        .await
        .map_err(ApiError::internal)??;
    Ok(Json(v))
}

/// Feedback counts and false-positive rates per detector (`ensemble`, `ueba:<type>`, or a rule
/// id) and per alert type, with the latest threshold changes.
fn feedback_summary(store: &watchpost_store::Store) -> Result<Value, watchpost_store::StoreError> {
    use std::collections::BTreeMap;
    use watchpost_proto::Verdict;
    let mut by_detector: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut by_type: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
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
                Verdict::Tp => slot.0 += 1,
                Verdict::Fp => slot.1 += 1,
            }
        }
        if let Some(c) = &f.threshold_change {
            changes.push((f.created_ns, f.alert_id.clone(), f.feedback, c.clone()));
        }
    }
    let rate = |(tp, fp): (u64, u64)| json!({"tp": tp, "fp": fp, "fp_rate": if tp + fp > 0 { fp as f64 / (tp + fp) as f64 } else { 0.0 }});
    changes.sort_by_key(|c| std::cmp::Reverse(c.0));
    changes.truncate(20);
    Ok(json!({
        "total": all.len(),
        "by_detector": by_detector.into_iter().map(|(k, v)| (k, rate(v))).collect::<serde_json::Map<_, _>>(),
        "by_type": by_type.into_iter().map(|(k, v)| (k.to_string(), rate(v))).collect::<serde_json::Map<_, _>>(),
        "threshold_changes": changes.into_iter().map(|(ts, id, fb, c)| json!({
            "created_ns": ts, "alert_id": id, "feedback": fb, "change": c,
        })).collect::<Vec<_>>(),
    }))
}

/// The running configuration, credentials masked.
pub async fn config(State(st): State<AppState>) -> Json<Value> {
    Json(st.config.masked_json())
}
