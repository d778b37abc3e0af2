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

/// The scale a producer's numeric severity is on. ECS says `event.severity` is "the numeric
/// severity of the event according to your event source": 3 is an error to a syslog writer,
/// medium to Watchpost, a warning to Windows and nothing at all to pino. So a number is read
/// only on a scale named for its source (`[severity]`, docs/event.md); on none it stays an
/// attribute and promotes nothing.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SeverityScale {
    /// Unknown: the number is kept as an attribute and not read as a severity.
    #[default]
    None,
    /// Watchpost's own 0 (debug) to 5 (critical).
    Watchpost,
    /// Syslog's 0 (emergency) to 7 (debug), as `log.syslog.severity.code`.
    Syslog,
    /// Windows event levels: 1 critical, 2 error, 3 warning, 4 information, 5 verbose, 0 "log
    /// always" (informational).
    Windows,
    /// OpenTelemetry's `SeverityNumber`, 1 (TRACE) to 24 (FATAL4).
    Otel,
    /// Bunyan's and pino's 10 trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal.
    Bunyan,
}

impl SeverityScale {
    /// Every scale, in the order documented.
    pub const ALL: [SeverityScale; 6] = [
        SeverityScale::None,
        SeverityScale::Watchpost,
        SeverityScale::Syslog,
        SeverityScale::Windows,
        SeverityScale::Otel,
        SeverityScale::Bunyan,
    ];

    /// The configuration's name of the scale.
    pub fn name(self) -> &'static str {
        match self {
            SeverityScale::None => "none",
            SeverityScale::Watchpost => "watchpost",
            SeverityScale::Syslog => "syslog",
            SeverityScale::Windows => "windows",
            SeverityScale::Otel => "otel",
            SeverityScale::Bunyan => "bunyan",
        }
    }

    /// `number` read on this scale; `None` for a number the scale does not have (a fraction,
    /// a value out of its range) and for every number on [`SeverityScale::None`]: a number off
    /// the scale is never clamped into it, which would make any large value critical.
    pub fn read(self, number: f64) -> Option<Severity> {
        if !number.is_finite() || number.fract() != 0.0 || !(0.0..=1000.0).contains(&number) {
            return None;
        }
        let n = number as u16;
        match self {
            SeverityScale::None => None,
            SeverityScale::Watchpost => Severity::try_from(n.min(255) as u8).ok(),
            SeverityScale::Syslog => (n <= 7).then(|| Severity::from_syslog(n as u8)),
            SeverityScale::Windows => match n {
                0 | 4 => Some(Severity::Info),
                1 => Some(Severity::Critical),
                2 => Some(Severity::High),
                3 => Some(Severity::Medium),
                5 => Some(Severity::Debug),
                _ => None,
            },
            SeverityScale::Otel => match n {
                1..=8 => Some(Severity::Debug),
                9..=12 => Some(Severity::Info),
                13..=16 => Some(Severity::Medium),
                17..=20 => Some(Severity::High),
                21..=24 => Some(Severity::Critical),
                _ => None,
            },
            SeverityScale::Bunyan => match n {
                1..=29 => Some(Severity::Debug),
                30..=39 => Some(Severity::Info),
                40..=49 => Some(Severity::Medium),
                50..=59 => Some(Severity::High),
                60..=69 => Some(Severity::Critical),
                _ => None,
            },
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
        assert!(Severity::try_from(6).is_err());
    }

    #[test]
    fn numbers_are_read_only_on_a_named_scale_and_never_clamped_into_it() {
        use SeverityScale::*;
        // The same number means four different things, and nothing on no scale.
        let three: Vec<Option<Severity>> = [None, Watchpost, Syslog, Windows, Bunyan]
            .into_iter()
            .map(|s| s.read(3.0))
            .collect();
        assert_eq!(
            three,
            [
                Option::None,
                Some(Severity::Medium),
                Some(Severity::High),
                Some(Severity::Medium),
                Some(Severity::Debug),
            ]
        );
        // Syslog's informational is not critical, and past a scale's end is nothing.
        assert_eq!(Syslog.read(6.0), Some(Severity::Info));
        assert_eq!(Watchpost.read(6.0), Option::None);
        assert_eq!(Watchpost.read(9.0), Option::None);
        assert_eq!(Syslog.read(8.0), Option::None);
        assert_eq!(Otel.read(13.0), Some(Severity::Medium));
        assert_eq!(Otel.read(0.0), Option::None);
        assert_eq!(Bunyan.read(30.0), Some(Severity::Info));
        assert_eq!(Bunyan.read(60.0), Some(Severity::Critical));
        assert_eq!(Windows.read(1.0), Some(Severity::Critical));
        for bad in [-1.0, 2.5, f64::NAN, f64::INFINITY, 1e12] {
            for scale in SeverityScale::ALL {
                assert_eq!(scale.read(bad), Option::None, "{scale:?} {bad}");
            }
        }
        for scale in SeverityScale::ALL {
            let name = serde_json::to_value(scale).unwrap();
            assert_eq!(name, scale.name());
        }
    }
}
