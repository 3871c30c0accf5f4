//! Bounded HTTP for discovery and registration: https only (plain http for loopback and the
//! hosts a setting names), no redirect followed to another origin, documents over 1 MB refused,
//! a timeout on each step, and every error naming the URL.

use crate::error::AuthError;
use futures_util::StreamExt;
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::StatusCode;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// The largest metadata, registration or token document read.
pub const MAX_DOCUMENT: usize = 1 << 20;
/// Each step's deadline.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Same-origin redirects followed from a metadata URL.
const MAX_REDIRECTS: usize = 3;

/// The HTTP client of the OAuth flows.
#[derive(Clone)]
pub struct Fetcher {
    http: reqwest::Client,
    allow_http: Arc<Vec<String>>,
}

/// A fetched JSON document, or its absence (404 and friends: the caller tries the next place).
pub enum Fetched {
    /// A 2xx JSON object.
    Json(Value),
    /// A 4xx: nothing there.
    Missing(StatusCode),
}

impl Fetcher {
    /// A client that allows plain `http://` to loopback and to `allow_http_hosts` only.
    pub fn new(allow_http_hosts: Vec<String>) -> Fetcher {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(STEP_TIMEOUT)
            .connect_timeout(STEP_TIMEOUT)
            .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Fetcher {
            http,
            allow_http: Arc::new(allow_http_hosts),
        }
    }

    /// The reqwest client (no redirects, timeouts), for the token endpoint's requests.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// `url` parsed and allowed: https, or http to loopback or a named host.
    pub fn check(&self, url: &str) -> Result<Url, AuthError> {
        let parsed = Url::parse(url).map_err(|e| AuthError::Fetch {
            url: url.into(),
            why: format!("not a URL: {e}"),
        })?;
        match parsed.scheme() {
            "https" => Ok(parsed),
            "http" if self.http_allowed(&parsed) => Ok(parsed),
            "http" => Err(AuthError::Fetch {
                url: url.into(),
                why: "plain http is allowed only to loopback (use https, or name the host in oauth_http_hosts)".into(),
            }),
            other => Err(AuthError::Fetch {
                url: url.into(),
                why: format!("scheme {other:?} is not http(s)"),
            }),
        }
    }

