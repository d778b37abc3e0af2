//! The fleet: how a node reaches the others, through NATS JetStream (docs/cluster.md).
//!
//! A node with `[cluster] servers` joins the fleet's JetStream cluster; without them nothing
//! here runs and the node stands alone. What is built so far is membership: each node keeps its
//! entry in the fleet's node list (a key-value bucket whose entries age out), and reads the
//! list back, so that `/api/v1/cluster` shows every live node with its roles and last contact.
//! The streams between the roles (detection records, alerts, shared content) come next, over
//! the same connection.
//!
//! ```no_run
//! # async fn demo() -> Result<(), watchpost_cluster::ClusterError> {
//! let config = watchpost_proto::config::ClusterConfig {
//!     servers: vec!["nats://127.0.0.1:4222".into()],
//!     ..Default::default()
//! };
//! let node = watchpost_cluster::NodeRecord::this_node("sensor-1", &config, "127.0.0.1:8080");
//! let membership = watchpost_cluster::Membership::start(&config, node)?;
//! let view = membership.snapshot();
//! println!("{} nodes, connected: {}", view.nodes.len(), view.connected);
//! # Ok(())
//! # }
//! ```

mod connect;
mod error;
mod membership;
mod node;

pub use error::ClusterError;
pub use membership::{ClusterSnapshot, Membership, NODES_BUCKET};
pub use node::{NodeEntry, NodeRecord};
