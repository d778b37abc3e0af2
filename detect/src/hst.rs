//! Half-Space Trees (Tan, Ting and Liu, "Fast Anomaly Detection for Streaming Data", IJCAI 2011).
//!
//! Each tree halves the feature cube down to a fixed height. A point is scored by the mass the
//! reference window left along its path, weighted by depth: points in sparsely visited regions
//! meet little mass, that is, score high. The latest window's mass is counted alongside and
//! becomes the reference every `window` points, so the model follows the stream with O(trees)
//! work per point and no allocation.
//!
//! Two choices differ from the paper, both for detection quality and both measured
//! (`cargo run --release -p watchpost-benches --bin hst_auc`, ROC AUC against River's
//! `HalfSpaceTrees` on the same streams, in `docs/benchmarks.md`):
//! - The cut ranges hold the unit interval each feature is scaled to and little more: a tree's
//!   first cut along a dimension falls anywhere in the middle 70% of [0, 1] (where River places
//!   its cuts), not in the paper's work range of two to four times the data's width around a
//!   random pivot. With that range the first cuts of most dimensions fell outside the data, a
//!   tree of height 8 over six features had almost no resolution left inside it, and every point
//!   read as denser than average: the AUC was 0.50 to 0.54 where River's is 0.80 to 0.999.
//! - A point's score adds up the mass times `2^depth` of every node on its path down to the first
//!   one under the size limit (a tenth of the window), as River does, instead of reading that last
//!   node alone: the nodes above it say how isolated the region is at coarser scales too.
//!
//! Layout, for speed: every node of one level of a tree cuts the same dimension (chosen at random
//! per level, so trees differ in which features they refine and in which order), always at the
//! middle of the node's range. The levels that cut a dimension `d` then halve its range
//! successively, so the path bits they contribute are the leading bits of the point's cell index
//! along `d` at that resolution. A leaf is therefore fixed by the point's cell along each
//! dimension, and the forest numbers leaves by those cells side by side (each dimension's cell in
//! its own bit field), so a point's leaf is pure arithmetic on its coordinates, computed for four
//! or eight trees at a time from the cuts laid out by dimension, with no table to read and no
//! chain of dependent node loads. Because a point's path is fixed by its leaf, the path sum its
//! score needs is worked out per leaf once per window; a point then only computes its leaf, reads
//! the leaf's sum and bumps the leaf's latest count. The window roll, which needs the leaves in
//! tree order (a node's leaves as one run), reads them through a per-tree permutation from path
//! numbering to cell numbering, built from per-dimension tables of the path bits each cell
//! decides.

use crate::error::Error;
use crate::fastmath::log2;
use crate::rng::SplitMix64;
use bincode::de::Decoder;
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{Decode, Encode};

/// Most trees in a forest.
pub const MAX_TREES: usize = 32;
/// Most dimensions of a feature vector.
pub const MAX_DIMS: usize = 8;
/// Greatest tree height (levels below the root).
pub const MAX_HEIGHT: usize = 16;

