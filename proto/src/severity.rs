//! The one severity scale shared by events and alerts.
//!
//! Syslog has eight levels, Sigma five, Windows and JSON producers their own words; operators need
//! one integer to filter and sort on. The scale (0 debug .. 5 critical) and every mapping onto it are
//! documented in `docs/event.md`.

use crate::ParseError;
use serde::{Deserialize, Serialize};

/// Event and alert severity, 0 (debug) to 5 (critical).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "u8", try_from = "u8")]
#[repr(u8)]
pub enum Severity {
    /// Debug output; syslog 7.
    Debug = 0,
    /// Informational; syslog 6, Sigma `informational`. The default when a producer says nothing.
    Info = 1,
    /// Low; syslog 5 (notice), Sigma `low`.
    Low = 2,
    /// Medium; syslog 4 (warning), Sigma `medium`.
    Medium = 3,
    /// High; syslog 3 (error), Sigma `high`.
    High = 4,
    /// Critical; syslog 0 to 2 (emerg, alert, crit), Sigma `critical`.
    Critical = 5,
}

impl Severity {
    /// Every level, lowest first.
    pub const ALL: [Severity; 6] = [
        Severity::Debug,
        Severity::Info,
        Severity::Low,
        Severity::Medium,
        Severity::High,
        Severity::Critical,
    ];

    /// Maps a syslog severity (0 emerg .. 7 debug); values above 7 are treated as debug.
    pub fn from_syslog(level: u8) -> Severity {
        match level {
            0..=2 => Severity::Critical,
            3 => Severity::High,
            4 => Severity::Medium,
            5 => Severity::Low,
            6 => Severity::Info,
            _ => Severity::Debug,
        }
    }

    /// Maps a level word as producers write it (`warn`, `ERROR`, `Information`, Sigma levels, ECS
    /// `log.level`, Windows `Level` names). Returns `None` for words it does not know.
    pub fn from_word(word: &str) -> Option<Severity> {
        let w = word.trim();
        let eq = |s: &str| w.eq_ignore_ascii_case(s);
        Some(if eq("debug") || eq("trace") || eq("verbose") {
            Severity::Debug
        } else if eq("info") || eq("informational") || eq("information") || eq("notset") {
            Severity::Info
        } else if eq("notice") || eq("low") {
            Severity::Low
        } else if eq("warn") || eq("warning") || eq("medium") {
            Severity::Medium
        } else if eq("err") || eq("error") || eq("high") {
            Severity::High
        } else if eq("crit")
            || eq("critical")
            || eq("alert")
            || eq("emerg")
            || eq("emergency")
            || eq("fatal")
            || eq("panic")
        {
            Severity::Critical
        } else {
            return None;
        })
    }

    /// Maps a number as JSON producers send it: 0..=5 is taken as this scale. ECS `event.severity`
    /// is free-form; values above 5 are clamped to critical.
    pub fn from_number(number: i64) -> Severity {
        Severity::try_from(number.clamp(0, 5) as u8).unwrap_or(Severity::Info)
    }

    /// The lower-case name used in documentation and logs.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Debug => "debug",
            Severity::Info => "informational",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

impl From<Severity> for u8 {
    fn from(s: Severity) -> u8 {
        s as u8
    }
}

impl TryFrom<u8> for Severity {
    type Error = ParseError;
    fn try_from(number: u8) -> Result<Severity, ParseError> {
        Severity::ALL
            .get(number as usize)
            .copied()
            .ok_or(ParseError::Severity(number))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_levels_map_onto_the_scale() {
        let got: Vec<u8> = (0..8).map(|l| Severity::from_syslog(l) as u8).collect();
        assert_eq!(got, vec![5, 5, 5, 4, 3, 2, 1, 0]);
    }

    #[test]
    fn words_and_numbers() {
        assert_eq!(Severity::from_word("WARN"), Some(Severity::Medium));
        assert_eq!(Severity::from_word("Information"), Some(Severity::Info));
        assert_eq!(Severity::from_word("fatal"), Some(Severity::Critical));
        assert_eq!(Severity::from_word("bogus"), None);
        assert_eq!(Severity::from_number(9), Severity::Critical);
        assert_eq!(Severity::from_number(-1), Severity::Debug);
        assert!(Severity::try_from(6).is_err());
    }
}
