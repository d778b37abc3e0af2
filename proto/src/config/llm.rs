//! The `[llm]` table.

use super::problems::Problems;
use super::{Config, Secret};
use serde::{Deserialize, Serialize};

/// `[llm]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// local_runner: requests waiting for the model at most; more are refused (503).
    pub local_queue_max: u32,
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
    pub cloud_api_key: Secret,
    /// cloud: timeout in seconds.
    pub cloud_timeout_s: f64,
    /// cloud: the provider's API base URL (`https://`); empty = the provider's public one.
    pub cloud_url: String,
    /// Hash user names and the other `cloud_sensitive_fields` before a prompt leaves the host
    /// (cloud backend); the answer shown maps them back.
    pub cloud_hash_usernames: bool,
    /// Fields whose values are sensitive: attribute names, `@entity.<kind>` for entities.
    pub cloud_sensitive_fields: Vec<String>,
    /// daemon and cloud: extra CA certificates (PEM) trusted besides the system's.
    pub tls_ca_file: String,
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

/// What `llm.cloud_sensitive_fields` holds by default: user and account names as entities and
/// under the attribute names of the logs Watchpost reads (Windows, Sysmon, ECS, syslog, cloud
/// audit logs), and e-mail addresses.
pub const DEFAULT_SENSITIVE_FIELDS: &[&str] = &[
    "@entity.user",
    "User",
    "user",
    "user.name",
    "username",
    "UserName",
    "SubjectUserName",
    "TargetUserName",
    "AccountName",
    "SamAccountName",
    "ParentUser",
    "SourceUser",
    "TargetUser",
    "userIdentity.userName",
    "userPrincipalName",
    "UserPrincipalName",
    "email",
    "Email",
];

impl Default for LlmConfig {
    fn default() -> LlmConfig {
        LlmConfig {
            backend: String::new(),
            model_path: String::new(),
            n_ctx: 4096,
            n_gpu_layers: 0,
            local_queue_max: 4,
            daemon_url: "http://127.0.0.1:11434".into(),
            daemon_model: String::new(),
            daemon_timeout_s: 30.0,
            cloud_provider: String::new(),
            cloud_model: String::new(),
            cloud_api_key: Secret::default(),
            cloud_timeout_s: 30.0,
            cloud_url: String::new(),
            cloud_hash_usernames: true,
            cloud_sensitive_fields: DEFAULT_SENSITIVE_FIELDS
                .iter()
                .map(|f| f.to_string())
                .collect(),
            tls_ca_file: String::new(),
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

/// Checks the table's keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    let l = &config.llm;
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
            if !(l.cloud_url.is_empty() || l.cloud_url.starts_with("https://")) {
                p.add(
                    "llm.cloud_url",
                    "must be an https:// URL (the key travels with every request), or empty for the provider's own",
                );
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
    if l.cloud_sensitive_fields.iter().any(|f| f.trim().is_empty()) {
        p.add("llm.cloud_sensitive_fields", "holds an empty field name");
    }
    for field in &l.cloud_sensitive_fields {
        if let Some(kind) = field.strip_prefix("@entity.")
            && !crate::EntityKind::ALL.iter().any(|k| k.name() == kind)
        {
            let kinds: Vec<String> = crate::EntityKind::ALL
                .iter()
                .map(|k| format!("@entity.{}", k.name()))
                .collect();
            p.add(
                "llm.cloud_sensitive_fields",
                format!("`{field}` names no entity kind ({})", kinds.join(", ")),
            );
        }
    }
    if !l.tls_ca_file.is_empty() && !std::path::Path::new(&l.tls_ca_file).is_file() {
        p.add(
            "llm.tls_ca_file",
            format!("{:?} is not a readable file", l.tls_ca_file),
        );
    }
    p.range_u64("llm.n_ctx", l.n_ctx.into(), 256, 1 << 20);
    p.range_u64("llm.n_gpu_layers", l.n_gpu_layers.into(), 0, 10_000);
    p.range_u64("llm.local_queue_max", l.local_queue_max.into(), 1, 1024);
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
}
