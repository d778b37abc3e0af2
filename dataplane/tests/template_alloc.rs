//! The template miner's hot path (`mine` on a line whose template exists) must not allocate: it
//! runs once per ingested line on pinned workers.
//!
//! A counting global allocator counts only on the thread that asked for it, so the test harness's
//! own threads cannot disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use watchpost_dataplane::template::{Change, MinerConfig, TemplateMiner};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: thread-locals may already be gone while a thread exits.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: defers to `System`, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    f();
    COUNTING.with(|on| on.set(false));
    ALLOCATIONS.with(|n| n.get())
}

/// One line of every shape the masker handles, so every scanner runs under the counter.
const LINES: &[&str] = &[
    "Invalid user webmaster from 173.234.31.186",
    "Invalid user chen from 202.100.179.208",
    "Failed password for invalid user test9 from 52.80.34.196 port 36060 ssh2",
    "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=173.234.31.186  user=root",
    "connection from 24.54.76.216 (24-54-76-216.bflony.adelphia.net) at Fri Jun 17 07:07:00 2005",
    "BLOCK* ask 10.250.17.177:50010 to delete  blk_-8570780307468499817 blk_-9122557405432088649",
    "Receiving block blk_-1608999687919862906 src: /10.250.19.102:54106 dest: /10.250.19.102:50010",
    "proxy.cse.cuhk.edu.hk:5070 close, 1190 bytes (1.16 KB) sent, 1671 bytes (1.63 KB) received, lifetime 00:02",
    "www.google.com:443 close, 0 bytes sent, 0 bytes received, lifetime <1 sec",
    "Block broadcast_9_piece0 stored as bytes in memory (estimated size 5.2 KB, free 5.2 KB)",
    "Input split: hdfs://10.10.34.11:9000/pjhe/logs/2kSOSP.log:21876+7292",
    "Created local directory at /opt/hdfs/nodemanager/usercache/curi/appcache/blockmgr-70293f72-844a-4b39-9ad6-fb0ad7e364e4",
    "Expiring session 0x24ede63a01b003b, timeout of 10000ms exceeded",
    "Ido chip status changed: FF:F2:9F:16:E2:23:00:0D:60:E9:1D:DC ip=10.0.0.151 v=9 t=4 status=M Fri Jul 01 08:16:53 PDT 2005",
    "Server environment:zookeeper.version=3.4.5--1, built on 06/10/2013 17:26 GMT",
    "request 123e4567-e89b-12d3-a456-426614174000 from fe80::1ff:fe23:4567:890a at 2024-01-31T12:00:00.123Z took 1h30m5s",
    "load C:\\Windows\\system32\\x.dll and ./run.sh, code -1, ratio 0.25",
    "(softheader=003b005b 00030000 00000001 00000000) PSR0=00001f01",
    "usuário ação 42",
    "",
];

#[test]
fn mining_known_lines_does_not_allocate() {
    let mut miner = TemplateMiner::new(&MinerConfig::default()).expect("default config");
    // Warm-up: create and generalise the templates and grow the scratch buffers.
    for _ in 0..3 {
        for line in LINES {
            miner.mine(line);
        }
    }
    let mut changes = Vec::with_capacity(LINES.len());
    let n = allocations(|| {
        for _ in 0..100 {
            for line in LINES {
                let o = miner.mine(line);
                if o.change != Change::None {
                    changes.push((*line, o.change));
                }
            }
        }
    });
    assert!(changes.is_empty(), "templates still changing: {changes:?}");
    assert_eq!(n, 0, "mine() allocated {n} times over known lines");
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the test above against a counter that never counts.
    let n = allocations(|| {
        let v: Vec<u8> = Vec::with_capacity(std::hint::black_box(16));
        std::hint::black_box(v);
    });
    assert_eq!(n, 1);
    // And creating a template does allocate, so the miner is really under the counter.
    let mut miner = TemplateMiner::new(&MinerConfig::default()).expect("default config");
    assert!(
        allocations(|| {
            miner.mine("a brand new line 1");
        }) > 0
    );
}
