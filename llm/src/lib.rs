//! LLM assistance: alert explanations, natural-language hunts ([`hunt`]) and Sigma rule drafts
//! ([`suggest`]) from the backend chosen by `llm.backend`, behind per-process caches.
//!
//! The LLM is an auxiliary signal: it is off by default, nothing calls it but an operator's
//! request, and the data plane never reaches it. Backends: `daemon` (a model server on loopback
//! or the local network, see [`daemon`]) and `cloud` (a hosted provider over HTTPS, see
//! [`cloud`], with sensitive values pseudonymised, see [`privacy`]) and, in a build with the
//! `local-runner` feature, `local_runner` (a GGUF model run in-process by llama.cpp, its answers
//! held to each feature's shape by a [`grammar`]). A backend that cannot be used starts the
//! service with the LLM "not ready" (503 on its routes, `/health` degraded) and says why,
//! rather than refusing to start over an optional feature.

pub mod cache;
pub mod cloud;
pub mod daemon;
pub mod grammar;
pub mod hunt;
#[cfg(feature = "local-runner")]
pub mod local;
pub mod privacy;
pub mod prompt;
pub mod suggest;
pub mod usage;

pub use daemon::DaemonUrlError;
pub use privacy::KeyError;
pub use prompt::rfc3339;

use cache::{Cached, TtlCache};
use cloud::Cloud;
use daemon::Daemon;
use grammar::Grammar;
use hunt::HuntAnswer;
use privacy::{Masking, PseudonymKey, Sensitive};
use serde::Serialize;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use suggest::Suggestion;
use usage::{Feature, Usage};
use watchpost_outbound::{HttpClient, Trust, TrustError};
use watchpost_proto::config::LlmConfig;

/// Why an LLM call gave no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// `llm.backend` is empty.
    #[error("the LLM is disabled (llm.backend is empty)")]
    Disabled,
    /// The backend cannot be used now: unreachable, model missing, not in this build.
    #[error("the LLM backend is not ready: {0}")]
    NotReady(String),
    /// The backend was reached and failed: timeout, error status, unreadable answer.
    #[error("the LLM backend failed: {0}")]
    Upstream(String),
    /// The backend is working on other requests and cannot queue this one.
    #[error("the LLM backend is busy: {0}")]
    Busy(String),
}

/// Why the configured backend cannot be used. The service still starts, with the LLM "not
/// ready": `/health` and every LLM route say this, naming the key to fix.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// `llm.tls_ca_file` does not load.
    #[error("llm.tls_ca_file: {0}")]
    Trust(#[from] TrustError),
    /// `llm.daemon_url` cannot be used.
    #[error("llm.daemon_url: {0}")]
    DaemonUrl(#[from] DaemonUrlError),
    /// `llm.cloud_provider` names no provider this build knows.
    #[error("llm.cloud_provider: unknown provider {0:?}")]
    CloudProvider(String),
    /// `llm.cloud_api_key` is empty.
    #[error("llm.cloud_api_key is empty")]
    CloudKey,
    /// The cloud prompts' pseudonym key cannot be read or made.
    #[error("llm.cloud_hash_usernames is on but the pseudonym key cannot be kept: {0}")]
    Pseudonyms(#[from] KeyError),
    /// `llm.model_path` is not a readable GGUF model.
    #[error("llm.model_path: {}: {why}", path.display())]
    Model {
        /// The path.
        path: std::path::PathBuf,
        /// What is wrong with it.
        why: ModelFileError,
    },
    /// The local runner's thread could not start.
    #[error("the model runner's thread: {0}")]
    Thread(std::io::Error),
    /// `llm.backend = local_runner` in a build without the runner.
    #[error(
        "llm.backend = local_runner needs the embedded model runner: build with \
         `cargo build --release --features local-runner` (it compiles llama.cpp, which needs \
         CMake), or use the daemon or cloud backend"
    )]
    NotBuilt,
    /// `llm.backend` names no backend.
    #[error("unknown llm.backend {0:?}")]
    Unknown(String),
}

