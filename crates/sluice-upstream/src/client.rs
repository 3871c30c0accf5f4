//! The HTTP client of the Streamable HTTP wire: hyper with a pool of its own for a plain
//! `http://` upstream (the common local case, and the hot path: no layers between the wire and
//! the socket), reqwest for everything else (TLS, and any proxy the environment names).

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use std::sync::OnceLock;
use std::time::Duration;

type Plain = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

/// The client an upstream URL is reached with.
#[derive(Clone)]
pub(crate) enum Client {
    /// hyper, for `http://` with no proxy in the environment (boxed: the client is large).
    Plain(Box<(Plain, hyper::Uri)>),
    /// reqwest, for `https://` or through a proxy.
    Reqwest(reqwest::Client),
}

/// One reqwest client for every upstream reached through it: pooling and keep-alive across
/// sessions.
pub(crate) fn shared_reqwest() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_max_idle_per_host(64)
                .tcp_nodelay(true)
                .build()
                .expect("HTTP client")
        })
        .clone()
}

fn shared_plain() -> Plain {
    static CLIENT: OnceLock<Plain> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
            connector.set_nodelay(true);
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_max_idle_per_host(64)
                .pool_timer(hyper_util::rt::TokioTimer::new())
                .build(connector)
        })
        .clone()
}

/// Does the environment route plain HTTP through a proxy (reqwest honours these)?
fn proxied() -> bool {
    static PROXIED: OnceLock<bool> = OnceLock::new();
    *PROXIED.get_or_init(|| {
        ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
    })
}

impl Client {
    /// The client for `url`.
    pub fn for_url(url: &reqwest::Url) -> Client {
        if url.scheme() == "http" && !proxied() {
            if let Ok(uri) = url.as_str().parse::<hyper::Uri>() {
                return Client::Plain(Box::new((shared_plain(), uri)));
            }
        }
        Client::Reqwest(shared_reqwest())
    }

    /// Send one request and wait for the head of its response. `Err` is the transport's
    /// failure, as text.
    pub async fn send(
        &self,
        method: Method,
        url: &reqwest::Url,
        headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Reply, String> {
        match self {
            Client::Plain(plain) => {
                let (client, uri) = &**plain;
                let mut req = hyper::Request::new(Full::new(body.unwrap_or_default()));
                *req.method_mut() = method;
                *req.uri_mut() = uri.clone();
                *req.headers_mut() = headers;
                let resp = client.request(req).await.map_err(|e| plain_error(&e))?;
                let (parts, body) = resp.into_parts();
                Ok(Reply {
                    status: parts.status,
                    headers: parts.headers,
                    body: Body::Plain(body),
                })
            }
            Client::Reqwest(client) => {
                let mut rb = client.request(method, url.clone()).headers(headers);
                if let Some(b) = body {
                    rb = rb.body(b);
                }
                let resp = rb.send().await.map_err(|e| e.to_string())?;
                Ok(Reply {
                    status: resp.status(),
                    headers: resp.headers().clone(),
                    body: Body::Reqwest(resp),
                })
            }
        }
    }
}

/// A hyper client error with its cause (hyper's own text is only "client error (Connect)").
fn plain_error(e: &hyper_util::client::legacy::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

enum Body {
    Plain(hyper::body::Incoming),
    Reqwest(reqwest::Response),
}

/// The head of a response, its body still to be read.
pub(crate) struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    body: Body,
}

impl Reply {
    /// The whole body.
    pub async fn bytes(self) -> Result<Bytes, String> {
        match self.body {
            Body::Plain(b) => b
                .collect()
                .await
                .map(|c| c.to_bytes())
                .map_err(|e| e.to_string()),
            Body::Reqwest(r) => r.bytes().await.map_err(|e| e.to_string()),
        }
    }

    /// The body as it arrives.
    pub fn stream(self) -> BoxStream<'static, Result<Bytes, String>> {
        match self.body {
            Body::Plain(b) => b
                .into_data_stream()
                .map(|r| r.map_err(|e| e.to_string()))
                .boxed(),
            Body::Reqwest(r) => r
                .bytes_stream()
                .map(|r| r.map_err(|e| e.to_string()))
                .boxed(),
        }
    }
}
