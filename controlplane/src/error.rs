//! The one error type of the API and its mapping onto HTTP.
//!
//! Every handler returns `Result<_, ApiError>`, and every error leaves the service in the shape of
//! [`watchpost_proto::ErrorBody`]: `{"error": "<code>", "message": "<text>", ...fields}`. Routing
//! failures (unknown path, wrong method) use the same shape.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use watchpost_proto::ErrorBody;

/// An error answer: a status and the body.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The JSON body, boxed: it is most of the error's size, and handlers return
    /// `Result<_, ApiError>` everywhere.
    pub body: Box<ErrorBody>,
    /// Seconds for `Retry-After`, on 429 and 503.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error of `status` with `code` and `message`.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: Box::new(ErrorBody::new(code, message)),
            retry_after: None,
        }
    }

    /// 422 for a query parameter, naming it.
    pub fn invalid_parameter(name: &str, message: impl Into<String>) -> ApiError {
        let e = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_parameter",
            message,
        );
        e.with("parameter", name)
    }

    /// 422 for a request body, naming the offending field.
    pub fn invalid_body(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
            .with("field", field)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 500, logging the cause (which is not shown to the client).
    pub fn internal(cause: impl std::fmt::Display) -> ApiError {
        tracing::error!("internal error: {cause}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the service log",
        )
    }

    /// Adds a field of the case to the body.
    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> ApiError {
        self.body.details.insert(key.to_string(), value.into());
        self
    }

    /// Adds `Retry-After`.
    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }
}

/// A store read that failed is a 500 in the error shape, never a 404 or an empty answer: an
/// analyst must not take "the disk failed" for "there is no such alert". The store has already
/// counted it (`/health`, `/stats`, `/metrics`) and logged it.
impl From<watchpost_store::StoreError> for ApiError {
    fn from(e: watchpost_store::StoreError) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_error",
            format!("reading the store failed: {e}"),
        )
    }
}

impl ApiError {
    /// A user's change the store refused to write, after its retries (a full disk): 503 with
    /// `Retry-After`, since nothing changed and the same request can simply be sent again.
    pub fn unsaved(what: &str, e: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("{what} was not saved: {e}"),
        )
        .retry_after(5)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, crate::answer::Json(*self.body)).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}
