//! Replayable SSE streams: every message sent to a client over SSE is kept (bounded) in a
//! [`StreamBuf`] under an event id `<stream>-<seq>`, so a client that lost the connection can
//! resume with `Last-Event-ID` and get only what it missed on that stream.

use bytes::Bytes;
use futures_util::Stream;
use parking_lot::Mutex;
use sluice_core::Message;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

struct BufInner {
    events: VecDeque<(u64, Arc<str>)>,
    next_seq: u64,
    done: bool,
    /// Readers opened before the latest pause end (SSE polling).
    epoch: u64,
    /// The reconnection hint sent to clients, ms.
    retry: Option<u64>,
}

/// One SSE stream's events, kept for replay.
pub struct StreamBuf {
    id: u64,
    cap: usize,
    inner: Mutex<BufInner>,
    notify: Notify,
}

impl StreamBuf {
    /// A new, empty stream numbered `id`, keeping at most `cap` events.
    pub fn new(id: u64, cap: usize) -> Arc<StreamBuf> {
        Arc::new(StreamBuf {
            id,
            cap: cap.max(1),
            inner: Mutex::new(BufInner {
                events: VecDeque::new(),
                next_seq: 1,
                done: false,
                epoch: 0,
                retry: None,
            }),
            notify: Notify::new(),
        })
    }

    /// The stream number (the part of event ids before the dash).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Append a message.
    pub fn push(&self, msg: &Message) {
        let data: Arc<str> = msg.to_json().into();
        {
            let mut g = self.inner.lock();
            if g.done {
                return;
            }
            let seq = g.next_seq;
            g.next_seq += 1;
            g.events.push_back((seq, data));
            while g.events.len() > self.cap {
                g.events.pop_front();
            }
        }
        self.notify.notify_waiters();
    }

    /// The reconnection hint (`retry:`) to send, ms.
    pub fn set_retry(&self, ms: u64) {
        self.inner.lock().retry = Some(ms);
    }

    /// End every reader attached now (each sends the retry hint and closes); the stream goes on
    /// for readers that resume.
    pub fn pause(&self, retry_ms: Option<u64>) {
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
    pub fn finish(&self) {
        self.inner.lock().done = true;
        self.notify.notify_waiters();
    }

    /// Has the stream ended?
    pub fn is_done(&self) -> bool {
        self.inner.lock().done
    }

    /// The sequence number of the last event pushed (0 when none).
    pub fn last_seq(&self) -> u64 {
        self.inner.lock().next_seq - 1
    }

    /// Parse an event id `<stream>-<seq>`.
    pub fn parse_event_id(s: &str) -> Option<(u64, u64)> {
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
                        out.push_str("event: message\nid: ");
                        out.push_str(&self.id.to_string());
                        out.push('-');
                        out.push_str(&seq.to_string());
                        out.push_str("\ndata: ");
                        out.push_str(data);
                        out.push_str("\n\n");
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
                    return Some(Bytes::from(match g.retry {
                        Some(ms) => format!("retry: {ms}\n\n"),
                        None => String::from(": paused\n\n"),
                    }));
                }
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(keepalive) => {
                    return Some(Bytes::from_static(b": keep-alive\n\n"));
                }
            }
        }
    }

    /// An SSE body: optionally a priming event (with the retry hint), then every event after
    /// `after`, waiting for new ones until the stream ends or pauses. Keep-alive comments are sent
    /// every `keepalive`; `progress`, when given, follows the last event delivered.
    pub fn reader(
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
                    let retry = buf.inner.lock().retry;
                    let frame = match retry {
                        Some(ms) => format!("id: {}-{}\nretry: {ms}\ndata: \n\n", buf.id, pos),
                        None => format!("id: {}-{}\ndata: \n\n", buf.id, pos),
                    };
                    return Some((Ok(Bytes::from(frame)), (buf, pos, false)));
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
        let b = StreamBuf::new(3, 10);
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
}
