//! The service configuration: every key of the specification with its default, plus Watchpost's
//! own `[dataplane]`, `[storage]`, `[inputs]` and `[templates]` tables.
//!
//! One TOML file (`--config PATH`); no file means every default, so a fresh checkout runs with no
//! set-up. Unknown keys are errors rather than warnings: a misspelt key silently ignored is a
//! setting the operator believes is on. Validation collects every problem at once, each naming the
//! key, so a bad file is fixed in one pass. `deploy/watchpost.toml` documents every key.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// What `config show` and `GET /config` print in place of a credential.
pub const MASK: &str = "********";

/// Keys whose values are credentials: masked wherever the configuration is echoed.
pub const SECRET_KEYS: &[&str] = &["api_rate_limit_store_url", "llm.cloud_api_key"];

/// The whole configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Shared rate-limit store (`redis://host:port/db`); empty = limits per process. A credential.
    pub api_rate_limit_store_url: String,
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
            api_list_rate_limit: "60/minute".into(),
            api_detail_rate_limit: "300/minute".into(),
            api_coverage_rate_limit: "10/minute".into(),
            api_max_body_bytes: 16 << 20,
            api_search_timeout_ms: 5000,
            ws_allowed_origins: Vec::new(),
            ws_max_connections: 20,
            ws_batch_max_events: 200,
            ws_tick_interval_s: 1.0,
            ws_status_interval_s: 10.0,
            ws_filter_min_interval_ms: 100,
            ws_queue_maxlen: 1000,
            log_level: "info".into(),
            ueba: UebaConfig::default(),
            llm: LlmConfig::default(),
            detection: DetectionConfig::default(),
            dataplane: DataplaneConfig::default(),
            storage: StorageConfig::default(),
            inputs: InputsConfig::default(),
            templates: TemplatesConfig::default(),
        }
    }
}

/// `[ueba]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UebaConfig {
    /// Produce UEBA alerts. Baselines keep learning while off, so re-enabling starts no new warmup.
    pub enabled: bool,
    /// Days from an entity's first event before it is scored.
    pub warmup_days: f64,
    /// Events an entity must have before it is scored.
    pub warmup_min_events: u64,
    /// Distinct source IPs remembered per entity (top-K).
    pub source_ip_cap: u32,
    /// Templates remembered per entity (top-K, LFU weighted).
    pub template_top_k: u32,
    /// Smoothing factor of the per-minute volume EMA.
    pub ema_alpha: f64,
    /// Seconds an entity stays in cooldown after an alert.
    pub alert_cooldown_seconds: u64,
    /// Entities tracked before the coldest are evicted.
    pub max_entities: u64,
    /// DSPOT risk level of the per-entity-type threshold.
    pub dspot_risk: f64,
    /// Weights of the four sub-scores; must sum to 1.0.
    pub sub_score_weights: SubScoreWeights,
}

impl Default for UebaConfig {
    fn default() -> UebaConfig {
        UebaConfig {
            enabled: true,
            warmup_days: 7.0,
            warmup_min_events: 200,
            source_ip_cap: 64,
            template_top_k: 32,
            ema_alpha: 0.05,
            alert_cooldown_seconds: 900,
            max_entities: 100_000,
            dspot_risk: 0.0001,
            sub_score_weights: SubScoreWeights::default(),
        }
    }
}

/// `[ueba.sub_score_weights]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubScoreWeights {
    /// Weight of the hour-of-day rarity sub-score.
    pub time_of_day: f64,
    /// Weight of the source IP novelty sub-score.
    pub source_novelty: f64,
    /// Weight of the volume sub-score.
    pub volume: f64,
    /// Weight of the template rarity sub-score.
    pub pattern_novelty: f64,
}

impl Default for SubScoreWeights {
    fn default() -> SubScoreWeights {
        SubScoreWeights {
            time_of_day: 0.25,
            source_novelty: 0.30,
            volume: 0.20,
            pattern_novelty: 0.25,
        }
    }
}

