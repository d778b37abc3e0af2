//! What each client address holds at once (open connections, request bodies in flight), capped
//! per address. A [`Ticket`] is one place; dropping it gives the place back, so a connection or a
//! body that ends in any way (answered, refused, cut, its task cancelled) cannot leak one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Places held per client address, at most `max` each. Addresses holding none take no memory.
pub(crate) struct PerClient {
    max: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

/// One place of one client; given back when dropped.
pub(crate) struct Ticket {
    of: Arc<PerClient>,
    client: IpAddr,
}

impl PerClient {
    /// Up to `max` places per address.
    pub(crate) fn new(max: usize) -> PerClient {
        PerClient {
            max,
            held: Mutex::new(HashMap::new()),
        }
    }

    /// The cap per address.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A place for `client`, or `None` when it holds `max` already.
    pub(crate) fn enter(self: &Arc<Self>, client: IpAddr) -> Option<Ticket> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(client).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Ticket {
            of: Arc::clone(self),
            client,
        })
    }

    /// Places `client` holds now.
    #[cfg(test)]
    fn held(&self, client: IpAddr) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(&client).copied().unwrap_or(0)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut held = self.of.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_cap_and_its_places_back_when_they_are_dropped() {
        let places = Arc::new(PerClient::new(2));
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let first = places.enter(a).unwrap();
        let second = places.enter(a).unwrap();
        assert!(places.enter(a).is_none(), "a third place over the cap");
        let other = places.enter(b).expect("another address has its own places");
        drop(first);
        assert_eq!(places.held(a), 1);
        let again = places.enter(a).expect("a dropped place is free again");
        drop((second, again, other));
        assert_eq!((places.held(a), places.held(b)), (0, 0));
        assert!(
            places.held.lock().unwrap().is_empty(),
            "no entry left behind"
        );
    }
}
