//! SSE toward clients: the one frame encoder ([`Frame`], [`keep_alive`]) both eras write with;
//! replayable streams, where every message sent to a client over SSE is kept (bounded) in a
//! [`StreamBuf`] under an event id `<stream>-<seq>`, so a client that lost the connection can
//! resume with `Last-Event-ID` and get only what it missed on that stream; and [`live`], the
//! unreplayable stream of a 2026-07-28 response (no ids, nothing kept).
//!
//! Hand-written rather than `axum::response::sse`: the replay buffer keeps events already
//! framed, and the frames must come out byte for byte as clients and the conformance suite see
//! them today (`event:`, `id:`, `retry:`, `data:`, in that order).

use bytes::Bytes;
use futures_util::Stream;
use parking_lot::Mutex;
use sluice_core::Message;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// One SSE event: each field present is written on its own line in the order `event`, `id`,
/// `retry`, `data` (one `data:` line per line of the data), then the blank line that ends it.
#[derive(Default)]
pub(crate) struct Frame<'a> {
    /// The event type.
    pub event: Option<&'a str>,
    /// The event id (`Last-Event-ID` on reconnection).
    pub id: Option<&'a str>,
    /// The reconnection hint, ms.
    pub retry: Option<u64>,
    /// The payload.
    pub data: Option<&'a str>,
}

impl Frame<'_> {
    /// A message event (`event: message`), with this id when it has one.
    pub(crate) fn message<'a>(id: Option<&'a str>, json: &'a str) -> Frame<'a> {
        Frame {
            event: Some("message"),
            id,
            retry: None,
            data: Some(json),
        }
    }

    /// Append the frame to `out`.
    pub(crate) fn write(&self, out: &mut String) {
        if let Some(e) = self.event {
            out.push_str("event: ");
            out.push_str(e);
            out.push('\n');
        }
        if let Some(id) = self.id {
            out.push_str("id: ");
            out.push_str(id);
            out.push('\n');
        }
        if let Some(ms) = self.retry {
            out.push_str("retry: ");
            out.push_str(&ms.to_string());
            out.push('\n');
        }
        if let Some(data) = self.data {
            for line in data.split('\n') {
                out.push_str("data: ");
                out.push_str(line.strip_suffix('\r').unwrap_or(line));
                out.push('\n');
            }
        }
        out.push('\n');
    }

    /// The frame as bytes.
    pub(crate) fn to_bytes(&self) -> Bytes {
        let mut out = String::new();
        self.write(&mut out);
        Bytes::from(out)
    }
}

/// A comment frame (ignored by clients).
pub(crate) fn comment(text: &'static str) -> Bytes {
    Bytes::from(format!(": {text}\n\n"))
}

/// The comment sent on a silent stream so that proxies keep it open.
pub(crate) fn keep_alive() -> Bytes {
    Bytes::from_static(b": keep-alive\n\n")
}

/// An SSE body of messages, not kept for replay: `first`, then each message `rx` yields (with a
/// keep-alive comment after each silent `keepalive`), ending when the sender is dropped. When
/// the client closes the stream the body is dropped, and with it the receiver: the sender sees
/// that (`closed()`), which is how a closed stream cancels a 2026-07-28 call.
pub(crate) fn live(
    rx: mpsc::UnboundedReceiver<Message>,
    first: Option<Message>,
    keepalive: Duration,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    let tick = tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
    let frame = |m: &Message| Frame::message(None, &m.to_json()).to_bytes();
    futures_util::stream::unfold(
        (rx, first, tick),
        move |(mut rx, mut first, mut tick)| async move {
            if let Some(m) = first.take() {
                return Some((Ok(frame(&m)), (rx, None, tick)));
            }
            tokio::select! {
                m = rx.recv() => m.map(|m| (Ok(frame(&m)), (rx, None, tick))),
                _ = tick.tick() => Some((Ok(keep_alive()), (rx, None, tick))),
            }
        },
    )
}

struct BufInner {
    events: VecDeque<(u64, Arc<str>)>,
    /// Bytes of data in `events`.
    bytes: usize,
    next_seq: u64,
    done: bool,
    /// Readers opened before the latest pause end (SSE polling).
    epoch: u64,
    /// The reconnection hint sent to clients, ms.
    retry: Option<u64>,
}

/// One SSE stream's events, kept for replay: at most `cap` events and `max_bytes` bytes of data
/// (the oldest beyond either go; the newest always stays, so a reader attached now gets it).
/// A `Last-Event-ID` older than what is kept replays what is kept, as a reader that fell behind.
pub(crate) struct StreamBuf {
    id: u64,
    cap: usize,
    max_bytes: usize,
    inner: Mutex<BufInner>,
    notify: Notify,
}

