//! One MCP connection's socket and the counters its watchdog reads (`transport/listener.rs`):
//! requests in flight, when the connection last became request-free, the first byte read since,
//! and the accept loop's call to close it at the cap (`transport/shed.rs`); and the hand-over between hyper and the bare GET server (`transport/bare_get.rs`): bytes read
//! but not yet served wait in a stash, served first to whoever reads next.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// `pending_since` when nothing was read since the connection became request-free.
pub(super) const NONE: u64 = u64::MAX;

/// What a connection's watchdog reads (ms counted from the connection's opening).
pub(super) struct Stats {
    opened: Instant,
    /// Requests whose head arrived and whose response body is not dropped yet.
    pub(super) inflight: AtomicUsize,
    /// When the connection last became request-free.
    pub(super) free_since: AtomicU64,
    /// The first byte read since then (`NONE`: none). The opening counts as one.
    pub(super) pending_since: AtomicU64,
    /// The accept loop asks the connection to close (at the cap, as the one idle the longest);
    /// its watchdog does when nothing is in flight.
    pub(super) shed: Notify,
    /// Asked already (not chosen twice while it closes).
    pub(super) asked: AtomicBool,
}

impl Stats {
    pub(super) fn new() -> Stats {
        Stats {
            opened: Instant::now(),
            inflight: AtomicUsize::new(0),
            free_since: AtomicU64::new(0),
            pending_since: AtomicU64::new(0),
            shed: Notify::new(),
            asked: AtomicBool::new(false),
        }
    }

    pub(super) fn now_ms(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64
    }

    /// Since when the connection has had nothing in flight (its head in progress, or idle
    /// kept alive); None while a request is in flight.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        if self.inflight.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let pending = self.pending_since.load(Ordering::SeqCst);
        let ms = if pending != NONE {
            pending
        } else {
            self.free_since.load(Ordering::SeqCst)
        };
        Some(self.opened + Duration::from_millis(ms))
    }
}

/// A request in flight, from its head to the end (or drop) of its response body.
pub(super) struct InFlight(Arc<Stats>);

impl InFlight {
    pub(super) fn begin(stats: Arc<Stats>) -> InFlight {
        stats.inflight.fetch_add(1, Ordering::SeqCst);
        stats.pending_since.store(NONE, Ordering::SeqCst);
        InFlight(stats)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.free_since.store(self.0.now_ms(), Ordering::SeqCst);
            self.0.pending_since.store(NONE, Ordering::SeqCst);
        }
    }
}

/// The connection's socket: notes the first byte of each request head; serves the stash first.
pub(super) struct Counted {
    pub(super) inner: TcpStream,
    pub(super) stats: Arc<Stats>,
    /// Bytes read and not served yet (the start of the next request).
    pub(super) stash: Vec<u8>,
    /// While hyper serves: a request head that starts with `G` (a GET, which the bare GET
    /// server takes) is kept in the stash, and hyper reads the end of the connection instead.
    pub(super) gets_elsewhere: bool,
    /// Set when that happened: the connection was handed back, not ended.
    pub(super) handed_back: bool,
}

impl Counted {
    pub(super) fn new(inner: TcpStream, stats: Arc<Stats>) -> Counted {
        Counted {
            inner,
            stats,
            stash: Vec::new(),
            gets_elsewhere: false,
            handed_back: false,
        }
    }

    /// Note bytes read from the socket; true when they are the first of a request head.
    fn note_read(&self) -> bool {
        if self.stats.inflight.load(Ordering::SeqCst) != 0 {
            return false;
        }
        let now = self.stats.now_ms();
        self.stats
            .pending_since
            .compare_exchange(NONE, now, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Read more from the socket onto the end of the stash (at most `max` bytes); 0 at its end.
    pub(super) async fn fill(&mut self, max: usize) -> std::io::Result<usize> {
        let start = self.stash.len();
        self.stash.resize(start + max, 0);
        let r = loop {
            self.inner.readable().await?;
            match self.inner.try_read(&mut self.stash[start..]) {
                Ok(n) => break Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => break Err(e),
            }
        };
        let n = *r.as_ref().unwrap_or(&0);
        self.stash.truncate(start + n);
        if n > 0 {
            self.note_read();
        }
        r
    }

    /// Drop the first `n` bytes of the stash (served); its memory goes when it is empty.
    pub(super) fn consume(&mut self, n: usize) {
        if n >= self.stash.len() {
            self.stash = Vec::new();
        } else {
            self.stash.drain(..n);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.stash.is_empty() {
            let n = self.stash.len().min(buf.remaining());
            buf.put_slice(&self.stash[..n]);
            self.consume(n);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before
            && self.note_read()
            && self.gets_elsewhere
            && buf.filled()[before] == b'G'
        {
            // Between requests, a GET: hyper sees the end of the connection (it is idle, so it
            // ends at once and writes nothing), the bytes wait for the bare GET server.
            let got = buf.filled()[before..].to_vec();
            self.stash = got;
            buf.set_filled(before);
            self.handed_back = true;
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
