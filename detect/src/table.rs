//! An open-addressing table from entity key to value whose lookups can be prefetched in stages.
//!
//! Why not `HashMap`: with a hundred thousand baselines, looking one up is a chain of cache misses
//! (the slot, then the value, then whatever the value points to), and `HashMap` offers no way to
//! start loading a slot without waiting for it. Here the slot of a key is a pure function of the
//! key, so a worker can prefetch the slot of an event a few places ahead without touching it, the
//! value once that slot has arrived, and the value's own heap data one step later: the misses of
//! several events overlap instead of each observation stalling on its own.
//!
//! Layout: a power-of-two array of 16-byte slots (key, index into a slab of values), linear
//! probing, load factor at most one half, backward-shift deletion (no tombstones, so probe
//! lengths stay short however many entities come and go). Keys are well-mixed 64-bit hashes; 0
//! marks an empty slot, so the key 0 is stored as 1 (two entities whose hashes are 0 and 1 would
//! share a baseline, a chance of one in 2^64).

/// Marks an empty slot.
const EMPTY: u64 = 0;

#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
struct Slot {
    key: u64,
    at: u32,
}

/// A map from 64-bit hash keys to `V`.
#[derive(Debug)]
pub struct EntityTable<V> {
    slots: Vec<Slot>,
    mask: usize,
    values: Vec<Option<(u64, V)>>,
    free: Vec<u32>,
    len: usize,
}

#[inline]
fn stored(key: u64) -> u64 {
    if key == EMPTY { 1 } else { key }
}

impl<V> EntityTable<V> {
    /// A table sized for `capacity` entries without growing.
    pub fn with_capacity(capacity: usize) -> EntityTable<V> {
        let slots = (capacity.max(4) * 2).next_power_of_two();
        EntityTable {
            slots: vec![Slot::default(); slots],
            mask: slots - 1,
            values: Vec::with_capacity(capacity),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        // Keys are hashes already: their low bits are as good as any.
        (key as usize) & self.mask
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        let key = stored(key);
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.key == key {
                return Some(i);
            }
            if s.key == EMPTY {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        let i = self.find(key)?;
        self.values[self.slots[i].at as usize]
            .as_ref()
            .map(|(_, v)| v)
    }

    /// The value of `key`, mutably.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        let i = self.find(key)?;
        self.values[self.slots[i].at as usize]
            .as_mut()
            .map(|(_, v)| v)
    }

    /// Holds `key`?
    pub fn contains_key(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    /// Where the value of `key` is kept: a handle for [`EntityTable::at_mut`], valid until the
    /// next insertion or removal. Lets a caller that may have to insert look the key up once.
    #[inline]
    pub fn position(&self, key: u64) -> Option<u32> {
        self.find(key).map(|i| self.slots[i].at)
    }

    /// The value at a handle from [`EntityTable::position`] or [`EntityTable::insert`].
    #[inline]
    pub fn at(&self, at: u32) -> Option<&V> {
        self.values.get(at as usize)?.as_ref().map(|(_, v)| v)
    }

    /// The value at a handle from [`EntityTable::position`] or [`EntityTable::insert`],
    /// mutably.
    #[inline]
    pub fn at_mut(&mut self, at: u32) -> Option<&mut V> {
        self.values.get_mut(at as usize)?.as_mut().map(|(_, v)| v)
    }

    /// Sets the value of `key`, replacing any; returns where it is kept (see
    /// [`EntityTable::position`]).
    pub fn insert(&mut self, key: u64, value: V) -> u32 {
        if let Some(i) = self.find(key) {
            let at = self.slots[i].at;
            self.values[at as usize] = Some((key, value));
            return at;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let at = match self.free.pop() {
            Some(at) => {
                self.values[at as usize] = Some((key, value));
                at
            }
            None => {
                self.values.push(Some((key, value)));
                (self.values.len() - 1) as u32
            }
        };
        self.place(stored(key), at);
        self.len += 1;
        at
    }

    fn place(&mut self, key: u64, at: u32) {
        let mut i = self.home(key);
        while self.slots[i].key != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = Slot { key, at };
    }

    fn grow(&mut self) {
        let bigger = vec![Slot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        self.mask = self.slots.len() - 1;
        for s in old {
            if s.key != EMPTY {
                self.place(s.key, s.at);
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let mut hole = self.find(key)?;
        let at = self.slots[hole].at;
        // Backward-shift deletion: pull later members of the probe run into the hole while their
        // home does not lie strictly between the hole and them.
        let mut i = (hole + 1) & self.mask;
        while self.slots[i].key != EMPTY {
            let home = self.home(self.slots[i].key);
            let distance_to_i = i.wrapping_sub(home) & self.mask;
            let distance_to_hole = hole.wrapping_sub(home) & self.mask;
            if distance_to_hole <= distance_to_i {
                self.slots[hole] = self.slots[i];
                hole = i;
            }
            i = (i + 1) & self.mask;
        }
        self.slots[hole] = Slot::default();
        self.len -= 1;
        self.free.push(at);
        self.values[at as usize].take().map(|(_, v)| v)
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> {
        self.values
            .iter()
            .filter_map(|e| e.as_ref().map(|(k, v)| (*k, v)))
    }

    /// Every entry, mutably, in no particular order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut V)> {
        self.values
            .iter_mut()
            .filter_map(|e| e.as_mut().map(|(k, v)| (*k, v)))
    }

    /// Stage 1 of a prefetch: starts loading the slot of `key`, reading nothing.
    #[inline]
    pub fn prefetch_slot(&self, key: u64) {
        crate::prefetch::prefetch(self.slots.as_ptr().wrapping_add(self.home(stored(key))));
    }

    /// Stage 2: reads the slot (loaded by stage 1 by now) and starts loading the value's lines.
    #[inline]
    pub fn prefetch_value(&self, key: u64) {
        if let Some(i) = self.find(key) {
            crate::prefetch::prefetch_lines(&self.values[self.slots[i].at as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_map_through_inserts_and_removals() {
        let mut t = EntityTable::with_capacity(4);
        let mut m = HashMap::new();
        let mut x = 0x1234_5678u64;
        for step in 0..20_000u64 {
            x = watchpost_proto::fmix64(x.wrapping_add(step));
            // Few distinct low bits, so that probe runs are long and wrap around.
            let key = ((x % 64) << 40) | (x % 7) | 0x100;
            if x.is_multiple_of(3) {
                assert_eq!(t.remove(key), m.remove(&key), "step {step}");
            } else {
                t.insert(key, step);
                m.insert(key, step);
            }
            assert_eq!(t.len(), m.len());
        }
        for (k, v) in &m {
            assert_eq!(t.get(*k), Some(v));
        }
        let mut seen: Vec<(u64, u64)> = t.iter().map(|(k, v)| (k, *v)).collect();
        let mut want: Vec<(u64, u64)> = m.into_iter().collect();
        seen.sort_unstable();
        want.sort_unstable();
        assert_eq!(seen, want);
    }

    #[test]
    fn key_zero_is_a_key() {
        let mut t = EntityTable::with_capacity(4);
        t.insert(0, "zero");
        assert_eq!(t.get(0), Some(&"zero"));
        assert_eq!(t.remove(0), Some("zero"));
        assert!(t.is_empty());
    }
}
