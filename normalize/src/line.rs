//! What stage A is told about a line before it reads it: its format and where it came from.

/// How the worker should read the lines of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Format {
    /// RFC 5424 / RFC 3164 syslog, or free text.
    Syslog = 0,
    /// One JSON object per line.
    Json = 1,
    /// JSON if the line starts with `{`, syslog otherwise (tailed files).
    Auto = 2,
}

/// Where one line sits in a batch, and what is known of it before parsing.
#[derive(Clone, Copy, Debug)]
pub struct LineMeta {
    /// Start of the line in its batch's bytes.
    pub start: u32,
    /// Length in bytes.
    pub len: u32,
    /// Receive time, ns.
    pub received_ns: i64,
    /// The line was longer than `dataplane.max_line_bytes` and was cut.
    pub truncated: bool,
}
