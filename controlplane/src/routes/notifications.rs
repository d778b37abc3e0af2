//! `POST /notifications/test`: a test message on one channel or all, sent now (not through the
//! outbox), so an operator sees at once whether a receiver takes what Watchpost sends.

use crate::answer::Json;
use crate::error::ApiError;
use crate::routes::read_body;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use watchpost_notify::TestResult;

/// The optional body: which channel; none or `{}` = every channel.
#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestBody {
    /// The channel's `name`; absent = every channel.
    #[serde(default)]
    channel: Option<String>,
}

/// What each channel did with its test message.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct TestAnswer {
    /// One per channel tried.
    results: Vec<TestResult>,
}

/// Sends the test messages; 200 when every receiver took its message, else 502 naming each
/// failure (the per-channel results are in the error body's `results`).
pub async fn test(State(st): State<AppState>, body: Body) -> Result<Json<TestAnswer>, ApiError> {
    let bytes = read_body(body, st.config.api_max_body_bytes).await?;
    let req: TestBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        TestBody::default()
    } else {
        serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::invalid_body(
                "body",
                format!("the body must be empty, {{}} or {{\"channel\": \"name\"}}: {e}"),
            )
        })?
    };
    let Some(results) = st.notifier.test(req.channel.as_deref()).await else {
        return Err(ApiError::not_found(match &req.channel {
            Some(name) => format!("no notification channel is named `{name}`"),
            None => "no notification channel is configured ([[notifications]])".to_string(),
        }));
    };
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.channel)))
        .collect();
    if failed.is_empty() {
        return Ok(Json(TestAnswer { results }));
    }
    Err(ApiError::new(
        StatusCode::BAD_GATEWAY,
        "notification_failed",
        format!("the test message was not delivered: {}", failed.join("; ")),
    )
    .with(
        "results",
        serde_json::to_value(&results).unwrap_or(serde_json::Value::Null),
    ))
}
