//! Membership: each node renews its entry in the fleet's node list, and reads the list back.
//!
//! The list is a JetStream key-value bucket ([`NODES_BUCKET`]), one key per node, one value
//! kept per key, and a maximum age of three heartbeats: a node that stops renewing (killed, cut
//! off, its host down) drops out of every node's view by itself, with no leaving protocol to
//! fail. The bucket is made by the first node that finds none, with its own heartbeat; the
//! others use it as it is, so the fleet's heartbeat is one setting.
//!
//! The work runs on one task of the control plane's runtime, which writes a [`ClusterSnapshot`]
//! after every heartbeat; the API reads the snapshot and never waits on the servers.

use crate::connect::{options, server_addrs};
use crate::view::KvView;
use crate::{ClusterError, FleetCounters, NodeEntry, NodeRecord};
use async_nats::jetstream::{self, kv};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use watchpost_proto::config::ClusterConfig;
use watchpost_proto::now_ns;

/// The node list's bucket.
pub const NODES_BUCKET: &str = "wp_nodes";

/// Heartbeats an entry outlives its last renewal by (the bucket's maximum age).
const MISSED_HEARTBEATS: u32 = 3;

/// What this node knows of the fleet, as of its last heartbeat.
#[derive(Clone, Debug)]
pub struct ClusterSnapshot {
    /// This node.
    pub node: NodeRecord,
    /// The servers configured.
    pub servers: Vec<String>,
    /// Whether the client is connected to one of them now.
    pub connected: bool,
    /// The server it is connected to (its `server_name`), when connected.
    pub server: Option<String>,
    /// Why the last heartbeat failed, while it does.
    pub last_error: Option<String>,
    /// When this node's entry was last renewed, ns since the epoch (0: never).
    pub last_heartbeat_ns: i64,
    /// The live nodes, this one included, by name.
    pub nodes: Vec<NodeEntry>,
}

/// The running membership of this node (see the module's documentation). Dropping it stops
/// the heartbeat; the entry then ages out.
pub struct Membership {
    snapshot: Arc<Mutex<ClusterSnapshot>>,
    task: tokio::task::JoinHandle<()>,
}

impl Membership {
    /// Starts the heartbeat on the current tokio runtime. Fails only on a server address the
    /// client refuses; servers that cannot be reached are tried again every heartbeat, and
    /// the snapshot says why meanwhile.
    /// `fleet`: this node's data-path counters, whose partitions and link state each heartbeat
    /// writes into the node's entry.
    pub fn start(
        config: &ClusterConfig,
        node: NodeRecord,
        fleet: Option<Arc<FleetCounters>>,
    ) -> Result<Membership, ClusterError> {
        let addrs = server_addrs(config)?;
        let snapshot = Arc::new(Mutex::new(ClusterSnapshot {
            node: node.clone(),
            servers: config.servers.clone(),
            connected: false,
            server: None,
            last_error: Some("connecting".into()),
            last_heartbeat_ns: 0,
            nodes: Vec::new(),
        }));
        let task = tokio::spawn(run(config.clone(), addrs, node, fleet, snapshot.clone()));
        Ok(Membership { snapshot, task })
    }

