//! `GET /cluster`: the fleet as this node sees it (docs/cluster.md), and its part of `/health`.

use crate::answer::Json;
use crate::state::AppState;
use axum::extract::State;
use serde::Serialize;
use watchpost_cluster::ClusterSnapshot;

/// `/cluster`.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "Cluster")]
pub(crate) struct ClusterAnswer {
    /// `standalone` (no `[cluster]` servers), `ok`, or `degraded` while this node cannot
    /// renew its entry in the fleet's node list.
    status: &'static str,
    /// This node's name in the fleet; null when it stands alone.
    node: Option<String>,
    /// Its roles.
    roles: Vec<String>,
    /// The servers configured (`cluster.servers`).
    servers: Vec<String>,
    /// The server it is connected to, by its `server_name`.
    server: Option<String>,
    /// Why the last heartbeat failed, while it does.
    last_error: Option<String>,
    /// When this node last renewed its entry, ns (0: never).
    last_heartbeat_ns: i64,
    /// The live nodes (those that renewed their entry within three heartbeats), by name.
    nodes: Vec<ClusterNode>,
    /// This node's part of the data path; null when it stands alone.
    data_path: Option<DataPath>,
    /// The fleet's shared content as this node holds it; null when it stands alone.
    content: Option<SharedContent>,
}

/// The fleet's rules, flags, exceptions and indicator files: written by the console, applied
/// by every other node (docs/cluster.md, "Shared content").
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct SharedContent {
    /// `source` on a console (it writes its content to the fleet's), `follower` elsewhere.
    role: &'static str,
    /// The content bucket's highest revision this node has written or applied.
    revision: u64,
    /// Entries and files written (a console) or that changed this node's content.
    changes: u64,
    /// Entries or files that could not be written or applied.
    errors: u64,
    /// Why the last one failed.
    last_error: Option<String>,
}

/// See [`SharedContent`].
pub(crate) fn shared_content(st: &AppState) -> Option<SharedContent> {
    use std::sync::atomic::Ordering::Relaxed;
    let fleet = st.fleet.as_ref()?;
    let c = fleet.counters();
    Some(SharedContent {
        role: if fleet.config().has_role("console") {
            "source"
        } else {
            "follower"
        },
        revision: c.content_revision.load(Relaxed),
        changes: c.content_changes.load(Relaxed),
        errors: c.content_errors.load(Relaxed),
        last_error: c.content_error(),
    })
}

/// What this node's roles move: the sensor's link, the detector's partitions, the console's
/// alerts (counters since the start).
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct DataPath {
    /// A sensor's link to the detection stream: `connecting`, `connected`, `spooling` (the
    /// servers do not acknowledge; records wait), `draining`; null on a node that is not a
    /// sensor.
    link: Option<&'static str>,
    /// Records handed to the link.
    records_queued: u64,
    /// Records the stream acknowledged.
    records_published: u64,
    /// Records dropped: the spool was full (`cluster.spool_max_bytes`).
    records_dropped: u64,
    /// Bytes of records waiting for the stream now.
    spool_bytes: u64,
    /// The most that waited at once.
    spool_peak_bytes: u64,
    /// Publications not acknowledged (each sent again).
    publish_failures: u64,
    /// A detector's records scored.
    records_scored: u64,
    /// Messages refused (another format, damaged).
    messages_refused: u64,
    /// Matches of rules or indicators this detector does not hold, dropped.
    content_unresolved: u64,
    /// Partitions taken and given up.
    partitions_taken: u64,
    /// See `partitions_taken`.
    partitions_released: u64,
    /// Partition snapshots written, and the ones that failed.
    snapshots_written: u64,
    /// See `snapshots_written`.
    snapshot_errors: u64,
    /// Alerts and signals a detector published, and dropped.
    alerts_published: u64,
    /// See `alerts_published`.
    alerts_dropped: u64,
    /// Alerts and signals a console stored from the stream, and the ones the store refused.
    alerts_received: u64,
    /// See `alerts_received`.
    alert_store_errors: u64,
    /// A console's verdicts sent to the detectors' partitions, and those dropped (queue full).
    feedback_sent: u64,
    /// See `feedback_sent`.
    feedback_dropped: u64,
    /// A detector's verdicts applied to its partitions' thresholds.
    feedback_applied: u64,
    /// A detector's writes of its partitions' series (minutes, hourly risk, rule fires) that
    /// the store refused.
    series_errors: u64,
    /// The partitions this detector owns.
    partitions: Vec<PartitionAnswer>,
}

/// A partition this detector owns.
#[derive(Serialize, schemars::JsonSchema)]
struct PartitionAnswer {
    /// Its number.
    partition: u32,
    /// Stream sequence of the last record applied.
    sequence: u64,
    /// Records of it in the stream after that one (the lag).
    pending: u64,
    /// When this detector took it, ns.
    since_ns: i64,
    /// The lease's revision.
    lease_revision: u64,
}

