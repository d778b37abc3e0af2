//! Half-Space Trees (Tan, Ting and Liu, "Fast Anomaly Detection for Streaming Data", IJCAI 2011).
//!
//! Each tree halves the unit feature cube at random dimensions, down to a fixed height. A point is
//! scored by the mass that the reference window left in the nodes it falls through, weighted by
//! depth: points in sparsely visited regions score low mass, that is, high anomaly. The latest
//! window's mass is counted alongside and becomes the reference every `window` points, so the model
//! follows the stream with O(trees x height) work per point and no allocation.
//!
//! Layout: every tree is a complete binary tree stored heap-style in flat arrays (node `i` has
//! children `2i + 1` and `2i + 2`), all trees back to back, so a descent is a few cache lines.

use super::rng::SplitMix64;
use bincode::{Decode, Encode};

/// Settings of a forest.
#[derive(Clone, Copy, Debug, PartialEq, Encode, Decode)]
pub struct HstConfig {
    /// Trees in the forest.
    pub trees: usize,
    /// Height of each tree (levels below the root).
    pub height: usize,
    /// Points per window (reference and latest).
    pub window: u32,
    /// Dimensions of the feature vectors, each expected in [0, 1].
    pub dims: usize,
    /// Seed of the random splits.
    pub seed: u64,
}

impl Default for HstConfig {
    fn default() -> Self {
        HstConfig {
            trees: 10,
            height: 8,
            window: 250,
            dims: 6,
            seed: 0x5eed_4a57,
        }
    }
}

/// A forest of Half-Space Trees.
#[derive(Clone, Debug, Encode, Decode)]
pub struct HalfSpaceTrees {
    cfg: HstConfig,
    nodes_per_tree: usize,
    /// Split dimension of each internal node.
    split_dim: Vec<u8>,
    /// Split value of each internal node.
    split_at: Vec<f32>,
    /// Reference-window mass of each node.
    reference: Vec<u32>,
    /// Latest-window mass of each node.
    latest: Vec<u32>,
    /// Points counted in the latest window.
    in_window: u32,
    /// Windows completed (scores are meaningful from the first).
    windows: u64,
    /// `2^-height`: the density of a single point in a leaf, the floor of the score's scale.
    min_density: f64,
}

impl HalfSpaceTrees {
    /// Builds the random trees.
    pub fn new(cfg: HstConfig) -> HalfSpaceTrees {
        let cfg = HstConfig {
            trees: cfg.trees.max(1),
            height: cfg.height.clamp(1, 16),
            window: cfg.window.max(1),
            dims: cfg.dims.clamp(1, 255),
            ..cfg
        };
        let nodes_per_tree = (1usize << (cfg.height + 1)) - 1;
        let internal = (1usize << cfg.height) - 1;
        let total = nodes_per_tree * cfg.trees;
        let mut split_dim = vec![0u8; total];
        let mut split_at = vec![0f32; total];
        let mut rng = SplitMix64::new(cfg.seed);
        let mut lo = vec![0f64; cfg.dims];
        let mut hi = vec![0f64; cfg.dims];
        for t in 0..cfg.trees {
            // The paper's work range: each dimension's [0, 1] stretched around a random pivot, so
            // that different trees cut in different places.
            for d in 0..cfg.dims {
                let s = rng.next_f64();
                let r = 2.0 * s.max(1.0 - s);
                lo[d] = s - r;
                hi[d] = s + r;
            }
            build(
                &mut rng,
                &mut split_dim[t * nodes_per_tree..],
                &mut split_at[t * nodes_per_tree..],
                0,
                internal,
                &mut lo,
                &mut hi,
            );
        }
        let min_density = 1.0 / (1u64 << cfg.height) as f64;
        HalfSpaceTrees {
            cfg,
            nodes_per_tree,
            split_dim,
            split_at,
            reference: vec![0; total],
            latest: vec![0; total],
            in_window: 0,
            windows: 0,
            min_density,
        }
    }

    /// Its settings.
    pub fn config(&self) -> &HstConfig {
        &self.cfg
    }

    /// A full reference window exists, so scores mean something.
    pub fn is_ready(&self) -> bool {
        self.windows > 0
    }

