//! GET requests served on the bare connection, without hyper: an idle GET event stream then
//! holds its response body and a few hundred bytes, not hyper's two 8 KB connection buffers
//! (hyper makes both per connection and has no setting below 8 KB).
//!
//! The listener (`transport/listener.rs`) brings here every request head that starts with
//! `G` between requests. A plain `GET` (HTTP/1.1, no body, no `Expect`, `Upgrade` or
//! `Connection` other than `keep-alive`, a head within [`MAX_HEAD`]) is read here, run through
//! the same router, and its response written as hyper writes it: the status line, the headers
//! in order with lower-case names, `content-length` or `transfer-encoding: chunked`, `date`;
//! chunked frames `<HEX>\r\n<data>\r\n`, then `0\r\n\r\n`. Anything else goes back, unread, to
//! hyper, which answers it as before (errors included). While the body streams, the socket is
//! watched for the client's end, as hyper does: the end closes the stream; bytes the client
//! sends meanwhile are kept for after it.

use super::conn_io::{Counted, InFlight};
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// The longest request head served here (longer ones go to hyper, whose limits apply).
pub(super) const MAX_HEAD: usize = 16 * 1024;

/// Headers a head may have at most here (hyper's own limit).
const MAX_HEADERS: usize = 100;

/// What became of the connection.
pub(super) enum Outcome {
    /// Served; the connection stays open for the next request (possibly already in the stash).
    Again,
    /// Served (or broken off); the connection ends.
    Close,
    /// Not a request for this server: hyper reads it from the stash.
    Hyper,
}

/// A parsed head this server takes, and its length in the stash.
struct Head {
    len: usize,
    uri: Uri,
    headers: HeaderMap,
}

/// Parse the head at the start of the stash: `Ok(None)` while incomplete, `Err(())` when it is
/// not one to serve here.
fn parse(stash: &[u8]) -> Result<Option<Head>, ()> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let len = match req.parse(stash) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(()),
    };
    if req.method != Some("GET") || req.version != Some(1) {
        return Err(());
    }
    let uri: Uri = req.path.ok_or(())?.parse().map_err(|_| ())?;
    let mut headers = HeaderMap::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| ())?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| ())?;
        if name == header::CONTENT_LENGTH
            || name == header::TRANSFER_ENCODING
            || name == header::EXPECT
            || name == header::UPGRADE
        {
            return Err(());
        }
        if name == header::CONNECTION {
            let plain = value.to_str().is_ok_and(|v| {
                v.split(',')
                    .all(|t| t.trim().eq_ignore_ascii_case("keep-alive"))
            });
            if !plain {
                return Err(());
            }
        }
        headers.append(name, value);
    }
    Ok(Some(Head { len, uri, headers }))
}

/// Read the head, run the router, write the response head: then the body to stream, the
/// request's time in flight, whether it is chunked, whether the connection ends after it.
async fn respond(
    io: &mut Counted,
    app: &axum::Router,
    draining: &CancellationToken,
) -> Result<(Body, InFlight, bool, bool), Outcome> {
    let head = loop {
        match parse(&io.stash) {
            Ok(Some(head)) => break head,
            Err(()) => return Err(Outcome::Hyper),
            Ok(None) if io.stash.len() >= MAX_HEAD => return Err(Outcome::Hyper),
            Ok(None) => match io.fill(1024).await {
                Ok(0) | Err(_) => return Err(Outcome::Close),
                Ok(_) => {}
            },
        }
    };
    io.consume(head.len);
    let guard = InFlight::begin(io.stats.clone());
    let mut req = Request::new(Body::empty());
    *req.method_mut() = Method::GET;
    *req.uri_mut() = head.uri;
    *req.headers_mut() = head.headers;
    let resp = {
        use hyper::service::Service as _;
        match hyper_util::service::TowerToHyperService::new(app.clone())
            .call(req)
            .await
        {
            Ok(r) => r,
            Err(never) => match never {},
        }
    };
    let (parts, body) = resp.into_parts();
    let (head, chunked, last) = encode_head(parts.status, parts.headers, &body, draining);
    if write(io, &head).await.is_err() {
        return Err(Outcome::Close);
    }
    if !has_body(parts.status) {
        drop(guard);
        return Err(if last { Outcome::Close } else { Outcome::Again });
    }
    Ok((body, guard, chunked, last))
}