/// Settings of a forest.
#[derive(Clone, Copy, Debug, PartialEq, Encode, Decode)]
pub struct HstConfig {
    /// Trees in the forest (at most [`MAX_TREES`]).
    pub trees: usize,
    /// Height of each tree (levels below the root, at most [`MAX_HEIGHT`]).
    pub height: usize,
    /// Points per window (reference and latest), at most 65,535 so counts fit 16 bits.
    pub window: u32,
    /// Dimensions of the feature vectors (at most [`MAX_DIMS`]), each expected in [0, 1].
    pub dims: usize,
    /// Seed of the random cuts.
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

/// How one tree turns a point into its leaf.
#[derive(Clone, Copy, Debug, Default, PartialEq, Encode, Decode)]
#[repr(C, align(16))]
struct Grid {
    /// Per dimension: where the tree's range starts, and cells per unit (`2^cuts / width`).
    lo: [f32; MAX_DIMS],
    scale: [f32; MAX_DIMS],
    /// Per dimension: the last cell (`2^cuts - 1`; 0 for a dimension the tree never cuts).
    top: [f32; MAX_DIMS],
    /// Per dimension: the weight of its cell in the leaf number, `2^offset` where `offset` is the
    /// number of cuts of the dimensions before it (0 for a dimension the tree never cuts).
    weight: [f32; MAX_DIMS],
    /// Per dimension: where its table starts in [`HalfSpaceTrees::bits`]. Entry `c` of the table
    /// holds the path bits that cell `c` along the dimension decides, in place, so a leaf's path
    /// is the OR of one entry per dimension.
    table: [u32; MAX_DIMS],
}

impl Grid {
    /// Cuts for `height` levels over `dims` dimensions; appends the tree's cell tables to `bits`.
    fn random(rng: &mut SplitMix64, height: usize, dims: usize, bits: &mut Vec<u16>) -> Grid {
        // The dimension each level cuts: every dimension once (while levels last), then random
        // ones, all in a random order. A tree that never cut a dimension would be blind to
        // outliers along it.
        let mut level_dim = [0usize; MAX_HEIGHT];
        for (level, d) in level_dim[..height].iter_mut().enumerate() {
            *d = if level < dims {
                level
            } else {
                rng.below(dims as u64) as usize
            };
        }
        for level in (1..height).rev() {
            let other = rng.below(level as u64 + 1) as usize;
            level_dim.swap(level, other);
        }
        let mut cuts = [0u32; MAX_DIMS];
        for &d in &level_dim[..height] {
            cuts[d] += 1;
        }
        let mut g = Grid::default();
        let mut offset = 0;
        for (d, &cut) in cuts.iter().enumerate() {
            let cells = 1usize << cut;
            g.table[d] = bits.len() as u32;
            g.weight[d] = if cut == 0 {
                0.0
            } else {
                (1u32 << offset) as f32
            };
            offset += cut;
            // The j-th of the dimension's cuts (from the root) is bit `cuts - 1 - j` of the cell
            // index, and the path bit of its level.
            for cell in 0..cells {
                let mut path = 0u16;
                let mut j = 0;
                for (level, &ld) in level_dim[..height].iter().enumerate() {
                    if ld == d {
                        let bit = (cell >> (cut - 1 - j)) & 1;
                        path |= (bit as u16) << (height - 1 - level);
                        j += 1;
                    }
                }
                bits.push(path);
            }
            g.top[d] = (cells - 1) as f32;
            if d < dims {
                // The first cut falls anywhere in the middle 70% of the unit interval (as River
                // places its cuts), and the range is as wide as it takes to hold [0, 1].
                let mid = 0.15 + 0.7 * rng.next_f64();
                let width = 2.0 * mid.max(1.0 - mid);
                g.lo[d] = (mid - width / 2.0) as f32;
                g.scale[d] = (cells as f64 / width) as f32;
            }
        }
        g
    }

    /// The leaf `v` falls in, in cell numbering: each dimension's cell times its [`Grid::weight`],
    /// summed. The sums are of integers below `2^16`, exact in `f32` in any order. Other targets
    /// use this; on x86-64 [`TreeLanes::leaves`] does the same for a vector of trees per step,
    /// and is tested against it.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    #[inline(always)]
    fn leaf(&self, v: &[f32; MAX_DIMS]) -> usize {
        let mut sum = 0f32;
        for (d, &value) in v.iter().enumerate() {
            // `max` returns its other operand when one is NaN: NaN reads as cell 0.
            let x = ((value - self.lo[d]) * self.scale[d])
                .max(0.0)
                .min(self.top[d]);
            sum += (x as u32) as f32 * self.weight[d];
        }
        sum as usize
    }

    /// Whether the dimensions' cell fields tile a leaf number of `leaves` exactly: each cut
    /// dimension's weight is the product of the cell counts before it, an uncut one weighs 0,
    /// and the cell counts multiply up to `leaves`. Then every point's leaf is below `leaves`.
    fn fields_fit(&self, leaves: usize) -> bool {
        let mut expected = 1usize;
        for d in 0..MAX_DIMS {
            let cells = self.top[d] as usize + 1;
            let fits = if cells == 1 {
                self.weight[d] == 0.0
            } else {
                cells.is_power_of_two() && self.weight[d] == expected as f32
            };
            if !fits {
                return false;
            }
            expected = expected.saturating_mul(cells);
        }
        expected == leaves
    }