/// `[llm]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// `""` (off), `local_runner`, `daemon` or `cloud`.
    pub backend: String,
    /// local_runner: path of the model file.
    pub model_path: String,
    /// local_runner: context size in tokens.
    pub n_ctx: u32,
    /// local_runner: layers offloaded to the GPU (0 = none).
    pub n_gpu_layers: u32,
    /// daemon: HTTP address of the model daemon.
    pub daemon_url: String,
    /// daemon: model name.
    pub daemon_model: String,
    /// daemon: timeout in seconds.
    pub daemon_timeout_s: f64,
    /// cloud: `anthropic` or `openai`.
    pub cloud_provider: String,
    /// cloud: model name.
    pub cloud_model: String,
    /// cloud: API key, or `env:VAR`. A credential.
    pub cloud_api_key: String,
    /// cloud: timeout in seconds.
    pub cloud_timeout_s: f64,
    /// Hash user names before a prompt leaves the host (cloud backend).
    pub cloud_hash_usernames: bool,
    /// Contributing events put into an explanation prompt.
    pub explanation_max_contributing_events: u32,
    /// Characters of an explanation prompt.
    pub explanation_max_prompt_chars: u32,
    /// Seconds an explanation may take.
    pub explanation_timeout_s: f64,
    /// Cached explanations.
    pub explanation_cache_size: u32,
    /// Seconds an explanation stays cached.
    pub explanation_cache_ttl_s: u64,
    /// Seconds a hunt translation may take.
    pub hunt_timeout_s: f64,
    /// Characters of a hunt query.
    pub hunt_max_query_chars: u32,
    /// Results of a hunt (also the CLI's `--limit` default).
    pub hunt_max_results: u32,
    /// Cached hunts.
    pub hunt_cache_size: u32,
    /// Seconds a hunt stays cached.
    pub hunt_cache_ttl_s: u64,
    /// Seconds a rule suggestion may take.
    pub rule_suggestion_timeout_s: f64,
    /// True-positive feedbacks before a pattern is eligible.
    pub rule_suggestion_min_tp: u32,
    /// Look-back window of those feedbacks in days; 0 = all time.
    pub rule_suggestion_window_days: u32,
    /// Cached suggestions.
    pub rule_suggestion_cache_size: u32,
    /// Seconds a suggestion stays cached.
    pub rule_suggestion_cache_ttl_s: u64,
}

impl Default for LlmConfig {
    fn default() -> LlmConfig {
        LlmConfig {
            backend: String::new(),
            model_path: String::new(),
            n_ctx: 4096,
            n_gpu_layers: 0,
            daemon_url: "http://127.0.0.1:11434".into(),
            daemon_model: String::new(),
            daemon_timeout_s: 30.0,
            cloud_provider: String::new(),
            cloud_model: String::new(),
            cloud_api_key: String::new(),
            cloud_timeout_s: 30.0,
            cloud_hash_usernames: true,
            explanation_max_contributing_events: 8,
            explanation_max_prompt_chars: 12_000,
            explanation_timeout_s: 12.0,
            explanation_cache_size: 256,
            explanation_cache_ttl_s: 3600,
            hunt_timeout_s: 12.0,
            hunt_max_query_chars: 512,
            hunt_max_results: 100,
            hunt_cache_size: 128,
            hunt_cache_ttl_s: 300,
            rule_suggestion_timeout_s: 30.0,
            rule_suggestion_min_tp: 3,
            rule_suggestion_window_days: 0,
            rule_suggestion_cache_size: 64,
            rule_suggestion_cache_ttl_s: 6 * 3600,
        }
    }
}

/// `[detection]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DetectionConfig {
    /// Seconds between flushes of detector models and UEBA baselines to the store.
    pub model_save_interval_seconds: u64,
    /// Extra folders of Sigma rules loaded at start (for example a SigmaHQ checkout).
    pub sigma_rules_dirs: Vec<String>,
    /// Extra Sigma field alias files (the format of `rules/mappings/fields.yml`), read after the
    /// bundled table: a name given again replaces the bundled aliases.
    pub sigma_field_mappings: Vec<String>,
    /// Extra logsource files (the format of `rules/mappings/logsources.yml`), read after the
    /// bundled table: their entries add event shapes.
    pub sigma_logsource_mappings: Vec<String>,
    /// Folder of uploaded custom rules; empty = `<storage.data_dir>/sigma-custom`.
    pub sigma_custom_upload_dir: String,
    /// Custom rules the upload folder may hold before uploads answer 507.
    pub sigma_custom_max_rules: u32,
    /// Whether the content ensemble raises `ml` alerts (it always scores, for the anomaly
    /// timeline).
    pub ml_enabled: bool,
    /// DSPOT risk of each source's `ml` threshold: the share of events expected above it.
    pub ml_risk: f64,
    /// Seconds an `ml` alert of one source stays open: repeats inside it bump its count.
    pub ml_alert_cooldown_seconds: u64,
    /// Seconds a `sigma` alert of one rule and entity stays open: repeats inside it bump its
    /// count. Correlation alerts (per rule and group) use it too.
    pub sigma_alert_cooldown_seconds: u64,
    /// Correlation groups (rule and group-by values) one stage B worker holds windows for;
    /// hits for new groups beyond it are dropped and counted.
    pub correlation_max_groups: u32,
    /// Distinct ATT&CK tactics of one entity's alerts that make a kill-chain progression.
    pub killchain_min_tactics: u32,
    /// Seconds the tactics of a kill-chain progression must fall within (and that its alert
    /// stays open for).
    pub killchain_window_seconds: u64,
    /// Folder of indicator files (plain lists, CSV, STIX 2.1 bundles); empty =
    /// `<storage.data_dir>/ioc`.
    pub ioc_dir: String,
    /// Seconds between checks of `ioc_dir` for changed files (a change reloads the set).
    pub ioc_reload_interval_seconds: u64,
    /// Seconds an `ioc` alert of one indicator and entity stays open: repeats bump its count.
    pub ioc_alert_cooldown_seconds: u64,
}

