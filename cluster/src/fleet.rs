//! This node's parts of the fleet's data path, started by its roles.

use crate::counters::FleetCounters;
use crate::{ClusterError, DetectorKit, Membership, SensorLink};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use watchpost_dataplane::LiveAlerts;
use watchpost_proto::config::ClusterConfig;
use watchpost_store::Store;

/// The fleet's data path on this node (see the crate's documentation): what its roles
/// started, and their counters.
pub struct Fleet {
    config: ClusterConfig,
    node: String,
    counters: Arc<FleetCounters>,
    partition_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    feedback: std::sync::OnceLock<crate::FeedbackQueue>,
    /// A detector's partition thread, for the API's questions about its baselines.
    partitions: std::sync::OnceLock<crate::partitions::WorkSender>,
}

impl Fleet {
    /// Nothing started yet.
    pub fn new(config: &ClusterConfig, node: &str) -> Fleet {
        Fleet {
            config: config.clone(),
            node: node.to_string(),
            counters: Arc::new(FleetCounters::default()),
            partition_thread: Mutex::new(None),
            feedback: std::sync::OnceLock::new(),
            partitions: std::sync::OnceLock::new(),
        }
    }

    /// This node's name in the fleet.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// A console's queue of analysts' verdicts to the detectors (`None` before the console
    /// role starts, and on other nodes).
    pub fn feedback(&self) -> Option<crate::FeedbackQueue> {
        self.feedback.get().cloned()
    }

    /// The partition an entity with name hash `entity` is scored in (its UEBA baseline's).
    pub fn partition_of(&self, entity: u64) -> u32 {
        watchpost_detect::shard_of(entity, self.config.partitions as usize) as u32
    }

    /// A detector's live UEBA baseline of the entity with name hash `entity`: `None` when this
    /// node is not a detector, does not own the entity's partition now, or the partition
    /// holds no baseline of it.
    pub async fn baseline(&self, entity: u64) -> Option<watchpost_dataplane::BaselineView> {
        let work = self.partitions.get()?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let ask = crate::partitions::Work::Baseline {
            partition: self.partition_of(entity),
            entity,
            reply,
        };
        if !crate::detector::hand(work, ask).await {
            return None;
        }
        tokio::time::timeout(Duration::from_secs(5), answer)
            .await
            .ok()?
            .ok()
            .flatten()
    }

    /// What it counts.
    pub fn counters(&self) -> Arc<FleetCounters> {
        Arc::clone(&self.counters)
    }

    /// The sensor's link to the detection stream, for the data plane (on the current
    /// runtime), with its spool in `spool_dir`.
    pub fn sensor_link(&self, spool_dir: &std::path::Path) -> Result<SensorLink, ClusterError> {
        SensorLink::start(
            &self.config,
            &self.node,
            spool_dir,
            Arc::clone(&self.counters),
        )
    }

    /// Starts the detector role (on the current runtime): leases, consumers, the partition
    /// thread, snapshots every `save_every`. `membership` (the node list) says which other
    /// detectors live and what they hold, for this node's share of the partitions.
    pub fn start_detector(
        &self,
        kit: DetectorKit,
        save_every: Duration,
        membership: Arc<Membership>,
    ) -> Result<(), ClusterError> {
        let (thread, work) = crate::detector::start(
            &self.config,
            &self.node,
            kit,
            save_every,
            Arc::clone(&self.counters),
            membership,
        )?;
        let _ = self.partitions.set(work);
        *self
            .partition_thread
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(thread);
        Ok(())
    }

    /// Starts sharing content (on the current runtime, docs/cluster.md "Shared content"): a
    /// console mirrors its rules, flags, exceptions and indicator files into the fleet's;
    /// any other node follows them.
    pub fn share_content(&self, parts: crate::ContentParts) -> Result<(), ClusterError> {
        crate::connect::server_addrs(&self.config)?;
        crate::content::start(
            self.config.clone(),
            self.node.clone(),
            self.config.has_role("console"),
            parts,
            Arc::clone(&self.counters),
        );
        Ok(())
    }

    /// Starts the console role (on the current runtime): the fleet's alerts into `store` and
    /// the live feed. `membership` says where each sensor's API listens (to name the
    /// entities of its alerts).
    pub fn start_console(
        &self,
        store: Arc<Store>,
        live: Arc<LiveAlerts>,
        membership: Arc<Membership>,
    ) -> Result<(), ClusterError> {
        crate::connect::server_addrs(&self.config)?;
        let _ = self.feedback.set(crate::feedback::start(
            self.config.clone(),
            self.node.clone(),
            Arc::clone(&self.counters),
        ));
        let (config, node, counters) = (
            self.config.clone(),
            self.node.clone(),
            Arc::clone(&self.counters),
        );
        tokio::spawn(async move {
            let Some(client) = crate::connect::client_for(&config, &node, "console").await else {
                return;
            };
            let js = async_nats::jetstream::new(client);
            let namer = crate::names::Namer::new(Arc::new(move |sensor: &str| {
                membership
                    .snapshot()
                    .nodes
                    .into_iter()
                    .find(|n| n.record.name == sensor)
                    .map(|n| n.record.api)
            }));
            crate::alerts::consume_loop(js, config, node, store, live, counters, namer).await;
        });
        Ok(())
    }
}
