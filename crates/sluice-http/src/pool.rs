//! Keep-alive HTTP/1.1 connections to one plain `http://` host, on hyper's connection API
//! ([`HostPool`]): a request takes an idle connection (or opens one), and the connection goes
//! back when its response has been read to the end.
//!
//! Why not hyper-util's pooled client: it finds the pool of a request by hashing its scheme
//! and authority on every request, and boxes a 3 KB future per request; a caller's pool is
//! known when it is made (an upstream's connection, a hook), so here a request costs a lock
//! and a pop.
//!
//! Per thread: a connection's I/O runs in a task on the runtime that opened it, so an idle
//! connection is kept with the serving thread that opened it (`sluice_core::worker`), in that
//! thread's own list, and taken again only there: a call's round trip to a host never wakes
//! another thread, and its take and put never write a line another thread uses. A lent
//! connection holds its thread's list (its own `Arc`), not the pool, and a request's target
//! and `Host` are copied, not shared: a call writes no reference count that another thread's
//! calls write.

use crate::error::Error;
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, HOST};
use hyper::{Request, Response};
use parking_lot::Mutex;
use sluice_core::worker::{Padded, PerThread};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Idle connections kept per upstream host and serving thread (more are closed).
const MAX_IDLE: usize = 64;
/// An idle connection unused for this long is closed instead of reused.
const IDLE_FOR: Duration = Duration::from_secs(90);

type Sender = SendRequest<Full<Bytes>>;

/// The connections to one `host:port`.
pub(crate) struct HostPool {
    /// Where to connect (`host:port`).
    authority: String,
    /// The `Host` header of its requests.
    host: Box<str>,
    /// Each serving thread's idle connections, the most recently used last.
    idle: PerThread<IdleList>,
}

/// One serving thread's idle connections to a host.
type IdleList = Arc<Padded<Mutex<Vec<Idle>>>>;

/// An idle connection.
struct Idle {
    sender: Sender,
    since: Instant,
    /// The serving thread whose runtime runs its I/O.
    home: u32,
}

/// A connection lent to one request: returned to its pool when the response has been read
/// to the end (or closed, when it never is).
pub(crate) struct Lease {
    sender: Option<Sender>,
    /// The list it goes back to: its thread's.
    list: IdleList,
    home: u32,
    /// The response's body was read to the end.
    done: bool,
}

impl HostPool {
    /// The pool of `authority` (`host:port`) for requests whose `Host` is `host`, shared by
    /// every connection to it.
    pub(crate) fn of(authority: &str, host: &str) -> Result<Arc<HostPool>, Error> {
        type Pools = Mutex<HashMap<(String, String), Weak<HostPool>>>;
        static POOLS: OnceLock<Pools> = OnceLock::new();
        let key = (authority.to_string(), host.to_string());
        let mut pools = POOLS.get_or_init(Default::default).lock();
        if let Some(p) = pools.get(&key).and_then(Weak::upgrade) {
            return Ok(p);
        }
        pools.retain(|_, p| p.strong_count() > 0);
        let pool = Arc::new(HostPool {
            authority: authority.to_string(),
            host: HeaderValue::from_str(host)
                .map_err(|source| Error::BadHost {
                    host: host.to_string(),
                    source,
                })
                .map(|_| host.into())?,
            idle: PerThread::default(),
        });
        pools.insert(key, Arc::downgrade(&pool));
        Ok(pool)
    }

    /// Send `req` (its URI already in origin form) and wait for the head of the response. A
    /// request that an idle connection could not take (the upstream closed it meanwhile) goes
    /// on a new connection.
    pub(crate) async fn send(
        &self,
        mut req: Request<Full<Bytes>>,
    ) -> Result<(Response<hyper::body::Incoming>, Lease), Error> {
        if !req.headers().contains_key(HOST) {
            // A copy: a clone of one shared value would write its count on every call.
            let host = HeaderValue::from_str(&self.host).map_err(|source| Error::BadHost {
                host: self.host.to_string(),
                source,
            })?;
            req.headers_mut().insert(HOST, host);
        }
        let home = sluice_core::worker::current();
        while let Some(mut sender) = self.take(home) {
            match sender.try_send_request(req).await {
                Ok(resp) => return Ok((resp, self.lease(sender, home))),
                Err(mut e) => match e.take_message() {
                    // Not sent: the connection was gone; try the next.
                    Some(back) => req = back,
                    None => return Err(e.into_error().into()),
                },
            }
        }
        // Boxed: opening a connection is rare, and its future is large.
        let mut sender = Box::pin(self.connect()).await?;
        let resp = sender.send_request(req).await?;
        Ok((resp, self.lease(sender, home)))
    }

