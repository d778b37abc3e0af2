//! A node as the fleet's node list holds it.

use serde::{Deserialize, Serialize};
use watchpost_proto::config::ClusterConfig;

/// What a node writes about itself at every heartbeat (JSON, so that `nats kv get` shows it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Its name in the fleet (`cluster.node_name`, or the host name).
    pub name: String,
    /// What it does: `sensor`, `detector`, `console`.
    pub roles: Vec<String>,
    /// Where the other nodes reach its API (`cluster.api_url`, or `http://` the dashboard's
    /// address and port): where a console sends the searches it fans out.
    pub api: String,
    /// The Watchpost version it runs.
    pub version: String,
    /// When it started, ns since the epoch.
    pub started_ns: i64,
    /// A detector's partitions, as of this heartbeat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<u32>,
    /// A detector's lag: records of its partitions in the stream not yet scored.
    #[serde(default)]
    pub pending: u64,
    /// A sensor's link to the detection stream (`connecting`, `connected`, `spooling`,
    /// `draining`); absent on a node that is not a sensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// A sensor's bytes of records waiting for the stream.
    #[serde(default)]
    pub spool_bytes: u64,
}

impl NodeRecord {
    /// This node, from its configuration, started now.
    pub fn this_node(name: &str, config: &ClusterConfig, api: &str) -> NodeRecord {
        NodeRecord {
            name: name.to_string(),
            roles: config.roles.clone(),
            api: api.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            started_ns: watchpost_proto::now_ns(),
            partitions: Vec::new(),
            pending: 0,
            link: None,
            spool_bytes: 0,
        }
    }
}

/// A node of the list as this node last read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// What the node wrote.
    pub record: NodeRecord,
    /// When its entry was last renewed, by the servers' clock, ns since the epoch.
    pub last_contact_ns: i64,
    /// The entry's revision in the bucket (grows with every renewal of any node).
    pub revision: u64,
    /// Whether it is the node reading the list.
    pub this_node: bool,
}