/// Why `llm.model_path` is not a model the runner can load.
#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    /// It cannot be opened.
    #[error("{0}")]
    Open(std::io::Error),
    /// Shorter than a GGUF header.
    #[error("shorter than a GGUF header")]
    Short,
    /// Its first bytes are not `GGUF`.
    #[error("not a GGUF model file (its first bytes are not `GGUF`)")]
    NotGguf,
}

/// The backend in use.
#[derive(Debug)]
enum Backend {
    Daemon(Daemon),
    Cloud {
        cloud: Cloud,
        /// Pseudonyms for sensitive values; `None` when `llm.cloud_hash_usernames` is off.
        pseudonyms: Option<PseudonymKey>,
    },
    #[cfg(feature = "local-runner")]
    Local(local::LocalRunner),
    /// Configured but unusable in this build (or misconfigured); the reason.
    Unavailable(BackendError),
}

/// An explanation of an alert.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Explanation {
    /// The alert explained.
    pub alert_id: String,
    /// The model's Markdown.
    pub markdown: String,
    /// `llm.backend`.
    pub backend: String,
    /// Model name.
    pub model: String,
    /// When it was generated, ns since the epoch.
    pub generated_ns: i64,
    /// Contributing events included in the prompt.
    pub events_in_prompt: usize,
    /// Characters of the prompt sent.
    pub prompt_chars: usize,
    /// Served from the cache.
    pub cached: bool,
    /// Seconds until the cached entry expires.
    pub expires_in_s: u64,
}

/// One model call.
pub struct Ask<'a> {
    /// The feature asking, for `/stats`.
    pub feature: Feature,
    /// The system message.
    pub system: &'a str,
    /// The user message.
    pub user: &'a str,
    /// The feature's timeout; the backend's own caps it.
    pub timeout_s: f64,
    /// Values a cloud provider gets as pseudonyms.
    pub sensitive: &'a Sensitive,
    /// The shape the answer must take, for backends that can hold sampling to it.
    pub grammar: Option<&'a Grammar>,
}

/// The `local_runner` backend of this build.
#[cfg(feature = "local-runner")]
fn local_backend(cfg: &LlmConfig, spare_cores: Vec<usize>) -> Backend {
    match local::LocalRunner::start(cfg, spare_cores) {
        Ok(runner) => Backend::Local(runner),
        Err(why) => Backend::Unavailable(why),
    }
}

/// The `local_runner` backend of this build: none.
#[cfg(not(feature = "local-runner"))]
fn local_backend(_: &LlmConfig, _: Vec<usize>) -> Backend {
    Backend::Unavailable(BackendError::NotBuilt)
}

/// How long a readiness answer is reused, so that `/health` polling does not hammer the daemon.
const READY_REUSE: Duration = Duration::from_secs(10);
/// The same for a cloud provider, which is further away and counts requests.
const CLOUD_READY_REUSE: Duration = Duration::from_secs(60);
/// Longest readiness probe.
const READY_DEADLINE: Duration = Duration::from_secs(2);

/// The LLM service of one process.
#[derive(Debug)]
pub struct Llm {
    cfg: LlmConfig,
    backend: Option<Backend>,
    explanations: TtlCache<Explanation>,
    hunts: TtlCache<HuntAnswer>,
    suggestions: TtlCache<Suggestion>,
    last_ready: Mutex<Option<(Instant, Result<(), LlmError>)>>,
    /// Calls, failures, cache hits and latency per feature.
    pub usage: Usage,
}

impl Llm {
    /// From the `[llm]` settings (already validated); `data_dir` keeps the cloud pseudonyms' key;
    /// `spare_cores` are those the data plane does not pin, for the local runner.
    pub fn new(cfg: &LlmConfig, data_dir: &Path, spare_cores: Vec<usize>) -> Llm {
        let trust = Trust::System {
            extra_ca_file: (!cfg.tls_ca_file.is_empty()).then(|| cfg.tls_ca_file.clone().into()),
        };
        let pseudonyms = || PseudonymKey::load_or_create(&data_dir.join("llm/pseudonym.key"));
        Llm::with_parts(cfg, HttpClient::new(trust), pseudonyms, spare_cores)
    }

