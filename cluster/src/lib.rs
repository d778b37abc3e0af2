//! The fleet: sensors, detectors and consoles joined through NATS JetStream
//! (docs/cluster.md).
//!
//! A node with `[cluster] servers` joins the fleet's JetStream cluster; without them nothing
//! here runs and the node stands alone. Each node keeps its entry in the fleet's node list
//! ([`Membership`]). By its roles it also:
//!
//! - as a **sensor**, publishes its stage A records to the detection stream, split by
//!   partition ([`SensorLink`], the data plane's [`watchpost_dataplane::RecordPublisher`]);
//! - as a **detector**, owns a share of the partitions through leases, scores their records
//!   with one detector per partition, snapshots them for the next owner, and publishes alerts;
//! - as a **console**, stores the fleet's alerts and serves them like its own.
//!
//! ```no_run
//! # async fn demo() -> Result<(), watchpost_cluster::ClusterError> {
//! let config = watchpost_proto::config::ClusterConfig {
//!     servers: vec!["nats://127.0.0.1:4222".into()],
//!     ..Default::default()
//! };
//! let node = watchpost_cluster::NodeRecord::this_node("sensor-1", &config, "127.0.0.1:8080");
//! let membership = watchpost_cluster::Membership::start(&config, node, None)?;
//! let view = membership.snapshot();
//! println!("{} nodes, connected: {}", view.nodes.len(), view.connected);
//! # Ok(())
//! # }
//! ```

mod alerts;
mod connect;
mod content;
mod counters;
mod detector;
mod error;
mod feedback;
mod fleet;
mod membership;
mod names;
mod node;
mod partitions;
mod sensor;
mod spool;
mod streams;
mod view;

pub use content::{CONTENT_BUCKET, ContentParts, FLEET_IOC_PREFIX, IOC_STORE};
pub use counters::{FleetCounters, LinkState, PartitionView};
pub use error::ClusterError;
pub use feedback::{FEEDBACK_HEADER, FeedbackQueue};
pub use fleet::Fleet;
pub use membership::{ClusterSnapshot, Membership, NODES_BUCKET};
pub use node::{NodeEntry, NodeRecord};
pub use partitions::DetectorKit;
pub use sensor::SensorLink;
pub use streams::{
    ALERTS_STREAM, ALERTS_SUBJECT, DETECT_STREAM, LEASES_BUCKET, STATE_BUCKET, detect_subject,
};
