//! The in-process limiter: the generic cell rate algorithm (GCRA). Each client has a
//! "theoretical arrival time"; a request is allowed while that time is less than one period ahead
//! of now, and pushes it on by one emission interval (period / count). That allows a burst of
//! `count` requests and then a steady `count` per period, with one timestamp per client and an
//! exact `Retry-After`. The shared store runs the same algorithm in a script
//! ([`super::store`]), so both answer alike.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use watchpost_proto::RateLimit;

use super::Client;

/// Clients remembered at most; past it, clients whose allowance is back to full are forgotten.
const MAX_CLIENTS: usize = 65_536;

/// One limit over many clients.
pub struct Limiter {
    interval: Duration,
    burst: Duration,
    clients: Mutex<HashMap<Client, Instant>>,
}

impl Limiter {
    /// `rate.count` requests per `rate.per_seconds`, per client.
    pub fn new(rate: RateLimit) -> Limiter {
        let period = Duration::from_secs(u64::from(rate.per_seconds));
        let interval = period / rate.count.max(1);
        Limiter {
            interval,
            burst: period.saturating_sub(interval),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Time between two requests at the steady rate (period / count).
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// How far ahead of now a client's arrival time may run: the burst beyond one request.
    pub fn burst(&self) -> Duration {
        self.burst
    }

    /// Takes one request of `client` at `now`: `Ok`, or `Err(seconds to wait)`.
    pub fn check(&self, client: Client, now: Instant) -> Result<(), u64> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
            clients.retain(|_, tat| *tat > now);
        }
        let tat = clients.get(&client).copied().unwrap_or(now).max(now);
        let ahead = tat - now;
        if ahead > self.burst {
            let wait = ahead - self.burst;
            // Whole seconds, rounded up: waiting that long always succeeds.
            return Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0));
        }
        clients.insert(client, tat + self.interval);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn a_burst_of_count_then_one_per_interval_with_an_exact_retry_after() {
        let l = Limiter::new(RateLimit {
            count: 10,
            per_seconds: 60,
        });
        let t0 = Instant::now();
        let client = |ip: &str| Client {
            addr: Some(ip.parse::<IpAddr>().unwrap()),
            page: false,
        };
        let (a, b) = (client("10.0.0.1"), client("10.0.0.2"));
        for _ in 0..10 {
            assert_eq!(l.check(a, t0), Ok(()));
        }
        assert_eq!(l.check(a, t0), Err(6), "one more every 6 s");
        assert_eq!(l.check(b, t0), Ok(()), "clients are counted apart");
        assert_eq!(l.check(a, t0 + Duration::from_millis(5_500)), Err(1));
        assert_eq!(l.check(a, t0 + Duration::from_secs(6)), Ok(()));
        assert_eq!(l.check(a, t0 + Duration::from_secs(6)), Err(6));
        for _ in 0..10 {
            assert_eq!(
                l.check(a, t0 + Duration::from_secs(200)),
                Ok(()),
                "full again"
            );
        }
    }
}
