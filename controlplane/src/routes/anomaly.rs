//! `GET /anomaly/timeline`: the content ensemble's scores per bucket, with alert counts.
//!
//! On a fleet's console the scores are the detectors' (each holds the minutes of the
//! partitions it scored) and the alerts the console's own (it holds the fleet's queue).

use crate::answer::Json;
use crate::error::ApiError;
use crate::fanout::Fanout;
use crate::query::Params;
use crate::routes::entities::range_ns;
use crate::state::AppState;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use watchpost_outbound::Method;
use watchpost_proto::{SensorCoverage, hash64, now_ns};
use watchpost_store::AlertQuery;

/// Most buckets in one answer (7 days at 5 minutes).
const MAX_BUCKETS: i64 = 2016;

/// `GET /anomaly/timeline`: the ensemble's scores over time.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub(crate) struct AnomalyTimeline {
    /// `1h`, `6h`, `24h` or `7d`.
    range: String,
    /// `1m`, `5m`, `15m` or `1h`.
    resolution: String,
    /// The source filtered on, if any.
    source: Option<String>,
    /// Buckets oldest first, every bucket present (empty ones with zeros).
    buckets: Vec<AnomalyBucket>,
    /// On a fleet's console: the detectors asked for their scores, and those that did not
    /// answer (`partial`: the scores are those of the detectors that did). Absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    detectors: Option<SensorCoverage>,
}

/// One bucket of the anomaly timeline.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
struct AnomalyBucket {
    /// Start of the bucket, ns.
    ts_ns: i64,
    /// Events scored.
    events: u64,
    /// Their mean ensemble score, 4 decimals.
    mean_score: f64,
    /// The highest score, 4 decimals.
    max_score: f64,
    /// Scores over their source's DSPOT threshold.
    alarms: u64,
    /// Alerts first seen in the bucket (all types; the source's only when filtered).
    alerts: u64,
}

/// Buckets of the last `range`, oldest first; every bucket is present (empty ones with zeros).
pub async fn timeline(
    State(st): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Json<AnomalyTimeline>, ApiError> {
    let p = Params::read(raw.as_deref())?;
    let (range, span) = range_ns(&p, "24h")?;
    let default_res = match range.as_str() {
        "1h" => "1m",
        "6h" => "5m",
        "24h" => "15m",
        _ => "1h",
    };
    let resolution = p.get("resolution").unwrap_or(default_res).to_string();
    let step: i64 = match resolution.as_str() {
        "1m" => 60,
        "5m" => 300,
        "15m" => 900,
        "1h" => 3600,
        other => {
            return Err(ApiError::invalid_parameter(
                "resolution",
                format!("`{other}` is not one of 1m, 5m, 15m, 1h"),
            ));
        }
    } * 1_000_000_000;
    if span / step > MAX_BUCKETS {
        return Err(ApiError::invalid_parameter(
            "resolution",
            format!(
                "{range} at {resolution} is more than {MAX_BUCKETS} buckets; choose a coarser resolution"
            ),
        ));
    }
    let source = p.text("source", 256)?;
    // A console: the same question to every detector (one that is also this node answers
    // for itself through the fan-out, so its store's minutes are not read twice below).
    let fleet =
        match Fanout::detector_targets(st.fanout.as_deref(), st.cluster.as_deref(), &headers) {
            Some(targets) => {
                let path = format!("/api/v1/anomaly/timeline?{}", raw.as_deref().unwrap_or(""));
                let mut gathered = super::console_fanout(&st)?
                    .ask(targets, Method::GET, &path, None)
                    .await;
                let answers = gathered.parsed::<AnomalyTimeline>(&[]);
                Some((answers, gathered.coverage))
            }
            None => None,
        };
    let store = st.store.clone();
    tokio::task::spawn_blocking(move || {
        let end = (now_ns() / step + 1) * step;
        let start = end - span;
        let n = (span / step) as usize;
        let mut events = vec![0u64; n];
        let mut sum = vec![0f64; n];
        let mut max = vec![0f64; n];
        let mut alarms = vec![0u64; n];
        let mut alerts = vec![0u64; n];
        let mut detectors = None;
        match fleet {
            Some((answers, coverage)) => {
                // By each bucket's start, not its place: a detector whose clock crossed a
                // bucket's end before this node's answers with its buckets one step on.
                for b in answers.into_iter().flat_map(|(_, t)| t.buckets) {
                    let i = (b.ts_ns - start).div_euclid(step);
                    if let Ok(i) = usize::try_from(i)
                        && i < n
                    {
                        events[i] += b.events;
                        sum[i] += b.mean_score * b.events as f64;
                        max[i] = max[i].max(b.max_score);
                        alarms[i] += b.alarms;
                    }
                }
                detectors = Some(coverage);
            }
            None => {
                let src = source.as_deref().map(|s| hash64(s.as_bytes()));
                for m in store.anomaly_minutes(start, end, src)? {
                    let i = ((m.minute_ns - start) / step) as usize;
                    if i < n {
                        events[i] += u64::from(m.events);
                        sum[i] += f64::from(m.sum);
                        max[i] = max[i].max(f64::from(m.max));
                        alarms[i] += u64::from(m.alarms);
                    }
                }
            }
        }
        // Alert counts per bucket by first-seen time (all types; one source when filtered).
        let all = store.search_alerts(&AlertQuery {
            since_ns: Some(start),
            until_ns: Some(end),
            page: 1,
            limit: u32::MAX,
            without_triage: true,
            ..AlertQuery::default()
        })?;
        for a in all.items {
            if source.as_ref().is_some_and(|s| *s != a.source) {
                continue;
            }
            let i = ((a.first_seen_ns - start) / step) as usize;
            if a.first_seen_ns >= start && i < n {
                alerts[i] += 1;
            }
        }
        let buckets: Vec<AnomalyBucket> = (0..n)
            .map(|i| {
                let mean = if events[i] > 0 {
                    sum[i] / events[i] as f64
                } else {
                    0.0
                };
                AnomalyBucket {
                    ts_ns: start + i as i64 * step,
                    events: events[i],
                    mean_score: (mean * 1e4).round() / 1e4,
                    max_score: (max[i] * 1e4).round() / 1e4,
                    alarms: alarms[i],
                    alerts: alerts[i],
                }
            })
            .collect();
        Ok(Json(AnomalyTimeline {
            range,
            resolution,
            source,
            buckets,
            detectors,
        }))
    })
    .await
    .map_err(ApiError::internal)?
}
