//! The `[cluster]` table: a node of a fleet joined through NATS JetStream (docs/cluster.md).
//! With no servers the node stands alone, exactly as before the fleet existed.

use super::problems::Problems;
use super::{Config, Secret};
use serde::{Deserialize, Serialize};

/// What a node may do in a fleet.
pub const CLUSTER_ROLES: &[&str] = &["sensor", "detector", "console"];

/// `[cluster]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// NATS servers, `nats://host:4222` or `tls://host:4222`; every server of the JetStream
    /// cluster, so that the client reaches a live one at once. Empty: the node stands alone.
    pub servers: Vec<String>,
    /// This node's name in the fleet (letters, digits, `-`, `_`); empty = the host name.
    pub node_name: String,
    /// What this node does: any of `sensor`, `detector`, `console`.
    pub roles: Vec<String>,
    /// NATS user (with `password`); empty = none.
    pub user: String,
    /// Its password. A credential.
    pub password: Secret,
    /// NATS token, instead of a user. A credential.
    pub token: Secret,
    /// CA certificates (PEM) trusted for `tls://` servers; empty = the system's roots.
    pub tls_ca_file: String,
    /// Client certificate (PEM) for servers that verify clients.
    pub tls_cert_file: String,
    /// Its private key (PEM).
    pub tls_key_file: String,
    /// How often this node renews its entry in the fleet's node list, seconds; an entry not
    /// renewed for three of these disappears (the bucket's age, set by the first node).
    pub heartbeat_seconds: u64,
    /// Partitions of the detection stream (`wp.detect.<p>`): the unit a detector owns and a
    /// takeover moves. Fixed when the fleet's stream is made; every node must say the same.
    pub partitions: u32,
    /// How long a detector's claim on a partition lasts unless renewed (every third of it),
    /// seconds: a dead detector's partitions move after at most this long.
    pub lease_seconds: u64,
    /// Bytes of detection records a sensor's spool (on disk, `<data_dir>/cluster-spool`) holds
    /// for the stream while the servers are away (or slower than its inputs); past it,
    /// records are dropped and counted.
    pub spool_max_bytes: u64,
    /// Hours the detection stream keeps records: a detector away longer than this, or a
    /// partition whose last snapshot is older, restarts from the oldest record kept.
    pub stream_max_age_hours: u64,
    /// Where the other nodes reach this node's API (`http://host:port` or `https://...`): a
    /// console sends the event searches it fans out there. Empty = `http://` the dashboard's
    /// bind address and port, with the host name for an unspecified address (`0.0.0.0`).
    pub api_url: String,
    /// How long a console waits for the sensors' answers to a search it fans out,
    /// milliseconds; a sensor that has not answered by then is named as missing and the
    /// answer marked partial.
    pub fanout_timeout_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            servers: Vec::new(),
            node_name: String::new(),
            roles: CLUSTER_ROLES.iter().map(|r| r.to_string()).collect(),
            user: String::new(),
            password: Secret::default(),
            token: Secret::default(),
            tls_ca_file: String::new(),
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
            heartbeat_seconds: 5,
            partitions: 64,
            lease_seconds: 10,
            spool_max_bytes: 256 << 20,
            stream_max_age_hours: 24,
            api_url: String::new(),
            fanout_timeout_ms: 5_000,
        }
    }
}

impl ClusterConfig {
    /// Whether the node is part of a fleet.
    pub fn enabled(&self) -> bool {
        !self.servers.is_empty()
    }
}

/// Whether `name` can name a node: it is a key of the fleet's node list (NATS KV keys allow
/// letters, digits and `-_=./`; `.` and `/` would nest, `=` is odd in a name).
pub fn valid_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Checks the `[cluster]` table.
pub(super) fn check(config: &Config, p: &mut Problems) {
    let c = &config.cluster;
    let mut tls = false;
    for (i, server) in c.servers.iter().enumerate() {
        let key = format!("cluster.servers[{i}]");
        let rest = if let Some(r) = server.strip_prefix("nats://") {
            r
        } else if let Some(r) = server.strip_prefix("tls://") {
            tls = true;
            r
        } else {
            p.add(
                &key,
                format!("`{server}` must start with nats:// or tls://"),
            );
            continue;
        };
        match crate::Authority::parse(rest) {
            Ok(a) if a.port.is_some() => {}
            Ok(_) => p.add(&key, format!("`{server}` needs its port (4222 by default)")),
            Err(e) => p.add(&key, e.to_string()),
        }
    }
    if !c.node_name.is_empty() && !valid_node_name(&c.node_name) {
        p.add(
            "cluster.node_name",
            format!(
                "`{}` must be 1 to 64 letters, digits, `-` or `_`",
                c.node_name
            ),
        );
    }
    if c.roles.is_empty() {
        p.add(
            "cluster.roles",
            "names no role (any of \"sensor\", \"detector\", \"console\")",
        );
    }
    for (i, role) in c.roles.iter().enumerate() {
        p.one_of(&format!("cluster.roles[{i}]"), role, CLUSTER_ROLES);
        if c.roles[..i].contains(role) {
            p.add(
                &format!("cluster.roles[{i}]"),
                format!("`{role}` is named twice"),
            );
        }
    }
    p.pair(
        "a NATS user",
        ("cluster.user", !c.user.is_empty()),
        ("cluster.password", !c.password.is_empty()),
    );
    if !c.user.is_empty() && !c.token.is_empty() {
        p.add(
            "cluster.token",
            "a token replaces the user: give one or the other",
        );
    }
    for (key, path) in [
        ("cluster.tls_ca_file", &c.tls_ca_file),
        ("cluster.tls_cert_file", &c.tls_cert_file),
        ("cluster.tls_key_file", &c.tls_key_file),
    ] {
        if path.is_empty() {
            continue;
        }
        if !std::path::Path::new(path).is_file() {
            p.add(key, format!("{path:?} is not a readable file"));
        } else if c.enabled() && !tls {
            p.add(key, "applies to tls:// servers only");
        }
    }
    p.pair(
        "a client certificate",
        ("cluster.tls_cert_file", !c.tls_cert_file.is_empty()),
        ("cluster.tls_key_file", !c.tls_key_file.is_empty()),
    );
    p.range_u64("cluster.heartbeat_seconds", c.heartbeat_seconds, 1, 60);
    p.range_u64("cluster.partitions", u64::from(c.partitions), 1, 4096);
    p.range_u64("cluster.lease_seconds", c.lease_seconds, 3, 300);
    p.range_u64(
        "cluster.spool_max_bytes",
        c.spool_max_bytes,
        1 << 20,
        1 << 40,
    );
    p.range_u64(
        "cluster.stream_max_age_hours",
        c.stream_max_age_hours,
        1,
        24 * 90,
    );
    if !c.api_url.is_empty() {
        let rest = c
            .api_url
            .strip_prefix("http://")
            .or_else(|| c.api_url.strip_prefix("https://"));
        match rest.map(|r| crate::Authority::parse(r.trim_end_matches('/'))) {
            Some(Ok(_)) => {}
            Some(Err(e)) => p.add("cluster.api_url", e.to_string()),
            None => p.add(
                "cluster.api_url",
                format!("`{}` must start with http:// or https://", c.api_url),
            ),
        }
    }
    p.range_u64(
        "cluster.fanout_timeout_ms",
        c.fanout_timeout_ms,
        100,
        120_000,
    );
}

impl ClusterConfig {
    /// Whether this node has `role` (one of [`CLUSTER_ROLES`]).
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}