    fn lease(&self, sender: Sender, home: u32) -> Lease {
        Lease {
            sender: Some(sender),
            list: self.idle.of(home).clone(),
            home,
            done: false,
        }
    }

    /// An idle connection of thread `home` ready for a request, if one is left (the stale
    /// ones met on the way are closed: one idle for `IDLE_FOR`, and every one older).
    fn take(&self, home: u32) -> Option<Sender> {
        let mut idle = self.idle.of(home).lock();
        let now = Instant::now();
        let mut i = idle.len();
        while i > 0 {
            i -= 1;
            let c = &idle[i];
            if now.saturating_duration_since(c.since) >= IDLE_FOR {
                idle.drain(..=i);
                return None;
            }
            if !c.sender.is_ready() {
                idle.remove(i);
                continue;
            }
            // Two threads share a list only past `worker::SLOTS` threads.
            if c.home == home {
                return Some(idle.remove(i).sender);
            }
        }
        None
    }

    /// Open a connection; its I/O runs in a task of its own.
    async fn connect(&self) -> Result<Sender, Error> {
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|source| Error::Connect {
                authority: self.authority.clone(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        let host = self.authority.clone();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%host, "HTTP connection ended: {e}");
            }
        });
        Ok(sender)
    }
}

/// Keep `sender` in `list` for the next request (the most recently used is taken first).
fn put(list: &IdleList, sender: Sender, home: u32) {
    let mut idle = list.lock();
    if idle.len() < MAX_IDLE {
        idle.push(Idle {
            sender,
            since: Instant::now(),
            home,
        });
    }
}