    /// The path (tree-order) number of the leaf numbered `cell_leaf` by cells.
    fn path_of(&self, cell_leaf: usize, bits: &[u16]) -> u16 {
        let mut path = 0;
        for d in 0..MAX_DIMS {
            let cells = self.top[d] as usize + 1;
            // An uncut dimension weighs 0 and has the one cell 0.
            let cell = cell_leaf
                .checked_div(self.weight[d] as usize)
                .map_or(0, |c| c % cells);
            path |= bits
                .get(self.table[d] as usize + cell)
                .copied()
                .unwrap_or(0);
        }
        path
    }
}

/// Every tree's cuts by dimension, trees side by side (four per SSE2 vector, eight per AVX2
/// one): the layout the leaf arithmetic runs fastest in. One tree's eight dimensions fill two
/// vectors of which six lanes work and the leaf takes a horizontal sum; here a step computes one
/// dimension's cell for a vector of trees, and the ten trees' leaves of a six-feature point take
/// eighteen SSE2 steps or twelve AVX2 steps and no horizontal sums. Worked out from the grids,
/// never saved.
#[derive(Clone, Debug)]
#[repr(C, align(16))]
struct TreeLanes {
    lo: [[f32; MAX_TREES]; MAX_DIMS],
    scale: [[f32; MAX_TREES]; MAX_DIMS],
    top: [[f32; MAX_TREES]; MAX_DIMS],
    weight: [[f32; MAX_TREES]; MAX_DIMS],
    /// Which of [`TreeLanes::leaves_with`]'s paths this CPU runs.
    isa: LeafIsa,
}

impl TreeLanes {
    /// The lanes of `grids` (at most [`MAX_TREES`]); lanes past the last tree hold zeros, so
    /// their leaf is 0.
    fn of(grids: &[Grid]) -> Box<TreeLanes> {
        let mut l = Box::new(TreeLanes {
            lo: [[0.0; MAX_TREES]; MAX_DIMS],
            scale: [[0.0; MAX_TREES]; MAX_DIMS],
            top: [[0.0; MAX_TREES]; MAX_DIMS],
            weight: [[0.0; MAX_TREES]; MAX_DIMS],
            isa: LeafIsa::detect(),
        });
        for (t, g) in grids.iter().take(MAX_TREES).enumerate() {
            for d in 0..MAX_DIMS {
                l.lo[d][t] = g.lo[d];
                l.scale[d][t] = g.scale[d];
                l.top[d][t] = g.top[d];
                l.weight[d][t] = g.weight[d];
            }
        }
        l
    }

    /// The leaf of `v` in each of the first `trees` trees (in cell numbering, as
    /// [`Grid::leaf`]), into `out`. The rest of the last vector's lanes get leaf 0 (their rows
    /// are zeros); lanes past it are not written.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn leaves(&self, v: &[f32; MAX_DIMS], dims: usize, trees: usize, out: &mut [i32; MAX_TREES]) {
        self.leaves_with(self.isa, v, dims, trees, out);
    }

