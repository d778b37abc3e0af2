//! Drain's fixed-depth prefix tree, flattened into one hash map.
//!
//! A node is named by the hash of its path (token count, then one routing hash per level), so
//! finding a child is one probe of a map keyed by an already-mixed `u64` and the tree needs no
//! pointers. Internal nodes only count their children (Drain caps the fan-out so that a token that
//! is secretly variable cannot grow the tree without bound); leaves hold cluster slots.

/// Routing hash of a wildcard branch (variable tokens and overflow go here).
pub(crate) const WILD_ROUTE: u64 = 0x5bd1_e995_6a09_e667;
/// Salt that keeps a `key=` route apart from a literal token with the same hash.
const KEY_SALT: u64 = 0x3c6e_f372_fe94_f82b;
/// The most token levels a search fans out over (each level can follow two branches).
pub(crate) const MAX_LEVELS: usize = 6;

pub(crate) use watchpost_proto::U64Map;

/// Route of a token: its `key=` prefix when it has one (values never split the tree), the
/// wildcard branch when it is variable, otherwise the token itself.
#[inline]
pub(crate) fn route(hash: u64, key: u64, var: bool) -> u64 {
    if key != 0 {
        key ^ KEY_SALT
    } else if var {
        WILD_ROUTE
    } else {
        hash
    }
}

#[inline]
fn mix(a: u64, b: u64) -> u64 {
    let mut k = a ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F).rotate_left(29);
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[inline]
fn root(len: usize) -> u64 {
    mix(0x243F_6A88_85A3_08D3, len as u64)
}

#[derive(Debug, Default)]
struct Node {
    children: u32,
    clusters: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct Tree {
    nodes: U64Map<Node>,
    levels: usize,
    max_children: u32,
}

impl Tree {
    pub(crate) fn new(levels: usize, max_children: usize) -> Self {
        Tree {
            nodes: U64Map::default(),
            levels: levels.min(MAX_LEVELS),
            max_children: u32::try_from(max_children).unwrap_or(u32::MAX),
        }
    }

    /// Calls `f` with the clusters of every leaf a line of `len` tokens with these routes could
    /// belong to: at each level both the token's own branch and the wildcard branch, so a cluster
    /// filed under either is found (Drain follows only one and misses the other).
    pub(crate) fn for_each_leaf(
        &self,
        len: usize,
        routes: impl Fn(usize) -> u64,
        mut f: impl FnMut(&[u32]),
    ) {
        let levels = self.levels.min(len);
        // Depth-first over at most 2^levels paths, without allocating.
        let mut stack = [(0u64, 0usize); 2 * MAX_LEVELS + 2];
        let mut top = 0;
        stack[0] = (root(len), 0);
        top += 1;
        while top > 0 {
            top -= 1;
            let (path, level) = stack[top];
            let Some(node) = self.nodes.get(&path) else {
                continue;
            };
            if level == levels {
                if !node.clusters.is_empty() {
                    f(&node.clusters);
                }
                continue;
            }
            let r = routes(level);
            stack[top] = (mix(path, WILD_ROUTE), level + 1);
            top += 1;
            if r != WILD_ROUTE {
                stack[top] = (mix(path, r), level + 1);
                top += 1;
            }
        }
    }

    /// Files a new cluster and returns its leaf: a token takes its own branch while the node has
    /// room for it, the wildcard branch otherwise.
    pub(crate) fn insert(&mut self, len: usize, routes: impl Fn(usize) -> u64, slot: u32) -> u64 {
        let levels = self.levels.min(len);
        let mut path = root(len);
        self.nodes.entry(path).or_default();
        for level in 0..levels {
            let r = routes(level);
            let own = mix(path, r);
            let next = if r != WILD_ROUTE && self.nodes.contains_key(&own) {
                own
            } else {
                let children = self.nodes.get(&path).map_or(0, |n| n.children);
                let wild = mix(path, WILD_ROUTE);
                let target = if r != WILD_ROUTE && children + 1 < self.max_children {
                    own
                } else {
                    wild
                };
                if !self.nodes.contains_key(&target) {
                    if let Some(n) = self.nodes.get_mut(&path) {
                        n.children += 1;
                    }
                    self.nodes.insert(target, Node::default());
                }
                target
            };
            path = next;
        }
        self.nodes.entry(path).or_default().clusters.push(slot);
        path
    }

    pub(crate) fn remove(&mut self, leaf: u64, slot: u32) {
        if let Some(n) = self.nodes.get_mut(&leaf) {
            n.clusters.retain(|&s| s != slot);
        }
    }
}
