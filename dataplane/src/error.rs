//! The data plane's one error type.
//!
//! Every fallible public function of this crate returns [`Error`]: starting the pipeline,
//! loading and changing the live content (rules, indicators), taking an HTTP ingest body, and
//! replaying files offline. Each message names the configuration key or the file to look at, so
//! the binary prints it as it is; the control plane matches the variants to choose a status.
//! Errors of the crates below keep their types inside a variant ([`StoreError`], [`RuleError`],
//! [`MappingError`], [`MinerError`]), so no cause is flattened into a string.

use std::path::PathBuf;
use watchpost_normalize::MinerError;
use watchpost_rules::{MappingError, RuleError};
use watchpost_store::StoreError;

/// Why a data-plane operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A listener could not be bound.
    #[error("{key}: cannot listen on {addr}: {source}")]
    Bind {
        /// Config key of the address.
        key: &'static str,
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error("storage.data_dir: {0}")]
    Store(#[from] StoreError),
    /// A core id in `dataplane.cores` does not exist.
    #[error(
        "dataplane.cores: core {core} is not available to this process (available: {available})"
    )]
    Core {
        /// The configured core.
        core: u32,
        /// The cores this process may use, listed.
        available: String,
    },
    /// A user mask of `templates.extra_masks` does not compile.
    #[error("templates.extra_masks: {0}")]
    Mask(#[from] MinerError),
    /// A thread could not be started.
    #[error("cannot start thread: {0}")]
    Thread(std::io::Error),
    /// A mapping file of `detection.sigma_field_mappings` or `sigma_logsource_mappings`.
    #[error("{0}")]
    Mapping(#[from] MappingError),
    /// A folder of `detection.sigma_rules_dirs` does not exist.
    #[error("detection.sigma_rules_dirs: {} is not a readable folder", .0.display())]
    RulesDir(PathBuf),
    /// A rule's saved enabled flag could not be read.
    #[error("reading whether rule {rule_id} is enabled: {source}")]
    RuleFlag {
        /// The rule.
        rule_id: String,
        /// The store's error.
        source: StoreError,
    },
    /// A folder or file the content lives in could not be read or created.
    #[error("{context}: {source}")]
    Content {
        /// What was being done, naming the key or path.
        context: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// An input file of `watchpost analyze` could not be read.
    #[error("{}: {source}", .path.display())]
    ReadInput {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An uploaded rule is not valid: the error has its line and column.
    #[error("{0}")]
    InvalidRule(RuleError),
    /// An uploaded rule's id is loaded already.
    #[error("a rule with id {0} is already loaded")]
    RuleCollision(String),
    /// The file an upload would be stored in exists and holds no loaded rule (one that failed
    /// to load, or a file put there by hand): it is not replaced.
    #[error("{} exists and holds no loaded rule; remove it, or upload under another id", .0.display())]
    RuleFileTaken(std::path::PathBuf),
    /// The upload folder holds `detection.sigma_custom_max_rules` rules already.
    #[error("the custom rule folder holds {0} rules, detection.sigma_custom_max_rules")]
    RulesFull(u32),
    /// The custom rule folder's files and the upload together pass
    /// `detection.sigma_custom_max_total_bytes`.
    #[error(
        "the custom rules hold {stored} bytes and this one {upload}: together over detection.sigma_custom_max_total_bytes ({max})"
    )]
    RulesTooLarge {
        /// Bytes of the custom rules stored.
        stored: u64,
        /// Bytes of the upload.
        upload: u64,
        /// The bound.
        max: u64,
    },
    /// An uploaded rule could not be written to its file.
    #[error("cannot write the rule file: {0}")]
    WriteRule(std::io::Error),
    /// An ingest body is neither a JSON array of objects nor JSON lines.
    #[error("{0}")]
    InvalidBody(#[from] crate::input::BodyError),
    /// The ingest queue is full; try again shortly.
    #[error("ingest queue is full")]
    IngestBusy,
    /// The store did not take an ingest body into its spool (a full disk, a failing device):
    /// nothing of it was accepted, and the client should retry.
    #[error("the store cannot make events durable now: {0}")]
    NotDurable(std::sync::Arc<StoreError>),
    /// The pipeline is shutting down.
    #[error("ingestion is stopping")]
    Stopped,
}
