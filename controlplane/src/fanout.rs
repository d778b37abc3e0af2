//! Searches across the fleet (docs/cluster.md, "Searches across the fleet").
//!
//! Events stay on the sensor that stored them; a console holds only the fleet's alerts. So a
//! console answers `/events`, entity search, entity timelines and hunts by sending the same
//! request to every sensor's API at once, waiting at most `cluster.fanout_timeout_ms`, and
//! merging the answers newest first. A sensor that does not answer in time, or answers with an
//! error, is named in the answer's `sensors.missing` and the answer is marked `partial`: an
//! analyst never takes part of the fleet for all of it.
//!
//! The sensors asked are the live ones of the node list plus every sensor this console has
//! seen since it started: one that dropped out of the list (killed, cut off) is named as
//! missing rather than silently left out. A forwarded request carries [`LOCAL_HEADER`], so a
//! node that is both console and sensor answers it from its own store instead of fanning out
//! again.

use crate::error::ApiError;
use axum::http::HeaderMap;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use watchpost_outbound::{HttpClient, Method, Trust};
use watchpost_proto::config::ClusterConfig;
use watchpost_proto::{ErrorBody, Event, ListResponse, MissingSensor, SensorCoverage};

/// The header of a request a console forwards: answer from your own store.
pub(crate) const LOCAL_HEADER: &str = "x-watchpost-local";
/// The header naming an entity by its name hash (16 hex digits), for a detector, which holds
/// baselines and hourly risk by hash and no entity names; for the risk history, the hash is
/// followed by `/` and the entity kind's number (the answer names the kind).
pub(crate) const ENTITY_HASH_HEADER: &str = "x-watchpost-entity-hash";

/// See the module's documentation.
pub struct Fanout {
    client: HttpClient,
    timeout: Duration,
    /// Every sensor and detector seen in the node list since this console started (by role
    /// and name), with its API's URL.
    seen: Mutex<BTreeMap<(&'static str, String), String>>,
}

/// A sensor to ask: its node name, its API's URL, and whether it is in the node list now.
pub(crate) struct Target {
    name: String,
    url: String,
    live: bool,
}

/// The answers of the sensors to one request: each one's status and body, and those that
/// gave none.
pub(crate) struct Gathered {
    /// `(sensor, status, body)` of each sensor that answered.
    pub answers: Vec<(String, u16, Vec<u8>)>,
    /// Who was asked, and who did not answer.
    pub coverage: SensorCoverage,
}

impl Target {
    /// A node of the fleet reached at `url`, asked whether or not it is in the node list.
    pub(crate) fn new(name: &str, url: &str) -> Target {
        Target {
            name: name.to_string(),
            url: url.to_string(),
            live: true,
        }
    }
}

impl Fanout {
    /// A console's fan-out, `timeout` per search.
    pub fn new(timeout: Duration) -> Result<Fanout, watchpost_outbound::TrustError> {
        Ok(Fanout {
            client: HttpClient::new(Trust::System {
                extra_ca_file: None,
            })?,
            timeout,
            seen: Mutex::new(BTreeMap::new()),
        })
    }

    /// The sensors a search on this node goes to; `None` when this node answers from its own
    /// store (it stands alone, is not a console, or the request was forwarded to it).
    /// `fanout` is the console's (`None` on any other node), `membership` the node's in the
    /// fleet.
    pub(crate) fn targets(
        fanout: Option<&Fanout>,
        membership: Option<&watchpost_cluster::Membership>,
        headers: &HeaderMap,
    ) -> Option<Vec<Target>> {
        Self::role_targets("sensor", fanout, membership, headers)
    }

    /// [`Fanout::targets`] for what the detectors hold: the series of the partitions they
    /// scored (anomaly minutes, rule fires), each in the store of the detector that owned the
    /// partition at the time. A detector that left the list is asked all the same, and named
    /// missing, as a sensor is: its history is part of the answer.
    pub(crate) fn detector_targets(
        fanout: Option<&Fanout>,
        membership: Option<&watchpost_cluster::Membership>,
        headers: &HeaderMap,
    ) -> Option<Vec<Target>> {
        Self::role_targets("detector", fanout, membership, headers)
    }

