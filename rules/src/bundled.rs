//! The rules written by this project, embedded at build time from `rules/sigma/` (see
//! `build.rs`), so the service loads them wherever it runs.

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