/// See [`DataPath`].
pub(crate) fn data_path(st: &AppState) -> Option<DataPath> {
    use std::sync::atomic::Ordering::Relaxed;
    let fleet = st.fleet.as_ref()?;
    let c = fleet.counters();
    Some(DataPath {
        link: fleet.config().has_role("sensor").then(|| c.link().name()),
        records_queued: c.records_queued.load(Relaxed),
        records_published: c.records_published.load(Relaxed),
        records_dropped: c.records_dropped.load(Relaxed),
        spool_bytes: c.spool_bytes.load(Relaxed),
        spool_peak_bytes: c.spool_peak_bytes.load(Relaxed),
        publish_failures: c.publish_failures.load(Relaxed),
        records_scored: c.records_scored.load(Relaxed),
        messages_refused: c.messages_refused.load(Relaxed),
        content_unresolved: c.content_unresolved.load(Relaxed),
        partitions_taken: c.partitions_taken.load(Relaxed),
        partitions_released: c.partitions_released.load(Relaxed),
        snapshots_written: c.snapshots_written.load(Relaxed),
        snapshot_errors: c.snapshot_errors.load(Relaxed),
        alerts_published: c.alerts_published.load(Relaxed),
        alerts_dropped: c.alerts_dropped.load(Relaxed),
        alerts_received: c.alerts_received.load(Relaxed),
        alert_store_errors: c.alert_store_errors.load(Relaxed),
        feedback_sent: c.feedback_sent.load(Relaxed),
        feedback_dropped: c.feedback_dropped.load(Relaxed),
        feedback_applied: c.feedback_applied.load(Relaxed),
        series_errors: c.series_errors.load(Relaxed),
        partitions: c
            .partitions()
            .into_iter()
            .map(|p| PartitionAnswer {
                partition: p.partition,
                sequence: p.sequence,
                pending: p.pending,
                since_ns: p.since_ns,
                lease_revision: p.lease_revision,
            })
            .collect(),
    })
}

/// One live node of the fleet.
#[derive(Serialize, schemars::JsonSchema)]
struct ClusterNode {
    /// Its name.
    name: String,
    /// What it does: `sensor`, `detector`, `console`.
    roles: Vec<String>,
    /// Where its API listens.
    api: String,
    /// The version it runs.
    version: String,
    /// When it started, ns.
    started_ns: i64,
    /// Its last renewal, by the servers' clock, ns.
    last_contact_ns: i64,
    /// Whether it is the node answering.
    this_node: bool,
    /// A detector's partitions.
    partitions: Vec<u32>,
    /// A detector's lag: records of its partitions in the stream not yet scored.
    pending: u64,
    /// A sensor's link to the detection stream; null on other nodes.
    link: Option<String>,
    /// A sensor's bytes of records waiting for the stream.
    spool_bytes: u64,
}

/// `ok` or `degraded`, for a node of a fleet.
pub(crate) fn status(s: &ClusterSnapshot) -> &'static str {
    if s.connected && s.last_error.is_none() {
        "ok"
    } else {
        "degraded"
    }
}

/// The fleet as this node's last heartbeat saw it.
pub async fn cluster(State(st): State<AppState>) -> Json<ClusterAnswer> {
    let Some(membership) = &st.cluster else {
        return Json(ClusterAnswer {
            status: "standalone",
            node: None,
            roles: Vec::new(),
            servers: Vec::new(),
            server: None,
            last_error: None,
            last_heartbeat_ns: 0,
            nodes: Vec::new(),
            data_path: None,
            content: None,
        });
    };
    let s = membership.snapshot();
    Json(ClusterAnswer {
        status: status(&s),
        node: Some(s.node.name),
        roles: s.node.roles,
        servers: s.servers,
        server: s.server,
        last_error: s.last_error,
        last_heartbeat_ns: s.last_heartbeat_ns,
        nodes: s
            .nodes
            .into_iter()
            .map(|n| ClusterNode {
                name: n.record.name,
                roles: n.record.roles,
                api: n.record.api,
                version: n.record.version,
                started_ns: n.record.started_ns,
                last_contact_ns: n.last_contact_ns,
                this_node: n.this_node,
                partitions: n.record.partitions,
                pending: n.record.pending,
                link: n.record.link,
                spool_bytes: n.record.spool_bytes,
            })
            .collect(),
        data_path: data_path(&st),
        content: shared_content(&st),
    })
}

/// `/health`'s view of the fleet: disabled when the node stands alone.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "ClusterHealth")]
pub(crate) struct ClusterHealth {
    /// `disabled`, `ok`, or `degraded` while this node cannot renew its entry.
    pub status: &'static str,
    /// The server connected to.
    pub server: Option<String>,
    /// Why the last heartbeat failed.
    pub last_error: Option<String>,
    /// Live nodes seen at the last heartbeat.
    pub nodes: usize,
    /// A sensor's link to the detection stream (`connecting`, `connected`, `spooling`,
    /// `draining`); null on other nodes. `spooling` makes the node degraded: it detects what
    /// stage A detects, but its records wait for the fleet's detectors.
    pub link: Option<&'static str>,
    /// Bytes of records waiting for the stream.
    pub spool_bytes: u64,
    /// Records dropped because the spool was full.
    pub records_dropped: u64,
    /// Partitions this detector owns.
    pub partitions: usize,
}

/// See [`ClusterHealth`].
pub(crate) fn health(st: &AppState) -> ClusterHealth {
    match &st.cluster {
        None => ClusterHealth {
            status: "disabled",
            server: None,
            last_error: None,
            nodes: 0,
            link: None,
            spool_bytes: 0,
            records_dropped: 0,
            partitions: 0,
        },
        Some(m) => {
            let s = m.snapshot();
            let path = data_path(st);
            let link = path.as_ref().and_then(|p| p.link);
            let status = match link {
                Some("spooling") => "degraded",
                _ => status(&s),
            };
            ClusterHealth {
                status,
                server: s.server,
                last_error: s.last_error,
                nodes: s.nodes.len(),
                link,
                spool_bytes: path.as_ref().map_or(0, |p| p.spool_bytes),
                records_dropped: path.as_ref().map_or(0, |p| p.records_dropped),
                partitions: path.as_ref().map_or(0, |p| p.partitions.len()),
            }
        }
    }
}