    /// The state as of the last heartbeat.
    pub fn snapshot(&self) -> ClusterSnapshot {
        self.snapshot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Connects, opens the bucket, and beats; after a failure to connect or to open the bucket,
/// starts over one heartbeat later. Once connected, the client reconnects by itself and a
/// failed heartbeat is only reported.
async fn run(
    config: ClusterConfig,
    addrs: Vec<async_nats::ServerAddr>,
    mut node: NodeRecord,
    fleet: Option<Arc<FleetCounters>>,
    snapshot: Arc<Mutex<ClusterSnapshot>>,
) {
    let heartbeat = Duration::from_secs(config.heartbeat_seconds);
    let report = |update: &dyn Fn(&mut ClusterSnapshot)| {
        update(&mut snapshot.lock().unwrap_or_else(|e| e.into_inner()));
    };
    loop {
        let client = match options(&config, &node.name).connect(addrs.clone()).await {
            Ok(c) => c,
            Err(source) => {
                let e = ClusterError::Connect {
                    servers: config.servers.join(","),
                    source,
                };
                tracing::warn!("cluster: {e}; trying again in {heartbeat:?}");
                report(&|s| {
                    s.connected = false;
                    s.server = None;
                    s.last_error = Some(e.to_string());
                });
                tokio::time::sleep(heartbeat).await;
                continue;
            }
        };
        tracing::info!(
            "cluster: node {} joined through {}",
            node.name,
            client.server_info().server_name
        );
        let bucket = match open_bucket(&client, &config).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("cluster: {e}; trying again in {heartbeat:?}");
                report(&|s| s.last_error = Some(e.to_string()));
                tokio::time::sleep(heartbeat).await;
                continue;
            }
        };
        let view = KvView::start(bucket.clone(), heartbeat * MISSED_HEARTBEATS);
        loop {
            if let Some(f) = &fleet {
                describe(&mut node, f, &config);
            }
            let beat = beat(&bucket, &view, heartbeat * MISSED_HEARTBEATS, &node).await;
            let connected = client.connection_state() == async_nats::connection::State::Connected;
            let server = connected.then(|| client.server_info().server_name);
            report(&|s| {
                s.connected = connected;
                s.server = server.clone();
                match &beat {
                    Ok(nodes) => {
                        s.last_error = None;
                        s.last_heartbeat_ns = now_ns();
                        s.nodes = nodes.clone();
                    }
                    Err(e) => s.last_error = Some(e.to_string()),
                }
            });
            if let Err(e) = beat {
                tracing::warn!("cluster: {e}");
            }
            tokio::time::sleep(heartbeat).await;
        }
    }
}

/// Writes the node's data-path state into its record.
fn describe(node: &mut NodeRecord, fleet: &FleetCounters, config: &ClusterConfig) {
    let partitions = fleet.partitions();
    node.pending = partitions.iter().map(|p| p.pending).sum();
    node.partitions = partitions.into_iter().map(|p| p.partition).collect();
    if config.has_role("sensor") {
        node.link = Some(fleet.link().name().to_string());
        node.spool_bytes = fleet.spool_bytes.load(std::sync::atomic::Ordering::Relaxed);
    }
}

/// The node list's bucket: opened, or made when there is none.
async fn open_bucket(
    client: &async_nats::Client,
    config: &ClusterConfig,
) -> Result<kv::Store, ClusterError> {
    let js = jetstream::new(client.clone());
    crate::streams::key_value(
        &js,
        kv::Config {
            bucket: NODES_BUCKET.into(),
            description: "Watchpost: the live nodes of the fleet (docs/cluster.md)".into(),
            history: 1,
            max_age: Duration::from_secs(config.heartbeat_seconds) * MISSED_HEARTBEATS,
            num_replicas: config.servers.len().clamp(1, 3),
            storage: jetstream::stream::StorageType::File,
            // An entry that ages out leaves a marker, which the watchers see as a purge.
            limit_markers: Some(Duration::from_secs(config.heartbeat_seconds) * MISSED_HEARTBEATS),
            ..Default::default()
        },
    )
    .await
}

/// Renews this node's entry and reads the list back from the bucket's view.
async fn beat(
    bucket: &kv::Store,
    view: &KvView,
    max_age: Duration,
    node: &NodeRecord,
) -> Result<Vec<NodeEntry>, ClusterError> {
    let value = serde_json::to_vec(node).map_err(|e| ClusterError::Renew(e.to_string()))?;
    bucket
        .put(&node.name, value.into())
        .await
        .map_err(|e| ClusterError::Renew(e.to_string()))?;
    let mut nodes = Vec::new();
    for entry in view.live_within(Some(max_age)) {
        // An entry another version wrote in a shape this one cannot read is left out of the
        // view rather than failing it.
        let Ok(record) = serde_json::from_slice::<NodeRecord>(&entry.value) else {
            tracing::debug!("cluster: the entry {} is not a node record", entry.key);
            continue;
        };
        nodes.push(NodeEntry {
            this_node: record.name == node.name,
            record,
            last_contact_ns: i64::try_from(entry.created.unix_timestamp_nanos()).unwrap_or(0),
            revision: entry.revision,
        });
    }
    // This node's own entry, as just written, even before the watcher brings it back.
    if !nodes.iter().any(|n| n.this_node) {
        nodes.push(NodeEntry {
            this_node: true,
            record: node.clone(),
            last_contact_ns: now_ns(),
            revision: 0,
        });
    }
    nodes.sort_by(|a, b| a.record.name.cmp(&b.record.name));
    Ok(nodes)
}
