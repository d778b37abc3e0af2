//! Strict parsing of query strings: unknown, repeated or malformed parameters answer 422 naming
//! the parameter, so a typo never silently widens a search.

use crate::error::ApiError;
use std::collections::BTreeMap;

/// A query parameter.
#[derive(Debug)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// JSON Schema type: `string`, `integer` or `boolean`.
    pub kind: &'static str,
    /// What it does.
    pub description: &'static str,
    /// A valid value (the route tests send it).
    pub example: &'static str,
}

/// Most items per page of every listing.
pub const MAX_LIMIT: u32 = 1000;
/// Items per page when `limit` is not given.
pub const DEFAULT_LIMIT: u32 = 50;

/// The query parameters the route table declares for the matched route (`Route::query`), put
/// in the request's extensions by the router's check (see [`Params::check`]); a handler that
/// names them in a message reads them here rather than keeping its own list.
#[derive(Clone, Copy)]
pub struct DeclaredQuery(pub &'static [Param]);

impl DeclaredQuery {
    /// The names, comma-separated, in the table's order.
    pub fn names(&self) -> String {
        self.0.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
    }
}

/// Parsed query parameters, checked against the names a route accepts.
pub struct Params {
    map: BTreeMap<String, String>,
}

impl Params {
    /// Checks `raw` (the part after `?`) against the parameters the route table declares for
    /// the route: an unknown, repeated or badly encoded one is a 422 naming it. The router runs
    /// this before every handler, so the table is the only list of a route's parameters.
    pub fn check(raw: Option<&str>, declared: DeclaredQuery) -> Result<Params, ApiError> {
        Params::parse(raw, Some(declared))
    }

    /// Parses `raw` in a handler, whose names the router has checked ([`Params::check`]).
    pub fn read(raw: Option<&str>) -> Result<Params, ApiError> {
        Params::parse(raw, None)
    }

    fn parse(raw: Option<&str>, declared: Option<DeclaredQuery>) -> Result<Params, ApiError> {
        let mut map = BTreeMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = decode(k).ok_or_else(|| {
                ApiError::invalid_parameter(k, "is not valid percent-encoded UTF-8")
            })?;
            let v = decode(v).ok_or_else(|| {
                ApiError::invalid_parameter(&k, "value is not valid percent-encoded UTF-8")
            })?;
            if let Some(declared) = declared
                && !declared.0.iter().any(|p| p.name == k)
            {
                return Err(ApiError::invalid_parameter(
                    &k,
                    format!("unknown parameter `{k}`; allowed: {}", declared.names()),
                ));
            }
            if map.insert(k.clone(), v).is_some() {
                return Err(ApiError::invalid_parameter(
                    &k,
                    format!("`{k}` is given more than once"),
                ));
            }
        }
        Ok(Params { map })
    }

    /// No parameter was given.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The raw value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    /// `true` or `false`, or `None` when absent.
    pub fn boolean(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(v) => Err(ApiError::invalid_parameter(
                name,
                format!("`{v}` is not true or false"),
            )),
        }
    }

    /// A whole number in `lo..=hi`, or `default`.
    pub fn int(&self, name: &str, default: u32, lo: u32, hi: u32) -> Result<u32, ApiError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => match v.parse::<u32>() {
                Ok(n) if (lo..=hi).contains(&n) => Ok(n),
                _ => Err(ApiError::invalid_parameter(
                    name,
                    format!("`{v}` must be a whole number from {lo} to {hi}"),
                )),
            },
        }
    }

    /// An ISO-8601 time as ns.
    pub fn time(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => watchpost_normalize::parse_rfc3339(v.as_bytes())
                .map(Some)
                .ok_or_else(|| {
                    ApiError::invalid_parameter(
                        name,
                        format!("`{v}` is not an ISO-8601 timestamp such as 2026-11-21T10:00:00Z"),
                    )
                }),
        }
    }

    /// A minimum severity: 0 (debug) to 5 (critical), or a name (`high`, `warning`...).
    pub fn severity(&self, name: &str) -> Result<Option<u8>, ApiError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        if let Ok(n) = v.parse::<u8>() {
            if n <= 5 {
                return Ok(Some(n));
            }
        } else if let Some(s) = watchpost_proto::Severity::from_word(v) {
            return Ok(Some(s as u8));
        }
        Err(ApiError::invalid_parameter(
            name,
            format!("`{v}` is not a severity: 0 (debug) to 5 (critical), or a name such as high"),
        ))
    }

    /// A text of 1 to `max` characters.
    pub fn text(&self, name: &str, max: usize) -> Result<Option<String>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) if v.is_empty() || v.chars().count() > max => Err(ApiError::invalid_parameter(
                name,
                format!("must be 1 to {max} characters"),
            )),
            Some(v) => Ok(Some(v.to_string())),
        }
    }
}

/// One page of a list already in memory, with its envelope (`page` is 1-based).
pub fn page_of<T>(all: Vec<T>, page: u32, limit: u32) -> watchpost_proto::ListResponse<T> {
    let total = all.len() as u64;
    let items = all
        .into_iter()
        .skip((page.max(1) as usize - 1).saturating_mul(limit as usize))
        .take(limit as usize)
        .collect();
    watchpost_proto::ListResponse {
        items,
        meta: watchpost_proto::ListMeta::exact(total, page, limit),
    }
}

/// Percent-decoding with `+` as space, as browsers encode forms.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = |c: u8| (c as char).to_digit(16);
                let hi = hex(*b.get(i + 1)?)?;
                let lo = hex(*b.get(i + 2)?)?;
                out.push((hi * 16 + lo) as u8);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Param = Param {
        name: "limit",
        kind: "integer",
        description: "",
        example: "5",
    };
    const Q: Param = Param {
        name: "q",
        kind: "string",
        description: "",
        example: "a",
    };

    #[test]
    fn unknown_and_repeated_parameters_are_refused() {
        let limit = DeclaredQuery(&[LIMIT]);
        assert!(Params::check(Some("limit=5&bogus=1"), limit).is_err());
        assert!(Params::check(Some("limit=5&limit=6"), limit).is_err());
        let p = Params::check(Some("q=a%20b+c&limit=5"), DeclaredQuery(&[Q, LIMIT])).unwrap();
        assert_eq!(p.get("q"), Some("a b c"));
        assert_eq!(p.int("limit", 50, 1, 1000).unwrap(), 5);
        assert!(p.int("limit", 50, 6, 10).is_err());
        assert!(Params::check(Some("q=%zz"), DeclaredQuery(&[Q])).is_err());
    }
}
