//! The service configuration: every key of the specification with its default, plus Watchpost's
//! own `[dataplane]`, `[storage]`, `[inputs]`, `[templates]` and `[severity]` tables.
//!
//! One TOML file (`--config PATH`); no file means every default, so a fresh checkout runs with no
//! set-up. Unknown keys are errors rather than warnings: a misspelt key silently ignored is a
//! setting the operator believes is on. Validation collects every problem at once, each naming the
//! key, so a bad file is fixed in one pass. `deploy/watchpost.toml` documents every key.

//!
//! One file per table: each defines its table's types with their defaults and checks its keys;
//! [`Config::validate`] runs every check and reports all problems together.

mod cluster;
mod dataplane;
mod detection;
mod inputs;
mod llm;
mod notifications;
mod problems;
mod rate_limit;
mod read;
mod secret;
mod service;
mod severity;
mod storage;
mod templates;
#[cfg(test)]
mod tests;
mod ueba;

pub use cluster::{CLUSTER_ROLES, ClusterConfig, valid_node_name};
pub use dataplane::DataplaneConfig;
pub use detection::{DetectionConfig, RiskLevelWeights};
pub use inputs::{FileInputConfig, HttpInputConfig, InputsConfig, TcpInputConfig, UdpInputConfig};
pub use llm::LlmConfig;
pub use notifications::{CHANNEL_KINDS, NotificationChannel};
pub use problems::{ConfigError, ConfigProblem};
pub use rate_limit::RateLimit;
pub use secret::Secret;
pub use severity::SeverityConfig;
pub use storage::StorageConfig;
pub use templates::{MaskConfig, TemplatesConfig};
pub use ueba::{SubScoreWeights, UebaConfig};

use problems::Problems;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What `config show` and `GET /config` print in place of a credential.
pub const MASK: &str = "********";

/// Keys whose values are credentials: masked wherever the configuration is echoed.
pub const SECRET_KEYS: &[&str] = &[
    "api_rate_limit_store_url",
    "llm.cloud_api_key",
    "cluster.password",
    "cluster.token",
];

/// Keys of each `[[notifications]]` table whose values are credentials.
pub const CHANNEL_SECRET_KEYS: &[&str] = &["url", "secret", "smtp_password"];