    fn role_targets(
        role: &'static str,
        fanout: Option<&Fanout>,
        membership: Option<&watchpost_cluster::Membership>,
        headers: &HeaderMap,
    ) -> Option<Vec<Target>> {
        if headers.contains_key(LOCAL_HEADER) {
            return None;
        }
        let fanout = fanout?;
        let snapshot = membership?.snapshot();
        let mut seen = fanout.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut live = Vec::new();
        for n in &snapshot.nodes {
            if n.record.roles.iter().any(|r| r == role) {
                seen.insert((role, n.record.name.clone()), n.record.api.clone());
                live.push(n.record.name.as_str());
            }
        }
        Some(
            seen.iter()
                .filter(|((r, _), _)| *r == role)
                .map(|((_, name), url)| Target {
                    name: name.clone(),
                    url: url.clone(),
                    live: live.contains(&name.as_str()),
                })
                .collect(),
        )
    }

    /// Sends `method path_and_query` (from `/api/v1` on) with `body` to every target at once
    /// and gathers what comes back within the timeout.
    pub(crate) async fn ask(
        &self,
        targets: Vec<Target>,
        method: Method,
        path_and_query: &str,
        body: Option<Vec<u8>>,
    ) -> Gathered {
        self.ask_with(targets, method, path_and_query, body, None)
            .await
    }

    /// [`Fanout::ask`] with one more header on each request.
    pub(crate) async fn ask_with(
        &self,
        targets: Vec<Target>,
        method: Method,
        path_and_query: &str,
        body: Option<Vec<u8>>,
        header: Option<(&'static str, String)>,
    ) -> Gathered {
        let mut coverage = SensorCoverage {
            asked: targets.iter().map(|t| t.name.clone()).collect(),
            ..SensorCoverage::default()
        };
        let mut asks = tokio::task::JoinSet::new();
        for t in targets {
            if !t.live {
                coverage.missing.push(MissingSensor {
                    sensor: t.name,
                    error: "not in the fleet's node list (stopped, or cut off from the servers)"
                        .into(),
                });
                continue;
            }
            let url = format!("{}{path_and_query}", t.url.trim_end_matches('/'));
            let (client, method, body, timeout) = (
                self.client.clone(),
                method.clone(),
                body.clone(),
                self.timeout,
            );
            let header = header.clone();
            asks.spawn(async move {
                let mut headers = vec![(LOCAL_HEADER, "1")];
                if let Some((name, value)) = &header {
                    headers.push((name, value.as_str()));
                }
                let reply = client.send(method, &url, &headers, body, timeout).await;
                (t.name, reply)
            });
        }
        let mut answers = Vec::new();
        while let Some(done) = asks.join_next().await {
            let Ok((sensor, reply)) = done else { continue };
            match reply {
                Ok(r) => answers.push((sensor, r.status, r.body)),
                Err(e) => coverage.missing.push(MissingSensor {
                    sensor,
                    error: e.to_string(),
                }),
            }
        }
        answers.sort_by(|a, b| a.0.cmp(&b.0));
        coverage.missing.sort_by(|a, b| a.sensor.cmp(&b.sensor));
        coverage.partial = !coverage.missing.is_empty();
        Gathered { answers, coverage }
    }
}

/// What every sensor answered to a listing, asked for its first `page * limit` items.
pub(crate) struct FirstPages<T> {
    /// Each answering sensor's listing.
    pub answers: Vec<(String, ListResponse<T>)>,
    /// Who was asked, and who did not answer.
    pub coverage: SensorCoverage,
    /// Items asked of each: the merged page is cut from the first this many.
    pub first: u64,
}

impl Fanout {
    /// Asks every target for the first `page * limit` items of listing `path` (under
    /// `/api/v1`) with the filters of `raw`.
    pub(crate) async fn first_pages<T: serde::de::DeserializeOwned>(
        &self,
        targets: Vec<Target>,
        path: &str,
        raw: Option<&str>,
        page: u32,
        limit: u32,
    ) -> Result<FirstPages<T>, ApiError> {
        let first = reach(page, limit)?;
        let path = format!("/api/v1{path}?{}", first_items(raw, first));
        let mut gathered = self.ask(targets, Method::GET, &path, None).await;
        let answers = gathered.parsed::<ListResponse<T>>(&[]);
        Ok(FirstPages {
            answers,
            coverage: gathered.coverage,
            first,
        })
    }
}

impl Gathered {
    /// The one answer of a request sent to one node: its body parsed as `T` when it answered
    /// 200, its own error (status and body) otherwise, and 503 when it did not answer.
    pub(crate) fn only<T: serde::de::DeserializeOwned>(mut self) -> Result<T, ApiError> {
        if let Some(m) = self.coverage.missing.pop() {
            return Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "node_unavailable",
                format!("{} did not answer: {}", m.sensor, m.error),
            ));
        }
        let (node, status, body) = self
            .answers
            .pop()
            .ok_or_else(|| ApiError::internal("no node was asked"))?;
        if status == 200 {
            return serde_json::from_slice(&body)
                .map_err(|e| ApiError::internal(format!("{node}'s answer: {e}")));
        }
        let status =
            axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
        let body = serde_json::from_slice::<ErrorBody>(&body).unwrap_or_else(|_| {
            ErrorBody::new("node_error", format!("{node} answered {}", status.as_u16()))
        });
        Err(ApiError {
            status,
            body: Box::new(body),
            retry_after: None,
        })
    }

