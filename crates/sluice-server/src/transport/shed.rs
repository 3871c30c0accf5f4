//! What the MCP listener's accept loop keeps to shed load (`transport/listener.rs`): every open
//! connection's counters, so that at `max_connections` the one idle the longest (nothing in
//! flight: kept alive, or its head not complete) is closed to let a new one in; the places
//! taken per peer address under `max_connections_per_ip`; and the real peer of a request a
//! trusted proxy forwards (`X-Forwarded-For`), whose requests in flight are capped the same way.
//!
//! Free when unused: without `max_connections_per_ip` no address is counted, and the registry
//! is written once when a connection opens and once when it closes, never per request.

use super::conn_io::Stats;
use axum::http::HeaderMap;
use ipnet::IpNet;
use parking_lot::Mutex;
use slab::Slab;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a connection must have been idle (or its head in progress) to be closed at the cap.
pub(super) const MIN_IDLE: Duration = Duration::from_millis(250);

/// The listener's open connections and places per address.
#[derive(Default)]
pub(super) struct Conns {
    /// Every open connection's counters, by key.
    all: Mutex<Slab<Arc<Stats>>>,
    /// Connections open per peer address (only while `max_connections_per_ip` is set).
    per_ip: Mutex<HashMap<IpAddr, u32>>,
    /// Requests in flight per forwarded address (from trusted proxies).
    forwarded: Mutex<HashMap<IpAddr, u32>>,
    /// A wake-up for the accept loop when a connection closes.
    pub(super) freed: Notify,
}

impl Conns {
    /// Register an open connection; its key, to [`Conns::remove`] it.
    pub(super) fn insert(&self, stats: Arc<Stats>) -> usize {
        self.all.lock().insert(stats)
    }

    /// Forget a closed connection.
    pub(super) fn remove(&self, key: usize) {
        self.all.lock().try_remove(key);
    }

    /// The open connection idle the longest (nothing in flight) not asked to close yet, and
    /// idle for at least [`MIN_IDLE`], now marked as asked and counted in `shedding` (whoever
    /// clears its mark takes it off). The minimum spares a connection whose head has arrived
    /// but that its thread, busy with a burst, has not read yet.
    pub(super) fn oldest_idle(&self, shedding: &AtomicUsize) -> Option<Arc<Stats>> {
        let all = self.all.lock();
        let before = Instant::now().checked_sub(MIN_IDLE)?;
        let oldest = all
            .iter()
            .filter(|(_, s)| !s.asked.load(Ordering::SeqCst))
            .filter_map(|(_, s)| Some((s.idle_since()?, s)))
            .filter(|(since, _)| *since <= before)
            .min_by_key(|(since, _)| *since)
            .map(|(_, s)| s.clone())?;
        shedding.fetch_add(1, Ordering::SeqCst);
        oldest.asked.store(true, Ordering::SeqCst);
        Some(oldest)
    }

    /// Take a connection's place for `ip` under a cap of `max`; false past it.
    pub(super) fn take_ip(&self, ip: IpAddr, max: u64) -> bool {
        take(&self.per_ip, ip, max)
    }

    /// Give back a connection's place for `ip`.
    pub(super) fn give_ip(&self, ip: IpAddr) {
        give(&self.per_ip, ip);
    }

    /// Take a request's place for the forwarded address `ip`, given back when dropped; None
    /// past `max`.
    pub(super) fn take_forwarded(self: &Arc<Self>, ip: IpAddr, max: u64) -> Option<Forwarded> {
        take(&self.forwarded, ip, max).then(|| Forwarded {
            conns: self.clone(),
            ip,
        })
    }
}

fn take(map: &Mutex<HashMap<IpAddr, u32>>, ip: IpAddr, max: u64) -> bool {
    let mut map = map.lock();
    let n = map.entry(ip).or_insert(0);
    if u64::from(*n) >= max {
        if *n == 0 {
            map.remove(&ip);
        }
        return false;
    }
    *n += 1;
    true
}

fn give(map: &Mutex<HashMap<IpAddr, u32>>, ip: IpAddr) {
    let mut map = map.lock();
    if let Some(n) = map.get_mut(&ip) {
        *n -= 1;
        if *n == 0 {
            map.remove(&ip);
        }
    }
}

