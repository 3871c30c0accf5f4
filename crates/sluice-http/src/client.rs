//! [`Client`]: hyper's connection API with a pool of its own ([`pool`](crate::pool)) for a
//! plain `http://` URL (the common local case, and the hot path: no layers between the caller
//! and the socket), reqwest for everything else (TLS, and any proxy the environment names).

use crate::error::Error;
use crate::pool::{HostPool, Lease};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use http_body_util::{BodyExt, Full};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The client a URL is reached with (cheap to clone).
#[derive(Clone)]
pub struct Client(Via);

#[derive(Clone)]
enum Via {
    /// hyper, for `http://` with no proxy in the environment: the host's pool and the
    /// request target (the URL's path and query, checked; each request parses its own copy,
    /// as a clone of one `Uri` would write its shared count on every call).
    Plain(Arc<(Arc<HostPool>, Box<str>)>),
    /// reqwest, for `https://` or through a proxy.
    Reqwest(reqwest::Client),
}

/// A reqwest client as Sluice makes them: idle connections kept 90 s, at most 64 per host,
/// `TCP_NODELAY`.
pub fn reqwest_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(64)
        .tcp_nodelay(true)
}

/// One reqwest client for every URL reached through it without a client of its own: pooling
/// and keep-alive across sessions (redirects followed, as reqwest does by default).
pub fn shared_reqwest() -> reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT
        .get_or_init(|| reqwest_builder().build().expect("HTTP client"))
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
    /// The client for `url`: the pool of its host for a plain `http://` URL, else
    /// [`shared_reqwest`].
    pub fn for_url(url: &reqwest::Url) -> Client {
        Client::for_url_or(url, shared_reqwest)
    }

    /// The client for `url`: the pool of its host for a plain `http://` URL (which never
    /// follows a redirect), else the reqwest client `fallback` makes.
    pub fn for_url_or(url: &reqwest::Url, fallback: impl FnOnce() -> reqwest::Client) -> Client {
        if url.scheme() == "http" && !proxied() {
            if let Some(plain) = plain_target(url) {
                return Client(Via::Plain(plain));
            }
        }
        Client(Via::Reqwest(fallback()))
    }

    /// Send one request and wait for the head of its response. `Err` is the transport's
    /// failure.
    pub async fn send(
        &self,
        method: Method,
        url: &reqwest::Url,
        headers: HeaderMap,
        body: Option<Bytes>,
    ) -> Result<Reply, Error> {
        match &self.0 {
            Via::Plain(plain) => {
                let (pool, target) = &**plain;
                let mut req = hyper::Request::new(Full::new(body.unwrap_or_default()));
                *req.method_mut() = method;
                *req.uri_mut() = hyper::Uri::try_from(&**target)?;
                *req.headers_mut() = headers;
                let (resp, lease) = pool.send(req).await?;
                let (parts, body) = resp.into_parts();
                Ok(Reply {
                    status: parts.status,
                    headers: parts.headers,
                    body: Body::Plain(body, lease),
                })
            }
            Via::Reqwest(client) => {
                let mut rb = client.request(method, url.clone()).headers(headers);
                if let Some(b) = body {
                    rb = rb.body(b);
                }
                let resp = rb.send().await?;
                Ok(Reply {
                    status: resp.status(),
                    headers: resp.headers().clone(),
                    body: Body::Reqwest(resp),
                })
            }
        }
    }
}

/// The pool and the request target of a plain `http://` URL (`None`: not one hyper can take).
fn plain_target(url: &reqwest::Url) -> Option<Arc<(Arc<HostPool>, Box<str>)>> {
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    let header = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let pool = HostPool::of(&format!("{host}:{port}"), &header).ok()?;
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    target.parse::<hyper::Uri>().ok()?;
    Some(Arc::new((pool, target.into())))
}

enum Body {
    /// The body, and the connection it came on (returned once the body is read to the end).
    Plain(hyper::body::Incoming, Lease),
    Reqwest(reqwest::Response),
}

/// The head of a response, its body still to be read.
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    body: Body,
}

impl Reply {
    /// The whole body.
    pub async fn bytes(self) -> Result<Bytes, Error> {
        match self.body {
            Body::Plain(b, mut lease) => {
                let body = b.collect().await?;
                lease.finish();
                Ok(body.to_bytes())
            }
            Body::Reqwest(r) => Ok(r.bytes().await?),
        }
    }

    /// The body as it arrives.
    pub fn stream(self) -> BoxStream<'static, Result<Bytes, Error>> {
        match self.body {
            Body::Plain(b, lease) => {
                // The connection goes back when the stream ends, not when it is dropped early.
                let data = b.into_data_stream();
                futures_util::stream::unfold((data, lease), |(mut data, mut lease)| async move {
                    match data.next().await {
                        Some(r) => Some((r.map_err(Error::from), (data, lease))),
                        None => {
                            lease.finish();
                            None
                        }
                    }
                })
                .boxed()
            }
            Body::Reqwest(r) => r.bytes_stream().map(|r| r.map_err(Error::from)).boxed(),
        }
    }
}