    /// The answers with status 200, parsed as `T`; any other status, or a body that does not
    /// parse, makes its sensor missing, except the statuses in `absent` (the sensor answered
    /// that it has nothing: a timeline's 404 for an entity it never saw).
    pub(crate) fn parsed<T: serde::de::DeserializeOwned>(
        &mut self,
        absent: &[u16],
    ) -> Vec<(String, T)> {
        let mut out = Vec::new();
        for (sensor, status, body) in std::mem::take(&mut self.answers) {
            if absent.contains(&status) {
                continue;
            }
            let error = if status == 200 {
                match serde_json::from_slice::<T>(&body) {
                    Ok(v) => {
                        out.push((sensor, v));
                        continue;
                    }
                    Err(e) => format!("answered with a body this console cannot read: {e}"),
                }
            } else {
                let why = serde_json::from_slice::<ErrorBody>(&body)
                    .map(|b| b.message)
                    .unwrap_or_default();
                format!("answered {status}: {why}")
            };
            self.coverage.missing.push(MissingSensor { sensor, error });
        }
        self.coverage
            .missing
            .sort_by(|a, b| a.sensor.cmp(&b.sensor));
        self.coverage.partial = !self.coverage.missing.is_empty();
        out
    }
}

/// Refuses a content change (a rule upload or toggle, an exception) on a fleet's node that is
/// not a console: the fleet's content is set once, on the console, and shared from there
/// (docs/cluster.md, "Shared content"); a change made here would be undone by the next entry.
pub(crate) fn content_set_here(c: &ClusterConfig) -> Result<(), ApiError> {
    if !c.enabled() || c.has_role("console") {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::CONFLICT,
        "set_on_console",
        "this node is part of a fleet: rules, their flags and exceptions are set on the \
         console, which shares them with every node (docs/cluster.md)",
    ))
}

/// The events of several sensors as one list, newest received first (ties by id), each named
/// by its sensor; `skip` and `take` cut the page.
pub(crate) fn merge_events(
    answers: impl IntoIterator<Item = (String, Vec<Event>)>,
    skip: usize,
    take: usize,
) -> Vec<Event> {
    let mut all: Vec<Event> = answers
        .into_iter()
        .flat_map(|(sensor, events)| {
            events.into_iter().map(move |mut e| {
                e.sensor.clone_from(&sensor);
                e
            })
        })
        .collect();
    all.sort_by(|a, b| {
        b.received_ns
            .cmp(&a.received_ns)
            .then_with(|| b.id.cmp(&a.id))
    });
    all.into_iter().skip(skip).take(take).collect()
}

