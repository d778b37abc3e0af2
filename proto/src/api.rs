//! Bodies shared by every API route: the list envelope and the one error shape.

use serde::{Deserialize, Serialize};

/// Pagination data of a list response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListMeta {
    /// Items matching the query across all pages.
    pub total: u64,
    /// The page returned, 1-based.
    pub page: u32,
    /// Items per page.
    pub limit: u32,
}

/// Every list response: `{"items": [...], "meta": {...}}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ListResponse<T> {
    /// The page's items, in the endpoint's order.
    pub items: Vec<T>,
    /// Pagination data.
    pub meta: ListMeta,
}

/// The one error body of the API: a stable machine code, a sentence for people, and fields of the
/// case (for example the parameter at fault).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Stable code, snake_case: `invalid_parameter`, `not_found`, `payload_too_large`, ...
    pub error: String,
    /// What went wrong, for a person.
    pub message: String,
    /// Extra fields of the case, flattened into the body.
    #[serde(flatten, skip_serializing_if = "serde_json::Map::is_empty", default)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl ErrorBody {
    /// An error with no extra fields.
    pub fn new(error: &str, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            error: error.to_string(),
            message: message.into(),
            details: serde_json::Map::new(),
        }
    }

    /// Adds a field of the case.
    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> ErrorBody {
        self.details.insert(key.to_string(), value.into());
        self
    }
}
