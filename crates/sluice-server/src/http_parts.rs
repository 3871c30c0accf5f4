//! The pieces both HTTP faces (legacy and 2026-07-28) build responses from: the MCP header
//! names, JSON replies and JSON-RPC errors with their status, SSE response headers, and reading
//! a header as text.

use axum::body::{Body, Bytes};
use axum::http::header::{AsHeaderName, HeaderName};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sluice_core::{Message, RpcError};
use std::time::Duration;

/// `Mcp-Session-Id` (a `HeaderName`, not text: a lookup by text parses the name every time).
pub(crate) const SESSION: HeaderName = HeaderName::from_static(sluice_core::headers::SESSION_ID);
/// `MCP-Protocol-Version`.
pub(crate) const PROTOCOL: HeaderName =
    HeaderName::from_static(sluice_core::headers::PROTOCOL_VERSION);
/// How long an SSE response stays silent before a keep-alive comment.
pub(crate) const KEEPALIVE: Duration = Duration::from_secs(15);

/// A JSON-RPC error as the whole response, with this status.
pub(crate) fn json_error(status: StatusCode, error: RpcError, id: Option<&Value>) -> Response {
    let body = sluice_core::exact::to_string(&error.to_response(id));
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// A header's value, when it is present and visible ASCII.
pub(crate) fn header_str(headers: &HeaderMap, name: impl AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A message as a 200 JSON response. A large reply kept as its upstream's text is sent as that
/// text around the client's id ([`json_pieces`]), not copied into a new string first.
pub(crate) fn json_reply(reply: Message) -> Response {
    if let Some((text, (start, end), id)) = reply
        .raw_pieces()
        .filter(|(text, ..)| text.len() >= PIECES_FROM)
    {
        let id = Bytes::from(sluice_core::exact::to_string(id));
        let whole = Bytes::from_owner(Text(text.clone()));
        return json_pieces([whole.slice(..start), id, whole.slice(end..)]);
    }
    json_text(reply.to_json())
}

/// From this many bytes a raw reply is written in pieces; below it one copy costs less than
/// the frames.
const PIECES_FROM: usize = 16 * 1024;

/// A reply's shared text as the owner of the bytes sent.
struct Text(std::sync::Arc<str>);

impl AsRef<[u8]> for Text {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A message already serialised, as a 200 JSON response.
pub(crate) fn json_text(body: String) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// A message already serialised in pieces (a cached page between the head with the id and the
/// closing brace), as a 200 JSON response whose body is those pieces as they are: hyper writes
/// them with the head in one vectored write, and nothing copies the page.
pub(crate) fn json_pieces<const N: usize>(pieces: [Bytes; N]) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::new(Pieces::new(pieces)),
    )
        .into_response()
}

/// A body of a few byte strings, one frame each, of a length known up front.
struct Pieces<const N: usize> {
    pieces: [Bytes; N],
    next: usize,
    left: u64,
}

impl<const N: usize> Pieces<N> {
    fn new(pieces: [Bytes; N]) -> Self {
        let left = pieces.iter().map(|p| p.len() as u64).sum();
        Pieces {
            pieces,
            next: 0,
            left,
        }
    }
}

impl<const N: usize> http_body::Body for Pieces<N> {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        while this.next < N {
            let piece = std::mem::take(&mut this.pieces[this.next]);
            this.next += 1;
            if !piece.is_empty() {
                this.left -= piece.len() as u64;
                return std::task::Poll::Ready(Some(Ok(http_body::Frame::data(piece))));
            }
        }
        std::task::Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

/// Mark a response as an SSE stream (`text/event-stream`, not cached).
pub(crate) fn sse_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[tokio::test]
    async fn pieces_are_one_json_body_of_their_whole_length() {
        let r = json_pieces([
            Bytes::from_static(br#"{"id":1,"result":"#),
            Bytes::new(),
            Bytes::from_static(br#"{"tools":[]}"#),
            Bytes::from_static(b"}"),
        ]);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        let body = r.into_body();
        // hyper writes a Content-Length from an exact size, not a chunked body.
        assert_eq!(body.size_hint().exact(), Some(30));
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        assert_eq!(&bytes[..], br#"{"id":1,"result":{"tools":[]}}"#);
    }

    /// A reply kept as its upstream's text, small and large, with the client's id put in: the
    /// body is the bytes `to_json` writes, and its length is known (a Content-Length).
    #[tokio::test]
    async fn raw_replies_are_written_as_to_json_writes_them() {
        for size in [10, PIECES_FROM + 1, 300_000] {
            let text = format!(
                r#"{{"result":{{"content":[{{"type":"text","text":"{}"}}]}},"jsonrpc":"2.0","id":41}}"#,
                "x".repeat(size)
            );
            let mut reply = Message::parse_reply(text.as_bytes()).unwrap();
            assert!(reply.raw_pieces().is_some(), "a plain reply is kept raw");
            reply.set_id(serde_json::json!("client-7"));
            let want = reply.to_json();
            assert!(want.ends_with(r#""jsonrpc":"2.0","id":"client-7"}"#));
            let body = json_reply(reply).into_body();
            assert_eq!(body.size_hint().exact(), Some(want.len() as u64));
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            assert_eq!(&bytes[..], want.as_bytes(), "size {size}");
        }
    }
}
