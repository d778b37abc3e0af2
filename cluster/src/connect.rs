//! The NATS connection of a node: its servers, credentials and TLS from `[cluster]`.

use crate::ClusterError;
use async_nats::{ConnectOptions, ServerAddr};
use std::path::PathBuf;
use std::time::Duration;
use watchpost_proto::config::ClusterConfig;

/// The configured servers, parsed by the client.
pub(crate) fn server_addrs(config: &ClusterConfig) -> Result<Vec<ServerAddr>, ClusterError> {
    config
        .servers
        .iter()
        .map(|s| {
            s.parse::<ServerAddr>().map_err(|e| ClusterError::Server {
                server: s.clone(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// The client's options: a name the servers show (`nats server report connections`),
/// credentials, and TLS with a private CA and a client certificate when configured. The client
/// reconnects by itself, for ever, to whichever server of the list answers.
pub(crate) fn options(config: &ClusterConfig, node: &str) -> ConnectOptions {
    let mut o = ConnectOptions::new()
        .name(format!("watchpost {node}"))
        .connection_timeout(Duration::from_secs(5))
        .max_reconnects(None::<usize>);
    if !config.user.is_empty() {
        o = o.user_and_password(config.user.clone(), config.password.expose().to_string());
    }
    if !config.token.is_empty() {
        o = o.token(config.token.expose().to_string());
    }
    if config.servers.iter().any(|s| s.starts_with("tls://")) {
        o = o.require_tls(true);
    }
    if !config.tls_ca_file.is_empty() {
        o = o.add_root_certificates(PathBuf::from(&config.tls_ca_file));
    }
    if !config.tls_cert_file.is_empty() {
        o = o.add_client_certificate(
            PathBuf::from(&config.tls_cert_file),
            PathBuf::from(&config.tls_key_file),
        );
    }
    o
}

/// Connects to the configured servers, trying again every `pause` until one answers; from
/// then on the client reconnects by itself. `failed` hears each failure (for the log and the
/// node's state).
pub(crate) async fn connect_retrying(
    config: &ClusterConfig,
    node: &str,
    pause: Duration,
    mut failed: impl FnMut(&ClusterError),
) -> Result<async_nats::Client, ClusterError> {
    let addrs = server_addrs(config)?;
    loop {
        match options(config, node).connect(addrs.clone()).await {
            Ok(client) => return Ok(client),
            Err(source) => {
                failed(&ClusterError::Connect {
                    servers: config.servers.join(","),
                    source,
                });
                tokio::time::sleep(pause).await;
            }
        }
    }
}
