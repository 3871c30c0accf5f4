//! Newline-delimited framing for the stdio transport, in both directions (an upstream child's
//! stdout and stderr, and the downstream `sluice serve --stdio` face): lines bounded by a length
//! limit, so a peer that never sends a newline cannot grow memory without end.
//!
//! [`LineCodec`] wraps tokio-util's `AnyDelimiterCodec` (bytes, not text: a line that is not
//! UTF-8 is the reader's to judge, not a broken stream) and turns its two recoverable errors into
//! items, because `FramedRead` ends its stream after any decoder error.

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncRead;
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, Decoder, FramedRead};

/// The longest stdout line (one JSON-RPC message) read from a stdio upstream: 16 MiB. The
/// gateway's configured body limit is a downstream setting that an upstream connection does not
/// see; this bound only keeps a misbehaving child from growing memory without end.
pub const MAX_MESSAGE_LINE: usize = 16 * 1024 * 1024;

/// The longest stderr line kept from a stdio upstream: 8 KiB. Longer lines are cut there (the
/// rest is dropped); stderr is only logged and kept as a short tail.
pub const MAX_STDERR_LINE: usize = 8 * 1024;

/// One line read off a newline-delimited stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A whole line, without its `\n` (nor a `\r` before it). Bytes: it may not be UTF-8.
    Full(Bytes),
    /// A line longer than the limit. Carries its first bytes (as many as
    /// [`LineCodec::keep_head`] asked for, none by default); the rest is discarded as it arrives,
    /// never buffered whole. Reading goes on with the next line.
    TooLong(Bytes),
}

/// Splits a byte stream at `\n` into [`Line`]s of at most `max_length` bytes.
#[derive(Debug, Clone)]
pub struct LineCodec {
    inner: AnyDelimiterCodec,
    head: usize,
}

impl LineCodec {
    /// Lines of at most `max_length` bytes (not counting the `\n`).
    pub fn new(max_length: usize) -> LineCodec {
        LineCodec {
            inner: AnyDelimiterCodec::new_with_max_length(
                b"\n".to_vec(),
                b"\n".to_vec(),
                max_length,
            ),
            head: 0,
        }
    }

    /// Keep the first `bytes` bytes (at most the limit) of an over-long line in
    /// [`Line::TooLong`], for a log or a truncated copy.
    pub fn keep_head(mut self, bytes: usize) -> LineCodec {
        self.head = bytes.min(self.inner.max_length());
        self
    }

    /// The limit given at [`LineCodec::new`].
    pub fn max_length(&self) -> usize {
        self.inner.max_length()
    }

    fn item(
        &self,
        decoded: Result<Option<Bytes>, AnyDelimiterCodecError>,
        buf: &BytesMut,
    ) -> std::io::Result<Option<Line>> {
        match decoded {
            Ok(line) => Ok(line.map(|l| Line::Full(without_cr(l)))),
            // The inner codec left the over-long bytes in `buf` and discards them (and what
            // follows, up to the next `\n`) on its next call.
            Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => Ok(Some(Line::TooLong(
                Bytes::copy_from_slice(&buf[..self.head.min(buf.len())]),
            ))),
            Err(AnyDelimiterCodecError::Io(e)) => Err(e),
        }
    }
}

impl Decoder for LineCodec {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Line>> {
        let decoded = self.inner.decode(buf);
        self.item(decoded, buf)
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> std::io::Result<Option<Line>> {
        let decoded = self.inner.decode_eof(buf);
        self.item(decoded, buf)
    }
}

/// The lines of `reader` (a stream of `std::io::Result<Line>`; it ends at end of input, or
/// after an I/O error).
pub fn read_lines<R: AsyncRead>(reader: R, codec: LineCodec) -> FramedRead<R, LineCodec> {
    FramedRead::new(reader, codec)
}

fn without_cr(line: Bytes) -> Bytes {
    match line.last() {
        Some(b'\r') => line.slice(..line.len() - 1),
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    async fn all(input: &'static [u8], codec: LineCodec) -> Vec<Line> {
        let mut lines = read_lines(input, codec);
        let mut out = Vec::new();
        while let Some(line) = lines.next().await {
            out.push(line.expect("no I/O error from a byte slice"));
        }
        out
    }

    fn full(s: &'static [u8]) -> Line {
        Line::Full(Bytes::from_static(s))
    }

    #[tokio::test]
    async fn lines_split_at_newlines_without_cr() {
        let got = all(b"one\r\ntwo\n\nlast", LineCodec::new(16)).await;
        assert_eq!(
            got,
            vec![full(b"one"), full(b"two"), full(b""), full(b"last")]
        );
    }

    #[tokio::test]
    async fn an_over_long_line_is_skipped_and_the_next_still_parses() {
        let got = all(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"way/too/long/for/the/limit\"}\n{\"a\":1}\n",
            LineCodec::new(10).keep_head(4),
        )
        .await;
        assert_eq!(
            got,
            vec![
                Line::TooLong(Bytes::from_static(b"{\"js")),
                full(b"{\"a\":1}")
            ]
        );
    }

    #[tokio::test]
    async fn an_over_long_line_is_not_buffered_whole() {
        // Read in small chunks, a 1 MiB line reports once, early, and the reading goes on.
        let mut input = vec![b'x'; 1 << 20];
        input.extend_from_slice(b"\nok\n");
        let (mut tx, rx) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            tx.write_all(&input).await.unwrap();
        });
        let mut lines = read_lines(rx, LineCodec::new(100));
        assert_eq!(
            lines.next().await.unwrap().unwrap(),
            Line::TooLong(Bytes::new())
        );
        assert!(lines.read_buffer().capacity() < 64 * 1024);
        assert_eq!(lines.next().await.unwrap().unwrap(), full(b"ok"));
        writer.await.unwrap();
        assert!(lines.next().await.is_none());
    }

    #[tokio::test]
    async fn invalid_utf8_does_not_end_the_stream() {
        let got = all(b"\xff\xfe\n{\"a\":1}\n", LineCodec::new(64)).await;
        assert_eq!(got, vec![full(b"\xff\xfe"), full(b"{\"a\":1}")]);
    }

    #[tokio::test]
    async fn an_over_long_last_line_without_newline_ends_cleanly() {
        let got = all(b"ok\nxxxxxxxxxxxxxxxxxxxx", LineCodec::new(8)).await;
        assert_eq!(got, vec![full(b"ok"), Line::TooLong(Bytes::new())]);
    }

    #[tokio::test]
    async fn a_line_at_the_limit_is_whole() {
        let got = all(b"12345678\n123456789\n", LineCodec::new(8)).await;
        assert_eq!(got, vec![full(b"12345678"), Line::TooLong(Bytes::new())]);
    }
}
