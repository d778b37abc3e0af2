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
            })
            .collect(),
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
}

/// See [`ClusterHealth`].
pub(crate) fn health(st: &AppState) -> ClusterHealth {
    match &st.cluster {
        None => ClusterHealth {
            status: "disabled",
            server: None,
            last_error: None,
            nodes: 0,
        },
        Some(m) => {
            let s = m.snapshot();
            ClusterHealth {
                status: status(&s),
                server: s.server,
                last_error: s.last_error,
                nodes: s.nodes.len(),
            }
        }
    }
}