/// `value` as one path segment of a URL the fan-out sends: every byte but RFC 3986's unreserved
/// ones percent-encoded. A rule id is only expected to be a UUID (anything else is a warning,
/// not an error), and an id holding `/`, `?`, `#` or a space would otherwise ask a detector
/// for another path, or for none.
pub(crate) fn path_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The query string `raw` with `page` and `limit` replaced: a console asks each sensor for
/// the first `limit` items, enough to cut any page up to it from the merge.
pub(crate) fn first_items(raw: Option<&str>, limit: u64) -> String {
    let mut q: Vec<&str> = raw
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty() && !kv.starts_with("page=") && !kv.starts_with("limit="))
        .collect();
    let tail = format!("page=1&limit={limit}");
    q.push(&tail);
    q.join("&")
}

/// The deepest item a console's merged listing reaches: each sensor is asked for the first
/// `page * limit` items, and a sensor answers at most [`crate::query::MAX_LIMIT`] per page.
pub(crate) fn reach(page: u32, limit: u32) -> Result<u64, ApiError> {
    let reach = u64::from(page) * u64::from(limit);
    if reach > u64::from(crate::query::MAX_LIMIT) {
        return Err(ApiError::invalid_parameter(
            "page",
            format!(
                "a search across the fleet pages through its first {} items; narrow it with \
                 `since`/`until` (or `until` = the oldest item's time) to go further back",
                crate::query::MAX_LIMIT
            ),
        ));
    }
    Ok(reach)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, received_ns: i64) -> Event {
        Event {
            id: id.into(),
            timestamp_ns: 0,
            received_ns,
            input: "syslog".into(),
            source: "sshd".into(),
            host: String::new(),
            severity: 1,
            message: String::new(),
            template_id: String::new(),
            entities: Vec::new(),
            attributes: Default::default(),
            sensor: String::new(),
        }
    }

    #[test]
    fn a_path_segment_keeps_a_uuid_and_encodes_what_would_change_the_path() {
        let id = "4b7661cd-2f29-4d79-ae5a-4a708f7da51c";
        assert_eq!(path_segment(id), id);
        assert_eq!(path_segment("my rule/v2?x#y"), "my%20rule%2Fv2%3Fx%23y");
        assert_eq!(path_segment("règle"), "r%C3%A8gle");
    }

    #[test]
    fn merged_events_are_newest_first_named_by_sensor_and_cut_to_the_page() {
        let a = vec![event("a3", 30), event("a1", 10)];
        let b = vec![event("b4", 40), event("b2", 20), event("b0", 0)];
        let merged = merge_events([("s-a".into(), a), ("s-b".into(), b)], 1, 3);
        let got: Vec<(&str, &str)> = merged
            .iter()
            .map(|e| (e.id.as_str(), e.sensor.as_str()))
            .collect();
        assert_eq!(got, [("a3", "s-a"), ("b2", "s-b"), ("a1", "s-a")]);
    }

    #[test]
    fn forwarded_query_keeps_filters_and_asks_for_the_first_items() {
        assert_eq!(
            first_items(Some("q=ssh&page=3&limit=20&source=sshd"), 60),
            "q=ssh&source=sshd&page=1&limit=60"
        );
        assert_eq!(first_items(None, 50), "page=1&limit=50");
    }

    #[test]
    fn pages_past_the_merge_window_are_refused_with_the_way_on() {
        assert_eq!(reach(20, 50).unwrap(), 1000);
        let e = reach(21, 50).unwrap_err();
        assert!(format!("{e:?}").contains("until"), "{e:?}");
    }
}
