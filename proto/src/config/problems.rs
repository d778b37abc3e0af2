//! What is wrong with a configuration: every problem, each naming its key.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// One problem with the configuration, naming the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Dotted key, e.g. `ueba.sub_score_weights`; `(file)` for problems of the file as a whole.
    pub key: String,
    /// What is wrong and what is allowed.
    pub problem: String,
}

/// Every problem found in a configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in key order of the file.
    pub problems: Vec<ConfigProblem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: {}", p.key, p.problem)?;
        }
        Ok(())
    }
}

impl ConfigError {
    pub(super) fn one(key: &str, problem: impl Into<String>) -> ConfigError {
        ConfigError {
            problems: vec![ConfigProblem {
                key: key.into(),
                problem: problem.into(),
            }],
        }
    }
}

/// Longest line of a parse error shown: the TOML library quotes the offending line, which in a
/// broken or hostile file can be megabytes long.
const MAX_ERROR_LINE: usize = 200;

/// `text` with each line cut to [`MAX_ERROR_LINE`] characters.
pub(super) fn clipped_lines(text: &str) -> String {
    text.lines()
        .map(|l| match l.char_indices().nth(MAX_ERROR_LINE) {
            Some((at, _)) => format!("{}…", &l[..at]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Default)]
pub(super) struct Problems(Vec<ConfigProblem>);

impl Problems {
    pub(super) fn add(&mut self, key: &str, problem: impl Into<String>) {
        self.0.push(ConfigProblem {
            key: key.into(),
            problem: problem.into(),
        });
    }
    /// Two keys that mean something only together (a user and its password, a certificate and
    /// its key): when one is set and the other is not, the missing one is named.
    pub(super) fn pair(&mut self, what: &str, (a, a_set): (&str, bool), (b, b_set): (&str, bool)) {
        if a_set != b_set {
            let missing = if a_set { b } else { a };
            self.add(missing, format!("{what} needs both {a} and {b}"));
        }
    }

    pub(super) fn port(&mut self, key: &str, v: u32) {
        if !(1..=65_535).contains(&v) {
            self.add(key, format!("port {v} is out of range (1 to 65535)"));
        }
    }
    pub(super) fn ip(&mut self, key: &str, v: &str) {
        if v.parse::<IpAddr>().is_err() {
            self.add(key, format!("`{v}` is not an IP address"));
        }
    }
    pub(super) fn socket(&mut self, key: &str, v: &str) {
        match v.parse::<SocketAddr>() {
            Ok(a) if a.port() == 0 => self.add(key, format!("`{v}`: port 0 is not allowed")),
            Ok(_) => {}
            Err(_) => self.add(key, format!("`{v}` is not an ip:port address")),
        }
    }
    pub(super) fn origin(&mut self, key: &str, v: &str) {
        let rest = v
            .strip_prefix("http://")
            .or_else(|| v.strip_prefix("https://"));
        match rest {
            Some(host) if !host.is_empty() && !host.contains('/') => {}
            _ => self.add(
                key,
                format!("`{v}` is not an origin like https://host[:port]"),
            ),
        }
    }
    pub(super) fn one_of(&mut self, key: &str, v: &str, allowed: &[&str]) {
        if !allowed.contains(&v) {
            let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
            self.add(key, format!("`{v}` is not one of {}", list.join(", ")));
        }
    }
    pub(super) fn range_u64(&mut self, key: &str, v: u64, lo: u64, hi: u64) {
        if v < lo || v > hi {
            self.add(key, format!("{v} is out of range ({lo} to {hi})"));
        }
    }
    pub(super) fn range_f64(&mut self, key: &str, v: f64, lo: f64, hi: f64) {
        if !(v.is_finite() && v >= lo && v <= hi) {
            self.add(key, format!("{v} is out of range ({lo} to {hi})"));
        }
    }
    pub(super) fn open_unit(&mut self, key: &str, v: f64) {
        if !(v.is_finite() && v > 0.0 && v <= 1.0) {
            self.add(key, format!("{v} must be greater than 0 and at most 1"));
        }
    }
    pub(super) fn risk(&mut self, key: &str, v: f64) {
        if !(v.is_finite() && v > 0.0 && v < 0.5) {
            self.add(key, format!("{v} must be greater than 0 and below 0.5"));
        }
    }
    pub(super) fn finish(self) -> Result<(), ConfigError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { problems: self.0 })
        }
    }
}