impl StreamBuf {
    /// A new, empty stream numbered `id`, keeping at most `cap` events and `max_bytes` bytes.
    pub(crate) fn new(id: u64, cap: usize, max_bytes: usize) -> Arc<StreamBuf> {
        Arc::new(StreamBuf {
            id,
            cap: cap.max(1),
            max_bytes,
            inner: Mutex::new(BufInner {
                events: VecDeque::new(),
                bytes: 0,
                next_seq: 1,
                done: false,
                epoch: 0,
                retry: None,
            }),
            notify: Notify::new(),
        })
    }

    /// Append a message.
    pub(crate) fn push(&self, msg: &Message) {
        let data: Arc<str> = msg.to_json().into();
        {
            let mut g = self.inner.lock();
            if g.done {
                return;
            }
            let seq = g.next_seq;
            g.next_seq += 1;
            g.bytes += data.len();
            g.events.push_back((seq, data));
            while g.events.len() > self.cap || (g.bytes > self.max_bytes && g.events.len() > 1) {
                if let Some((_, old)) = g.events.pop_front() {
                    g.bytes -= old.len();
                }
            }
        }
        self.notify.notify_waiters();
    }

    /// Append an event numbered elsewhere (a cluster's store numbers a GET stream's events):
    /// kept when it is newer than the last one here, else ignored.
    pub(crate) fn push_at(&self, seq: u64, data: Arc<str>) {
        {
            let mut g = self.inner.lock();
            if g.done || seq < g.next_seq {
                return;
            }
            g.next_seq = seq + 1;
            g.bytes += data.len();
            g.events.push_back((seq, data));
            while g.events.len() > self.cap || (g.bytes > self.max_bytes && g.events.len() > 1) {
                if let Some((_, old)) = g.events.pop_front() {
                    g.bytes -= old.len();
                }
            }
        }
        self.notify.notify_waiters();
    }

    /// The reconnection hint (`retry:`) to send, ms.
    pub(crate) fn set_retry(&self, ms: u64) {
        self.inner.lock().retry = Some(ms);
    }

    /// End every reader attached now (each sends the retry hint and closes); the stream goes on
    /// for readers that resume.
    pub(crate) fn pause(&self, retry_ms: Option<u64>) {
        {
            let mut g = self.inner.lock();
            g.epoch += 1;
            if retry_ms.is_some() {
                g.retry = retry_ms;
            }
        }
        self.notify.notify_waiters();
    }

    /// No more events will follow (the response was sent).
    pub(crate) fn finish(&self) {
        self.inner.lock().done = true;
        self.notify.notify_waiters();
    }

    /// Has the stream ended?
    pub(crate) fn is_done(&self) -> bool {
        self.inner.lock().done
    }

    /// Bytes of event data kept for replay.
    pub(crate) fn held_bytes(&self) -> usize {
        self.inner.lock().bytes
    }

    /// The sequence number of the last event pushed (0 when none).
    pub(crate) fn last_seq(&self) -> u64 {
        self.inner.lock().next_seq - 1
    }

    /// Parse an event id `<stream>-<seq>`.
    pub(crate) fn parse_event_id(s: &str) -> Option<(u64, u64)> {
        let (a, b) = s.trim().split_once('-')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    }

    /// The next frame for a reader at `pos` (None: the reader ends). Waits for events.
    async fn next_frame(
        &self,
        pos: &mut u64,
        epoch: u64,
        keepalive: Duration,
        progress: &Option<Arc<AtomicU64>>,
    ) -> Option<Bytes> {
        loop {
            let notified = self.notify.notified();
            {
                let g = self.inner.lock();
                let mut out = String::new();
                for (seq, data) in g.events.iter() {
                    if *seq > *pos {
                        let id = format!("{}-{seq}", self.id);
                        Frame::message(Some(&id), data).write(&mut out);
                        *pos = *seq;
                    }
                }
                if !out.is_empty() {
                    drop(g);
                    if let Some(p) = progress {
                        p.store(*pos, Ordering::SeqCst);
                    }
                    return Some(Bytes::from(out));
                }
                if g.done {
                    return None;
                }
                if g.epoch != epoch {
                    // Paused: tell the client when to come back, then close.
                    *pos = u64::MAX;
                    return Some(match g.retry {
                        Some(ms) => Frame {
                            retry: Some(ms),
                            ..Frame::default()
                        }
                        .to_bytes(),
                        None => comment("paused"),
                    });
                }
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(keepalive) => {
                    return Some(keep_alive());
                }
            }
        }
    }

