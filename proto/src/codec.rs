//! The one binary encoding of what Watchpost persists.

/// The bincode configuration of every record.
pub fn bincode_config() -> bincode::config::Configuration {
    bincode::config::standard()
}
