//! The `daemon` backend: a model server on the local network, spoken to in one of the two wire
//! protocols such servers share. An endpoint whose path ends in `/v1` speaks the OpenAI-compatible
//! chat-completions protocol (llama.cpp's server, vLLM, LM Studio, LocalAI, and Ollama's own `/v1`);
//! any other speaks Ollama's native `/api/chat`. Readiness is the model being listed by the
//! server (`/api/tags` or `/v1/models`), so a daemon that is up but lacks the model is "not ready",
//! not an upstream failure.

use super::LlmError;
use super::http::{Endpoint, request};
use serde_json::{Value, json};
use std::time::Duration;
use watchpost_proto::ParseError;

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
    endpoint: Endpoint,
    protocol: Protocol,
    model: String,
}

impl Daemon {
    /// From `llm.daemon_url` and `llm.daemon_model`.
    pub fn new(url: &str, model: &str) -> Result<Daemon, ParseError> {
        let endpoint = Endpoint::parse(url)?;
        let protocol = if endpoint.prefix.ends_with("/v1") {
            Protocol::OpenAi
        } else {
            Protocol::Ollama
        };
        Ok(Daemon {
            endpoint,
            protocol,
            model: model.to_string(),
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
        let answer = request(&self.endpoint, "GET", path, &[], None, deadline).await?;
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
        let answer = request(&self.endpoint, "POST", path, &[], Some(&body), deadline).await?;
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
