//! The MCP listener's accept loop (hyper 1, HTTP/1.1 with keep-alive and `TCP_NODELAY`), with
//! what `axum::serve` cannot give: a cap on connections served at once (at it, the connection
//! idle the longest is closed for a new one; when every one is busy, new ones wait, in the
//! kernel's backlog), one watchdog per connection for the header and idle timeouts, the
//! overload actions, and the drain at shutdown.
//!
//! Each connection counts what its watchdog needs: requests in flight (from the moment hyper has
//! a whole head until the response body is dropped: an SSE stream is a request in flight for as
//! long as it is open) and when it last became request-free, and the first byte read since
//! (an IO wrapper). With no request in flight:
//!
//! - a head in progress (bytes read, or the connection just opened) must complete within
//!   `header_timeout_ms` of its first byte (of the opening, for the first request);
//! - a connection with nothing read is closed `idle_timeout_ms` after it became request-free.
//!
//! Both are read from the snapshot in force each time the watchdog looks (about once a
//! second at most), so an edit applies to open connections. Hyper's own `header_read_timeout`
//! is off: in hyper 1.12 it also runs while a kept-alive connection is idle.
//!
//! Overload actions: from `overload.at_percent` of `max_connections` open, both timeouts
//! become `overload.header_timeout_ms` / `overload.idle_timeout_ms` (when shorter); at the cap
//! the connection idle the longest is asked to close (its watchdog closes it when nothing is
//! in flight) to let the next one in, and only when none is idle do new ones wait in the
//! backlog. With `max_connections_per_ip`, a connection past the cap of its address is closed
//! as soon as it is accepted (the backlog never fills with one address's connections); a
//! trusted proxy's connections are not capped, its requests are, by the address its
//! `X-Forwarded-For` names (429). Each action is counted (`sluice_overload_actions_total`).
//!
//! Who serves: between requests the connection task reads the first bytes of the next head
//! itself. A GET (`G…`) goes to the bare GET server (`transport/bare_get.rs`), so an open GET
//! stream holds no hyper connection and its two 8 KB buffers; anything else, and a GET that
//! server does not take, to a hyper connection made then, which serves until the connection
//! ends or, between two requests, the next head is a GET: the socket wrapper keeps it, hyper
//! (idle) sees the end of the connection and hands the socket back (`poll_without_shutdown`).
//!
//! Where: each accepted connection is handed, as a plain socket, to the serving thread with
//! the fewest connections (`workers.rs`), which registers it with its own runtime and serves it
//! there to the end.
//!
//! Shutdown ([`serve`]'s future resolves): the listener is closed, `draining` is cancelled
//! (GET and listen streams end; see `transport/http.rs`), every connection is shut down
//! gracefully (an idle one at once; a busy one after the response in flight, sent with
//! `Connection: close`, so a request sent on a kept-alive connection during the drain is not
//! read), and the loop waits up to `drain_ms` for them, then drops the rest.

use super::bare_get;
use super::conn_io::{Counted, InFlight, Stats, NONE};
use super::http::{router, HttpFace};
use super::shed::{self, Conns, Forwarded};
use super::workers::{Place, Workers};
use crate::http_parts::json_error;
use crate::state::State;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use sluice_core::{codes, RpcError};
use sluice_telemetry::Action;
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::{pin, Pin};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// The listen backlog asked for (the kernel caps it at `net.core.somaxconn`).
const BACKLOG: i32 = 65_535;

