//! A minimal HTTP/1.1 client: one persistent connection, requests written in one go, responses
//! read with `Content-Length`, chunked, or close-delimited bodies. Just enough for MCP's
//! Streamable HTTP; nothing here allocates more than one buffer per connection.

use anyhow::{anyhow, bail, Context, Result};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where requests go: `http://HOST:PORT/PATH`, and the headers every request there carries.
#[derive(Debug, Clone)]
pub struct Target {
    /// `HOST:PORT` to connect to.
    pub addr: String,
    /// The request path (`/mcp`).
    pub path: String,
    /// `(name, value)` pairs sent on every request (e.g. `Authorization` for a protected
    /// server); usually none.
    pub headers: Vec<(String, String)>,
}

impl Target {
    /// Parse an `http://` URL (no TLS, no user info).
    pub fn parse(url: &str) -> Result<Arc<Target>> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow!("only http:// URLs are supported: {url}"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let addr = if authority.contains(':') {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        Ok(Arc::new(Target {
            addr,
            path: path.to_string(),
            headers: Vec::new(),
        }))
    }

    /// [`Target::parse`], every request also carrying `headers`.
    pub fn with_headers(url: &str, headers: &[(String, String)]) -> Result<Arc<Target>> {
        let mut t = Arc::unwrap_or_clone(Target::parse(url)?);
        t.headers = headers.to_vec();
        Ok(Arc::new(t))
    }
}

/// A response, body read whole.
#[derive(Debug)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`, lower-cased (empty when absent).
    pub content_type: String,
    /// `Mcp-Session-Id`, when sent.
    pub session: Option<String>,
    /// `Location`, when sent (a redirect).
    pub location: Option<String>,
    /// The first `Set-Cookie`'s `name=value`, when sent.
    pub cookie: Option<String>,
    /// The body (chunked encoding removed).
    pub body: Vec<u8>,
}

impl Response {
    /// Is the body an SSE stream?
    pub fn is_sse(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }
}

/// One keep-alive connection.
pub struct Conn {
    target: Arc<Target>,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    pos: usize,
    req: Vec<u8>,
}

impl Conn {
    /// A connection to `target`, opened on first use (and re-opened if the server closes it).
    pub fn new(target: Arc<Target>) -> Conn {
        Conn {
            target,
            stream: None,
            buf: Vec::with_capacity(16 * 1024),
            pos: 0,
            req: Vec::with_capacity(1024),
        }
    }