    /// [`TreeLanes::leaves`] with the instructions of `isa`, which must be one this CPU has
    /// ([`LeafIsa::detect`] or below it).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn leaves_with(
        &self,
        isa: LeafIsa,
        v: &[f32; MAX_DIMS],
        dims: usize,
        trees: usize,
        out: &mut [i32; MAX_TREES],
    ) {
        let (dims, trees) = (dims.min(MAX_DIMS), trees.min(MAX_TREES));
        match isa {
            // SAFETY: `isa` is AVX2 only where the CPU was found to have it (`LeafIsa::detect`,
            // or a test that checks before asking).
            LeafIsa::Avx2 => unsafe { self.leaves_avx2(v, dims, trees, out) },
            LeafIsa::Sse2 => self.leaves_sse2(v, dims, trees, out),
        }
    }

    /// Four trees per step, with SSE2 (the x86-64 baseline).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn leaves_sse2(
        &self,
        v: &[f32; MAX_DIMS],
        dims: usize,
        trees: usize,
        out: &mut [i32; MAX_TREES],
    ) {
        use std::arch::x86_64::{
            __m128, __m128i, _mm_add_ps, _mm_cvtepi32_ps, _mm_cvttps_epi32, _mm_loadu_ps,
            _mm_max_ps, _mm_min_ps, _mm_mul_ps, _mm_set1_ps, _mm_setzero_ps, _mm_storeu_si128,
            _mm_sub_ps,
        };
        // SAFETY: SSE2 is part of the x86-64 baseline. Group `g` < MAX_TREES / 4 reads and
        // writes lanes `4g..4g + 4` of MAX_TREES-lane rows, and `d` < MAX_DIMS indexes rows
        // that exist; unaligned loads and stores need no alignment.
        unsafe {
            let row =
                |r: &[f32; MAX_TREES], at: usize| -> __m128 { _mm_loadu_ps(r.as_ptr().add(at)) };
            let zero = _mm_setzero_ps();
            for g in 0..trees.div_ceil(4) {
                let at = 4 * g;
                let mut sum = _mm_setzero_ps();
                for (d, &value) in v[..dims].iter().enumerate() {
                    let x = _mm_mul_ps(
                        _mm_sub_ps(_mm_set1_ps(value), row(&self.lo[d], at)),
                        row(&self.scale[d], at),
                    );
                    // `max` returns its second operand when the first is NaN: NaN reads as cell 0.
                    let x = _mm_min_ps(_mm_max_ps(x, zero), row(&self.top[d], at));
                    let cell = _mm_cvtepi32_ps(_mm_cvttps_epi32(x));
                    sum = _mm_add_ps(sum, _mm_mul_ps(cell, row(&self.weight[d], at)));
                }
                _mm_storeu_si128(
                    out.as_mut_ptr().add(at).cast::<__m128i>(),
                    _mm_cvttps_epi32(sum),
                );
            }
        }
    }

    /// Eight trees per step. The operations are those of [`TreeLanes::leaves_sse2`], lane for
    /// lane (no fused multiply-add: the cell arithmetic must round as the scalar leaf does), so
    /// the leaves are the same.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn leaves_avx2(
        &self,
        v: &[f32; MAX_DIMS],
        dims: usize,
        trees: usize,
        out: &mut [i32; MAX_TREES],
    ) {
        use std::arch::x86_64::{
            __m256, __m256i, _mm256_add_ps, _mm256_cvtepi32_ps, _mm256_cvttps_epi32,
            _mm256_loadu_ps, _mm256_max_ps, _mm256_min_ps, _mm256_mul_ps, _mm256_set1_ps,
            _mm256_setzero_ps, _mm256_storeu_si256, _mm256_sub_ps,
        };
        // SAFETY: the caller vouches for AVX2. Group `g` < MAX_TREES / 8 reads and writes lanes
        // `8g..8g + 8` of MAX_TREES-lane rows, and `d` < MAX_DIMS indexes rows that exist;
        // unaligned loads and stores need no alignment.
        unsafe {
            let row =
                |r: &[f32; MAX_TREES], at: usize| -> __m256 { _mm256_loadu_ps(r.as_ptr().add(at)) };
            let zero = _mm256_setzero_ps();
            for g in 0..trees.div_ceil(8) {
                let at = 8 * g;
                let mut sum = _mm256_setzero_ps();
                for (d, &value) in v[..dims].iter().enumerate() {
                    let x = _mm256_mul_ps(
                        _mm256_sub_ps(_mm256_set1_ps(value), row(&self.lo[d], at)),
                        row(&self.scale[d], at),
                    );
                    // As in SSE2, `max` returns its second operand when the first is NaN.
                    let x = _mm256_min_ps(_mm256_max_ps(x, zero), row(&self.top[d], at));
                    let cell = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(x));
                    sum = _mm256_add_ps(sum, _mm256_mul_ps(cell, row(&self.weight[d], at)));
                }
                _mm256_storeu_si256(
                    out.as_mut_ptr().add(at).cast::<__m256i>(),
                    _mm256_cvttps_epi32(sum),
                );
            }
        }
    }
}

/// The widest vectors the leaf arithmetic uses on this CPU, found once per forest: the default
/// ten trees take three SSE2 steps per dimension, two AVX2 steps (`hst_10x8` 1.00 against
/// 1.08 ms per 16,384 points when it came, session 15). AVX-512, one step, was slower on the
/// EPYC this was measured on (1.15 ms, and the whole per-event bench 8% slower), so it is not
/// used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
enum LeafIsa {
    Sse2,
    Avx2,
}