    /// Scores `x` and learns it. The score is in [0, 1]: 0 where the reference window was at least
    /// as dense as average, rising to 1 where it saw nothing.
    ///
    /// Per tree, the mass is read at the first node whose reference mass is under a tenth of the
    /// window (the paper's size limit) or at the leaf, and scaled by `2^depth`: that estimates the
    /// local density relative to an even spread, `window` meaning "average". The forest's mean
    /// is mapped as `-log2(density / window) / height`, so each halving of density adds the same.
    #[inline]
    pub fn score_and_learn(&mut self, x: &[f32]) -> f64 {
        let internal = (1usize << self.cfg.height) - 1;
        let limit = (self.cfg.window / 10).max(1);
        let mut raw = 0.0;
        for t in 0..self.cfg.trees {
            let base = t * self.nodes_per_tree;
            let mut node = 0usize;
            let mut depth = 0u32;
            let mut scored = false;
            loop {
                let i = base + node;
                self.latest[i] += 1;
                if !scored && (node >= internal || self.reference[i] < limit) {
                    raw += f64::from(self.reference[i]) * f64::from(1u32 << depth);
                    scored = true;
                }
                if node >= internal {
                    break;
                }
                let d = self.split_dim[i] as usize;
                let v = x.get(d).copied().unwrap_or(0.0);
                node = 2 * node + if v < self.split_at[i] { 1 } else { 2 };
                depth += 1;
            }
        }
        self.in_window += 1;
        if self.in_window >= self.cfg.window {
            std::mem::swap(&mut self.reference, &mut self.latest);
            self.latest.fill(0);
            self.in_window = 0;
            self.windows += 1;
        }
        if self.windows == 0 {
            return 0.0;
        }
        let density = raw / self.cfg.trees as f64 / f64::from(self.cfg.window);
        let floor = self.min_density;
        (-(density + floor).log2() / self.cfg.height as f64).clamp(0.0, 1.0)
    }
}

/// Splits `[lo, hi]` down the tree rooted at `node`.
fn build(
    rng: &mut SplitMix64,
    dims: &mut [u8],
    at: &mut [f32],
    node: usize,
    internal: usize,
    lo: &mut [f64],
    hi: &mut [f64],
) {
    if node >= internal {
        return;
    }
    let d = rng.below(lo.len() as u64) as usize;
    let mid = 0.5 * (lo[d] + hi[d]);
    dims[node] = d as u8;
    at[node] = mid as f32;
    let saved = hi[d];
    hi[d] = mid;
    build(rng, dims, at, 2 * node + 1, internal, lo, hi);
    hi[d] = saved;
    let saved = lo[d];
    lo[d] = mid;
    build(rng, dims, at, 2 * node + 2, internal, lo, hi);
    lo[d] = saved;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outliers_score_higher_than_inliers() {
        let mut f = HalfSpaceTrees::new(HstConfig {
            dims: 3,
            ..HstConfig::default()
        });
        let mut rng = SplitMix64::new(9);
        let point = |rng: &mut SplitMix64| {
            [
                0.3 + 0.05 * rng.gaussian() as f32,
                0.6 + 0.05 * rng.gaussian() as f32,
                0.5 + 0.05 * rng.gaussian() as f32,
            ]
        };
        for _ in 0..2000 {
            f.score_and_learn(&point(&mut rng));
        }
        assert!(f.is_ready());
        let mut inliers: Vec<f64> = (0..500)
            .map(|_| f.score_and_learn(&point(&mut rng)))
            .collect();
        inliers.sort_by(f64::total_cmp);
        let p99 = inliers[495];
        let mean = inliers.iter().sum::<f64>() / inliers.len() as f64;
        for far in [[0.95, 0.05, 0.9], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]] {
            let outlier = f.score_and_learn(&far);
            assert!(
                outlier > p99 && outlier > mean + 0.2,
                "{far:?}: {outlier} vs inliers mean {mean}, p99 {p99}"
            );
        }
    }

    #[test]
    fn scores_are_deterministic_for_a_seed() {
        let run = || {
            let mut f = HalfSpaceTrees::new(HstConfig::default());
            let mut rng = SplitMix64::new(5);
            let mut last = 0.0;
            for _ in 0..1000 {
                let x: [f32; 6] = std::array::from_fn(|_| rng.next_f64() as f32);
                last = f.score_and_learn(&x);
            }
            last
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn odd_inputs_are_clamped_not_panicked_on() {
        let mut f = HalfSpaceTrees::new(HstConfig::default());
        for _ in 0..300 {
            let s = f.score_and_learn(&[f32::NAN, -4.0, 9.0]);
            assert!((0.0..=1.0).contains(&s));
        }
    }
}