    /// Open the TCP connection now (if not open).
    pub async fn connect(&mut self) -> Result<()> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.target.addr)
                .await
                .with_context(|| format!("connecting to {}", self.target.addr))?;
            s.set_nodelay(true)?;
            self.stream = Some(s);
            self.buf.clear();
            self.pos = 0;
        }
        Ok(())
    }

    /// Send one request and read its whole response. `headers` are extra `(name, value)` pairs.
    pub async fn request(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response> {
        self.req.clear();
        self.req.extend_from_slice(method.as_bytes());
        self.req.push(b' ');
        self.req.extend_from_slice(self.target.path.as_bytes());
        self.req.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        self.req.extend_from_slice(self.target.addr.as_bytes());
        self.req.extend_from_slice(b"\r\n");
        let every = self
            .target
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()));
        for (k, v) in every.chain(headers.iter().copied()) {
            self.req.extend_from_slice(k.as_bytes());
            self.req.extend_from_slice(b": ");
            self.req.extend_from_slice(v.as_bytes());
            self.req.extend_from_slice(b"\r\n");
        }
        if !body.is_empty() || method == "POST" {
            self.req.extend_from_slice(b"Content-Length: ");
            self.req
                .extend_from_slice(body.len().to_string().as_bytes());
            self.req.extend_from_slice(b"\r\n");
        }
        self.req.extend_from_slice(b"\r\n");
        self.req.extend_from_slice(body);
        // A kept-alive connection the server closed meanwhile: retry once on a fresh one.
        let reused = self.stream.is_some();
        match self.exchange(method).await {
            Ok(r) => Ok(r),
            Err(e) if reused => {
                self.stream = None;
                self.exchange(method).await.context(e)
            }
            Err(e) => {
                self.stream = None;
                Err(e)
            }
        }
    }

    async fn exchange(&mut self, method: &str) -> Result<Response> {
        self.connect().await?;
        let stream = self.stream.as_mut().expect("connected");
        stream.write_all(&self.req).await.context("writing")?;
        let r = self.read_response(method == "HEAD").await;
        if r.is_err() {
            self.stream = None;
        }
        r
    }

    /// Read more bytes into the buffer; an error at EOF.
    async fn fill(&mut self) -> Result<()> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 64 * 1024 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.reserve(16 * 1024);
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| anyhow!("not connected"))?;
        let n = stream.read_buf(&mut self.buf).await.context("reading")?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        Ok(())
    }

    /// Read until EOF (close-delimited body).
    async fn fill_or_eof(&mut self) -> Result<bool> {
        self.buf.reserve(16 * 1024);
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| anyhow!("not connected"))?;
        let n = stream.read_buf(&mut self.buf).await.context("reading")?;
        Ok(n > 0)
    }

    async fn read_response(&mut self, head: bool) -> Result<Response> {
        loop {
            // Parse the head.
            let (status, content_type, session, length, chunked, close, used, location, cookie) = loop {
                let mut hs = [httparse::EMPTY_HEADER; 32];
                let mut resp = httparse::Response::new(&mut hs);
                match resp
                    .parse(&self.buf[self.pos..])
                    .context("parsing the response")?
                {
                    httparse::Status::Complete(used) => {
                        let mut content_type = String::new();
                        let mut session = None;
                        let mut length = None;
                        let mut chunked = false;
                        let mut close = resp.version == Some(0);
                        let mut location = None;
                        let mut cookie = None;
                        for h in resp.headers.iter() {
                            let v = std::str::from_utf8(h.value).unwrap_or("").trim();
                            if h.name.eq_ignore_ascii_case("content-type") {
                                content_type = v.to_ascii_lowercase();
                            } else if h.name.eq_ignore_ascii_case("mcp-session-id") {
                                session = Some(v.to_string());
                            } else if h.name.eq_ignore_ascii_case("content-length") {
                                length = v.parse::<usize>().ok();
                            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                                chunked = v.to_ascii_lowercase().contains("chunked");
                            } else if h.name.eq_ignore_ascii_case("connection") {
                                close = v.eq_ignore_ascii_case("close");
                            } else if h.name.eq_ignore_ascii_case("location") {
                                location = Some(v.to_string());
                            } else if h.name.eq_ignore_ascii_case("set-cookie") && cookie.is_none()
                            {
                                cookie = v.split(';').next().map(str::to_string);
                            }
                        }
                        break (
                            resp.code.unwrap_or(0),
                            content_type,
                            session,
                            length,
                            chunked,
                            close,
                            used,
                            location,
                            cookie,
                        );
                    }
                    httparse::Status::Partial => self.fill().await?,
                }
            };
            self.pos += used;
            if (100..200).contains(&status) {
                continue; // 100 Continue and friends: the real response follows.
            }
            let no_body = head || status == 204 || status == 304;
            let body = if no_body {
                Vec::new()
            } else if chunked {
                self.read_chunked().await?
            } else if let Some(n) = length {
                while self.buf.len() - self.pos < n {
                    self.fill().await?;
                }
                let b = self.buf[self.pos..self.pos + n].to_vec();
                self.pos += n;
                b
            } else {
                // Close-delimited.
                while self.fill_or_eof().await? {}
                let b = self.buf[self.pos..].to_vec();
                self.pos = self.buf.len();
                self.stream = None;
                b
            };
            if close {
                self.stream = None;
            }
            return Ok(Response {
                status,
                content_type,
                session,
                location,
                cookie,
                body,
            });
        }
    }

    /// Read one CRLF-terminated line (without the CRLF).
    async fn read_line(&mut self) -> Result<Vec<u8>> {
        loop {
            if let Some(i) = self.buf[self.pos..].windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[self.pos..self.pos + i].to_vec();
                self.pos += i + 2;
                return Ok(line);
            }
            self.fill().await?;
        }
    }

    async fn read_chunked(&mut self) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line().await?;
            let size_text = std::str::from_utf8(&line).unwrap_or("");
            let size_text = size_text.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .with_context(|| format!("bad chunk size {size_text:?}"))?;
            if size == 0 {
                // Trailers, then an empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok(body);
            }
            while self.buf.len() - self.pos < size + 2 {
                self.fill().await?;
            }
            body.extend_from_slice(&self.buf[self.pos..self.pos + size]);
            self.pos += size + 2;
        }
    }
}