/// Serve MCP on `listener`, its connections on `workers`, until `shutdown` resolves, then
/// drain (bounded by `drain_ms`).
pub(crate) async fn serve(
    face: Arc<HttpFace>,
    listener: TcpListener,
    workers: &Workers,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let st = face.st.clone();
    let app = router(face.clone());
    // A burst of connections waits in the kernel's queue rather than losing its SYNs (a lost
    // SYN is sent again a second later): the backlog as long as the kernel allows
    // (`net.core.somaxconn` caps it), not tokio's 1,024.
    if let Err(e) = socket2::SockRef::from(&listener).listen(BACKLOG) {
        tracing::debug!("cannot raise the listen backlog: {e}");
    }
    let conns = Arc::new(Conns::default());
    let overload = st.rt.overload().clone();
    let memory = tokio::spawn(sample_memory(st.clone()));
    let mut tasks = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    let mut saturated = false;
    'serve: loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or the peer gave up: never end the listener for it.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        while tasks.try_join_next().is_some() {}
        let ip = peer.ip().to_canonical();
        let (per_ip, forwarded) = {
            let snap = st.snapshot();
            let s = snap.settings();
            let proxy = !s.trusted_proxies.is_empty() && shed::trusted(&s.trusted_proxies, ip);
            (s.max_connections_per_ip.filter(|_| !proxy), proxy)
        };
        // Past the cap of its address: closed at once.
        let ip_place = match per_ip {
            Some(max) if !conns.take_ip(ip, max) => {
                overload.count(Action::PerIpRefused);
                tracing::debug!(%ip, max, "closing a connection past max_connections_per_ip");
                drop(stream);
                continue;
            }
            Some(_) => Some(ip),
            None => None,
        };
        // The cap: at it, the connection idle the longest is asked to close and this one is
        // served meanwhile (the ones asked and not closed yet do not count); when none is idle
        // (for `MIN_IDLE`), this one waits, and the next ones in the kernel's backlog.
        loop {
            let cap = st.snapshot().settings().max_connections;
            let open = overload.open.load(Ordering::SeqCst);
            let shedding = overload.shedding.load(Ordering::SeqCst);
            if open.saturating_sub(shedding) < cap as usize {
                saturated = false;
                break;
            }
            if let Some(idle) = conns.oldest_idle(&overload.shedding) {
                idle.shed.notify_one();
                continue;
            }
            if !saturated {
                saturated = true;
                tracing::warn!(
                    max_connections = cap,
                    "the MCP listener is at max_connections with no connection idle: new connections wait until one closes or idles"
                );
            }
            tokio::select! {
                () = conns.freed.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                () = &mut shutdown => break 'serve,
            }
        }
        let _ = stream.set_nodelay(true);
        let stats = Arc::new(Stats::new());
        overload.open.fetch_add(1, Ordering::SeqCst);
        let mut slot = Release {
            conns: conns.clone(),
            overload: overload.clone(),
            key: conns.insert(stats.clone()),
            stats: stats.clone(),
            ip: ip_place,
            _place: None,
        };
        // Out of this runtime's reactor, into the serving thread's.
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("cannot hand a connection over: {e}");
                continue;
            }
        };
        let place = workers.pick();
        let handle = place.handle.clone();
        slot._place = Some(place);
        let (face, app, conns) = (face.clone(), app.clone(), conns.clone());
        let peer = Peer {
            addr: peer,
            forwarded,
            conns,
        };
        tasks.spawn_on(
            async move {
                match TcpStream::from_std(stream) {
                    Ok(stream) => connection(&face, app, stream, stats, peer, slot).await,
                    Err(e) => tracing::debug!("cannot serve a connection: {e}"),
                }
            },
            &handle,
        );
    }
    memory.abort();
    drop(listener);
    drain(&st, tasks).await;
    Ok(())
}