    fn http_allowed(&self, url: &Url) -> bool {
        match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback() || self.named(&ip.to_string()),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback() || self.named(&ip.to_string()),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost") || self.named(d),
            None => false,
        }
    }

    fn named(&self, host: &str) -> bool {
        self.allow_http.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// GET a JSON document (following same-origin redirects only).
    pub async fn get_json(&self, url: &str) -> Result<Fetched, AuthError> {
        let mut at = self.check(url)?;
        for _ in 0..=MAX_REDIRECTS {
            let resp = self
                .http
                .get(at.clone())
                .header(ACCEPT, HeaderValue::from_static("application/json"))
                .send()
                .await
                .map_err(|e| fetch_err(at.as_str(), &e))?;
            let status = resp.status();
            if status.is_redirection() {
                let next = resp
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| at.join(l).ok())
                    .ok_or_else(|| AuthError::Fetch {
                        url: at.to_string(),
                        why: format!("HTTP {status} without a usable Location"),
                    })?;
                if next.origin() != at.origin() {
                    return Err(AuthError::Fetch {
                        url: at.to_string(),
                        why: format!(
                            "redirect to another origin ({}) not followed",
                            next.origin().ascii_serialization()
                        ),
                    });
                }
                at = self.check(next.as_str())?;
                continue;
            }
            if status.is_client_error() {
                return Ok(Fetched::Missing(status));
            }
            if !status.is_success() {
                return Err(AuthError::Fetch {
                    url: at.to_string(),
                    why: format!("HTTP {status}"),
                });
            }
            let body = read_capped(at.as_str(), resp).await?;
            let value: Value = serde_json::from_slice(&body).map_err(|e| AuthError::Metadata {
                url: at.to_string(),
                why: format!("not JSON: {e}"),
            })?;
            if !value.is_object() {
                return Err(AuthError::Metadata {
                    url: at.to_string(),
                    why: "not a JSON object".into(),
                });
            }
            return Ok(Fetched::Json(value));
        }
        Err(AuthError::Fetch {
            url: url.into(),
            why: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    /// POST `body` to an MCP server without a token: its status and `WWW-Authenticate` values
    /// (the challenge that starts discovery).
    pub async fn probe(
        &self,
        url: &str,
        body: &str,
        headers: &[(&str, String)],
    ) -> Result<(StatusCode, Vec<String>, reqwest::header::HeaderMap), AuthError> {
        let at = self.check(url)?;
        let mut rb = self.http.post(at.clone());
        for (k, v) in headers {
            rb = rb.header(*k, v);
        }
        let resp = rb
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(
                ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            )
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| fetch_err(at.as_str(), &e))?;
        let challenges = resp
            .headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        Ok((resp.status(), challenges, resp.headers().clone()))
    }

    /// One token endpoint request of the `oauth2` crate, sent by this client: the URL checked,
    /// no redirect followed, the answer over 1 MB refused.
    pub async fn token_call(
        &self,
        request: oauth2::HttpRequest,
    ) -> Result<oauth2::HttpResponse, AuthError> {
        let url = request.uri().to_string();
        let at = self.check(&url)?;
        let (parts, body) = request.into_parts();
        let resp = self
            .http
            .request(parts.method, at)
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(|e| fetch_err(&url, &e))?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = read_capped(&url, resp).await?;
        let mut out = oauth2::HttpResponse::new(body);
        *out.status_mut() = status;
        *out.headers_mut() = headers;
        Ok(out)
    }

    /// POST a form (`application/x-www-form-urlencoded`: revocation, token exchange), with HTTP
    /// Basic client authentication when `basic` is given (the client id and secret each
    /// form-encoded first, as RFC 6749 section 2.3.1 says); the status and the JSON answer
    /// (`null` when it is not JSON: RFC 7009 answers with an empty body).
    pub async fn post_form(
        &self,
        url: &str,
        form: &[(&str, String)],
        basic: Option<(&str, &str)>,
    ) -> Result<(StatusCode, Value), AuthError> {
        let at = self.check(url)?;
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let mut rb = self
            .http
            .post(at.clone())
            .header(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-www-form-urlencoded"),
            )
            .header(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some((id, secret)) = basic {
            let enc =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            rb = rb.basic_auth(enc(id), Some(enc(secret)));
        }
        json_answer(&at, rb.body(body)).await
    }

    /// POST a JSON body (client registration); the status and the JSON answer.
    pub async fn post_json(
        &self,
        url: &str,
        body: &Value,
    ) -> Result<(StatusCode, Value), AuthError> {
        let at = self.check(url)?;
        let rb = self
            .http
            .post(at.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static("application/json"))
            .body(body.to_string());
        json_answer(&at, rb).await
    }
}

/// Send `rb` (to `at`): the status and the answer as JSON (`null` when it is not JSON).
async fn json_answer(
    at: &Url,
    rb: reqwest::RequestBuilder,
) -> Result<(StatusCode, Value), AuthError> {
    let resp = rb.send().await.map_err(|e| fetch_err(at.as_str(), &e))?;
    let status = resp.status();
    let body = read_capped(at.as_str(), resp).await?;
    Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

/// A transport error, named without the URL's query (which never holds a secret here, but a
/// redirect target might).
fn fetch_err(url: &str, e: &reqwest::Error) -> AuthError {
    let why = if e.is_timeout() {
        format!("no answer within {} s", STEP_TIMEOUT.as_secs())
    } else if e.is_connect() {
        "cannot connect".to_string()
    } else {
        "the request failed".to_string()
    };
    AuthError::Fetch {
        url: url.into(),
        why,
    }
}

/// The body, refused past [`MAX_DOCUMENT`].
async fn read_capped(url: &str, resp: reqwest::Response) -> Result<Vec<u8>, AuthError> {
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_DOCUMENT as u64)
    {
        return Err(too_big(url));
    }
    let mut out = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| fetch_err(url, &e))?;
        if out.len() + chunk.len() > MAX_DOCUMENT {
            return Err(too_big(url));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

fn too_big(url: &str) -> AuthError {
    AuthError::Fetch {
        url: url.into(),
        why: format!("the document is over {} bytes", MAX_DOCUMENT),
    }
}

#[cfg(test)]
mod tests {
    use super::{Fetched, Fetcher, MAX_DOCUMENT};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback HTTP server answering each request with the next of `answers` (raw HTTP).
    async fn serve(answers: Vec<String>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            for answer in answers {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(answer.as_bytes()).await;
            }
        });
        base
    }

    fn ok(body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    fn redirect(to: &str) -> String {
        format!("HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
    }

    #[tokio::test]
    async fn documents_are_bounded() {
        let f = Fetcher::new(Vec::new());
        let big = format!("{{\"x\": \"{}\"}}", "a".repeat(MAX_DOCUMENT));
        let base = serve(vec![ok(&big)]).await;
        let e = f.get_json(&format!("{base}/doc")).await.err().unwrap();
        assert_eq!(
            e.to_string(),
            format!("{base}/doc: the document is over {MAX_DOCUMENT} bytes")
        );
        // A same-origin redirect is followed; one to another origin is not.
        let base = serve(vec![redirect("/moved"), ok(r#"{"a": 1}"#)]).await;
        match f.get_json(&format!("{base}/doc")).await.unwrap() {
            Fetched::Json(v) => assert_eq!(v["a"], 1),
            Fetched::Missing(s) => panic!("missing: {s}"),
        }
        let base = serve(vec![redirect("http://127.0.0.2:9/elsewhere")]).await;
        let e = f.get_json(&format!("{base}/doc")).await.err().unwrap();
        assert_eq!(
            e.to_string(),
            format!("{base}/doc: redirect to another origin (http://127.0.0.2:9) not followed")
        );
        // Not JSON, and not an object.
        let base = serve(vec![ok("[1]")]).await;
        let e = f.get_json(&format!("{base}/doc")).await.err().unwrap();
        assert_eq!(e.to_string(), format!("{base}/doc: not a JSON object"));
        // Nothing listening: the error names the URL, not a transport dump.
        let e = f.get_json("http://127.0.0.1:9/doc").await.err().unwrap();
        assert_eq!(e.to_string(), "http://127.0.0.1:9/doc: cannot connect");
    }

    #[test]
    fn plain_http_only_to_loopback_and_named_hosts() {
        let f = Fetcher::new(vec!["auth.test".into()]);
        assert!(f.check("https://example.com/x").is_ok());
        assert!(f.check("http://127.0.0.1:9/x").is_ok());
        assert!(f.check("http://localhost:9/x").is_ok());
        assert!(f.check("http://[::1]:9/x").is_ok());
        assert!(f.check("http://auth.test/x").is_ok());
        let e = f.check("http://example.com/x").unwrap_err().to_string();
        assert_eq!(
            e,
            "http://example.com/x: plain http is allowed only to loopback (use https, or name the host in oauth_http_hosts)"
        );
        assert!(f.check("ftp://example.com/x").is_err());
        assert!(f.check("not a url").is_err());
    }
}
