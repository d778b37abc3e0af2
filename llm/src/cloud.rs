//! The `cloud` backend: a hosted model over HTTPS, in the wire protocol of the provider that
//! `llm.cloud_provider` names. `openai`: `POST /chat/completions` with a bearer key; `anthropic`:
//! `POST /messages` with `x-api-key` and `anthropic-version`. Readiness is the provider
//! accepting the key on its free model listing (`GET /models`).
//!
//! Rate limits and overloads (429, 5xx, Anthropic's 529) are retried with exponential backoff,
//! or after the provider's `Retry-After`, while the feature's deadline leaves time; otherwise the
//! call fails with the provider's reason. The key goes in a header and nowhere else: every text
//! that comes back from the provider (its error messages quote keys) is scrubbed of it before it
//! reaches a log, an error or `/health`.

use super::{BackendError, LlmError};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use watchpost_outbound::Method;
use watchpost_outbound::{HttpClient, OutboundError, Reply};
use watchpost_proto::config::{LlmConfig, MASK, Secret};

/// The protocol a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Chat completions.
    OpenAi,
    /// Messages.
    Anthropic,
}

impl Provider {
    /// The provider's public API.
    fn default_url(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com/v1",
        }
    }
}

/// The `anthropic-version` header the request and answer shapes follow.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Tokens an Anthropic answer may take (the protocol requires a bound): an explanation or a
/// rule draft is well under it.
const ANTHROPIC_MAX_TOKENS: u32 = 2048;

/// Attempts of one call at most (the deadline usually ends them first).
const MAX_ATTEMPTS: u32 = 5;

/// First backoff; doubled per attempt.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// A provider, the model and the key.
#[derive(Debug)]
pub struct Cloud {
    client: HttpClient,
    provider: Provider,
    base: String,
    model: String,
    key: Secret,
}

