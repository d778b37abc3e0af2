//! Detection algorithms: the content ensemble (Half-Space Trees, Holt-Winters, CUSUM, a Markov
//! chain over templates), DSPOT thresholds, and UEBA baselines.
//!
//! Each is plain state plus an `update`-style method: no I/O, no clocks (event time is passed
//! in, so `watchpost analyze` replays weeks of logs with the same results as live ingestion), no
//! locks (each worker owns its detectors), no allocation per event, and a seeded generator where
//! randomness is needed. Models derive bincode's `Encode`/`Decode` so they can be saved to and
//! restored from the store.

pub mod dspot;
pub mod engine;
pub mod ensemble;
pub mod fastmath;
pub mod hst;
pub mod killchain;
pub mod markov;
pub mod prefetch;
pub mod record;
pub mod rng;
pub mod stage;
pub mod table;
pub mod time;
pub mod topk;
pub mod ueba;
pub mod volume;
