//! One feed file being read: how it was read, what it gave, what went wrong, and the context
//! the list, CSV and STIX readers add its indicators through.

use super::parse::{self, Hint, IndicatorError};
use super::{Added, IocSet};
use std::fmt;
use std::sync::Arc;

/// Errors kept per file; a file of garbage would otherwise give one per line. The count in
/// [`FileStats::errors`] stays exact.
const MAX_ERRORS_PER_FILE: usize = 100;

/// How a file was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "IocFileFormat")]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// One indicator per line (`.txt`, `.list`, no extension, or text with another extension).
    List,
    /// A CSV export with a header row (`.csv`).
    Csv,
    /// A STIX 2.1 bundle (`.json`, `.stix`, or content that starts with `{` or `[`).
    Stix,
    /// Not read: unreadable, or binary.
    Skipped,
}

/// What one file gave, for the load report.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct FileStats {
    /// The file name.
    pub file: String,
    /// How it was read.
    pub format: Format,
    /// Indicators new to the set.
    pub added: usize,
    /// Indicators already in the set (from this file or an earlier one); the first is kept.
    pub duplicates: usize,
    /// Entries left out on purpose: revoked, expired, of a type or pattern this module does not
    /// match.
    pub skipped: usize,
    /// Entries that could not be read (all of them, even past the ones listed in
    /// [`IocLoad::errors`](super::IocLoad::errors)).
    pub errors: usize,
}

/// One entry that could not be used.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct IocError {
    /// The file name.
    pub file: String,
    /// 1-based line; 0 when it concerns the whole file or the line is not known.
    pub line: usize,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for IocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for IocError {}

/// One file being read: counts and errors go here, indicators through it into the set.
pub(crate) struct FileCtx<'a> {
    set: &'a mut IocSet,
    source: Arc<str>,
    /// The last label used, so rows repeating a description share one string.
    last_label: Option<Arc<str>>,
    pub(crate) stats: FileStats,
    errors: Vec<IocError>,
}

impl<'a> FileCtx<'a> {
    /// Starts reading file `name`, in `format`, into `set`.
    pub(crate) fn new(set: &'a mut IocSet, name: &str, format: Format) -> FileCtx<'a> {
        FileCtx {
            set,
            source: Arc::from(name),
            last_label: None,
            stats: FileStats {
                file: name.to_string(),
                format,
                added: 0,
                duplicates: 0,
                skipped: 0,
                errors: 0,
            },
            errors: Vec::new(),
        }
    }

    /// What the file gave, and its errors (at most [`MAX_ERRORS_PER_FILE`]).
    pub(crate) fn finish(self) -> (FileStats, Vec<IocError>) {
        (self.stats, self.errors)
    }

    pub(crate) fn error(&mut self, line: usize, message: String) {
        self.stats.errors += 1;
        if self.errors.len() < MAX_ERRORS_PER_FILE {
            self.errors.push(IocError {
                file: self.stats.file.clone(),
                line,
                message,
            });
        }
    }

    pub(crate) fn label(&mut self, text: &str) -> Arc<str> {
        match &self.last_label {
            Some(l) if **l == *text => Arc::clone(l),
            _ => {
                let l: Arc<str> = Arc::from(text);
                self.last_label = Some(Arc::clone(&l));
                l
            }
        }
    }

    /// Adds one value, with the feed's confidence in it when it gives one; the error is for the
    /// caller to place.
    pub(crate) fn add(
        &mut self,
        text: &str,
        hint: Hint,
        label: Option<&Arc<str>>,
        confidence: Option<u8>,
    ) -> Result<(), IndicatorError> {
        let parsed = parse::parse(text, hint)?;
        match self.set.insert(parsed, &self.source, label, confidence)? {
            Added::New(_) => self.stats.added += 1,
            Added::Duplicate(_) => self.stats.duplicates += 1,
        }
        Ok(())
    }

    /// Adds one value read at `line`, with its label; a value that does not parse becomes an
    /// error of that line.
    pub(crate) fn add_at(
        &mut self,
        line: usize,
        text: &str,
        hint: Hint,
        label: Option<&str>,
        confidence: Option<u8>,
    ) {
        let label = label.map(str::trim).filter(|l| !l.is_empty());
        let label = label.map(|l| self.label(l));
        if let Err(e) = self.add(text, hint, label.as_ref(), confidence) {
            self.error(line, e.to_string());
        }
    }
}
