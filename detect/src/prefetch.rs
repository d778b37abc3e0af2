//! Cache prefetch hints, for the staged loads of UEBA baselines (see `Detector::process_all`).

/// Prefetches every cache line of `value`.
#[inline]
pub fn prefetch_lines<T>(value: &T) {
    let p = (value as *const T).cast::<u8>();
    for offset in (0..std::mem::size_of::<T>()).step_by(64) {
        prefetch(p.wrapping_add(offset));
    }
}

/// A hint to load the cache line at `address`; never faults, whatever `address` is.
#[inline(always)]
pub fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never dereferences in the language's sense and cannot
    // fault, even for an address outside any allocation.
    unsafe {
        std::arch::x86_64::_mm_prefetch(address.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