impl Default for DetectionConfig {
    fn default() -> DetectionConfig {
        DetectionConfig {
            model_save_interval_seconds: 300,
            sigma_rules_dirs: Vec::new(),
            sigma_field_mappings: Vec::new(),
            sigma_logsource_mappings: Vec::new(),
            sigma_custom_upload_dir: String::new(),
            sigma_custom_max_rules: 1000,
            ml_enabled: true,
            ml_risk: 1e-4,
            ml_alert_cooldown_seconds: 300,
            sigma_alert_cooldown_seconds: 300,
            correlation_max_groups: 100_000,
            killchain_min_tactics: 3,
            killchain_window_seconds: 86_400,
            ioc_dir: String::new(),
            ioc_reload_interval_seconds: 30,
            ioc_alert_cooldown_seconds: 3600,
        }
    }
}

/// `[dataplane]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DataplaneConfig {
    /// Stage A workers (parse, normalise, template mining), each on its own SPSC rings.
    pub parse_workers: u32,
    /// Stage B workers (content ensemble sharded by source, UEBA sharded by entity, alert
    /// dedup), each fed by one SPSC ring from every stage A worker.
    pub detect_workers: u32,
    /// Pin worker threads to cores with `core_affinity`.
    pub pin_workers: bool,
    /// Core ids to pin workers to, in order: parse workers, the writer, detect workers; empty = round-robin
    /// over every core the process may use.
    pub cores: Vec<u32>,
    /// Batches each ring holds before its producer waits.
    pub ring_capacity: u32,
    /// Most events in one batch.
    pub batch_size: u32,
    /// Most bytes of raw lines in one batch.
    pub batch_bytes: u32,
    /// Milliseconds a partly filled batch waits for more lines before it is sent on.
    pub batch_linger_ms: u64,
    /// Longest line kept whole; longer lines are truncated to this and flagged (and counted).
    pub max_line_bytes: u32,
}

impl Default for DataplaneConfig {
    fn default() -> DataplaneConfig {
        DataplaneConfig {
            parse_workers: 1,
            detect_workers: 1,
            pin_workers: true,
            cores: Vec::new(),
            ring_capacity: 64,
            batch_size: 1024,
            batch_bytes: 1 << 20,
            batch_linger_ms: 20,
            max_line_bytes: 64 << 10,
        }
    }
}

/// `[storage]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// Folder of the RocksDB store and the miner state; relative paths are from the working dir.
    pub data_dir: String,
    /// Days events are kept.
    pub retention_days: u32,
    /// RocksDB memtable size in MiB (per column family).
    pub write_buffer_mb: u32,
    /// RocksDB block cache in MiB (shared).
    pub block_cache_mb: u32,
    /// fsync the WAL on every write batch (slower; survives power loss, not just crashes).
    pub sync_writes: bool,
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        StorageConfig {
            data_dir: "data".into(),
            retention_days: 30,
            write_buffer_mb: 64,
            block_cache_mb: 256,
            sync_writes: false,
        }
    }
}

/// `[inputs]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InputsConfig {
    /// Syslog over UDP (RFC 5424 and RFC 3164).
    pub syslog_udp: UdpInputConfig,
    /// Syslog over TCP (newline or octet-counting framing).
    pub syslog_tcp: TcpInputConfig,
    /// JSON lines over TCP.
    pub json_tcp: TcpInputConfig,
    /// Tailed files.
    pub file: FileInputConfig,
    /// `POST /api/v1/ingest` on the API port.
    pub http: HttpInputConfig,
}

impl Default for InputsConfig {
    fn default() -> InputsConfig {
        InputsConfig {
            syslog_udp: UdpInputConfig::default(),
            syslog_tcp: TcpInputConfig {
                address: "127.0.0.1:5514".into(),
                ..TcpInputConfig::default()
            },
            json_tcp: TcpInputConfig {
                address: "127.0.0.1:5515".into(),
                ..TcpInputConfig::default()
            },
            file: FileInputConfig::default(),
            http: HttpInputConfig::default(),
        }
    }
}

/// A UDP input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UdpInputConfig {
    /// Listen at all.
    pub enabled: bool,
    /// `ip:port` to bind.
    pub address: String,
    /// Kernel receive buffer asked for (SO_RCVBUF); bursts beyond it are dropped by the kernel.
    pub recv_buffer_bytes: u32,
}

impl Default for UdpInputConfig {
    fn default() -> UdpInputConfig {
        UdpInputConfig {
            enabled: true,
            address: "127.0.0.1:5514".into(),
            recv_buffer_bytes: 8 << 20,
        }
    }
}

/// A TCP input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TcpInputConfig {
    /// Listen at all.
    pub enabled: bool,
    /// `ip:port` to bind.
    pub address: String,
    /// Connections served at once; more are refused (and counted).
    pub max_connections: u32,
    /// Seconds a connection may send nothing before it is closed.
    pub idle_timeout_s: u64,
}

impl Default for TcpInputConfig {
    fn default() -> TcpInputConfig {
        TcpInputConfig {
            enabled: true,
            address: String::new(),
            max_connections: 512,
            idle_timeout_s: 600,
        }
    }
}