impl Lease {
    /// The response's body has been read to the end.
    pub(crate) fn finish(&mut self) {
        self.done = true;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut sender) = self.sender.take() else {
            return;
        };
        // A body not read to the end leaves the connection unusable: it closes.
        if !self.done || sender.is_closed() {
            return;
        }
        if sender.is_ready() {
            put(&self.list, sender, self.home);
            return;
        }
        // The connection's task has not yet seen the end of the response: it goes back once
        // it has.
        let (list, home) = (self.list.clone(), self.home);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if sender.ready().await.is_ok() {
                    put(&list, sender, home);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback HTTP/1.1 server that answers each request with `body` and counts the
    /// connections it accepted; with `close_after_one`, it closes each connection after its
    /// first reply (keep-alive announced, as a server that restarted would leave it).
    async fn server(close_after_one: bool) -> (String, Arc<AtomicUsize>) {
        serve(
            close_after_one,
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        )
        .await
    }

    /// [`server`] answering each request with `reply`, as written.
    async fn serve(close_after_one: bool, reply: &'static [u8]) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        let mut head = Vec::new();
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        if s.write_all(reply).await.is_err() || close_after_one {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    fn get(path: &str) -> Request<Full<Bytes>> {
        Request::builder()
            .uri(path)
            .body(Full::new(Bytes::new()))
            .expect("a request")
    }

    async fn read(pool: &Arc<HostPool>) -> String {
        let (resp, mut lease) = pool.send(get("/mcp")).await.expect("a reply");
        let body = resp.into_body().collect().await.expect("a body").to_bytes();
        lease.finish();
        drop(lease);
        String::from_utf8(body.to_vec()).expect("text")
    }

    /// Requests one after another share one connection.
    #[tokio::test]
    async fn a_connection_is_reused_once_its_response_is_read() {
        let (addr, accepted) = server(false).await;
        let pool = HostPool::of(&addr, &addr).expect("a pool");
        for _ in 0..5 {
            assert_eq!(read(&pool).await, "ok");
            // Back in the pool once the connection's task has seen the end of the reply.
            for _ in 0..200 {
                if !idle_homes(&pool).is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    /// The serving thread of each idle connection, slot by slot.
    fn idle_homes(pool: &HostPool) -> Vec<u32> {
        (0..sluice_core::worker::SLOTS as u32)
            .flat_map(|n| {
                pool.idle
                    .of(n)
                    .lock()
                    .iter()
                    .map(|c| c.home)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Waits (bounded) until `pool` holds `n` idle connections.
    async fn idle_count(pool: &Arc<HostPool>, n: usize) {
        for _ in 0..200 {
            if idle_homes(pool).len() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the pool never held {n} idle connection(s)");
    }

    /// An idle connection is taken again only by the serving thread that opened it: another
    /// thread opens its own, and each thread then reuses its own.
    #[tokio::test]
    async fn idle_connections_are_kept_per_serving_thread() {
        let (addr, accepted) = server(false).await;
        let pool = HostPool::of(&addr, &addr).expect("a pool");
        assert_eq!(read(&pool).await, "ok");
        idle_count(&pool, 1).await;
        sluice_core::worker::mark(1);
        assert_eq!(read(&pool).await, "ok");
        idle_count(&pool, 2).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        assert_eq!(idle_homes(&pool), [0, 1]);
        assert_eq!(pool.idle.of(1).lock().len(), 1, "in thread 1's own list");
        assert_eq!(read(&pool).await, "ok");
        sluice_core::worker::mark(0);
        assert_eq!(read(&pool).await, "ok");
        idle_count(&pool, 2).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    /// A connection the upstream closed while it was idle is not used; the request goes on
    /// a new one and succeeds.
    #[tokio::test]
    async fn a_connection_closed_while_idle_is_replaced() {
        let (addr, accepted) = server(true).await;
        let pool = HostPool::of(&addr, &addr).expect("a pool");
        assert_eq!(read(&pool).await, "ok");
        // Until its task has seen the server close it.
        for _ in 0..200 {
            if pool.idle.mine().lock().iter().all(|c| c.sender.is_closed()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(read(&pool).await, "ok");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    /// A response whose body was not read to the end does not give its connection back.
    #[tokio::test]
    async fn an_unread_body_closes_its_connection() {
        let (addr, accepted) = server(false).await;
        let pool = HostPool::of(&addr, &addr).expect("a pool");
        let (_resp, lease) = pool.send(get("/mcp")).await.expect("a reply");
        drop(lease);
        assert!(idle_homes(&pool).is_empty());
        assert_eq!(read(&pool).await, "ok");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    /// A body read as a stream (an SSE reply) gives its connection back when the stream ends,
    /// through the wire's client.
    #[tokio::test]
    async fn a_streamed_body_gives_its_connection_back_at_its_end() {
        use futures_util::StreamExt;
        let (addr, accepted) = serve(
            false,
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n7\r\ndata: 1\r\n0\r\n\r\n",
        )
        .await;
        let url: reqwest::Url = format!("http://{addr}/mcp").parse().expect("a URL");
        let client = crate::client::Client::for_url(&url);
        // The same pool as the client's (one per host).
        let pool = HostPool::of(&addr, &addr).expect("a pool");
        for _ in 0..3 {
            let reply = client
                .send(hyper::Method::GET, &url, Default::default(), None)
                .await
                .expect("a reply");
            let chunks: Vec<_> = reply.stream().collect().await;
            assert_eq!(chunks.len(), 1);
            assert_eq!(chunks[0].as_deref().expect("data"), b"data: 1");
            // Back in the pool once the connection's task has seen the end of the reply.
            for _ in 0..200 {
                if !idle_homes(&pool).is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(
                idle_homes(&pool).len(),
                1,
                "the connection is idle in its pool"
            );
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    /// Nothing listens: the error names the address, and keeps the refusal as its source.
    #[tokio::test]
    async fn a_refused_connection_names_the_address() {
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").to_string()
        };
        let pool = HostPool::of(&addr, &addr).expect("a pool");
        let err = pool.send(get("/mcp")).await.err().expect("refused");
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("connecting to {addr} failed: ")),
            "{text}"
        );
        let Error::Connect { authority, source } = &err else {
            panic!("not a connect error: {err:?}")
        };
        assert_eq!(authority, &addr);
        assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
        // The text with its causes says the cause once.
        assert_eq!(sluice_core::error::with_causes(&err), text);
    }
}
