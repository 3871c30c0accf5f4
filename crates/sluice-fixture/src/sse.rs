//! The SSE streams of one HTTP session: event ids (`<stream>-<seq>`), an event log so a client
//! can resume a stream with `Last-Event-ID`, the live connection of each stream, and the
//! standalone (GET) stream for messages unrelated to any request.

use std::collections::HashMap;

use axum::body::Bytes;
use serde_json::Value;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// The `retry:` hint (milliseconds) sent in priming events.
pub(crate) const RETRY_MS: u64 = 1000;

/// Finished streams kept for resumption (older ones are forgotten).
const KEEP_FINISHED: u64 = 256;

#[derive(Default)]
struct Stream {
    next_seq: u64,
    events: Vec<(u64, Bytes)>,
    live: Option<UnboundedSender<Bytes>>,
    finished: bool,
}

impl Stream {
    fn is_live(&self) -> bool {
        self.live.as_ref().is_some_and(|l| !l.is_closed())
    }
}

/// All SSE streams of one session.
#[derive(Default)]
pub(crate) struct Streams {
    next_id: u64,
    streams: HashMap<u64, Stream>,
    standalone: Option<u64>,
}

fn message_frame(event_id: &str, msg: &Value) -> Bytes {
    Bytes::from(format!("id: {event_id}\nevent: message\ndata: {msg}\n\n"))
}

impl Streams {
    /// Open a new stream; its connection's body arrives on the returned receiver, starting with
    /// a priming event (id, `retry:`, empty data) when `priming`.
    pub(crate) fn open(&mut self, priming: bool) -> (u64, UnboundedReceiver<Bytes>) {
        let id = self.next_id;
        self.next_id += 1;
        let standalone = self.standalone;
        self.streams
            .retain(|sid, s| !s.finished || sid + KEEP_FINISHED >= id || Some(*sid) == standalone);
        let (tx, rx) = unbounded_channel();
        if priming {
            let _ = tx.send(Bytes::from(format!(
                "id: {id}-0\nretry: {RETRY_MS}\ndata: \n\n"
            )));
        }
        self.streams.insert(
            id,
            Stream {
                next_seq: 1,
                live: Some(tx),
                ..Stream::default()
            },
        );
        (id, rx)
    }

    /// Append `msg` to stream `id` and send it on its live connection, if any.
    pub(crate) fn push(&mut self, id: u64, msg: &Value) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let seq = stream.next_seq;
        stream.next_seq += 1;
        let frame = message_frame(&format!("{id}-{seq}"), msg);
        if let Some(live) = &stream.live {
            if live.send(frame.clone()).is_err() {
                stream.live = None;
            }
        }
        stream.events.push((seq, frame));
    }

    /// Close stream `id`'s live connection (the stream itself goes on; the client may resume).
    pub(crate) fn detach(&mut self, id: u64) {
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.live = None;
        }
    }

    /// Mark stream `id` complete and close its live connection.
    pub(crate) fn finish(&mut self, id: u64) {
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.finished = true;
            stream.live = None;
        }
    }

    /// Open the standalone (GET) stream; `None` if one is already connected.
    pub(crate) fn open_standalone(&mut self, priming: bool) -> Option<UnboundedReceiver<Bytes>> {
        if let Some(id) = self.standalone {
            if self.streams.get(&id).is_some_and(Stream::is_live) {
                return None;
            }
        }
        let (id, rx) = self.open(priming);
        self.standalone = Some(id);
        Some(rx)
    }

    /// Send `msg` on the standalone stream; `false` if no such stream is connected.
    pub(crate) fn push_standalone(&mut self, msg: &Value) -> bool {
        match self.standalone {
            Some(id) if self.streams.get(&id).is_some_and(Stream::is_live) => {
                self.push(id, msg);
                true
            }
            _ => false,
        }
    }

    /// Resume the stream `last_event_id` belongs to: replay the events after it, then (unless
    /// the stream is finished) keep the connection for what follows. `None`: unknown event id.
    pub(crate) fn resume(&mut self, last_event_id: &str) -> Option<UnboundedReceiver<Bytes>> {
        let (id, seq) = last_event_id.trim().split_once('-')?;
        let (id, seq) = (id.parse::<u64>().ok()?, seq.parse::<u64>().ok()?);
        let stream = self.streams.get_mut(&id)?;
        let (tx, rx) = unbounded_channel();
        for (_, frame) in stream.events.iter().filter(|(s, _)| *s > seq) {
            let _ = tx.send(frame.clone());
        }
        if !stream.finished {
            stream.live = Some(tx);
        }
        Some(rx)
    }

    /// Close every live connection (the session ended).
    pub(crate) fn close_all(&mut self) {
        for stream in self.streams.values_mut() {
            stream.finished = true;
            stream.live = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resumes_after_detach() {
        let mut s = Streams::default();
        let (id, mut rx) = s.open(true);
        assert!(String::from_utf8_lossy(&rx.try_recv().unwrap()).contains("retry: 1000"));
        s.detach(id);
        s.push(id, &json!({"a": 1}));
        assert!(rx.try_recv().is_err());
        let mut resumed = s.resume(&format!("{id}-0")).unwrap();
        assert!(String::from_utf8_lossy(&resumed.try_recv().unwrap()).contains(r#"{"a":1}"#));
        s.push(id, &json!({"b": 2}));
        s.finish(id);
        assert!(String::from_utf8_lossy(&resumed.try_recv().unwrap()).contains(r#"{"b":2}"#));
        assert!(s.resume("99-0").is_none());
    }

    #[test]
    fn one_standalone_stream() {
        let mut s = Streams::default();
        assert!(!s.push_standalone(&json!({})));
        let rx = s.open_standalone(false).unwrap();
        assert!(s.open_standalone(false).is_none());
        assert!(s.push_standalone(&json!({})));
        drop(rx);
        assert!(!s.push_standalone(&json!({})));
        assert!(s.open_standalone(false).is_some());
    }
}
