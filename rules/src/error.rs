//! What is wrong with a rule, and where.

use std::fmt;

/// A position in the source: 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

/// The class of a rule error (the `error` field of `watchpost rules validate` and of the API's 422).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The text is not valid YAML.
    Yaml,
    /// A required field is missing or a field has the wrong shape or value.
    Schema,
    /// A value modifier is unknown or cannot be combined as written.
    Modifier,
    /// The condition does not parse or names a search that does not exist.
    Condition,
    /// A `re` value is not a valid regular expression.
    Regex,
    /// A value cannot be used as its modifiers require (a bad CIDR, a non-number for `gt`).
    Value,
}

impl ErrorKind {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Yaml => "yaml",
            ErrorKind::Schema => "schema",
            ErrorKind::Modifier => "modifier",
            ErrorKind::Condition => "condition",
            ErrorKind::Regex => "regex",
            ErrorKind::Value => "value",
        }
    }
}

/// One error in a rule.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RuleError {
    /// What kind of problem.
    pub kind: ErrorKind,
    /// Where, when known.
    pub pos: Option<Pos>,
    /// What is wrong, in words.
    pub message: String,
}

impl RuleError {
    /// An error at `pos`.
    pub fn at(pos: Pos, kind: ErrorKind, message: impl Into<String>) -> RuleError {
        RuleError {
            kind,
            pos: Some(pos),
            message: message.into(),
        }
    }

    /// Line, or 0 when unknown.
    pub fn line(&self) -> usize {
        self.pos.map_or(0, |p| p.line)
    }

    /// Column, or 0 when unknown.
    pub fn column(&self) -> usize {
        self.pos.map_or(0, |p| p.column)
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(p) => write!(
                f,
                "line {}, column {}: {} error: {}",
                p.line,
                p.column,
                self.kind.as_str(),
                self.message
            ),
            None => write!(f, "{} error: {}", self.kind.as_str(), self.message),
        }
    }
}

impl std::error::Error for RuleError {}
