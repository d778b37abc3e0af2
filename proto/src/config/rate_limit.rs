//! `N/unit` rate limits of the API's route families.

use crate::ParseError;

/// A parsed `N/unit` rate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed per period.
    pub count: u32,
    /// The period in seconds.
    pub per_seconds: u32,
}

impl RateLimit {
    /// Parses `60/minute`, `5/second`, `1000/hour` (also `text`, `m`, `h`, `min`, `sec`).
    pub fn parse(text: &str) -> Result<RateLimit, ParseError> {
        Self::parse_text(text).map_err(ParseError::RateLimit)
    }

    fn parse_text(text: &str) -> Result<RateLimit, String> {
        let (n, unit) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}` is not of the form N/second, N/minute or N/hour"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}` in `{text}` is not a whole number"))?;
        if count == 0 {
            return Err(format!("`{text}`: the count must be at least 1"));
        }
        let per_seconds = match unit.trim() {
            "second" | "sec" | "s" => 1,
            "minute" | "min" | "m" => 60,
            "hour" | "h" => 3600,
            other => {
                return Err(format!(
                    "unknown unit `{other}` in `{text}` (second, minute, hour)"
                ));
            }
        };
        Ok(RateLimit { count, per_seconds })
    }
}
