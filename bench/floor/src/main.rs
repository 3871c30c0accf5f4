//! `sluice-bench-floor`: the floor the benchmark measures Sluice against. The least a
//! JSON-RPC-aware Streamable HTTP passthrough has to do, done plainly: a hyper server, a hyper
//! client with its own connection pool, and for each POST body: parse it, give a request the
//! floor's own id upstream, serialise, forward, parse the reply, put the client's id back,
//! serialise, answer. No sessions of its own (the client's `Mcp-Session-Id` and protocol
//! version travel both ways), no hooks, no catalog.
//!
//! ```text
//! sluice-bench-floor --listen 127.0.0.1:PORT --upstream http://127.0.0.1:UP/mcp
//! ```
//!
//! JSON replies and SSE replies (each `data:` line that is the reply) both get their id back;
//! a GET (the server-to-client stream) is relayed as it streams.

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use std::convert::Infallible;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const USAGE: &str = "usage: sluice-bench-floor --listen HOST:PORT --upstream URL";

type Error = Box<dyn std::error::Error + Send + Sync>;
type Body = Either<Full<Bytes>, Incoming>;

/// Headers that go upstream as the client sent them, and those that come back.
const UP: &[&str] = &[
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "accept",
    "content-type",
    "authorization",
];
const DOWN: &[&str] = &["mcp-session-id", "content-type"];

struct Floor {
    client: Client<HttpConnector, Full<Bytes>>,
    upstream: Uri,
    next_id: AtomicU64,
}

fn main() -> ExitCode {
    let (listen, upstream) = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match rt.block_on(serve(listen, upstream)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-bench-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

fn args() -> Result<(String, Uri), String> {
    let (mut listen, mut upstream) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let value = it.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--listen" => listen = Some(value),
            "--upstream" => upstream = Some(value),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let upstream: Uri = upstream
        .ok_or("--upstream is required")?
        .parse()
        .map_err(|e| format!("--upstream: {e}"))?;
    if upstream.scheme_str() != Some("http") {
        return Err("--upstream must be an http:// URL".into());
    }
    Ok((listen.ok_or("--listen is required")?, upstream))
}

async fn serve(listen: String, upstream: Uri) -> Result<(), Error> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let floor = Arc::new(Floor {
        client: Client::builder(TokioExecutor::new()).build(connector),
        upstream,
        next_id: AtomicU64::new(1),
    });
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    eprintln!("sluice-bench-floor on http://{listen}/mcp");
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let floor = floor.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let floor = floor.clone();
                async move { Ok::<_, Infallible>(handle(&floor, req).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(floor: &Floor, req: Request<Incoming>) -> Response<Body> {
    forward(floor, req).await.unwrap_or_else(|e| {
        let mut r = Response::new(Either::Left(Full::new(Bytes::from(format!(
            "upstream failed: {e}"
        )))));
        *r.status_mut() = StatusCode::BAD_GATEWAY;
        r
    })
}

async fn forward(floor: &Floor, req: Request<Incoming>) -> Result<Response<Body>, Error> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    // A request gets the floor's own id upstream; the client's comes back on the reply.
    let mut client_id = None;
    let body = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(mut msg)) if parts.method == Method::POST => {
            if msg.contains_key("method") {
                if let Some(id) = msg.get_mut("id") {
                    let ours = Value::from(floor.next_id.fetch_add(1, Ordering::Relaxed));
                    client_id = Some(std::mem::replace(id, ours));
                }
            }
            Bytes::from(serde_json::to_vec(&msg)?)
        }
        _ => body,
    };
    let mut up = Request::builder()
        .method(parts.method.clone())
        .uri(floor.upstream.clone());
    for name in UP {
        if let Some(v) = parts.headers.get(*name) {
            up = up.header(*name, v);
        }
    }
    let reply = floor.client.request(up.body(Full::new(body))?).await?;
    let (rparts, rbody) = reply.into_parts();
    let mut down = Response::builder().status(rparts.status);
    for name in DOWN {
        if let Some(v) = rparts.headers.get(*name) {
            down = down.header(HeaderName::from_static(name), v);
        }
    }
    let Some(id) = client_id else {
        // Not a request (a GET stream, a notification's 202, a DELETE): relayed as it comes.
        return Ok(down.body(Either::Right(rbody))?);
    };
    let sse = rparts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let rbody = rbody.collect().await?.to_bytes();
    let rbody = if sse {
        restore_sse(&rbody, &id)
    } else {
        restore(&rbody, &id).unwrap_or(rbody)
    };
    Ok(down.body(Either::Left(Full::new(rbody)))?)
}

/// A JSON reply under the client's id (`None`: not a JSON-RPC reply, passed as it is).
fn restore(body: &[u8], id: &Value) -> Option<Bytes> {
    let Ok(Value::Object(mut msg)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    if msg.contains_key("method") || !msg.contains_key("id") {
        return None;
    }
    msg.insert("id".into(), id.clone());
    serde_json::to_vec(&msg).ok().map(Bytes::from)
}

/// An SSE reply with every `data:` line that is the reply put under the client's id.
fn restore_sse(body: &[u8], id: &Value) -> Bytes {
    let text = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        let restored = line
            .strip_prefix("data:")
            .and_then(|data| restore(data.trim().as_bytes(), id));
        match restored {
            Some(json) => {
                out.push_str("data: ");
                out.push_str(&String::from_utf8_lossy(&json));
                out.push('\n');
            }
            None => out.push_str(line),
        }
    }
    Bytes::from(out)
}
