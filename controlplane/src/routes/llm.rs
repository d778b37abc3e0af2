//! The LLM routes: an alert's explanation, generated on request and cached (see [`crate::llm`]).

use super::read_body;
use crate::error::ApiError;
use crate::llm::{Explanation, LlmError, prompt};
use crate::state::AppState;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;

impl From<LlmError> for ApiError {
    fn from(e: LlmError) -> ApiError {
        match e {
            LlmError::Disabled | LlmError::NotReady(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "llm_unavailable",
                e.to_string(),
            )
            .retry_after(30),
            LlmError::Upstream(_) => {
                ApiError::new(StatusCode::BAD_GATEWAY, "llm_failed", e.to_string())
            }
        }
    }
}

/// The optional body of `POST /alerts/{id}/explain`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ExplainBody {
    /// Ask the model again even when an explanation is cached.
    #[serde(default)]
    refresh: bool,
}

/// An alert's explanation: the cached one while it lives, else a new one from the model.
pub async fn explain(
    State(st): State<AppState>,
    Path(id): Path<String>,
    body: Body,
) -> Result<Json<Explanation>, ApiError> {
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let req: ExplainBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        ExplainBody::default()
    } else {
        serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::invalid_body("body", format!("the body is not an explain object: {e}"))
        })?
    };
    let llm = st.llm.clone();
    let limit = llm.config().explanation_max_contributing_events as usize;
    let store = st.store.clone();
    let key = id.clone();
    let (alert, events) =
        tokio::task::spawn_blocking(move || super::alerts::with_events(&store, &key, limit))
            .await
            .map_err(ApiError::internal)?
            .ok_or_else(|| ApiError::not_found(format!("no alert {id}")))?;
    if !req.refresh
        && let Some(cached) = llm.cached_explanation(&id)
    {
        return Ok(Json(cached));
    }
    llm.ready().await?;
    let cfg = llm.config();
    // Only the daemon backend is built, and it runs on the operator's own network, so user
    // names stay in the prompt; `llm.cloud_hash_usernames` belongs to the cloud backend.
    let p = prompt::explanation(&alert, &events, cfg.explanation_max_prompt_chars as usize);
    let markdown = llm
        .complete(prompt::EXPLAIN_SYSTEM, &p.text, cfg.explanation_timeout_s)
        .await?;
    Ok(Json(llm.store_explanation(Explanation {
        alert_id: id,
        markdown,
        backend: cfg.backend.clone(),
        model: llm.model().to_string(),
        generated_ns: watchpost_dataplane::clock::now_ns(),
        events_in_prompt: p.events,
        prompt_chars: p.text.chars().count(),
        cached: false,
        expires_in_s: 0,
    })))
}

/// The cached explanation only; never calls the model.
pub async fn explanation(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Explanation>, ApiError> {
    if !st.llm.enabled() {
        return Err(LlmError::Disabled.into());
    }
    if let Some(cached) = st.llm.cached_explanation(&id) {
        return Ok(Json(cached));
    }
    let store = st.store.clone();
    let key = id.clone();
    let exists = tokio::task::spawn_blocking(move || store.alert(&key).is_some())
        .await
        .map_err(ApiError::internal)?;
    Err(ApiError::not_found(if exists {
        format!(
            "no explanation of alert {id} is cached; POST /api/v1/alerts/{id}/explain makes one"
        )
    } else {
        format!("no alert {id}")
    }))
}