impl LeafIsa {
    /// The widest this CPU has.
    fn detect() -> LeafIsa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                return LeafIsa::Avx2;
            }
        }
        LeafIsa::Sse2
    }

    /// Every one this CPU has, narrowest first.
    #[cfg(test)]
    fn available() -> Vec<LeafIsa> {
        let widest = LeafIsa::detect();
        [LeafIsa::Sse2, LeafIsa::Avx2]
            .into_iter()
            .filter(|&i| i as u8 <= widest as u8)
            .collect()
    }
}

/// A forest of Half-Space Trees.
#[derive(Clone, Debug)]
pub struct HalfSpaceTrees {
    cfg: HstConfig,
    /// Each tree's cuts.
    grids: Vec<Grid>,
    /// The cell tables of every tree and dimension (see [`Grid::table`]).
    bits: Vec<u16>,
    /// Per leaf in cell numbering, tree after tree: the reference path sum that scores a point
    /// landing there.
    leaf_sum: Vec<f32>,
    /// Latest-window count of each leaf in cell numbering, tree after tree.
    latest: Vec<u16>,
    /// Per leaf in path numbering, tree after tree: its cell number (worked out from `grids` and
    /// `bits`, not saved).
    cell_of: Vec<u16>,
    /// The grids by dimension, for the leaf arithmetic (worked out from `grids`, not saved).
    lanes: Box<TreeLanes>,
    /// Prefix sums of one tree's leaf counts in path order while a window rolls, kept so that
    /// rolling allocates nothing.
    scratch: Vec<u32>,
    /// Points counted in the latest window.
    in_window: u32,
    /// Windows completed (scores are meaningful from the first).
    windows: u64,
}

/// Marks the saved form of this layout (leaves in cell numbering), so that a forest saved by the
/// earlier layout (leaves in path order, which read back here would score from the wrong leaves)
/// is refused. That form began with the tree count, at most [`MAX_TREES`].
const LAYOUT: u8 = 0xC2;

impl HalfSpaceTrees {
    /// Builds the random trees.
    pub fn new(cfg: HstConfig) -> HalfSpaceTrees {
        let cfg = HstConfig {
            trees: cfg.trees.clamp(1, MAX_TREES),
            height: cfg.height.clamp(1, MAX_HEIGHT),
            window: cfg.window.clamp(1, u32::from(u16::MAX)),
            dims: cfg.dims.clamp(1, MAX_DIMS),
            ..cfg
        };
        let mut rng = SplitMix64::new(cfg.seed);
        let mut bits = Vec::new();
        let grids = (0..cfg.trees)
            .map(|_| Grid::random(&mut rng, cfg.height, cfg.dims, &mut bits))
            .collect();
        let leaves = 1usize << cfg.height;
        let mut forest = HalfSpaceTrees {
            cfg,
            grids,
            bits,
            leaf_sum: vec![0.0; leaves * cfg.trees],
            latest: vec![0; leaves * cfg.trees],
            cell_of: Vec::new(),
            lanes: TreeLanes::of(&[]),
            scratch: Vec::new(),
            in_window: 0,
            windows: 0,
        };
        let whole = forest.derive();
        debug_assert!(whole, "fresh cell tables number every leaf once");
        forest
    }

    /// Works out what is not saved: the cell number of every leaf, and the roll's scratch space.
    /// False when the cell tables do not number every leaf once (a damaged save): the roll
    /// would then merge leaves that the score keeps apart.
    fn derive(&mut self) -> bool {
        let leaves = 1usize << self.cfg.height;
        let mut cell_of = vec![0; leaves * self.grids.len()];
        let mut seen = vec![false; leaves];
        let mut whole = true;
        for (g, tree) in self.grids.iter().zip(cell_of.chunks_exact_mut(leaves)) {
            seen.fill(false);
            for c in 0..leaves {
                let p = usize::from(g.path_of(c, &self.bits));
                whole &= !std::mem::replace(&mut seen[p], true);
                tree[p] = c as u16;
            }
        }
        self.cell_of = cell_of;
        self.lanes = TreeLanes::of(&self.grids);
        self.scratch = vec![0; leaves + 1];
        whole
    }

