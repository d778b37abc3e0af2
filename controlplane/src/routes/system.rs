//! `GET /health`, `GET /stats`, `GET /config`.

use crate::error::ApiError;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use watchpost_dataplane::batch::InputId;
use watchpost_dataplane::clock::now_ns;

/// A worker that has not reported for this long is considered stuck.
const STALE_WORKER_NS: i64 = 10_000_000_000;

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
    let workers: Vec<Value> = st
        .stats
        .workers_alive
        .iter()
        .zip(&st.stats.worker_heartbeat_ns)
        .enumerate()
        .map(|(i, (alive, beat))| {
            let alive = alive.load(Ordering::Relaxed);
            let age_ns = now - beat.load(Ordering::Relaxed);
            let ok = alive && age_ns < STALE_WORKER_NS;
            if !ok {
                degraded.push(format!("worker {i}"));
            }
            json!({"worker": i, "status": if ok { "ok" } else { "degraded" }, "last_heartbeat_ms_ago": age_ns / 1_000_000})
        })
        .collect();
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
            "store": {
                "status": if writer_ok { "ok" } else { "degraded" },
                "path": st.store.path().display().to_string(),
                "writer_running": writer_alive,
                "last_error": writer_error,
                "write_errors": st.stats.writer.errors.get(),
            },
        },
    });
    let code = if degraded.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

/// Pipeline counters and rates.
pub async fn stats(State(st): State<AppState>) -> Result<Json<Value>, ApiError> {
    let snap = st.stats.snapshot();
    let mut v = serde_json::to_value(&snap).map_err(ApiError::internal)?;
    v["rates"] = serde_json::to_value(st.rates.rates()).map_err(ApiError::internal)?;
    v["uptime_s"] = json!(st.started.elapsed().as_secs());
    Ok(Json(v))
}

/// The running configuration, credentials masked.
pub async fn config(State(st): State<AppState>) -> Json<Value> {
    Json(st.config.masked_json())
}