    /// An SSE body: optionally a priming event (with the retry hint), then every event after
    /// `after`, waiting for new ones until the stream ends or pauses. Keep-alive comments are sent
    /// every `keepalive`; `progress`, when given, follows the last event delivered.
    pub(crate) fn reader(
        self: &Arc<StreamBuf>,
        after: u64,
        prime: bool,
        keepalive: Duration,
        progress: Option<Arc<AtomicU64>>,
    ) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
        let buf = self.clone();
        let epoch = buf.inner.lock().epoch;
        futures_util::stream::unfold((buf, after, prime), move |(buf, mut pos, prime)| {
            let progress = progress.clone();
            async move {
                if pos == u64::MAX {
                    return None;
                }
                if prime {
                    let id = format!("{}-{pos}", buf.id);
                    let frame = Frame {
                        id: Some(&id),
                        retry: buf.inner.lock().retry,
                        data: Some(""),
                        ..Frame::default()
                    };
                    return Some((Ok(frame.to_bytes()), (buf, pos, false)));
                }
                let frame = buf
                    .next_frame(&mut pos, epoch, keepalive, &progress)
                    .await?;
                Some((Ok(frame), (buf, pos, false)))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use serde_json::json;

    #[tokio::test]
    async fn replays_after_an_event_id_and_ends_when_done() {
        let b = StreamBuf::new(3, 10, 1 << 20);
        b.push(&Message::notification("a", None));
        b.push(&Message::notification("b", Some(json!({"x": 1}))));
        b.finish();
        let body: Vec<_> = b
            .reader(1, false, Duration::from_secs(10), None)
            .map(|r| String::from_utf8(r.unwrap().to_vec()).unwrap())
            .collect()
            .await;
        assert_eq!(
            body.concat(),
            "event: message\nid: 3-2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"b\",\"params\":{\"x\":1}}\n\n"
        );
        assert_eq!(StreamBuf::parse_event_id("3-2"), Some((3, 2)));
        assert_eq!(StreamBuf::parse_event_id("junk"), None);
    }

    #[tokio::test]
    async fn primes_with_the_retry_hint_and_ends_a_paused_reader_with_it() {
        let b = StreamBuf::new(2, 10, 1 << 20);
        b.set_retry(500);
        let reader = b.reader(0, true, Duration::from_secs(10), None);
        b.pause(None);
        let body: Vec<_> = reader
            .map(|r| String::from_utf8(r.unwrap().to_vec()).unwrap())
            .collect()
            .await;
        assert_eq!(body, ["id: 2-0\nretry: 500\ndata: \n\n", "retry: 500\n\n"]);
    }

    #[tokio::test]
    async fn keeps_at_most_max_bytes_and_always_the_newest_event() {
        let b = StreamBuf::new(1, 100, 140);
        let big = |n: usize| Message::notification("n", Some(json!({"p": "x".repeat(n)})));
        for _ in 0..5 {
            b.push(&big(20)); // 68 bytes each: two fit in 140
        }
        b.push(&big(10));
        b.finish();
        let body: Vec<_> = b
            .reader(0, false, Duration::from_secs(10), None)
            .map(|r| String::from_utf8(r.unwrap().to_vec()).unwrap())
            .collect()
            .await;
        let ids: Vec<_> = body
            .concat()
            .lines()
            .filter_map(|l| l.strip_prefix("id: ").map(str::to_string))
            .collect();
        assert_eq!(ids, ["1-5", "1-6"]);
        let one = StreamBuf::new(1, 100, 10);
        one.push(&big(50));
        assert_eq!(one.inner.lock().events.len(), 1);
    }

    #[test]
    fn frames_every_line_of_the_data_and_the_fields_in_order() {
        let f = Frame {
            event: Some("message"),
            id: Some("1-2"),
            retry: Some(10),
            data: Some("a\nb\r\nc"),
        };
        assert_eq!(
            f.to_bytes(),
            "event: message\nid: 1-2\nretry: 10\ndata: a\ndata: b\ndata: c\n\n"
        );
        assert_eq!(
            Frame::message(None, "{}").to_bytes(),
            "event: message\ndata: {}\n\n"
        );
        assert_eq!(comment("paused"), ": paused\n\n");
        assert_eq!(keep_alive(), ": keep-alive\n\n");
    }

    #[tokio::test]
    async fn a_live_body_sends_first_then_what_arrives_and_ends_with_the_sender() {
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(Message::notification("b", None)).unwrap();
        drop(tx);
        let body: Vec<_> = live(
            rx,
            Some(Message::notification("a", None)),
            Duration::from_secs(10),
        )
        .map(|r| String::from_utf8(r.unwrap().to_vec()).unwrap())
        .collect()
        .await;
        assert_eq!(
            body.concat(),
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"b\"}\n\n"
        );
    }
}