/// Stop serving: end the streams that never end on their own, let every connection finish what
/// it has in flight, and drop those still open after `drain_ms`.
async fn drain(st: &State, mut tasks: JoinSet<()>) {
    st.rt.draining().cancel();
    st.rt.listeners().close_all();
    let within = Duration::from_millis(st.snapshot().settings().drain_ms);
    tracing::info!(
        connections = tasks.len(),
        "draining: no new connections; calls in flight may finish within {} ms",
        within.as_millis()
    );
    let all = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(within, all).await.is_err() {
        tracing::warn!(
            connections = tasks.len(),
            "the drain time passed: closing the connections still open"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

/// One place under the cap (and its address's), registered for shedding and on a serving
/// thread, given back when the connection ends.
struct Release {
    conns: Arc<Conns>,
    overload: Arc<crate::overload::Overload>,
    key: usize,
    stats: Arc<Stats>,
    ip: Option<IpAddr>,
    _place: Option<Place>,
}

impl Drop for Release {
    fn drop(&mut self) {
        self.conns.remove(self.key);
        if self.stats.asked.swap(false, Ordering::SeqCst) {
            self.overload.shedding.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some(ip) = self.ip {
            self.conns.give_ip(ip);
        }
        self.overload.open.fetch_sub(1, Ordering::SeqCst);
        self.conns.freed.notify_one();
    }
}

/// Where a connection comes from: a trusted proxy's requests are capped by the address they
/// are forwarded for.
struct Peer {
    /// The peer's address (for the log).
    addr: std::net::SocketAddr,
    forwarded: bool,
    conns: Arc<Conns>,
}

/// Drop the replay buffers of finished streams, the least recently used sessions' first, until
/// they held `excess` bytes; how many were dropped.
fn shed_replays(st: &State, excess: u64) -> u64 {
    let mut sessions = st.rt.sessions().all();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.idle_secs()));
    let (mut dropped, mut freed) = (0, 0);
    for session in sessions {
        if freed >= excess {
            break;
        }
        if let Some(http) = session.http() {
            let (n, bytes) = http.drop_finished();
            dropped += n;
            freed += bytes;
        }
    }
    dropped
}

/// Read the resident memory every [`crate::overload::SAMPLE_EVERY`] while `max_memory_mb` is
/// set; past it, drop the replay buffers of finished streams, least recently used sessions
/// first, until what they held covers the excess.
async fn sample_memory(st: Arc<State>) {
    let overload = st.rt.overload().clone();
    loop {
        tokio::time::sleep(crate::overload::SAMPLE_EVERY).await;
        let Some(mb) = st.snapshot().settings().max_memory_mb else {
            // No ceiling (or no longer one, after a reload): nothing sampled, nothing over.
            overload.sampled(0, None);
            continue;
        };
        let Some(resident) = crate::overload::resident_bytes() else {
            continue;
        };
        let max = mb.saturating_mul(1024 * 1024);
        if overload.sampled(resident, Some(max)) {
            let dropped = shed_replays(&st, resident - max);
            if dropped > 0 {
                overload.actions.add(Action::ReplayShed, dropped);
                tracing::warn!(
                    resident_mb = resident / (1024 * 1024),
                    max_memory_mb = mb,
                    dropped,
                    "past max_memory_mb: replay buffers dropped, new sessions refused"
                );
            }
        }
    }
}

async fn connection(
    face: &HttpFace,
    app: axum::Router,
    stream: TcpStream,
    stats: Arc<Stats>,
    peer: Peer,
    _slot: Release,
) {
    // The connection's own face: its requests' clones of it write a count only this
    // connection's thread writes.
    let face = Arc::new(HttpFace {
        st: face.st.clone(),
        rounds: face.rounds.clone(),
    });
    let st = &face.st;
    let peer = Arc::new(peer);
    let mut io = Counted::new(stream, stats.clone());
    let draining = st.rt.draining().clone();
    loop {
        // Between requests: the first bytes of the next head (nothing is in flight, so closing
        // on a timeout or at the drain loses nothing).
        if io.stash.is_empty() {
            let read = tokio::select! {
                r = io.fill(1024) => r,
                why = watchdog(st, &stats) => {
                    tracing::debug!(peer = %peer.addr, "closing a connection: {why}");
                    return;
                }
                () = draining.cancelled() => return,
            };
            match read {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(peer = %peer.addr, "connection ended: {e}");
                    return;
                }
            }
        }
        if io.stash.first() == Some(&b'G') {
            let outcome = tokio::select! {
                o = bare_get::serve(&mut io, &app, &draining) => o,
                why = watchdog(st, &stats) => {
                    tracing::debug!(peer = %peer.addr, "closing a connection: {why}");
                    return;
                }
            };
            match outcome {
                bare_get::Outcome::Again => continue,
                bare_get::Outcome::Close => return,
                bare_get::Outcome::Hyper => {}
            }
        }
        // Boxed: hyper's phase need not enlarge an idle GET stream's task.
        match Box::pin(with_hyper(&face, &app, io, &peer)).await {
            Some(back) => io = back,
            None => return,
        }
    }
}

/// Serve the connection with hyper (its head is in the stash) until it ends (`None`) or hands
/// the connection back between requests for a GET (`Some`: the GET is in the stash).
async fn with_hyper(
    face: &Arc<HttpFace>,
    app: &axum::Router,
    mut io: Counted,
    peer: &Arc<Peer>,
) -> Option<Counted> {
    let st = &face.st;
    let stats = io.stats.clone();
    io.gets_elsewhere = true;
    let service = Tracked {
        app: TowerToHyperService::new(app.clone()),
        face: face.clone(),
        stats: stats.clone(),
        peer: peer.forwarded.then(|| peer.clone()),
    };
    let mut builder = http1::Builder::new();
    builder.keep_alive(true).header_read_timeout(None);
    // Boxed: an idle GET stream's task need not carry hyper's connection state.
    let mut conn = Box::new(builder.serve_connection(TokioIo::new(io), service));
    let draining = st.rt.draining().clone();
    let mut drained = false;
    loop {
        tokio::select! {
            r = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => {
                let parts = conn.into_parts();
                let mut io = parts.io.into_inner();
                io.gets_elsewhere = false;
                if std::mem::take(&mut io.handed_back) && !drained && !draining.is_cancelled() {
                    let mut stash = parts.read_buf.to_vec();
                    stash.append(&mut io.stash);
                    io.stash = stash;
                    return Some(io);
                }
                match r {
                    // Ended as hyper ends a connection: the socket is shut down.
                    Ok(()) => {
                        let _ = io.shutdown().await;
                    }
                    Err(e) => tracing::debug!(peer = %peer.addr, "connection ended: {e}"),
                }
                return None;
            }
            why = watchdog(st, &stats) => {
                // Nothing is in flight (the watchdog checks in this task, between polls of the
                // connection): closing loses nothing.
                tracing::debug!(peer = %peer.addr, "closing a connection: {why}");
                return None;
            }
            () = draining.cancelled(), if !drained => {
                drained = true;
                Pin::new(&mut *conn).graceful_shutdown();
            }
        }
    }
}

/// Resolves when the connection passed its header or idle timeout (with nothing in flight),
/// or was asked to close at the cap with nothing in flight.
async fn watchdog(st: &State, stats: &Stats) -> &'static str {
    let overload = st.rt.overload();
    loop {
        // The timeouts in force, and the shorter ones under overload.
        let ((header, idle), (usual_header, usual_idle)) = {
            let snap = st.snapshot();
            let s = snap.settings();
            let usual = (s.header_timeout_ms, s.idle_timeout_ms);
            if overload.pressed(s) {
                let o = &s.overload;
                (
                    (
                        usual.0.min(o.header_timeout_ms),
                        usual.1.min(o.idle_timeout_ms),
                    ),
                    usual,
                )
            } else {
                (usual, usual)
            }
        };
        let now = stats.now_ms();
        let wait = if stats.inflight.load(Ordering::SeqCst) > 0 {
            header.min(idle)
        } else {
            let pending = stats.pending_since.load(Ordering::SeqCst);
            if pending != NONE {
                let due = pending.saturating_add(header);
                if now >= due {
                    if now < pending.saturating_add(usual_header) {
                        overload.count(Action::HeaderTimeoutShortened);
                        return "no complete request head within the overload header timeout";
                    }
                    return "no complete request head within header_timeout_ms";
                }
                due - now
            } else {
                let free = stats.free_since.load(Ordering::SeqCst);
                let due = free.saturating_add(idle);
                if now >= due {
                    if now >= free.saturating_add(usual_idle) {
                        return "idle for idle_timeout_ms";
                    }
                    // Connections idle together close only as many as end the overload.
                    let asked = stats.asked.load(Ordering::SeqCst);
                    if asked || overload.claim_close(st.snapshot().settings()) {
                        if !asked && stats.asked.swap(true, Ordering::SeqCst) {
                            overload.shedding.fetch_sub(1, Ordering::SeqCst);
                        }
                        overload.count(Action::IdleTimeoutShortened);
                        return "idle for the overload idle timeout";
                    }
                    // No longer under overload: the usual idle timeout holds.
                    usual_idle.saturating_add(free).saturating_sub(now)
                } else {
                    due - now
                }
            }
        };
        // Look again at least every second: bytes may arrive, settings may change.
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(wait.clamp(1, 1000))) => {}
            () = stats.shed.notified() => {
                if stats.inflight.load(Ordering::SeqCst) == 0 {
                    overload.count(Action::ShedAtCap);
                    return "at max_connections, idle the longest";
                }
                if stats.asked.swap(false, Ordering::SeqCst) {
                    overload.shedding.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }
}

/// The router, counting requests in flight. A request to `/mcp` or to an endpoint's
/// `/mcp/<name>` goes straight to its handler with the connection's face (the router would
/// clone itself and the gateway's face, counts every connection's requests write, box the
/// handler's future once more, and, for an endpoint, extract the name as a path parameter).
struct Tracked {
    app: TowerToHyperService<axum::Router>,
    face: Arc<HttpFace>,
    stats: Arc<Stats>,
    /// A trusted proxy's connection: its requests are capped by the forwarded address.
    peer: Option<Arc<Peer>>,
}

type Reply = hyper::Response<Guarded>;

impl hyper::service::Service<hyper::Request<Incoming>> for Tracked {
    type Response = Reply;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Reply, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let guard = InFlight::begin(self.stats.clone());
        let forwarded = match &self.peer {
            None => None,
            Some(peer) => match forwarded_place(&self.face.st, peer, req.headers()) {
                Ok(place) => place,
                Err(refused) => {
                    let resp = (*refused).map(|inner| Guarded {
                        inner,
                        guard: Some(guard),
                        _forwarded: None,
                    });
                    return Box::pin(std::future::ready(Ok(resp)));
                }
            },
        };
        if matches!(req.uri().path(), "/mcp" | "/mcp/") {
            let face = self.face.clone();
            return Box::pin(async move {
                let resp = super::http::serve(face, req.map(Body::new)).await;
                Ok(resp.map(|inner| Guarded {
                    inner,
                    guard: Some(guard),
                    _forwarded: forwarded,
                }))
            });
        }
        // So does a request to an endpoint, `/mcp/<name>` (a name as mcp/endpoints.json allows
        // them; anything else is the router's, as before).
        if let Some(name) = endpoint_in(req.uri().path()) {
            let (face, snap) = (
                self.face.clone(),
                super::http::endpoint_snapshot(&self.face, name),
            );
            return Box::pin(async move {
                let resp = match snap {
                    Ok(snap) => super::http::serve_from(face, req.map(Body::new), snap).await,
                    Err(not_found) => *not_found,
                };
                Ok(resp.map(|inner| Guarded {
                    inner,
                    guard: Some(guard),
                    _forwarded: forwarded,
                }))
            });
        }
        let reply = self.app.call(req);
        Box::pin(async move {
            let resp = reply.await?;
            Ok(resp.map(|inner| Guarded {
                inner,
                guard: Some(guard),
                _forwarded: forwarded,
            }))
        })
    }
}