/// The whole configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Port of the HTTP API, WebSocket and dashboard listener.
    pub dashboard_port: u32,
    /// Address the API listener binds; loopback by default (put a reverse proxy in front to expose it).
    pub dashboard_bind_address: String,
    /// Address health probes (`/health`, `/metrics`) are served on.
    pub health_bind_address: String,
    /// Port of the health probe listener; 0 = none (probes only on the API listener).
    pub health_port: u32,
    /// Browser origins allowed by CORS; empty = same origin only.
    pub api_allowed_origins: Vec<String>,
    /// `Host` names (`name` or `name:port`) the listeners answer besides `localhost`, `127.0.0.1`,
    /// `[::1]` and their bind address at their port: a reverse proxy's or the sensor's DNS names.
    /// Any other `Host` is refused, which stops DNS-rebinding pages.
    pub api_allowed_hosts: Vec<String>,
    /// Trust `X-Forwarded-For` for client addresses; only behind a trusted reverse proxy.
    pub api_trust_proxy_headers: bool,
    /// Shared rate-limit store (`redis://`, `rediss://`, `unix://`, `redis+sentinel://`; see
    /// `store_url`); empty = limits per process. A credential.
    pub api_rate_limit_store_url: String,
    /// CA certificates (PEM) trusted for a `rediss://` store; empty = the system's roots.
    pub api_rate_limit_store_ca_file: String,
    /// Client certificate (PEM) for a store that asks for one (Redis's `tls-auth-clients`).
    pub api_rate_limit_store_cert_file: String,
    /// Its private key (PEM).
    pub api_rate_limit_store_key_file: String,
    /// Rate limit of list endpoints, `N/second|minute|hour`.
    pub api_list_rate_limit: String,
    /// Rate limit of detail endpoints.
    pub api_detail_rate_limit: String,
    /// Rate limit of `/attack/coverage`.
    pub api_coverage_rate_limit: String,
    /// Largest accepted request body, in bytes (HTTP ingest included).
    pub api_max_body_bytes: u64,
    /// Longest an event search reads before answering what it found, ms; 0 = no bound.
    pub api_search_timeout_ms: u64,
    /// Seconds a client has to send a whole request head, and a kept-alive connection to start
    /// its next request, before the connection is closed (both listeners).
    pub api_header_read_timeout_seconds: u64,
    /// Connections one client address may hold open (both listeners together).
    pub api_max_connections_per_client: u32,
    /// Connections all clients together may hold open (both listeners together).
    pub api_max_connections: u32,
    /// Ingest and OTLP requests framed, spooled and made durable at once (a slot is taken once
    /// the body is in); more are answered 503 `busy`.
    pub api_ingest_max_in_flight: u32,
    /// Seconds a request body may take to arrive in full, on every route; past it the request is
    /// answered 408 `body_timeout` and the connection closed.
    pub api_body_read_timeout_seconds: u64,
    /// Slowest a request body may arrive, in bytes a second averaged over each 5 s (or the rest of
    /// the body, when less); slower is answered 408 `body_timeout`. 0 = no floor (the timeout
    /// alone).
    pub api_body_min_bytes_per_second: u64,
    /// Request bodies one client address may be sending at once, on every route; more are
    /// answered 429 `too_many_bodies`.
    pub api_max_bodies_per_client: u32,
    /// Memory all request bodies in flight may hold together (twice what has arrived of each),
    /// with what splitting and decoding them takes, MiB; a body that would pass it is answered 503 `busy` (counted in `/stats`'s
    /// memory budget).
    pub api_body_memory_mb: u32,
    /// Most events one ingest request may carry (array elements or lines of `POST /ingest`,
    /// five times this in OTLP messages); more are answered 413 `too_many_events`.
    pub api_ingest_max_events: u32,
    /// Allowed WebSocket origins; empty = localhost and 127.0.0.1 on `dashboard_port`.
    pub ws_allowed_origins: Vec<String>,
    /// Concurrent WebSocket clients.
    pub ws_max_connections: u32,
    /// Most events in one `batch` frame.
    pub ws_batch_max_events: u32,
    /// Flush tick of `batch` and `alert_batch` frames, seconds.
    pub ws_tick_interval_s: f64,
    /// Interval of `status` frames, seconds.
    pub ws_status_interval_s: f64,
    /// Minimum interval between a client's filter updates, milliseconds.
    pub ws_filter_min_interval_ms: u64,
    /// Frames buffered per client before the oldest are dropped.
    pub ws_queue_maxlen: u32,
    /// Bytes of frames buffered per client: the oldest are dropped first past it, as past
    /// `ws_queue_maxlen` frames, so a client that reads nothing costs at most this.
    pub ws_queue_max_bytes: u64,
    /// Largest frame sent: a tick's `batch` or `alert_batch` larger than this goes out as
    /// several frames.
    pub ws_frame_max_bytes: u64,
    /// Log verbosity of the service itself: error, warn, info, debug, trace.
    pub log_level: String,
    /// Per-entity behaviour analytics.
    pub ueba: UebaConfig,
    /// Optional LLM assistance.
    pub llm: LlmConfig,
    /// Detection engines.
    pub detection: DetectionConfig,
    /// Threads, cores, rings and batches of the data plane.
    pub dataplane: DataplaneConfig,
    /// Where and how long events are kept.
    pub storage: StorageConfig,
    /// Network and file inputs.
    pub inputs: InputsConfig,
    /// Template miner additions.
    pub templates: TemplatesConfig,
    /// Which scale each source's numeric severities are on.
    pub severity: SeverityConfig,
    /// Channels alerts are sent out on (`[[notifications]]`, docs/notifications.md).
    pub notifications: Vec<NotificationChannel>,
    /// The fleet this node is part of, if any (docs/cluster.md).
    pub cluster: ClusterConfig,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            dashboard_port: 8080,
            dashboard_bind_address: "127.0.0.1".into(),
            health_bind_address: "127.0.0.1".into(),
            health_port: 8081,
            api_allowed_origins: Vec::new(),
            api_allowed_hosts: Vec::new(),
            api_trust_proxy_headers: false,
            api_rate_limit_store_url: String::new(),
            api_rate_limit_store_ca_file: String::new(),
            api_rate_limit_store_cert_file: String::new(),
            api_rate_limit_store_key_file: String::new(),
            api_list_rate_limit: "60/minute".into(),
            api_detail_rate_limit: "300/minute".into(),
            api_coverage_rate_limit: "10/minute".into(),
            api_max_body_bytes: 16 << 20,
            api_search_timeout_ms: 5000,
            api_header_read_timeout_seconds: 10,
            api_max_connections_per_client: 64,
            api_max_connections: 1024,
            api_ingest_max_in_flight: 16,
            api_body_read_timeout_seconds: 30,
            api_body_min_bytes_per_second: 1024,
            api_max_bodies_per_client: 4,
            api_body_memory_mb: 512,
            api_ingest_max_events: 100_000,
            ws_allowed_origins: Vec::new(),
            ws_max_connections: 20,
            ws_batch_max_events: 200,
            ws_tick_interval_s: 1.0,
            ws_status_interval_s: 10.0,
            ws_filter_min_interval_ms: 100,
            ws_queue_maxlen: 1000,
            ws_queue_max_bytes: 8 << 20,
            ws_frame_max_bytes: 1 << 20,
            log_level: "info".into(),
            ueba: UebaConfig::default(),
            llm: LlmConfig::default(),
            detection: DetectionConfig::default(),
            dataplane: DataplaneConfig::default(),
            storage: StorageConfig::default(),
            inputs: InputsConfig::default(),
            templates: TemplatesConfig::default(),
            severity: SeverityConfig::default(),
            notifications: Vec::new(),
            cluster: ClusterConfig::default(),
        }
    }
}

