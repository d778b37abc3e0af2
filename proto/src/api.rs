//! Bodies shared by every API route: the list envelope and the one error shape.

use serde::{Deserialize, Serialize};

/// Pagination data of a list response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ListMeta {
    /// Items matching the query across all pages; a lower bound when `total_exact` is false.
    pub total: u64,
    /// The page returned, 1-based.
    pub page: u32,
    /// Items per page.
    pub limit: u32,
    /// False when counting stopped early (event and alert listings that must read each match to
    /// count it, past [`TOTAL_EXACT_UP_TO`] matches); only written then.
    #[serde(default = "always_true", skip_serializing_if = "is_true")]
    pub total_exact: bool,
    /// True when an event search hit `api_search_timeout_ms`: the items are those found by then
    /// (possibly fewer than a full page); only written then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// The order of the items, on listings that can be sorted (alerts, signals): `last_seen`
    /// (latest activity first, the default) or `first_seen` (newest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    /// On a fleet's console, the sensors a search was sent to and those that did not answer
    /// (docs/cluster.md, "Searches across the fleet"); absent on a node answering alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensors: Option<SensorCoverage>,
    /// On a fleet's console, for what the detectors hold (the rule catalogue's fire counts):
    /// the detectors asked and those that did not answer; absent on a node answering alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectors: Option<SensorCoverage>,
}

/// Which sensors answered a search a console fanned out. A search any sensor did not answer is
/// `partial`: its items are those of the sensors that did, never presented as the whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SensorCoverage {
    /// True when a sensor asked did not answer in time or answered with an error.
    pub partial: bool,
    /// The sensors asked, by node name.
    pub asked: Vec<String>,
    /// Those that did not answer, with why.
    pub missing: Vec<MissingSensor>,
}

/// A sensor that did not answer a search, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MissingSensor {
    /// Its node name.
    pub sensor: String,
    /// What happened: a timeout, a refused connection, an error status.
    pub error: String,
}

/// Matches an event search counts exactly, at least, before it may report a lower bound: enough
/// for any pager ("10,000+"), and what Elastic's `track_total_hits` defaults to.
pub const TOTAL_EXACT_UP_TO: u64 = 10_000;

fn always_true() -> bool {
    true
}

fn is_true(v: &bool) -> bool {
    *v
}

impl ListMeta {
    /// An exact total.
    pub fn exact(total: u64, page: u32, limit: u32) -> ListMeta {
        ListMeta {
            total,
            page,
            limit,
            total_exact: true,
            timed_out: false,
            sort: None,
            sensors: None,
            detectors: None,
        }
    }
}

/// Every list response: `{"items": [...], "meta": {...}}`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "{T}List")]
pub struct ListResponse<T> {
    /// The page's items, in the endpoint's order.
    pub items: Vec<T>,
    /// Pagination data.
    pub meta: ListMeta,
}

/// The one error body of the API: a stable machine code, a sentence for people, and fields of the
/// case (for example the parameter at fault).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Error")]
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