/// The file tail input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileInputConfig {
    /// Tail at all.
    pub enabled: bool,
    /// Glob patterns of files to tail (`/var/log/auth.log`, `/var/log/nginx/*.log`).
    pub paths: Vec<String>,
    /// `syslog`, `json` or `auto` (a line starting with `{` is JSON).
    pub format: String,
    /// Where a file never seen before is read from: `beginning` or `end`.
    pub start_at: String,
    /// Milliseconds between looks for new data, new files, rotation and truncation.
    pub poll_interval_ms: u64,
}

impl Default for FileInputConfig {
    fn default() -> FileInputConfig {
        FileInputConfig {
            enabled: false,
            paths: Vec::new(),
            format: "auto".into(),
            start_at: "beginning".into(),
            poll_interval_ms: 250,
        }
    }
}

/// The HTTP ingest input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpInputConfig {
    /// Serve `POST /api/v1/ingest`.
    pub enabled: bool,
}

impl Default for HttpInputConfig {
    fn default() -> HttpInputConfig {
        HttpInputConfig { enabled: true }
    }
}

/// `[templates]`: the miner has one default configuration for every log; operators may only add
/// masks for variables specific to their logs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TemplatesConfig {
    /// Extra masks: tokens matching `pattern` (a regex) are replaced by `<NAME>`.
    pub extra_masks: Vec<MaskConfig>,
}

/// One user-added template mask.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaskConfig {
    /// Upper-case name shown in templates as `<NAME>`.
    pub name: String,
    /// Regular expression a whole token must match.
    pub pattern: String,
}

/// One problem with the configuration, naming the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Dotted key, e.g. `ueba.sub_score_weights`; `(file)` for problems of the file as a whole.
    pub key: String,
    /// What is wrong and what is allowed.
    pub problem: String,
}

/// Every problem found in a configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in key order of the file.
    pub problems: Vec<ConfigProblem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: {}", p.key, p.problem)?;
        }
        Ok(())
    }
}

impl ConfigError {
    fn one(key: &str, problem: impl Into<String>) -> ConfigError {
        ConfigError {
            problems: vec![ConfigProblem {
                key: key.into(),
                problem: problem.into(),
            }],
        }
    }
}

/// A parsed `N/unit` rate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed per period.
    pub count: u32,
    /// The period in seconds.
    pub per_seconds: u32,
}