    /// From the settings, the HTTP client (or why there is none), where the pseudonyms' key
    /// comes from (read only for the cloud backend with hashing on) and the local runner's cores.
    pub fn with_parts(
        cfg: &LlmConfig,
        client: Result<HttpClient, TrustError>,
        pseudonyms: impl FnOnce() -> Result<PseudonymKey, KeyError>,
        spare_cores: Vec<usize>,
    ) -> Llm {
        let client = client.map_err(BackendError::Trust);
        let backend = match cfg.backend.as_str() {
            "" => None,
            "daemon" => Some(
                match client.and_then(|c| {
                    Daemon::new(c, &cfg.daemon_url, &cfg.daemon_model).map_err(BackendError::from)
                }) {
                    Ok(d) => Backend::Daemon(d),
                    Err(why) => Backend::Unavailable(why),
                },
            ),
            "cloud" => Some(match client.and_then(|c| Cloud::new(c, cfg)) {
                Err(why) => Backend::Unavailable(why),
                Ok(cloud) if !cfg.cloud_hash_usernames => Backend::Cloud {
                    cloud,
                    pseudonyms: None,
                },
                Ok(cloud) => match pseudonyms() {
                    Ok(key) => Backend::Cloud {
                        cloud,
                        pseudonyms: Some(key),
                    },
                    // Nothing leaves the host unhashed because the key could not be kept.
                    Err(why) => Backend::Unavailable(BackendError::Pseudonyms(why)),
                },
            }),
            "local_runner" => Some(local_backend(cfg, spare_cores)),
            other => Some(Backend::Unavailable(BackendError::Unknown(
                other.to_string(),
            ))),
        };
        if let Some(Backend::Unavailable(why)) = &backend {
            tracing::warn!("LLM assistance unavailable: {why}");
        }
        Llm {
            explanations: TtlCache::new(
                cfg.explanation_cache_size as usize,
                Duration::from_secs(cfg.explanation_cache_ttl_s),
            ),
            hunts: TtlCache::new(
                cfg.hunt_cache_size as usize,
                Duration::from_secs(cfg.hunt_cache_ttl_s),
            ),
            suggestions: TtlCache::new(
                cfg.rule_suggestion_cache_size as usize,
                Duration::from_secs(cfg.rule_suggestion_cache_ttl_s),
            ),
            cfg: cfg.clone(),
            backend,
            last_ready: Mutex::new(None),
            usage: Usage::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &LlmConfig {
        &self.cfg
    }

    /// The values of `llm.cloud_sensitive_fields` among an alert's `entities` and in `events`.
    pub fn sensitive<'a>(
        &self,
        entities: impl IntoIterator<Item = &'a watchpost_proto::EntityRef>,
        events: &[watchpost_proto::Event],
    ) -> Sensitive {
        Sensitive::of(&self.cfg.cloud_sensitive_fields, entities, events)
    }

    /// A backend is configured (usable or not).
    pub fn enabled(&self) -> bool {
        self.backend.is_some()
    }

    /// The model name in use (`""` when none).
    pub fn model(&self) -> &str {
        match &self.backend {
            Some(Backend::Daemon(d)) => d.model(),
            Some(Backend::Cloud { cloud, .. }) => cloud.model(),
            #[cfg(feature = "local-runner")]
            Some(Backend::Local(runner)) => runner.model(),
            _ => match self.cfg.backend.as_str() {
                "cloud" => &self.cfg.cloud_model,
                "local_runner" => &self.cfg.model_path,
                _ => "",
            },
        }
    }

    /// The usable backend, or why there is none.
    fn backend(&self) -> Result<&Backend, LlmError> {
        match &self.backend {
            None => Err(LlmError::Disabled),
            Some(Backend::Unavailable(why)) => Err(LlmError::NotReady(why.to_string())),
            Some(b) => Ok(b),
        }
    }

    /// Whether the backend can take a request now; answers are reused for a few seconds.
    pub async fn ready(&self) -> Result<(), LlmError> {
        let backend = self.backend()?;
        // The runner's own state: nothing to probe, nothing to reuse.
        #[cfg(feature = "local-runner")]
        if let Backend::Local(runner) = backend {
            return runner.ready();
        }
        let reuse = match backend {
            Backend::Cloud { .. } => CLOUD_READY_REUSE,
            _ => READY_REUSE,
        };
        if let Ok(last) = self.last_ready.lock()
            && let Some((at, r)) = last.as_ref()
            && at.elapsed() < reuse
        {
            return r.clone();
        }
        let r = match backend {
            Backend::Daemon(daemon) => {
                daemon
                    .ready(READY_DEADLINE.min(secs(self.cfg.daemon_timeout_s)))
                    .await
            }
            Backend::Cloud { cloud, .. } => {
                cloud
                    .ready(READY_DEADLINE.min(secs(self.cfg.cloud_timeout_s)))
                    .await
            }
            #[cfg(feature = "local-runner")]
            Backend::Local(runner) => runner.ready(),
            Backend::Unavailable(why) => Err(LlmError::NotReady(why.to_string())),
        }
        .map_err(|e| match e {
            LlmError::Upstream(why) => LlmError::NotReady(why),
            other => other,
        });
        self.remember_ready(r.clone());
        r
    }

    fn remember_ready(&self, r: Result<(), LlmError>) {
        if let Ok(mut last) = self.last_ready.lock() {
            *last = Some((Instant::now(), r));
        }
    }

    /// One completion within `timeout_s` (and the backend's own timeout). To a cloud provider
    /// with hashing on, the `sensitive` values leave as pseudonyms, which the answer gets back
    /// as the values.
    pub async fn complete(&self, ask: Ask<'_>) -> Result<String, LlmError> {
        let Ask {
            feature,
            system,
            user,
            timeout_s,
            sensitive,
            grammar,
        } = ask;
        let started = Instant::now();
        let r = match self.backend() {
            Err(e) => Err(e),
            Ok(Backend::Daemon(daemon)) => {
                let deadline = secs(timeout_s).min(secs(self.cfg.daemon_timeout_s));
                daemon.complete(system, user, deadline).await
            }
            Ok(Backend::Cloud { cloud, pseudonyms }) => {
                let deadline = secs(timeout_s).min(secs(self.cfg.cloud_timeout_s));
                match pseudonyms {
                    Some(key) => {
                        let masking = Masking::new(key, sensitive);
                        cloud
                            .complete(&masking.hide(system), &masking.hide(user), deadline)
                            .await
                            .map(|answer| masking.reveal(&answer))
                    }
                    None => cloud.complete(system, user, deadline).await,
                }
            }
            #[cfg(feature = "local-runner")]
            Ok(Backend::Local(runner)) => {
                // The model runs on this host: nothing leaves it, so nothing is pseudonymised.
                runner
                    .complete(system, user, grammar.cloned(), secs(timeout_s))
                    .await
                    .map(|g| {
                        tracing::info!(
                            "local model, {}: {} prompt tokens in {:.2} s, {} tokens in {:.2} s \
                             ({:.1} tokens/s)",
                            feature.name(),
                            g.prompt_tokens,
                            g.prefill.as_secs_f64(),
                            g.tokens,
                            g.generation.as_secs_f64(),
                            g.tokens as f64 / g.generation.as_secs_f64().max(1e-9)
                        );
                        g.text
                    })
            }
            Ok(Backend::Unavailable(why)) => Err(LlmError::NotReady(why.to_string())),
        };
        // Only the local runner can hold sampling to a grammar.
        #[cfg(not(feature = "local-runner"))]
        let _ = grammar;
        // A refusal before any model call (off, not ready, queue full) is not a call.
        if !matches!(
            r,
            Err(LlmError::Disabled | LlmError::NotReady(_) | LlmError::Busy(_))
        ) {
            self.usage
                .call(feature, started.elapsed().as_nanos() as u64, r.is_ok());
        }
        // What a real call learned about readiness beats the last probe.
        match &r {
            Ok(_) => self.remember_ready(Ok(())),
            Err(e @ LlmError::NotReady(_)) => self.remember_ready(Err(e.clone())),
            Err(_) => {}
        }
        r
    }

    /// The cached explanation of an alert, if one is live.
    pub fn cached_explanation(&self, alert_id: &str) -> Option<Explanation> {
        let hit = self.explanations.get(alert_id).map(|c| served(c, true));
        if hit.is_some() {
            self.usage.cache_hit(Feature::Explain);
        }
        hit
    }

    /// Caches an explanation and returns it as served.
    pub fn store_explanation(&self, explanation: Explanation) -> Explanation {
        let key = explanation.alert_id.clone();
        served(self.explanations.put(&key, explanation), false)
    }

    /// The cached answer of a hunt (key: the canonical question and the limit), if live.
    pub fn cached_hunt(&self, key: &str) -> Option<HuntAnswer> {
        let hit = self.hunts.get(key).map(|c| served(c, true));
        // An entity lookup's answer is cached too, but never came from the model.
        if hit.as_ref().is_some_and(|h| h.mode == "llm") {
            self.usage.cache_hit(Feature::Hunt);
        }
        hit
    }

    /// Caches a hunt's answer and returns it as served.
    pub fn store_hunt(&self, key: &str, answer: HuntAnswer) -> HuntAnswer {
        served(self.hunts.put(key, answer), false)
    }

    /// The cached draft of a pattern, if live.
    pub fn cached_suggestion(&self, pattern_key: &str) -> Option<Suggestion> {
        let hit = self.suggestions.get(pattern_key).map(|c| served(c, true));
        if hit.is_some() {
            self.usage.cache_hit(Feature::RuleSuggestion);
        }
        hit
    }

    /// Whether a live draft of the pattern is cached (for listings: no copy, no LRU use).
    pub fn has_suggestion(&self, pattern_key: &str) -> bool {
        self.suggestions.contains(pattern_key)
    }

    /// Caches a draft and returns it as served.
    pub fn store_suggestion(&self, suggestion: Suggestion) -> Suggestion {
        let key = suggestion.pattern_key.clone();
        served(self.suggestions.put(&key, suggestion), false)
    }

    /// Drops a pattern's cached draft; true when there was one.
    pub fn forget_suggestion(&self, pattern_key: &str) -> bool {
        self.suggestions.remove(pattern_key)
    }

    /// The LLM's part of `/health`: `disabled`, or `ok`/`degraded` with the reason.
    pub async fn health(&self) -> LlmHealth {
        if !self.enabled() {
            return LlmHealth::Disabled { status: "disabled" };
        }
        let r = self.ready().await;
        LlmHealth::Enabled {
            status: if r.is_ok() { "ok" } else { "degraded" },
            backend: self.cfg.backend.clone(),
            model: self.model().to_string(),
            error: r.err().map(|e| e.to_string()),
            cached_explanations: self.explanations.len(),
            cached_hunts: self.hunts.len(),
            cached_suggestions: self.suggestions.len(),
        }
    }
}

/// The LLM backend in `/health`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum LlmHealth {
    /// `llm.backend` is empty.
    Disabled {
        /// `disabled`.
        status: &'static str,
    },
    /// A backend is configured.
    Enabled {
        /// `ok`, or `degraded` when it cannot be used now.
        status: &'static str,
        /// `llm.backend`.
        backend: String,
        /// The model.
        model: String,
        /// Why it is degraded.
        error: Option<String>,
        /// Explanations cached.
        cached_explanations: usize,
        /// Hunt answers cached.
        cached_hunts: usize,
        /// Rule suggestions cached.
        cached_suggestions: usize,
    },
}

impl LlmHealth {
    /// Whether `/health` counts it as degraded.
    pub fn is_degraded(&self) -> bool {
        matches!(self, LlmHealth::Enabled { status, .. } if *status == "degraded")
    }
}

/// A cached answer: says whether it came from the cache and when it expires.
trait Answer {
    fn stamp(&mut self, cached: bool, expires_in_s: u64);
}

macro_rules! answer {
    ($($t:ty),*) => {$(
        impl Answer for $t {
            fn stamp(&mut self, cached: bool, expires_in_s: u64) {
                self.cached = cached;
                self.expires_in_s = expires_in_s;
            }
        }
    )*};
}
answer!(Explanation, HuntAnswer, Suggestion);

fn served<V: Answer>(c: Cached<V>, cached: bool) -> V {
    let mut v = c.value;
    v.stamp(
        cached,
        c.expires
            .saturating_duration_since(Instant::now())
            .as_secs(),
    );
    v
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::from_secs(30))
}