    /// Its settings.
    pub fn config(&self) -> &HstConfig {
        &self.cfg
    }

    /// A full reference window exists, so scores mean something.
    pub fn is_ready(&self) -> bool {
        self.windows > 0
    }

    /// Scores `point` and learns it. The score is in [0, 1]: 0 for a point whose every node down to
    /// its leaf held the whole window, 1 for one whose first cut already leads where the
    /// reference window had too little mass to go on.
    ///
    /// Per tree, the path sum is the reference mass of each node below the root, times `2^depth`,
    /// down to and including the first node under the size limit (or the leaf). In units of the
    /// window, the forest's mean `s` runs from 0 to `2^(height + 1) - 2`; the score is
    /// `1 - log2(1 + s) / log2(2^(height + 1) - 1)`, so each halving of the mass met costs the
    /// same.
    #[inline]
    pub fn score_and_learn<const N: usize>(&mut self, point: &[f32; N]) -> f64 {
        let trees = self.cfg.trees;
        let height = self.cfg.height;
        let leaves = 1usize << height;
        // Dimensions past the input read 0 (and past MAX_DIMS are ignored); a fixed-size copy
        // lets the cell arithmetic run on whole vectors. The input's length is a constant so
        // that the copy is a few moves: a slice of run-time length was copied by a call to
        // `memcpy`, 2% of the per-event bench's samples.
        let mut v = [0f32; MAX_DIMS];
        for (slot, &value) in v.iter_mut().zip(point) {
            *slot = value;
        }
        let mut at = [0i32; MAX_TREES];
        #[cfg(target_arch = "x86_64")]
        self.lanes.leaves(&v, self.cfg.dims, trees, &mut at);
        #[cfg(not(target_arch = "x86_64"))]
        for (t, grid) in self.grids[..trees].iter().enumerate() {
            at[t] = grid.leaf(&v) as i32;
        }
        let mut sum = 0f32;
        for (t, &cell) in at[..trees].iter().enumerate() {
            let leaf = t * leaves + cell as usize;
            sum += self.leaf_sum.get(leaf).copied().unwrap_or(0.0);
            if let Some(count) = self.latest.get_mut(leaf) {
                *count = count.saturating_add(1);
            }
        }
        self.in_window += 1;
        if self.in_window >= self.cfg.window {
            self.roll_window();
        }
        if self.windows == 0 {
            return 0.0;
        }
        let s = sum / (trees as f32 * self.cfg.window as f32);
        let most = ((1u64 << (height + 1)) - 1) as f32;
        // The reciprocal does not wait for `s`, so the score's chain has a multiplication where
        // it had a division.
        let per_bit = 1.0 / log2(most);
        f64::from(1.0 - log2(1.0 + s) * per_bit).clamp(0.0, 1.0)
    }

    /// The latest window becomes the reference: each leaf takes the path sum of its nodes below
    /// the root, each node's mass scaled by `2^depth`, down to the first node under the size limit
    /// (a tenth of the window) or the leaf. The latest counts start again from zero.
    ///
    /// A node's leaves are one run in heap order, so its mass is a difference of prefix sums over
    /// the leaf counts. The walk goes down from the root only through nodes at or over the limit
    /// (at most ten per level, the window being ten limits), and fills the leaves under each first
    /// node below it in one go: about `3 x leaves` steps per tree instead of `4 x nodes`.
    fn roll_window(&mut self) {
        let leaves = 1usize << self.cfg.height;
        let height = self.cfg.height;
        let limit = (self.cfg.window / 10).max(1);
        let prefix = &mut self.scratch[..leaves + 1];
        for t in 0..self.cfg.trees {
            let tree = t * leaves..(t + 1) * leaves;
            let cell_of = &self.cell_of[tree.clone()];
            // Prefix sums of the counts taken in path order.
            let latest = &mut self.latest[tree.clone()];
            prefix[0] = 0;
            for (i, &c) in cell_of.iter().enumerate() {
                prefix[i + 1] = prefix[i] + u32::from(latest[usize::from(c)]);
            }
            latest.fill(0);
            let out = &mut self.leaf_sum[tree];
            // Depth-first; a node pops once and pushes at most two, so `height + 1` slots do.
            // Each entry carries the sum of the nodes above it (the root's mass is the whole
            // window for every point, so it is left out).
            let mut stack = [(0usize, 0usize, 0f32); MAX_HEIGHT + 1];
            let mut top = 1;
            while top > 0 {
                top -= 1;
                let (depth, first, above) = stack[top];
                let span = leaves >> depth;
                let mass = prefix[first + span] - prefix[first];
                let sum = if depth == 0 {
                    0.0
                } else {
                    above + mass as f32 * (1u32 << depth) as f32
                };
                if (mass < limit && depth > 0) || depth == height {
                    for &c in &cell_of[first..first + span] {
                        out[usize::from(c)] = sum;
                    }
                } else {
                    stack[top] = (depth + 1, first + span / 2, sum);
                    stack[top + 1] = (depth + 1, first, sum);
                    top += 2;
                }
            }
        }
        self.in_window = 0;
        self.windows += 1;
    }

