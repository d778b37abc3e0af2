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
//! and indicators stage A reports through the small traits of [`names`].
//!
//! A Half-Space Trees forest learns where points usually fall and scores a point far from them
//! higher:
//!
//! ```
//! use watchpost_detect::hst::{HalfSpaceTrees, HstConfig};
//! use watchpost_detect::rng::SplitMix64;
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

pub mod dspot;
pub mod engine;
pub mod ensemble;
pub mod fastmath;
pub mod hst;
pub mod killchain;
pub mod markov;
pub mod names;
pub mod prefetch;
pub mod record;
pub mod rng;
pub mod table;
pub mod time;
pub mod topk;
pub mod ueba;
pub mod volume;
