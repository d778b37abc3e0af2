//! What can go wrong between a node and the fleet's servers.

/// See the module's documentation.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A server address the NATS client refuses (the configuration's check lets through what
    /// only the client can judge).
    #[error("cluster.servers: `{server}`: {reason}")]
    Server {
        /// The address as configured.
        server: String,
        /// Why.
        reason: String,
    },
    /// No server of the list could be reached (or it refused the credentials or the TLS).
    #[error("cannot connect to {servers}: {source}")]
    Connect {
        /// The servers tried.
        servers: String,
        /// Why.
        source: async_nats::ConnectError,
    },
    /// The node list's bucket could not be opened or made.
    #[error("cannot open or make {bucket}: {reason}")]
    Bucket {
        /// The bucket (or stream).
        bucket: String,
        /// Why.
        reason: String,
    },
    /// This node's entry could not be written.
    #[error("cannot renew this node's entry: {0}")]
    Renew(String),
    /// The detection stream was made with another partition count than this node's.
    #[error(
        "cluster.partitions is {configured} but the fleet's stream {} was made with {stream}: \
         every node must say the same (a new count needs a new stream)",
        crate::DETECT_STREAM
    )]
    Partitions {
        /// The stream's count.
        stream: String,
        /// This node's.
        configured: u32,
    },
    /// The sensor's spool could not be opened.
    #[error("cannot open the spool in {path}: {reason}")]
    Spool {
        /// Its folder.
        path: String,
        /// Why.
        reason: String,
    },
    /// The node list could not be read.
    #[error("cannot read the node list: {0}")]
    List(String),
}