impl Cloud {
    /// From the `[llm]` settings (validated: provider, model and key are set).
    pub fn new(client: HttpClient, cfg: &LlmConfig) -> Result<Cloud, BackendError> {
        let provider = match cfg.cloud_provider.as_str() {
            "openai" => Provider::OpenAi,
            "anthropic" => Provider::Anthropic,
            other => return Err(BackendError::CloudProvider(other.to_string())),
        };
        let base = if cfg.cloud_url.is_empty() {
            provider.default_url().to_string()
        } else {
            cfg.cloud_url.trim_end_matches('/').to_string()
        };
        if cfg.cloud_api_key.is_empty() {
            return Err(BackendError::CloudKey);
        }
        Ok(Cloud {
            client,
            provider,
            base,
            model: cfg.cloud_model.clone(),
            key: cfg.cloud_api_key.clone(),
        })
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The provider's headers: the key and the protocol version.
    fn headers(&self) -> Vec<(&'static str, String)> {
        match self.provider {
            Provider::OpenAi => vec![("authorization", format!("Bearer {}", self.key.expose()))],
            Provider::Anthropic => vec![
                ("x-api-key", self.key.expose().to_string()),
                ("anthropic-version", ANTHROPIC_VERSION.to_string()),
            ],
        }
    }

    /// `text` without the key (providers quote a refused key in their errors).
    fn scrub(&self, text: &str) -> String {
        let key = self.key.expose();
        if key.is_empty() {
            text.to_string()
        } else {
            text.replace(key, MASK)
        }
    }

    /// One exchange, no retry.
    async fn once(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Duration,
    ) -> Result<Reply, OutboundError> {
        let headers = self.headers();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let url = format!("{}{path}", self.base);
        self.client
            .send(method, &url, &headers, body, deadline)
            .await
    }

    /// Ok when the provider answers and accepts the key.
    pub async fn ready(&self, deadline: Duration) -> Result<(), LlmError> {
        let reply = self
            .once(Method::GET, "/models", None, deadline)
            .await
            .map_err(|e| LlmError::NotReady(self.scrub(&e.to_string())))?;
        match reply.status {
            200 => Ok(()),
            status => Err(LlmError::NotReady(format!(
                "the provider answered {status} to GET /models: {}",
                error_text(&self.scrub(&String::from_utf8_lossy(&reply.body)))
            ))),
        }
    }

    /// One chat turn, retried on rate limits, overloads and dropped connections while
    /// `deadline` leaves time.
    pub async fn complete(
        &self,
        system: &str,
        user: &str,
        deadline: Duration,
    ) -> Result<String, LlmError> {
        let (path, body) = match self.provider {
            Provider::OpenAi => (
                "/chat/completions",
                json!({"model": self.model, "temperature": 0.2, "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ]}),
            ),
            Provider::Anthropic => (
                "/messages",
                json!({"model": self.model, "max_tokens": ANTHROPIC_MAX_TOKENS,
                       "temperature": 0.2, "system": system,
                       "messages": [{"role": "user", "content": user}]}),
            ),
        };
        let body = serde_json::to_vec(&body).map_err(|e| LlmError::Upstream(e.to_string()))?;
        let started = Instant::now();
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        // Why the previous attempt failed, for the message should the last one time out.
        let mut last: Option<String> = None;
        loop {
            let left = deadline.saturating_sub(started.elapsed());
            let outcome = self
                .once(Method::POST, path, Some(body.clone()), left)
                .await;
            let (why, wait) = match outcome {
                Ok(reply) if reply.status == 200 => return self.text_of(&reply.body),
                Ok(reply) => {
                    let why = format!(
                        "the provider answered {}: {}",
                        reply.status,
                        error_text(&self.scrub(&String::from_utf8_lossy(&reply.body)))
                    );
                    if !retryable(reply.status) {
                        return Err(LlmError::Upstream(why));
                    }
                    (why, reply.retry_after.unwrap_or(backoff))
                }
                Err(OutboundError::Timeout(_)) => {
                    return Err(LlmError::Upstream(format!(
                        "no answer from the provider within {:.1} s (llm timeout){}",
                        deadline.as_secs_f64(),
                        match &last {
                            Some(why) => format!(", {attempt} attempts; before: {why}"),
                            None => String::new(),
                        }
                    )));
                }
                // A certificate the client does not trust, or a URL it cannot use, stays so.
                Err(e @ (OutboundError::Url { .. } | OutboundError::Connect { .. }))
                    if permanent(&e) =>
                {
                    return Err(LlmError::Upstream(self.scrub(&e.to_string())));
                }
                Err(e) => (self.scrub(&e.to_string()), backoff),
            };
            let left = deadline.saturating_sub(started.elapsed());
            if attempt >= MAX_ATTEMPTS || wait >= left {
                return Err(LlmError::Upstream(format!(
                    "{why} (gave up after {attempt} attempt{}: {})",
                    if attempt == 1 { "" } else { "s" },
                    if attempt >= MAX_ATTEMPTS {
                        "the most a call makes".to_string()
                    } else {
                        format!(
                            "the next would start after {:.1} s, past the {:.1} s the call may take",
                            wait.as_secs_f64(),
                            deadline.as_secs_f64()
                        )
                    }
                )));
            }
            tracing::info!(
                "cloud LLM attempt {attempt} failed ({why}); retrying in {:.1} s",
                wait.as_secs_f64()
            );
            tokio::time::sleep(wait).await;
            last = Some(why);
            backoff = backoff.saturating_mul(2);
            attempt += 1;
        }
    }

    /// The text of a successful answer.
    fn text_of(&self, body: &[u8]) -> Result<String, LlmError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| LlmError::Upstream(format!("the provider's answer is not JSON: {e}")))?;
        let text = match self.provider {
            Provider::OpenAi => v["choices"][0]["message"]["content"]
                .as_str()
                .map(str::to_string),
            Provider::Anthropic => {
                let parts: Vec<&str> = v["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|block| block["type"] == "text")
                    .filter_map(|block| block["text"].as_str())
                    .collect();
                (!parts.is_empty()).then(|| parts.concat())
            }
        };
        match text.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => Ok(t.to_string()),
            _ => Err(LlmError::Upstream(
                "the provider's answer holds no message text".into(),
            )),
        }
    }
}

/// A transport failure another attempt cannot clear: a bad URL, a certificate not trusted.
fn permanent(error: &OutboundError) -> bool {
    match error {
        OutboundError::Url { .. } => true,
        OutboundError::Connect { why, .. } => why.contains("certificate"),
        _ => false,
    }
}

/// Worth another attempt: rate limited, overloaded, or failing for now.
fn retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500 | 502 | 503 | 504 | 529)
}

/// The reason in a provider's error body (already scrubbed of the key: cutting it first could
/// leave part of the key): both put it in `error.message`.
fn error_text(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let text = v["error"]["message"]
        .as_str()
        .or(v["error"].as_str())
        .or(v["message"].as_str());
    match text {
        Some(t) => t.chars().take(500).collect(),
        None => body.chars().take(200).collect(),
    }
}
