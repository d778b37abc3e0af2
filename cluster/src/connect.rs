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

/// Connects to the configured servers for `part` of this node (`sensor link`, `detector`,
/// ...), trying again every second until one answers, each failure logged; from then on the
/// client reconnects by itself. `None` (logged) only for a server address the client refuses,
/// which the configuration's checks let through.
pub(crate) async fn client_for(
    config: &ClusterConfig,
    node: &str,
    part: &str,
) -> Option<async_nats::Client> {
    let addrs = match server_addrs(config) {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("cluster: {part}: {e}");
            return None;
        }
    };
    loop {
        match options(config, node).connect(addrs.clone()).await {
            Ok(client) => return Some(client),
            Err(source) => {
                let e = ClusterError::Connect {
                    servers: config.servers.join(","),
                    source,
                };
                tracing::warn!("cluster: {part}: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
