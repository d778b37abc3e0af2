//! Parsers for what arrives on the wire: syslog headers, JSON log lines, timestamps, and the
//! entities (users, addresses, hosts, domains) inside free-text messages.
//!
//! They are hand-written rather than built on `regex`, `serde_json` or `chrono` because they sit
//! on the per-line hot path of every input, and three properties matter there more than brevity:
//!
//! - **No allocation.** Results are ranges into the caller's line or values borrowed from it;
//!   where bytes must be rewritten (JSON escapes, SD-PARAM escapes) or collected (entities), the
//!   caller passes a buffer it reuses for every line, so steady-state ingest does not touch the
//!   allocator at all.
//! - **No panics on any input.** Lines come from the network and from arbitrary files: invalid
//!   UTF-8, truncation mid-token, megabyte lines and hostile nesting must all produce a result or an
//!   error, never a crashed worker. Every function here is covered by a seeded fuzz-style test.
//! - **Speed.** One pass per line with `memchr` for the scans that dominate, and no backtracking,
//!   so cost is linear in the line length whatever the input.
//!
//! Conventions shared by the submodules: ranges index the input the caller passed and fall on
//! ASCII delimiters (so on `str` boundaries whenever the input is UTF-8); callbacks may run before
//! a later error is found, so callers discard partial results on failure; timestamps are `i64`
//! nanoseconds since the Unix epoch, UTC.

pub mod extract;
pub mod json;
pub mod syslog;
pub mod time;
