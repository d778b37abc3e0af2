//! Event time in the units the detectors key on.
//!
//! Detection runs on event time, never on a clock (see the module above), and several detectors
//! bucket the same timestamp: the content ensemble by minute (volume) and hour of day (a feature),
//! UEBA by minute (volume), hour (risk history) and hour of day (time of day) for each of up to
//! four entities. [`EventTime`] divides once per event and every detector reads the result.

/// Nanoseconds per minute.
pub const NS_PER_MINUTE: i64 = 60_000_000_000;
/// Nanoseconds per hour.
pub const NS_PER_HOUR: i64 = 3_600_000_000_000;

/// An event's time, bucketed once per event: each observation dividing the timestamp again (three
/// 64-bit divisions by constants) was about 8% of `Ueba::observe`'s samples in `perf`. The default
/// is the epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventTime {
    /// Event time, ns.
    pub ts_ns: i64,
    /// Minutes since the epoch: `i64::MAX` nanoseconds is 153,722,867 minutes, so every time has
    /// one that fits an i32.
    pub(super) minute: i32,
    /// Hours since the epoch.
    pub(super) hour: i32,
    /// UTC hour of the day, 0 to 23.
    pub(super) hour_of_day: u8,
}

impl EventTime {
    /// The time `ts_ns` (ns since the epoch).
    #[inline]
    pub fn new(ts_ns: i64) -> EventTime {
        let minute = ts_ns.div_euclid(NS_PER_MINUTE) as i32;
        let hour = minute.div_euclid(60);
        EventTime {
            ts_ns,
            minute,
            hour,
            hour_of_day: hour.rem_euclid(24) as u8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_time_matches_the_timestamp_arithmetic() {
        const DAY: i64 = 86_400_000_000_000;
        for ts in [
            0,
            1,
            -1,
            59_999_999_999,
            NS_PER_MINUTE,
            -NS_PER_MINUTE - 1,
            1_763_700_000_123_456_789,
            -3 * DAY - 5,
            i64::MAX,
            i64::MIN,
        ] {
            let t = EventTime::new(ts);
            assert_eq!(i64::from(t.minute), ts.div_euclid(NS_PER_MINUTE), "{ts}");
            assert_eq!(i64::from(t.hour), ts.div_euclid(NS_PER_HOUR), "{ts}");
            let h = ts.div_euclid(NS_PER_HOUR).rem_euclid(24);
            assert_eq!(i64::from(t.hour_of_day), h, "{ts}");
        }
    }
}