impl RateLimit {
    /// Parses `60/minute`, `5/second`, `1000/hour` (also `s`, `m`, `h`, `min`, `sec`).
    pub fn parse(s: &str) -> Result<RateLimit, String> {
        let (n, unit) = s
            .split_once('/')
            .ok_or_else(|| format!("`{s}` is not of the form N/second, N/minute or N/hour"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}` in `{s}` is not a whole number"))?;
        if count == 0 {
            return Err(format!("`{s}`: the count must be at least 1"));
        }
        let per_seconds = match unit.trim() {
            "second" | "sec" | "s" => 1,
            "minute" | "min" | "m" => 60,
            "hour" | "h" => 3600,
            other => {
                return Err(format!(
                    "unknown unit `{other}` in `{s}` (second, minute, hour)"
                ));
            }
        };
        Ok(RateLimit { count, per_seconds })
    }
}

/// Longest line of a parse error shown: the TOML library quotes the offending line, which in a
/// broken or hostile file can be megabytes long.
const MAX_ERROR_LINE: usize = 200;

/// `text` with each line cut to [`MAX_ERROR_LINE`] characters.
fn clipped_lines(text: &str) -> String {
    text.lines()
        .map(|l| match l.char_indices().nth(MAX_ERROR_LINE) {
            Some((at, _)) => format!("{}…", &l[..at]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Config {
    /// Parses a TOML text and validates it. Nesting is bounded by the TOML library (80 levels of
    /// arrays and tables); deeper is a parse error with its line and column, not a crash.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text)
            .map_err(|e| ConfigError::one("(file)", clipped_lines(e.to_string().trim_end())))?;
        config.validate()?;
        Ok(config)
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

    /// Replaces `env:VAR` values of credential keys with the variable's value.
    pub fn resolve_secrets(&mut self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        for (key, value) in [
            (
                "api_rate_limit_store_url",
                &mut self.api_rate_limit_store_url,
            ),
            ("llm.cloud_api_key", &mut self.llm.cloud_api_key),
        ] {
            if let Some(var) = value.strip_prefix("env:") {
                match std::env::var(var) {
                    Ok(v) => *value = v,
                    Err(_) => problems.push(ConfigProblem {
                        key: key.into(),
                        problem: format!("environment variable `{var}` is not set"),
                    }),
                }
            }
        }
        if problems.is_empty() {
            Ok(())
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
        v
    }

    /// The configuration as TOML with every credential masked; what `config show` prints.
    pub fn masked_toml(&self) -> String {
        toml::to_string(&self.masked_json()).unwrap_or_default()
    }

    /// Checks every value; returns all problems at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut p = Problems::default();
        p.port("dashboard_port", self.dashboard_port);
        p.ip("dashboard_bind_address", &self.dashboard_bind_address);
        p.ip("health_bind_address", &self.health_bind_address);
        if self.health_port != 0 {
            p.port("health_port", self.health_port);
            if self.health_port == self.dashboard_port {
                p.add(
                    "health_port",
                    format!(
                        "{} is dashboard_port too: the probe listener needs its own port (0 = no probe listener)",
                        self.health_port
                    ),
                );
            }
        }
        for (i, o) in self.api_allowed_origins.iter().enumerate() {
            p.origin(&format!("api_allowed_origins[{i}]"), o);
        }
        for (i, o) in self.ws_allowed_origins.iter().enumerate() {
            p.origin(&format!("ws_allowed_origins[{i}]"), o);
        }
        for (i, h) in self.api_allowed_hosts.iter().enumerate() {
            if let Err(e) = crate::Authority::parse(h) {
                p.add(&format!("api_allowed_hosts[{i}]"), e);
            }
        }
        let url = &self.api_rate_limit_store_url;
        if !url.is_empty()
            && !url.starts_with("env:")
            && let Err(e) = crate::store_url::StoreUrl::parse(url)
        {
            p.add("api_rate_limit_store_url", e);
        }
        for (key, v) in [
            ("api_list_rate_limit", &self.api_list_rate_limit),
            ("api_detail_rate_limit", &self.api_detail_rate_limit),
            ("api_coverage_rate_limit", &self.api_coverage_rate_limit),
        ] {
            if let Err(e) = RateLimit::parse(v) {
                p.add(key, e);
            }
        }
        p.range_u64("api_max_body_bytes", self.api_max_body_bytes, 1024, 1 << 30);
        p.range_u64(
            "api_search_timeout_ms",
            self.api_search_timeout_ms,
            0,
            600_000,
        );
        p.range_u64(
            "ws_max_connections",
            self.ws_max_connections.into(),
            1,
            10_000,
        );
        p.range_u64(
            "ws_batch_max_events",
            self.ws_batch_max_events.into(),
            1,
            10_000,
        );
        p.range_f64("ws_tick_interval_s", self.ws_tick_interval_s, 0.01, 60.0);
        p.range_f64(
            "ws_status_interval_s",
            self.ws_status_interval_s,
            0.1,
            3600.0,
        );
        p.range_u64(
            "ws_filter_min_interval_ms",
            self.ws_filter_min_interval_ms,
            0,
            60_000,
        );
        p.range_u64("ws_queue_maxlen", self.ws_queue_maxlen.into(), 1, 1_000_000);
        p.one_of(
            "log_level",
            &self.log_level,
            &["error", "warn", "info", "debug", "trace"],
        );

        let u = &self.ueba;
        p.range_f64("ueba.warmup_days", u.warmup_days, 0.0, 365.0);
        p.range_u64("ueba.warmup_min_events", u.warmup_min_events, 0, 1 << 40);
        p.range_u64("ueba.source_ip_cap", u.source_ip_cap.into(), 1, 4096);
        p.range_u64("ueba.template_top_k", u.template_top_k.into(), 1, 4096);
        p.open_unit("ueba.ema_alpha", u.ema_alpha);
        p.range_u64(
            "ueba.alert_cooldown_seconds",
            u.alert_cooldown_seconds,
            0,
            30 * 86_400,
        );
        p.range_u64("ueba.max_entities", u.max_entities, 1, 100_000_000);
        p.risk("ueba.dspot_risk", u.dspot_risk);
        let w = &u.sub_score_weights;
        let parts = [
            ("time_of_day", w.time_of_day),
            ("source_novelty", w.source_novelty),
            ("volume", w.volume),
            ("pattern_novelty", w.pattern_novelty),
        ];
        for (name, v) in parts {
            p.range_f64(&format!("ueba.sub_score_weights.{name}"), v, 0.0, 1.0);
        }
        let sum: f64 = parts.iter().map(|(_, v)| v).sum();
        if (sum - 1.0).abs() > 1e-6 {
            p.add(
                "ueba.sub_score_weights",
                format!("the four weights must sum to 1.0, they sum to {sum}"),
            );
        }

        let l = &self.llm;
        p.one_of(
            "llm.backend",
            &l.backend,
            &["", "local_runner", "daemon", "cloud"],
        );
        match l.backend.as_str() {
            "local_runner" if l.model_path.is_empty() => p.add(
                "llm.model_path",
                "required when llm.backend is local_runner",
            ),
            "daemon" => {
                if !(l.daemon_url.starts_with("http://") || l.daemon_url.starts_with("https://")) {
                    p.add("llm.daemon_url", "must be an http:// or https:// URL");
                }
                if l.daemon_model.is_empty() {
                    p.add("llm.daemon_model", "required when llm.backend is daemon");
                }
            }
            "cloud" => {
                p.one_of(
                    "llm.cloud_provider",
                    &l.cloud_provider,
                    &["anthropic", "openai"],
                );
                if l.cloud_model.is_empty() {
                    p.add("llm.cloud_model", "required when llm.backend is cloud");
                }
                if l.cloud_api_key.is_empty() {
                    p.add(
                        "llm.cloud_api_key",
                        "required when llm.backend is cloud (a key or env:VAR)",
                    );
                }
            }
            _ => {}
        }
        p.range_u64("llm.n_ctx", l.n_ctx.into(), 256, 1 << 20);
        for (key, v) in [
            ("llm.daemon_timeout_s", l.daemon_timeout_s),
            ("llm.cloud_timeout_s", l.cloud_timeout_s),
            ("llm.explanation_timeout_s", l.explanation_timeout_s),
            ("llm.hunt_timeout_s", l.hunt_timeout_s),
            ("llm.rule_suggestion_timeout_s", l.rule_suggestion_timeout_s),
        ] {
            p.range_f64(key, v, 0.1, 600.0);
        }
        p.range_u64(
            "llm.explanation_max_contributing_events",
            l.explanation_max_contributing_events.into(),
            1,
            1000,
        );
        p.range_u64(
            "llm.explanation_max_prompt_chars",
            l.explanation_max_prompt_chars.into(),
            256,
            1 << 22,
        );
        p.range_u64(
            "llm.hunt_max_query_chars",
            l.hunt_max_query_chars.into(),
            1,
            1 << 16,
        );
        p.range_u64("llm.hunt_max_results", l.hunt_max_results.into(), 1, 10_000);
        p.range_u64(
            "llm.rule_suggestion_min_tp",
            l.rule_suggestion_min_tp.into(),
            1,
            1_000_000,
        );
        for (key, v) in [
            ("llm.explanation_cache_size", l.explanation_cache_size),
            ("llm.hunt_cache_size", l.hunt_cache_size),
            (
                "llm.rule_suggestion_cache_size",
                l.rule_suggestion_cache_size,
            ),
        ] {
            p.range_u64(key, v.into(), 0, 1_000_000);
        }

        let d = &self.detection;
        p.range_u64(
            "detection.model_save_interval_seconds",
            d.model_save_interval_seconds,
            1,
            86_400,
        );
        p.range_u64(
            "detection.sigma_custom_max_rules",
            d.sigma_custom_max_rules.into(),
            1,
            1_000_000,
        );
        p.range_f64("detection.ml_risk", d.ml_risk, 1e-7, 0.1);
        p.range_u64(
            "detection.ml_alert_cooldown_seconds",
            d.ml_alert_cooldown_seconds,
            0,
            86_400 * 7,
        );
        p.range_u64(
            "detection.sigma_alert_cooldown_seconds",
            d.sigma_alert_cooldown_seconds,
            0,
            86_400 * 7,
        );
        p.range_u64(
            "detection.correlation_max_groups",
            d.correlation_max_groups.into(),
            100,
            10_000_000,
        );
        p.range_u64(
            "detection.killchain_min_tactics",
            d.killchain_min_tactics.into(),
            2,
            14,
        );
        p.range_u64(
            "detection.killchain_window_seconds",
            d.killchain_window_seconds,
            60,
            86_400 * 30,
        );
        p.range_u64(
            "detection.ioc_reload_interval_seconds",
            d.ioc_reload_interval_seconds,
            1,
            86_400,
        );
        p.range_u64(
            "detection.ioc_alert_cooldown_seconds",
            d.ioc_alert_cooldown_seconds,
            0,
            86_400 * 7,
        );

        let dp = &self.dataplane;
        p.range_u64("dataplane.parse_workers", dp.parse_workers.into(), 1, 64);
        p.range_u64("dataplane.detect_workers", dp.detect_workers.into(), 1, 64);
        p.range_u64(
            "dataplane.ring_capacity",
            dp.ring_capacity.into(),
            2,
            1 << 16,
        );
        p.range_u64("dataplane.batch_size", dp.batch_size.into(), 1, 65_535);
        p.range_u64("dataplane.batch_linger_ms", dp.batch_linger_ms, 1, 10_000);
        p.range_u64(
            "dataplane.max_line_bytes",
            dp.max_line_bytes.into(),
            256,
            16 << 20,
        );
        p.range_u64(
            "dataplane.batch_bytes",
            dp.batch_bytes.into(),
            4096,
            256 << 20,
        );
        if dp.batch_bytes < dp.max_line_bytes {
            p.add(
                "dataplane.batch_bytes",
                "must be at least dataplane.max_line_bytes",
            );
        }

        let s = &self.storage;
        if s.data_dir.trim().is_empty() {
            p.add("storage.data_dir", "must not be empty");
        }
        p.range_u64("storage.retention_days", s.retention_days.into(), 1, 36_500);
        p.range_u64("storage.write_buffer_mb", s.write_buffer_mb.into(), 1, 4096);
        p.range_u64("storage.block_cache_mb", s.block_cache_mb.into(), 1, 65_536);

        let i = &self.inputs;
        if i.syslog_udp.enabled {
            p.socket("inputs.syslog_udp.address", &i.syslog_udp.address);
        }
        p.range_u64(
            "inputs.syslog_udp.recv_buffer_bytes",
            i.syslog_udp.recv_buffer_bytes.into(),
            4096,
            1 << 30,
        );
        for (name, t) in [("syslog_tcp", &i.syslog_tcp), ("json_tcp", &i.json_tcp)] {
            if t.enabled {
                p.socket(&format!("inputs.{name}.address"), &t.address);
            }
            p.range_u64(
                &format!("inputs.{name}.max_connections"),
                t.max_connections.into(),
                1,
                100_000,
            );
            p.range_u64(
                &format!("inputs.{name}.idle_timeout_s"),
                t.idle_timeout_s,
                1,
                86_400 * 7,
            );
        }
        let f = &i.file;
        if f.enabled && f.paths.is_empty() {
            p.add(
                "inputs.file.paths",
                "at least one glob is required when inputs.file.enabled is true",
            );
        }
        for (n, g) in f.paths.iter().enumerate() {
            if g.trim().is_empty() {
                p.add(&format!("inputs.file.paths[{n}]"), "must not be empty");
            }
        }
        p.one_of("inputs.file.format", &f.format, &["auto", "syslog", "json"]);
        p.one_of("inputs.file.start_at", &f.start_at, &["beginning", "end"]);
        p.range_u64(
            "inputs.file.poll_interval_ms",
            f.poll_interval_ms,
            10,
            60_000,
        );

        for (n, m) in self.templates.extra_masks.iter().enumerate() {
            let ok = !m.name.is_empty()
                && m.name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !ok {
                p.add(
                    &format!("templates.extra_masks[{n}].name"),
                    "must be non-empty upper-case letters, digits or _",
                );
            }
            if m.pattern.is_empty() {
                p.add(
                    &format!("templates.extra_masks[{n}].pattern"),
                    "must not be empty",
                );
            }
        }
        p.finish()
    }
}

#[derive(Default)]
struct Problems(Vec<ConfigProblem>);

impl Problems {
    fn add(&mut self, key: &str, problem: impl Into<String>) {
        self.0.push(ConfigProblem {
            key: key.into(),
            problem: problem.into(),
        });
    }
    fn port(&mut self, key: &str, v: u32) {
        if !(1..=65_535).contains(&v) {
            self.add(key, format!("port {v} is out of range (1 to 65535)"));
        }
    }
    fn ip(&mut self, key: &str, v: &str) {
        if v.parse::<IpAddr>().is_err() {
            self.add(key, format!("`{v}` is not an IP address"));
        }
    }
    fn socket(&mut self, key: &str, v: &str) {
        match v.parse::<SocketAddr>() {
            Ok(a) if a.port() == 0 => self.add(key, format!("`{v}`: port 0 is not allowed")),
            Ok(_) => {}
            Err(_) => self.add(key, format!("`{v}` is not an ip:port address")),
        }
    }
    fn origin(&mut self, key: &str, v: &str) {
        let rest = v
            .strip_prefix("http://")
            .or_else(|| v.strip_prefix("https://"));
        match rest {
            Some(host) if !host.is_empty() && !host.contains('/') => {}
            _ => self.add(
                key,
                format!("`{v}` is not an origin like https://host[:port]"),
            ),
        }
    }
    fn one_of(&mut self, key: &str, v: &str, allowed: &[&str]) {
        if !allowed.contains(&v) {
            let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
            self.add(key, format!("`{v}` is not one of {}", list.join(", ")));
        }
    }
    fn range_u64(&mut self, key: &str, v: u64, lo: u64, hi: u64) {
        if v < lo || v > hi {
            self.add(key, format!("{v} is out of range ({lo} to {hi})"));
        }
    }
    fn range_f64(&mut self, key: &str, v: f64, lo: f64, hi: f64) {
        if !(v.is_finite() && v >= lo && v <= hi) {
            self.add(key, format!("{v} is out of range ({lo} to {hi})"));
        }
    }
    fn open_unit(&mut self, key: &str, v: f64) {
        if !(v.is_finite() && v > 0.0 && v <= 1.0) {
            self.add(key, format!("{v} must be greater than 0 and at most 1"));
        }
    }
    fn risk(&mut self, key: &str, v: f64) {
        if !(v.is_finite() && v > 0.0 && v < 0.5) {
            self.add(key, format!("{v} must be greater than 0 and below 0.5"));
        }
    }
    fn finish(self) -> Result<(), ConfigError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { problems: self.0 })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        match Config::from_toml(text) {
            Ok(_) => Vec::new(),
            Err(e) => e
                .problems
                .iter()
                .map(|p| format!("{}: {}", p.key, p.problem))
                .collect(),
        }
    }

    #[test]
    fn defaults_are_valid_and_match_the_spec() {
        let c = Config::default();
        c.validate().unwrap();
        assert_eq!(c.dashboard_port, 8080);
        assert_eq!(c.ws_max_connections, 20);
        assert_eq!(c.ws_filter_min_interval_ms, 100);
        assert_eq!(c.api_coverage_rate_limit, "10/minute");
        assert_eq!(c.ueba.source_ip_cap, 64);
        assert_eq!(c.ueba.template_top_k, 32);
        assert_eq!(c.ueba.ema_alpha, 0.05);
        assert_eq!(c.ueba.alert_cooldown_seconds, 900);
        assert_eq!(c.ueba.max_entities, 100_000);
        assert_eq!(c.ueba.dspot_risk, 0.0001);
        assert_eq!(c.llm.backend, "");
        assert_eq!(c.llm.explanation_max_contributing_events, 8);
        assert_eq!(c.llm.explanation_timeout_s, 12.0);
        assert_eq!(c.llm.hunt_timeout_s, 12.0);
        assert_eq!(c.llm.rule_suggestion_timeout_s, 30.0);
        assert_eq!(c.llm.hunt_max_query_chars, 512);
        assert_eq!(c.llm.rule_suggestion_min_tp, 3);
        assert_eq!(c.llm.rule_suggestion_window_days, 0);
        assert_eq!(c.llm.rule_suggestion_cache_ttl_s, 21_600);
        assert_eq!(Config::from_toml("").unwrap(), c);
    }

    #[test]
    fn the_example_file_documents_exactly_the_defaults() {
        let example = Config::from_toml(include_str!("../../deploy/watchpost.toml")).unwrap();
        assert_eq!(example, Config::default());
    }

    #[test]
    fn weights_must_sum_to_one() {
        let got = problems("[ueba.sub_score_weights]\ntime_of_day = 0.5\n");
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("ueba.sub_score_weights: the four weights must sum to 1.0"),
            "{got:?}"
        );
    }

    #[test]
    fn the_probe_listener_needs_its_own_port() {
        let got = problems("dashboard_port = 9000\nhealth_port = 9000\n");
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("health_port: 9000 is dashboard_port too"),
            "{got:?}"
        );
        assert!(problems("health_port = 70000\n")[0].starts_with("health_port: port 70000"));
        assert!(problems("health_port = 0\n").is_empty());
        assert_eq!(Config::default().health_port, 8081);
    }

    #[test]
    fn allowed_hosts_must_be_host_and_port() {
        assert!(
            problems("api_allowed_hosts = [\"soc.corp.example\", \"[::1]:9000\"]\n").is_empty()
        );
        let got = problems("api_allowed_hosts = [\"ok.example\", \"https://soc.corp.example\"]\n");
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with(
                "api_allowed_hosts[1]: `https://soc.corp.example` is not a host[:port]"
            ),
            "{got:?}"
        );
    }

    #[test]
    fn nested_values_are_parse_errors_with_their_place_and_short_lines() {
        let nested = |depth: usize| {
            format!(
                "log_level = \"info\"\ndashboard_port = {}1{}\n",
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        let got = problems(&nested(70));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("(file): TOML parse error at line 2"),
            "{got:?}"
        );
        assert!(
            got[0].contains("expected u32"),
            "within the bound it parses: {got:?}"
        );
        let got = problems(&nested(100_000));
        assert_eq!(got.len(), 1);
        assert!(got[0].contains("max recursion depth"), "{}", &got[0][..300]);
        assert!(
            got[0].lines().all(|l| l.chars().count() <= 201),
            "lines are clipped"
        );
    }

    #[test]
    fn unknown_keys_are_errors_that_name_the_key() {
        let got = problems("dashbord_port = 80\n");
        assert_eq!(got.len(), 1);
        assert!(got[0].contains("dashbord_port"), "{got:?}");
        let got = problems("[ueba]\nwarmup = 3\n");
        assert!(got[0].contains("warmup"), "{got:?}");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let got = problems(
            "dashboard_port = 70000\napi_list_rate_limit = \"ten/minute\"\n[llm]\nbackend = \"cloud\"\n[inputs.syslog_tcp]\naddress = \"nowhere\"\n",
        );
        let keys: Vec<&str> = got.iter().map(|g| g.split(':').next().unwrap()).collect();
        assert_eq!(
            keys,
            vec![
                "dashboard_port",
                "api_list_rate_limit",
                "llm.cloud_provider",
                "llm.cloud_model",
                "llm.cloud_api_key",
                "inputs.syslog_tcp.address"
            ],
            "{got:?}"
        );
    }

    #[test]
    fn wrong_types_are_reported_with_their_line() {
        let got = problems("[storage]\nretention_days = \"forever\"\n");
        assert!(got[0].contains("line 2"), "{got:?}");
    }

    #[test]
    fn credentials_are_masked_and_env_references_resolved() {
        let mut c = Config::from_toml(
            "api_rate_limit_store_url = \"redis://:hunter2@10.0.0.1:6379/0\"\n[llm]\nbackend = \"cloud\"\ncloud_provider = \"openai\"\ncloud_model = \"m\"\ncloud_api_key = \"env:WATCHPOST_TEST_KEY_UNSET\"\n",
        )
        .unwrap();
        let err = c.resolve_secrets().unwrap_err();
        assert_eq!(err.problems[0].key, "llm.cloud_api_key");
        c.llm.cloud_api_key = "sk-secret".into();
        let shown = c.masked_toml();
        assert!(
            !shown.contains("hunter2") && !shown.contains("sk-secret"),
            "{shown}"
        );
        assert_eq!(c.masked_json()["llm"]["cloud_api_key"], MASK);
        // Masking must not touch the running value.
        assert_eq!(c.llm.cloud_api_key, "sk-secret");
    }

    #[test]
    fn rate_limits_parse() {
        assert_eq!(
            RateLimit::parse("60/minute").unwrap(),
            RateLimit {
                count: 60,
                per_seconds: 60
            }
        );
        assert!(RateLimit::parse("0/minute").is_err());
        assert!(RateLimit::parse("5/fortnight").is_err());
    }
}
