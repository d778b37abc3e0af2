//! Why a shared value does not parse.

/// Why a value of the shared types does not parse: a `Host`, the rate-limit store's URL, an
/// `N/unit` rate, a severity number. Configuration validation quotes it under the key that held
/// the value; other crates wrap it in their own errors. Each message says what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not a `host[:port]` (see `Authority::parse`).
    #[error("`{text}` is not a host[:port] ({reason})")]
    Authority {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A rate-limit store URL that cannot be used.
    #[error("{0}")]
    StoreUrl(String),
    /// Not an `N/second`, `N/minute` or `N/hour` rate.
    #[error("{0}")]
    RateLimit(String),
    /// Not an `http://host[:port][/prefix]` URL (an LLM daemon, the service for `watchpost hunt`).
    #[error("{0}")]
    HttpUrl(String),
    /// A severity number outside the scale.
    #[error("severity must be 0 to 5, got {0}")]
    Severity(u8),
}