    /// Why this forest cannot be used, if it cannot: a saved model is decoded into this, and one
    /// saved with another layout must be refused rather than indexed out of bounds.
    fn check(&self) -> Result<(), Error> {
        let c = &self.cfg;
        let leaves = 1usize << c.height.min(MAX_HEIGHT);
        let bad = c.trees == 0
            || c.trees > MAX_TREES
            || c.height == 0
            || c.height > MAX_HEIGHT
            || c.dims == 0
            || c.dims > MAX_DIMS
            || c.window == 0
            || c.window > u32::from(u16::MAX)
            || self.grids.len() != c.trees
            || self.leaf_sum.len() != leaves * c.trees
            || self.latest.len() != leaves * c.trees
            || self.bits.iter().any(|&b| usize::from(b) >= leaves)
            || self.grids.iter().any(|g| {
                (0..MAX_DIMS).any(|d| {
                    let top = g.top[d];
                    !(0.0..65_536.0).contains(&top)
                        || g.table[d] as usize + top as usize >= self.bits.len()
                        || !g.lo[d].is_finite()
                        || !g.scale[d].is_finite()
                }) || !g.fields_fit(leaves)
            });
        if bad {
            Err(Error::Inconsistent {
                model: "Half-Space Trees",
                detail: format!("a forest whose parts do not match its settings {c:?}"),
            })
        } else {
            Ok(())
        }
    }
}

impl Encode for HalfSpaceTrees {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        LAYOUT.encode(e)?;
        self.cfg.encode(e)?;
        self.grids.encode(e)?;
        self.bits.encode(e)?;
        self.leaf_sum.encode(e)?;
        self.latest.encode(e)?;
        self.in_window.encode(e)?;
        self.windows.encode(e)
    }
}

impl<C> Decode<C> for HalfSpaceTrees {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        let layout: u8 = Decode::decode(d)?;
        if layout != LAYOUT {
            return Err(Error::Layout {
                model: "Half-Space Trees",
                found: layout,
                expected: LAYOUT,
            }
            .into());
        }
        let mut forest = HalfSpaceTrees {
            cfg: Decode::decode(d)?,
            grids: Decode::decode(d)?,
            bits: Decode::decode(d)?,
            leaf_sum: Decode::decode(d)?,
            latest: Decode::decode(d)?,
            cell_of: Vec::new(),
            lanes: TreeLanes::of(&[]),
            scratch: Vec::new(),
            in_window: Decode::decode(d)?,
            windows: Decode::decode(d)?,
        };
        forest.check()?;
        if !forest.derive() {
            return Err(Error::Inconsistent {
                model: "Half-Space Trees",
                detail: "cell tables that do not number every leaf".into(),
            }
            .into());
        }
        Ok(forest)
    }
}

