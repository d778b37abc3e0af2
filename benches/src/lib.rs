//! Load generation for Watchpost: a seeded generator of realistic security log traffic and the
//! `watchpost-loadgen` binary that sends it to a running service.
//!
//! Throughput numbers are only meaningful on input that exercises the service the way production
//! does: many templates, recurring entities, a heavy-tailed mix with bursts of attacks. Synthetic
//! `"line N"` input would make the template miner and entity store look unrealistically fast, so
//! this crate models a small organisation instead.

pub mod domain;
mod emit;
pub mod http_post;
mod logwriter;
pub mod orgs;
pub mod realistic;
pub mod rng;
pub mod scenario;
pub mod sigma;
mod traffic;
pub mod world;

pub use rng::stream_seed;
pub use traffic::{Kind, Traffic};

/// Counts heap allocations per thread, so the tests can hold the generator to its promise of
/// allocating nothing per line once warmed up.
#[cfg(test)]
mod alloc_count {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static COUNT: Cell<u64> = const { Cell::new(0) };
    }

    struct Counting;

    // SAFETY: delegates every operation to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
            // SAFETY: same contract as the caller's.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: same contract as the caller's.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
            // SAFETY: same contract as the caller's.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;

    /// Allocations made so far by the calling thread.
    pub fn allocations() -> u64 {
        COUNT.with(Cell::get)
    }

    #[test]
    fn no_allocation_per_line_after_warm_up() {
        let mut t = crate::Traffic::new(99);
        let mut buf = Vec::with_capacity(1 << 16);
        let now = 1_717_243_200;
        for i in 0..20_000 {
            buf.clear();
            t.next_syslog(now + i / 1000, &mut buf);
            buf.clear();
            t.next_json(now + i / 1000, &mut buf);
        }
        let before = allocations();
        for i in 0..200_000 {
            buf.clear();
            t.next_syslog(now + 20 + i / 1000, &mut buf);
            buf.clear();
            t.next_json(now + 20 + i / 1000, &mut buf);
        }
        assert_eq!(allocations() - before, 0);
    }
}
