//! The client's `filter` frame: what a connection wants to receive, checked on the server so that
//! a narrow dashboard does not pay for the whole stream.

use serde::Serialize;
use serde_json::Value;
use watchpost_proto::{Alert, Event, Uuid};

/// Sources one filter may name.
const MAX_SOURCES: usize = 256;

/// Why a client frame was refused; the connection answers `{"type":"error","error":
/// "invalid_filter","message":...}` with this text and keeps the filter in force.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The frame is not JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// The frame is JSON but not an object.
    #[error("a frame is a JSON object")]
    NotObject,
    /// The frame has no `type`.
    #[error("the frame has no `type`")]
    NoType,
    /// The frame's `type` is not `filter`.
    #[error("unknown frame type `{0}`; only `filter`")]
    UnknownType(String),
    /// A known field with a value it cannot take.
    #[error("{field}: {expected}")]
    BadValue {
        /// The field.
        field: &'static str,
        /// What it takes.
        expected: String,
    },
    /// A field no filter has.
    #[error("unknown field `{0}`")]
    UnknownField(String),
}

/// The active filter; every criterion that is absent lets everything through.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Filter {
    /// Minimum severity, 0 to 5.
    pub min_severity: Option<u8>,
    /// Sources to receive (exact names).
    pub source: Option<Vec<String>>,
    /// Entity UUID to receive.
    pub entity: Option<Uuid>,
}

impl Filter {
    /// Parses a `{"type": "filter", ...}` frame. A field that is absent (or null) clears that
    /// criterion; an unknown field or a bad value is an error naming it, and the filter in force
    /// stays.
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| FilterError::NotJson(e.to_string()))?;
        let Value::Object(map) = v else {
            return Err(FilterError::NotObject);
        };
        match map.get("type").and_then(Value::as_str) {
            Some("filter") => {}
            Some(other) => return Err(FilterError::UnknownType(other.to_string())),
            None => return Err(FilterError::NoType),
        }
        let bad = |field: &'static str, expected: String| FilterError::BadValue { field, expected };
        let mut f = Filter::default();
        for (k, v) in &map {
            match (k.as_str(), v) {
                ("type", _) | (_, Value::Null) => {}
                ("min_severity", v) => {
                    f.min_severity = Some(
                        v.as_u64()
                            .filter(|s| *s <= 5)
                            .ok_or_else(|| bad("min_severity", "an integer from 0 to 5".into()))?
                            as u8,
                    );
                }
                ("source", Value::Array(items)) => {
                    if items.len() > MAX_SOURCES {
                        return Err(bad("source", format!("at most {MAX_SOURCES} names")));
                    }
                    let names = items
                        .iter()
                        .map(|s| s.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad("source", "an array of strings".into()))?;
                    f.source = Some(names);
                }
                ("source", _) => return Err(bad("source", "an array of strings".into())),
                ("entity", Value::String(s)) => {
                    f.entity = Some(
                        Uuid::parse_str(s)
                            .map_err(|_| bad("entity", format!("`{s}` is not a UUID")))?,
                    );
                }
                ("entity", _) => return Err(bad("entity", "a UUID string".into())),
                (other, _) => return Err(FilterError::UnknownField(other.to_string())),
            }
        }
        Ok(f)
    }

    /// Whether `event` passes.
    pub fn event(&self, event: &Event) -> bool {
        self.min_severity.is_none_or(|m| event.severity >= m)
            && self
                .source
                .as_ref()
                .is_none_or(|s| s.contains(&event.source))
            && self
                .entity
                .is_none_or(|u| event.entities.iter().any(|r| r.uuid == u))
    }

    /// Whether `alert` passes (its entity or a related one for the entity criterion).
    pub fn alert(&self, alert: &Alert) -> bool {
        self.min_severity.is_none_or(|m| alert.severity >= m)
            && self
                .source
                .as_ref()
                .is_none_or(|s| s.contains(&alert.source))
            && self.entity.is_none_or(|u| {
                alert
                    .entity
                    .iter()
                    .chain(&alert.related_entities)
                    .any(|r| r.uuid == u)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Property: any text a client sends is a filter or an error it is told, never a panic.
    #[test]
    fn mangled_filter_frames_are_errors_never_panics() {
        let examples: [&[u8]; 2] = [
            br#"{"type":"filter","min_severity":3,"source":["sshd","nginx"],"entity":"6ba7b810-9dad-51d1-80b4-00c04fd430c8"}"#,
            br#"{"type":"filter","min_severity":"high","source":null}"#,
        ];
        let mut inputs = watchpost_proto::mutate::Mutations::new(&examples, 31, 64 << 10);
        let mut refused = 0;
        for _ in 0..5_000 {
            let bytes = inputs.next_input();
            if let Err(e) = Filter::parse(&String::from_utf8_lossy(&bytes)) {
                assert!(!e.to_string().is_empty());
                refused += 1;
            }
        }
        assert!(refused > 0);
    }

    #[test]
    fn filters_parse_strictly() {
        let f = Filter::parse(
            r#"{"type":"filter","min_severity":3,"source":["sshd"],"entity":"6ba7b810-9dad-51d1-80b4-00c04fd430c8"}"#,
        )
        .unwrap();
        assert_eq!(f.min_severity, Some(3));
        assert_eq!(f.source.as_deref(), Some(&["sshd".to_string()][..]));
        assert!(f.entity.is_some());
        assert_eq!(
            Filter::parse(r#"{"type":"filter"}"#).unwrap(),
            Filter::default()
        );
        for bad in [
            r#"{"type":"filter","min_severity":9}"#,
            r#"{"type":"filter","source":"sshd"}"#,
            r#"{"type":"filter","entity":"nope"}"#,
            r#"{"type":"filter","colour":"red"}"#,
            r#"{"type":"subscribe"}"#,
            r#"[1]"#,
            "not json",
        ] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Filter::parse(r#"{"type":"filter","colour":"red"}"#),
            Err(FilterError::UnknownField("colour".into()))
        );
        assert_eq!(
            Filter::parse(r#"{"type":"filter","min_severity":9}"#)
                .unwrap_err()
                .to_string(),
            "min_severity: an integer from 0 to 5"
        );
    }
}
