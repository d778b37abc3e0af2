//! Detection algorithms: the content ensemble (Half-Space Trees, Holt-Winters, CUSUM, a Markov
//! chain over templates), DSPOT thresholds, and UEBA baselines.
//!
//! Each is plain state plus an `update`-style method: no I/O, no clocks (event time is passed
//! in, so `watchpost analyze` replays weeks of logs with the same results as live ingestion), no
//! locks (each worker owns its detectors), no allocation per event, and a seeded generator where
//! randomness is needed. Models derive bincode's `Encode`/`Decode` so they can be saved to and
//! restored from the store.
//!
//! The crate uses only `watchpost_proto` and `watchpost_rules`: the data plane runs it (stage B
//! workers, `watchpost analyze`), the store keeps what it saves, and the engine names the rules
//! and indicators stage A reports through two small traits, [`RuleBook`] and [`IndicatorBook`].
//!
//! A Half-Space Trees forest learns where points usually fall and scores a point far from them
//! higher:
//!
//! ```
//! use watchpost_detect::{HalfSpaceTrees, HstConfig, SplitMix64};
//!
//! let mut forest = HalfSpaceTrees::new(HstConfig { dims: 2, ..HstConfig::default() });
//! let mut rng = SplitMix64::new(7);
//! let mut usual = || [0.3 + 0.02 * rng.gaussian() as f32, 0.6 + 0.02 * rng.gaussian() as f32];
//! for _ in 0..2_000 {
//!     forest.score_and_learn(&usual());
//! }
//! assert!(forest.is_ready());
//! let inlier = forest.score_and_learn(&usual());
//! let outlier = forest.score_and_learn(&[0.95, 0.05]);
//! assert!(outlier > inlier + 0.2, "outlier {outlier}, inlier {inlier}");
//! ```

mod content;
mod deviation;
mod dspot;
mod engine;
mod ensemble;
mod error;
mod exceptions;
mod fastmath;
mod hst;
mod killchain;
mod markov;
mod names;
mod peers;
mod prefetch;
mod record;
mod risk;
mod rng;
mod snapshot;
mod table;
mod time;
mod topk;
mod ueba;
mod volume;
mod wire;

pub use content::{
    ContentKeys, ContentNumbers, NameContent, NumberContent, SameHost, Unresolved, indicator_key,
    rule_key,
};
pub use dspot::{Dspot, DspotConfig, Tail, Verdict, fit_gpd, moments};
pub use engine::{
    AlertSink, Collect, Detector, DetectorParams, FEEDBACK_STEP, LOOKAHEAD, SourceState,
};
pub use ensemble::{Contributions, EventFeatures, Scored, SourceModel, WEIGHTS};
pub use error::Error;
pub use exceptions::{ExceptionHits, ExceptionSet};
pub use fastmath::{log2, logistic4};
pub use hst::{HalfSpaceTrees, HstConfig, MAX_DIMS, MAX_HEIGHT, MAX_TREES};
pub use killchain::{DETECTOR, KillChain};
pub use markov::Markov;
pub use names::{IndicatorBook, RuleBook};
pub use peers::{HostPeers, PEER_BOARD_SLOTS, PeerBoard};
pub use prefetch::{prefetch, prefetch_lines};
pub use record::{
    CorrelationHit, DetectBatch, DetectRecord, GROUP_TEXT_BYTES, NOT_SCORED, RECORD_ENTITIES,
    RecordEntity, SOURCE_NAME_BYTES, route, route_hits, shard_of,
};
pub use risk::{Crossing, RiskBook, RiskParams, SignalRisk};
pub use rng::SplitMix64;
pub use snapshot::Restored;
pub use snapshot::SNAPSHOT_FORMAT;
pub use table::EntityTable;
pub use time::{EventTime, NS_PER_HOUR, NS_PER_MINUTE};
pub use topk::{Probe, TemplateChange, TopLists, network_of};
pub use ueba::{
    Baseline, Lifecycle, MIN_ALERT_SCORE, Observation, Outcome, SubScores, TemplateWeight, Ueba,
    UebaAlert, UebaParams, UebaType, ip_key, is_service_account, source_text,
};
pub use volume::{Cusum, HoltWinters, Volume, VolumeScores, z_to_score};
pub use wire::DETECT_BATCH_FORMAT;