/// Serve the GET at the start of the stash (bytes are read as needed).
pub(super) async fn serve(
    io: &mut Counted,
    app: &axum::Router,
    draining: &CancellationToken,
) -> Outcome {
    // Boxed: reading the head and running the router take far more room than an idle stream,
    // which then holds only what follows.
    let (mut body, guard, chunked, last) = match Box::pin(respond(io, app, draining)).await {
        Ok(streaming) => streaming,
        Err(outcome) => return outcome,
    };
    // Watch for the client's end while the body streams (until it sends something: that is
    // kept for after the response, and the watch stops, as in hyper).
    let mut watch = io.stash.is_empty();
    loop {
        let frame = if watch {
            tokio::select! {
                f = body.frame() => f,
                r = io.inner.readable() => {
                    if r.is_err() {
                        return Outcome::Close;
                    }
                    let mut buf = [0u8; 512];
                    match io.inner.try_read(&mut buf) {
                        Ok(0) => return Outcome::Close,
                        Ok(n) => {
                            io.stash.extend_from_slice(&buf[..n]);
                            watch = false;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return Outcome::Close,
                    }
                    continue;
                }
            }
        } else {
            body.frame().await
        };
        match frame {
            None => break,
            Some(Err(e)) => {
                tracing::debug!("a GET response body failed: {e}");
                return Outcome::Close;
            }
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue; // trailers: none are sent on these responses
                };
                if data.is_empty() {
                    continue;
                }
                let ok = if chunked {
                    let size = format!("{:X}\r\n", data.len());
                    let mut out = Vec::with_capacity(size.len() + data.len() + 2);
                    out.extend_from_slice(size.as_bytes());
                    out.extend_from_slice(&data);
                    out.extend_from_slice(b"\r\n");
                    write(io, &out).await
                } else {
                    write(io, &data).await
                };
                if ok.is_err() {
                    return Outcome::Close;
                }
            }
        }
    }
    drop(guard);
    if chunked && write(io, b"0\r\n\r\n").await.is_err() {
        return Outcome::Close;
    }
    if last || draining.is_cancelled() {
        Outcome::Close
    } else {
        Outcome::Again
    }
}

async fn write(io: &mut Counted, bytes: &[u8]) -> std::io::Result<()> {
    io.inner.write_all(bytes).await?;
    io.inner.flush().await
}

/// The response head as hyper 1 writes it for a GET over HTTP/1.1; whether the body is
/// chunked; whether the connection ends after it (`Connection: close` in the response, or the
/// listener draining).
fn encode_head(
    status: StatusCode,
    headers: HeaderMap,
    body: &Body,
    draining: &CancellationToken,
) -> (Vec<u8>, bool, bool) {
    use http_body::Body as _;
    let mut out = Vec::with_capacity(128 + headers.len() * 32);
    if status == StatusCode::OK {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let can_body = has_body(status);
    let exact = if body.is_end_stream() {
        Some(0)
    } else {
        body.size_hint().exact()
    };
    let mut last = draining.is_cancelled();
    let (mut wrote_len, mut wrote_date, mut chunked) = (false, false, false);
    let mut prev: Option<HeaderName> = None;
    for (name, value) in headers.iter() {
        let repeat = prev.as_ref() == Some(name);
        if !repeat {
            prev = Some(name.clone());
        }
        if *name == header::CONTENT_LENGTH {
            // Written once, from the first value (hyper trusts a body that knows its length).
            if !repeat && exact != Some(0) {
                out.extend_from_slice(b"content-length: ");
                out.extend_from_slice(value.as_bytes());
                out.extend_from_slice(b"\r\n");
                wrote_len = true;
            }
            continue;
        }
        if *name == header::TRANSFER_ENCODING && !can_body {
            continue;
        }
        if *name == header::TRANSFER_ENCODING {
            wrote_len = true;
            chunked = true;
        }
        if *name == header::CONNECTION && value.to_str().is_ok_and(has_close) {
            last = true;
        }
        if *name == header::DATE {
            wrote_date = true;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !wrote_len {
        match exact {
            None if can_body => {
                out.extend_from_slice(b"transfer-encoding: chunked\r\n");
                chunked = true;
            }
            Some(n) if can_body => {
                out.extend_from_slice(format!("content-length: {n}\r\n").as_bytes());
            }
            _ => {}
        }
    }
    if !wrote_date {
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (out, chunked && can_body, last)
}

fn has_close(v: &str) -> bool {
    v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))
}

/// Whether a response with this status has a body (hyper's rule for GET).
fn has_body(status: StatusCode) -> bool {
    !(status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}