impl Config {
    /// Parses a TOML text and validates it, reporting every problem of the file at once: each
    /// syntax error, each unknown key (with the closest known one) and value of the wrong type
    /// (with its line), and each value the checks refuse. Nesting is bounded by the TOML library
    /// (80 levels of arrays and tables); deeper is a parse error with its line and column.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        read::read(text)
    }

    /// Reads, parses and validates a file; `None` gives the defaults.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::one("(file)", format!("cannot read {}: {e}", path.display()))
        })?;
        Config::from_toml(&text)
    }

    /// The data folder.
    pub fn data_dir(&self) -> PathBuf {
        PathBuf::from(&self.storage.data_dir)
    }

    /// The custom Sigma rule folder, resolved against the data folder when not set.
    pub fn sigma_custom_upload_dir(&self) -> PathBuf {
        if self.detection.sigma_custom_upload_dir.is_empty() {
            self.data_dir().join("sigma-custom")
        } else {
            PathBuf::from(&self.detection.sigma_custom_upload_dir)
        }
    }

    /// The indicator folder: `detection.ioc_dir`, or `<data_dir>/ioc` when empty.
    pub fn ioc_dir(&self) -> PathBuf {
        if self.detection.ioc_dir.is_empty() {
            self.data_dir().join("ioc")
        } else {
            PathBuf::from(&self.detection.ioc_dir)
        }
    }

    /// Replaces `env:VAR` values of credential keys with the variable's value, then checks the
    /// configuration again: a value read from the environment is held to the same rules as one
    /// written in the file (a webhook URL must be https://).
    pub fn resolve_secrets(&mut self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        let mut credentials = vec![
            (
                "api_rate_limit_store_url".to_string(),
                &mut self.api_rate_limit_store_url,
            ),
            (
                "llm.cloud_api_key".to_string(),
                &mut self.llm.cloud_api_key.0,
            ),
            ("cluster.password".to_string(), &mut self.cluster.password.0),
            ("cluster.token".to_string(), &mut self.cluster.token.0),
        ];
        for (i, c) in self.notifications.iter_mut().enumerate() {
            credentials.push((format!("notifications[{i}].url"), &mut c.url.0));
            credentials.push((format!("notifications[{i}].secret"), &mut c.secret.0));
            credentials.push((
                format!("notifications[{i}].smtp_password"),
                &mut c.smtp_password.0,
            ));
        }
        for (key, value) in credentials {
            if let Some(var) = value.strip_prefix("env:") {
                match std::env::var(var) {
                    Ok(v) => *value = v,
                    Err(_) => problems.push(ConfigProblem {
                        key,
                        problem: format!("environment variable `{var}` is not set"),
                    }),
                }
            }
        }
        if problems.is_empty() {
            self.validate()
        } else {
            Err(ConfigError { problems })
        }
    }

    /// The configuration as JSON with every credential masked; what `GET /config` returns.
    pub fn masked_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        for key in SECRET_KEYS {
            let mut node = &mut v;
            let parts: Vec<&str> = key.split('.').collect();
            for part in &parts[..parts.len() - 1] {
                node = &mut node[*part];
            }
            let leaf = &mut node[parts[parts.len() - 1]];
            if leaf.as_str().is_some_and(|s| !s.is_empty()) {
                *leaf = serde_json::Value::String(MASK.into());
            }
        }
        if let Some(channels) = v["notifications"].as_array_mut() {
            for channel in channels {
                for key in CHANNEL_SECRET_KEYS {
                    let leaf = &mut channel[*key];
                    if leaf.as_str().is_some_and(|s| !s.is_empty()) {
                        *leaf = serde_json::Value::String(MASK.into());
                    }
                }
            }
        }
        v
    }

    /// The configuration as TOML with every credential masked; what `config show` prints.
    pub fn masked_toml(&self) -> String {
        toml::to_string(&self.masked_json()).unwrap_or_default()
    }

    /// Checks every value; returns all problems at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Problems::default();
        service::check(self, &mut problems);
        ueba::check(self, &mut problems);
        llm::check(self, &mut problems);
        detection::check(self, &mut problems);
        dataplane::check(self, &mut problems);
        storage::check(self, &mut problems);
        inputs::check(self, &mut problems);
        templates::check(self, &mut problems);
        severity::check(self, &mut problems);
        notifications::check(self, &mut problems);
        cluster::check(self, &mut problems);
        problems.finish()
    }
}
