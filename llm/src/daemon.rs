//! The `daemon` backend: a model server on the local network, spoken to in one of the two wire
//! protocols such servers share. An endpoint whose path ends in `/v1` speaks the OpenAI-compatible
//! chat-completions protocol (llama.cpp's server, vLLM, LM Studio, LocalAI, and Ollama's own `/v1`);
//! any other speaks Ollama's native `/api/chat`. Readiness is the model being listed by the
//! server (`/api/tags` or `/v1/models`), so a daemon that is up but lacks the model is "not ready",
//! not an upstream failure.

use super::LlmError;
use serde_json::{Value, json};
use std::time::Duration;
use watchpost_outbound::Method;
use watchpost_outbound::{HttpClient, OutboundError, Reply};

/// Which protocol an endpoint speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `POST /api/chat`, `GET /api/tags`.
    Ollama,
    /// `POST /v1/chat/completions`, `GET /v1/models`.
    OpenAi,
}

/// A daemon and the model to ask.
#[derive(Clone, Debug)]
pub struct Daemon {
    client: HttpClient,
    /// `llm.daemon_url` without a trailing slash; the API's paths are appended to it.
    base: String,
    protocol: Protocol,
    model: String,
}

/// Why `llm.daemon_url` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DaemonUrlError {
    /// Not a URL.
    #[error("{url:?}: {source}")]
    Parse {
        /// The URL as configured.
        url: String,
        /// Why.
        source: watchpost_outbound::InvalidUri,
    },
    /// A URL, but not an http:// or https:// one with a host.
    #[error("{0:?} is not an http:// or https:// URL")]
    NotHttp(String),
    /// `user:password@` in the URL.
    #[error("credentials in the URL are not supported")]
    Credentials,
}

impl Daemon {
    /// From `llm.daemon_url` and `llm.daemon_model`; the error says what is wrong with the URL.
    pub fn new(client: HttpClient, url: &str, model: &str) -> Result<Daemon, DaemonUrlError> {
        let uri: watchpost_outbound::Uri = url.parse().map_err(|source| DaemonUrlError::Parse {
            url: url.to_string(),
            source,
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(DaemonUrlError::NotHttp(url.to_string()));
        }
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(DaemonUrlError::Credentials);
        }
        let base = url.trim_end_matches('/').to_string();
        let protocol = if base.ends_with("/v1") {
            Protocol::OpenAi
        } else {
            Protocol::Ollama
        };
        Ok(Daemon {
            client,
            base,
            protocol,
            model: model.to_string(),
        })
    }

    /// One exchange with the daemon. No connection is "not ready"; anything else that keeps
    /// an answer from arriving is an upstream failure.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        deadline: Duration,
    ) -> Result<Reply, LlmError> {
        let url = format!("{}{path}", self.base);
        self.client
            .send(method, &url, &[], body, deadline)
            .await
            .map_err(|e| match e {
                OutboundError::Connect { .. } | OutboundError::Url { .. } => {
                    LlmError::NotReady(e.to_string())
                }
                OutboundError::Timeout(_) | OutboundError::Exchange { .. } => {
                    LlmError::Upstream(e.to_string())
                }
            })
    }

    /// The model asked.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Ok when the server answers and lists the model.
    pub async fn ready(&self, deadline: Duration) -> Result<(), LlmError> {
        let path = match self.protocol {
            Protocol::Ollama => "/api/tags",
            Protocol::OpenAi => "/models",
        };
        let answer = self.call(Method::GET, path, None, deadline).await?;
        if answer.status != 200 {
            return Err(LlmError::NotReady(format!(
                "the daemon answered {} to GET {path}",
                answer.status
            )));
        }
        let v: Value = serde_json::from_slice(&answer.body)
            .map_err(|e| LlmError::NotReady(format!("the daemon's model list is not JSON: {e}")))?;
        let listed: Vec<&str> = match self.protocol {
            Protocol::Ollama => v["models"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["name"].as_str().or(m["model"].as_str()))
                .collect(),
            Protocol::OpenAi => v["data"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["id"].as_str())
                .collect(),
        };
        // Ollama tags a model `name:latest` when no tag was given.
        let wanted = |name: &str| name == self.model || name == format!("{}:latest", self.model);
        if listed.iter().any(|n| wanted(n)) {
            Ok(())
        } else {
            Err(LlmError::NotReady(format!(
                "the daemon does not have the model {:?} (it lists {})",
                self.model,
                if listed.is_empty() {
                    "none".to_string()
                } else {
                    listed.join(", ")
                }
            )))
        }
    }

    /// One chat turn: the system and user messages in, the model's text out.
    pub async fn complete(
        &self,
        system: &str,
        user: &str,
        deadline: Duration,
    ) -> Result<String, LlmError> {
        let messages = json!([
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]);
        let (path, body) = match self.protocol {
            Protocol::Ollama => (
                "/api/chat",
                json!({"model": self.model, "messages": messages, "stream": false,
                       "options": {"temperature": 0.2}}),
            ),
            Protocol::OpenAi => (
                "/chat/completions",
                json!({"model": self.model, "messages": messages, "stream": false,
                       "temperature": 0.2}),
            ),
        };
        let body = serde_json::to_vec(&body).map_err(|e| LlmError::Upstream(e.to_string()))?;
        let answer = self.call(Method::POST, path, Some(body), deadline).await?;
        let v: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        if answer.status != 200 {
            let why = v["error"]["message"]
                .as_str()
                .or(v["error"].as_str())
                .unwrap_or("no reason given");
            // Ollama answers 404 for a model it does not have: not ready rather than failing.
            return Err(if answer.status == 404 {
                LlmError::NotReady(format!("the daemon answered 404: {why}"))
            } else {
                LlmError::Upstream(format!("the daemon answered {}: {why}", answer.status))
            });
        }
        let text = match self.protocol {
            Protocol::Ollama => v["message"]["content"].as_str(),
            Protocol::OpenAi => v["choices"][0]["message"]["content"].as_str(),
        };
        match text.map(str::trim) {
            Some(t) if !t.is_empty() => Ok(t.to_string()),
            _ => Err(LlmError::Upstream(
                "the daemon's answer holds no message text".into(),
            )),
        }
    }
}