/// The endpoint name of a path `/mcp/<name>`, when the name is one `mcp/endpoints.json` could
/// have (ASCII letters, digits, `-` and `_`; no percent-encoding, no further segment).
fn endpoint_in(path: &str) -> Option<&str> {
    path.strip_prefix("/mcp/").filter(|name| {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// A request from a trusted proxy takes a place under `max_connections_per_ip` for the address
/// its `X-Forwarded-For` names; past it, 429.
fn forwarded_place(
    st: &State,
    peer: &Arc<Peer>,
    headers: &axum::http::HeaderMap,
) -> Result<Option<Forwarded>, Box<axum::response::Response>> {
    let snap = st.snapshot();
    let s = snap.settings();
    let Some(max) = s.max_connections_per_ip else {
        return Ok(None);
    };
    let Some(ip) = shed::forwarded_peer(headers, &s.trusted_proxies) else {
        return Ok(None);
    };
    match peer.conns.take_forwarded(ip, max) {
        Some(place) => Ok(Some(place)),
        None => {
            st.rt.overload().count(Action::PerIpForwardedRefused);
            tracing::debug!(%ip, max, "a forwarded request past max_connections_per_ip");
            let error = RpcError::new(
                codes::RATE_LIMITED,
                format!("Too many requests from {ip} at once ({max}, max_connections_per_ip)"),
            )
            .with_data(serde_json::json!({"limit": "max_connections_per_ip", "max": max, "retryAfterMs": 1000}));
            let mut r = json_error(StatusCode::TOO_MANY_REQUESTS, error, None);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            Err(Box::new(r))
        }
    }
}

/// A response body that ends its request's time in flight when it ends or is dropped.
struct Guarded {
    inner: Body,
    guard: Option<InFlight>,
    /// A forwarded request's place under its address's cap, held as long as the request.
    _forwarded: Option<Forwarded>,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = r {
            self.guard.take();
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_an_endpoint_name_goes_straight_to_the_handler() {
        assert_eq!(super::endpoint_in("/mcp/support"), Some("support"));
        assert_eq!(super::endpoint_in("/mcp/coding-2_b"), Some("coding-2_b"));
        for path in [
            "/mcp",
            "/mcp/",
            "/mcp/a/b",
            "/mcp/sup%70ort",
            "/mcpx/a",
            "/admin/a",
        ] {
            assert_eq!(super::endpoint_in(path), None, "{path}");
        }
    }
}
