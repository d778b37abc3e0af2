//! A credential in the configuration: printed as [`MASK`] by `{:?}`, so that a log line, an
//! error or a panic that formats the configuration never shows it. Serialised as written, so
//! that the masking of `config show` and `GET /config` stays in one place
//! ([`super::Config::masked_json`]).

use super::MASK;
use serde::{Deserialize, Serialize};

/// See the module's documentation.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Secret(pub(super) String);

impl Secret {
    /// The credential itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// No credential given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            write!(f, "{MASK:?}")
        }
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Secret {
        Secret(text.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;
    use crate::config::LlmConfig;

    #[test]
    fn debug_output_never_shows_the_credential() {
        let cfg = LlmConfig {
            cloud_api_key: Secret::from("sk-live-9f8e7d"),
            ..LlmConfig::default()
        };
        let shown = format!("{cfg:?} {cfg:#?}");
        assert!(!shown.contains("sk-live"), "{shown}");
        assert!(shown.contains("cloud_api_key: \"********\""), "{shown}");
        assert_eq!(cfg.cloud_api_key.expose(), "sk-live-9f8e7d");
        assert_eq!(
            serde_json::to_value(&cfg).unwrap()["cloud_api_key"],
            "sk-live-9f8e7d"
        );
    }
}
