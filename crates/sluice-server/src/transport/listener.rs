//! The MCP listener's accept loop (hyper 1, HTTP/1.1 with keep-alive and `TCP_NODELAY`), with
//! what `axum::serve` cannot give: a cap on connections served at once (past it new ones wait
//! in the kernel's backlog, not accepted), one watchdog per connection for the header and idle
//! timeouts, and the drain at shutdown.
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
use super::workers::{Place, Workers};
use crate::state::State;
use axum::body::{Body, Bytes};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;

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
    let open = Arc::new(Open::default());
    let mut tasks = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    let mut saturated = false;
    'serve: loop {
        // The cap: wait (not accepting) while it is reached.
        loop {
            let cap = st.snapshot().settings().max_connections as usize;
            if open.count.load(Ordering::SeqCst) < cap {
                break;
            }
            if !saturated {
                saturated = true;
                tracing::warn!(
                    max_connections = cap,
                    "the MCP listener is at max_connections: new connections wait until one closes"
                );
            }
            tokio::select! {
                () = open.freed.notified() => {}
                () = &mut shutdown => break 'serve,
            }
        }
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors, or the peer gave up: never end the listener for it.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        saturated = false;
        while tasks.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        // Out of this runtime's reactor, into the serving thread's.
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!("cannot hand a connection over: {e}");
                continue;
            }
        };
        open.count.fetch_add(1, Ordering::SeqCst);
        let place = workers.pick();
        let handle = place.handle.clone();
        let slot = Release {
            open: open.clone(),
            _place: place,
        };
        let (face, app) = (face.clone(), app.clone());
        tasks.spawn_on(
            async move {
                match TcpStream::from_std(stream) {
                    Ok(stream) => connection(&face, app, stream, slot).await,
                    Err(e) => tracing::debug!("cannot serve a connection: {e}"),
                }
            },
            &handle,
        );
    }
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

/// Connections open now, and a wake-up for the accept loop when one closes.
#[derive(Default)]
struct Open {
    count: AtomicUsize,
    freed: Notify,
}

/// One place under the cap and on a serving thread, given back when the connection ends.
struct Release {
    open: Arc<Open>,
    _place: Place,
}

impl Drop for Release {
    fn drop(&mut self) {
        self.open.count.fetch_sub(1, Ordering::SeqCst);
        self.open.freed.notify_one();
    }
}

async fn connection(face: &HttpFace, app: axum::Router, stream: TcpStream, _slot: Release) {
    // The connection's own face: its requests' clones of it write a count only this
    // connection's thread writes.
    let face = Arc::new(HttpFace {
        st: face.st.clone(),
        rounds: face.rounds.clone(),
    });
    let st = &face.st;
    let stats = Arc::new(Stats::new());
    let mut io = Counted::new(stream, stats.clone());
    let draining = st.rt.draining().clone();
    loop {
        // Between requests: the first bytes of the next head (nothing is in flight, so closing
        // on a timeout or at the drain loses nothing).
        if io.stash.is_empty() {
            let read = tokio::select! {
                r = io.fill(1024) => r,
                why = watchdog(st, &stats) => {
                    tracing::debug!("closing a connection: {why}");
                    return;
                }
                () = draining.cancelled() => return,
            };
            match read {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!("connection ended: {e}");
                    return;
                }
            }
        }
        if io.stash.first() == Some(&b'G') {
            let outcome = tokio::select! {
                o = bare_get::serve(&mut io, &app, &draining) => o,
                why = watchdog(st, &stats) => {
                    tracing::debug!("closing a connection: {why}");
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
        match Box::pin(with_hyper(&face, &app, io)).await {
            Some(back) => io = back,
            None => return,
        }
    }
}

/// Serve the connection with hyper (its head is in the stash) until it ends (`None`) or hands
/// the connection back between requests for a GET (`Some`: the GET is in the stash).
async fn with_hyper(face: &Arc<HttpFace>, app: &axum::Router, mut io: Counted) -> Option<Counted> {
    let st = &face.st;
    let stats = io.stats.clone();
    io.gets_elsewhere = true;
    let service = Tracked {
        app: TowerToHyperService::new(app.clone()),
        face: face.clone(),
        stats: stats.clone(),
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
                    Err(e) => tracing::debug!("connection ended: {e}"),
                }
                return None;
            }
            why = watchdog(st, &stats) => {
                // Nothing is in flight (the watchdog checks in this task, between polls of the
                // connection): closing loses nothing.
                tracing::debug!("closing a connection: {why}");
                return None;
            }
            () = draining.cancelled(), if !drained => {
                drained = true;
                Pin::new(&mut *conn).graceful_shutdown();
            }
        }
    }
}

/// Resolves when the connection passed its header or idle timeout (with nothing in flight).
async fn watchdog(st: &State, stats: &Stats) -> &'static str {
    loop {
        let (header, idle) = {
            let snap = st.snapshot();
            let s = snap.settings();
            (s.header_timeout_ms, s.idle_timeout_ms)
        };
        let now = stats.now_ms();
        let wait = if stats.inflight.load(Ordering::SeqCst) > 0 {
            header.min(idle)
        } else {
            let pending = stats.pending_since.load(Ordering::SeqCst);
            if pending != NONE {
                let due = pending.saturating_add(header);
                if now >= due {
                    return "no complete request head within header_timeout_ms";
                }
                due - now
            } else {
                let due = stats.free_since.load(Ordering::SeqCst).saturating_add(idle);
                if now >= due {
                    return "idle for idle_timeout_ms";
                }
                due - now
            }
        };
        // Look again at least every second: bytes may arrive, settings may change.
        tokio::time::sleep(Duration::from_millis(wait.clamp(1, 1000))).await;
    }
}

/// The router, counting requests in flight. A request to `/mcp` goes straight to its
/// handler with the connection's face (the router would clone itself and the gateway's face,
/// counts every connection's requests write, and box the handler's future once more).
struct Tracked {
    app: TowerToHyperService<axum::Router>,
    face: Arc<HttpFace>,
    stats: Arc<Stats>,
}

type Reply = hyper::Response<Guarded>;

impl hyper::service::Service<hyper::Request<Incoming>> for Tracked {
    type Response = Reply;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Reply, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let guard = InFlight::begin(self.stats.clone());
        if matches!(req.uri().path(), "/mcp" | "/mcp/") {
            let face = self.face.clone();
            return Box::pin(async move {
                let resp = super::http::serve(face, req.map(Body::new)).await;
                Ok(resp.map(|inner| Guarded {
                    inner,
                    guard: Some(guard),
                }))
            });
        }
        let reply = self.app.call(req);
        Box::pin(async move {
            let resp = reply.await?;
            Ok(resp.map(|inner| Guarded {
                inner,
                guard: Some(guard),
            }))
        })
    }
}

/// A response body that ends its request's time in flight when it ends or is dropped.
struct Guarded {
    inner: Body,
    guard: Option<InFlight>,
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