/// A forwarded request's place under the cap of its address.
pub(super) struct Forwarded {
    conns: Arc<Conns>,
    ip: IpAddr,
}

impl Drop for Forwarded {
    fn drop(&mut self) {
        give(&self.conns.forwarded, self.ip);
    }
}

/// Is `ip` one of the `trusted` proxies?
pub(super) fn trusted(trusted: &[IpNet], ip: IpAddr) -> bool {
    trusted.iter().any(|net| net.contains(&ip))
}

/// The real peer of a request a trusted proxy forwarded: the last address of
/// `X-Forwarded-For` (every such header, in order) that is not itself a trusted proxy. None
/// when the header names no such address (the proxy's own request).
pub(super) fn forwarded_peer(headers: &HeaderMap, proxies: &[IpNet]) -> Option<IpAddr> {
    let mut hops: Vec<IpAddr> = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(text) = value.to_str() else { continue };
        hops.extend(
            text.split(',')
                .filter_map(|h| h.trim().parse::<IpAddr>().ok())
                .map(|ip| ip.to_canonical()),
        );
    }
    hops.into_iter().rev().find(|ip| !trusted(proxies, *ip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn the_real_peer_is_the_last_hop_not_a_trusted_proxy() {
        let proxies = nets(&["10.0.0.0/8"]);
        let mut h = HeaderMap::new();
        assert_eq!(forwarded_peer(&h, &proxies), None);
        h.append(
            "x-forwarded-for",
            HeaderValue::from_static("203.0.113.7, 198.51.100.2"),
        );
        h.append("x-forwarded-for", HeaderValue::from_static("10.1.2.3"));
        assert_eq!(
            forwarded_peer(&h, &proxies),
            Some("198.51.100.2".parse().unwrap())
        );
        let mut h = HeaderMap::new();
        h.append(
            "x-forwarded-for",
            HeaderValue::from_static("10.0.0.1, junk"),
        );
        assert_eq!(forwarded_peer(&h, &proxies), None);
        assert!(trusted(&proxies, "10.9.9.9".parse().unwrap()));
        assert!(!trusted(&proxies, "11.0.0.1".parse().unwrap()));
    }

    #[test]
    fn places_per_address_are_capped_and_given_back() {
        let conns = Arc::new(Conns::default());
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(conns.take_ip(ip, 2) && conns.take_ip(ip, 2));
        assert!(!conns.take_ip(ip, 2));
        conns.give_ip(ip);
        assert!(conns.take_ip(ip, 2));
        let a = conns
            .take_forwarded(ip, 1)
            .expect("a first forwarded request");
        assert!(conns.take_forwarded(ip, 1).is_none());
        drop(a);
        assert!(conns.take_forwarded(ip, 1).is_some());
        assert!(conns.forwarded.lock().is_empty());
    }

    #[test]
    fn the_connection_idle_the_longest_is_chosen_once() {
        let conns = Conns::default();
        let shedding = AtomicUsize::new(0);
        let old = Arc::new(Stats::new());
        std::thread::sleep(Duration::from_millis(5));
        let busy = Arc::new(Stats::new());
        busy.inflight.store(1, Ordering::SeqCst);
        let young = Arc::new(Stats::new());
        let mut keys = vec![
            conns.insert(young.clone()),
            conns.insert(busy),
            conns.insert(old.clone()),
        ];
        assert!(
            conns.oldest_idle(&shedding).is_none(),
            "none idle for MIN_IDLE yet"
        );
        std::thread::sleep(MIN_IDLE);
        keys.push(conns.insert(Arc::new(Stats::new())));
        assert!(Arc::ptr_eq(&conns.oldest_idle(&shedding).unwrap(), &old));
        assert!(Arc::ptr_eq(&conns.oldest_idle(&shedding).unwrap(), &young));
        assert!(
            conns.oldest_idle(&shedding).is_none(),
            "the busy one is never chosen, the newest not before MIN_IDLE"
        );
        assert_eq!(shedding.load(Ordering::SeqCst), 2);
        for k in keys {
            conns.remove(k);
        }
        assert!(conns.all.lock().is_empty());
    }
}