bincode::impl_borrow_decode!(HalfSpaceTrees);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn tree_lanes_give_every_tree_its_grid_leaf() {
        // Each vector width this CPU has, so a wider path cannot drift from the scalar leaf.
        let isas = LeafIsa::available();
        eprintln!("leaf paths checked: {isas:?}");
        let mut rng = SplitMix64::new(31);
        for (trees, dims) in [(10, 6), (7, 3), (32, 8), (1, 1), (25, 5)] {
            let f = HalfSpaceTrees::new(HstConfig {
                trees,
                dims,
                ..HstConfig::default()
            });
            for i in 0..2000 {
                let mut v = [0f32; MAX_DIMS];
                for x in v[..dims].iter_mut() {
                    // Inside, outside and on the edges of the unit interval, and now and then NaN.
                    *x = match i % 50 {
                        0 => f32::NAN,
                        1 => 1.0,
                        2 => -3.0,
                        _ => (rng.next_f64() * 1.4 - 0.2) as f32,
                    };
                }
                for &isa in &isas {
                    let mut at = [-1i32; MAX_TREES];
                    f.lanes.leaves_with(isa, &v, dims, trees, &mut at);
                    for (t, g) in f.grids.iter().enumerate() {
                        assert_eq!(
                            at[t] as usize,
                            g.leaf(&v),
                            "{isa:?}, {trees} trees, tree {t}, {v:?}"
                        );
                    }
                }
            }
        }
    }

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

    /// The regression guard for the forest that scored everything 0: over a stream of clustered
    /// points with 1% uniform outliers, a random outlier must outscore a random inlier nearly
    /// always (River's forest reaches an AUC of 0.998 on this kind of stream).
    #[test]
    fn outliers_rank_above_inliers_across_a_stream() {
        let mut f = HalfSpaceTrees::new(HstConfig::default());
        let mut rng = SplitMix64::new(17);
        let centres: Vec<[f64; 6]> = (0..3)
            .map(|_| std::array::from_fn(|_| 0.2 + 0.6 * rng.next_f64()))
            .collect();
        let (mut inliers, mut outliers) = (Vec::new(), Vec::new());
        for i in 0..20_000 {
            let outlier = rng.next_f64() < 0.01;
            let c = &centres[rng.below(3) as usize];
            let x: [f32; 6] = if outlier {
                std::array::from_fn(|_| rng.next_f64() as f32)
            } else {
                std::array::from_fn(|d| (c[d] + 0.05 * rng.gaussian()).clamp(0.0, 1.0) as f32)
            };
            let s = f.score_and_learn(&x);
            if i >= 1000 {
                if outlier { &mut outliers } else { &mut inliers }.push(s);
            }
        }
        let mut above = 0.0;
        for &o in &outliers {
            for &n in &inliers {
                above += if o > n {
                    1.0
                } else if o == n {
                    0.5
                } else {
                    0.0
                };
            }
        }
        let auc = above / (outliers.len() * inliers.len()) as f64;
        assert!(auc > 0.97, "AUC {auc}");
    }

    #[test]
    fn a_saved_forest_comes_back_the_same_and_a_damaged_one_is_refused() {
        let mut f = HalfSpaceTrees::new(HstConfig::default());
        let mut rng = SplitMix64::new(3);
        for _ in 0..600 {
            let x: [f32; 6] = std::array::from_fn(|_| rng.next_f64() as f32);
            f.score_and_learn(&x);
        }
        let cfg = watchpost_proto::bincode_config();
        let bytes = bincode::encode_to_vec(&f, cfg).unwrap();
        let (mut back, _): (HalfSpaceTrees, _) = bincode::decode_from_slice(&bytes, cfg).unwrap();
        let x = [0.3f32, 0.9, 0.1, 0.5, 0.5, 0.2];
        assert_eq!(f.score_and_learn(&x), back.score_and_learn(&x));
        // A forest saved with more trees than its parts hold.
        let mut bad = f.clone();
        bad.cfg.trees = 11;
        let bytes = bincode::encode_to_vec(&bad, cfg).unwrap();
        let err = bincode::decode_from_slice::<HalfSpaceTrees, _>(&bytes, cfg).unwrap_err();
        assert!(err.to_string().contains("Half-Space Trees"), "{err}");
        // A forest of the previous layout began with its tree count, not the layout marker.
        let mut old = bincode::encode_to_vec(&f, cfg).unwrap();
        old[0] = 10;
        let err = bincode::decode_from_slice::<HalfSpaceTrees, _>(&old, cfg).unwrap_err();
        assert!(err.to_string().contains("another layout"), "{err}");
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
