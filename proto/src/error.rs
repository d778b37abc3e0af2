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
    /// Not an IP address or network (see `parse_cidr`).
    #[error("`{0}` is not an address or network (`10.0.0.0/8`)")]
    Network(String),
    /// A network whose prefix length is past its family's.
    #[error("`{text}`: the prefix length must be 0 to {max}")]
    PrefixLength {
        /// The text given.
        text: String,
        /// The family's longest prefix (32 or 128).
        max: u32,
    },
    /// A network with address bits set past its prefix length (`10.1.2.3/16`).
    #[error("`{0}` has bits set past its prefix length (did you mean the network it lies in?)")]
    HostBits(String),
    /// Not a template id (see `parse_template`).
    #[error("`{0}` is not a template id (16 hex digits)")]
    TemplateId(String),
}
