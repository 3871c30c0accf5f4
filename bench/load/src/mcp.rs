//! An MCP client session over Streamable HTTP: `initialize` (keeping `Mcp-Session-Id`),
//! `notifications/initialized`, then requests whose replies come as JSON or as an SSE stream.

use crate::http::{Conn, Response};
use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};

/// The protocol revision the load generator asks for.
pub const PROTOCOL: &str = "2025-11-25";

/// The 2026-07-28 revision (no handshake, `_meta` on every request).
pub const MODERN: &str = "2026-07-28";

/// What a session needs on every request after `initialize`.
#[derive(Debug, Clone)]
pub struct Session {
    /// `Mcp-Session-Id` (None for a server that does not use sessions).
    pub id: Option<String>,
    /// The negotiated protocol version (sent as `MCP-Protocol-Version`).
    pub version: String,
    /// A 2026-07-28 client: no session; each call carries `_meta` and `Mcp-Method` / `Mcp-Name`.
    pub modern: bool,
}

impl Session {
    /// A 2026-07-28 client's "session": nothing to open.
    pub fn modern() -> Session {
        Session {
            id: None,
            version: MODERN.into(),
            modern: true,
        }
    }

    /// Send a JSON-RPC message (request or notification) on `conn`.
    pub async fn post(&self, conn: &mut Conn, body: &[u8]) -> Result<Response> {
        self.post_with(conn, body, &[]).await
    }

    /// [`Session::post`] with extra headers.
    async fn post_with(
        &self,
        conn: &mut Conn,
        body: &[u8],
        extra: &[(&str, &str)],
    ) -> Result<Response> {
        let mut headers: Vec<(&str, &str)> = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", &self.version),
        ];
        if let Some(id) = &self.id {
            headers.push(("Mcp-Session-Id", id));
        }
        headers.extend_from_slice(extra);
        conn.request("POST", &headers, body).await
    }

    /// `tools/call echo` as this session's era sends it (see [`echo_call`]); returns the body
    /// and the arguments to check the reply against.
    pub fn echo_call(&self, id: u64, tool: &str, filler: &str) -> (Vec<u8>, Value) {
        let (body, args) = echo_call(id, tool, filler);
        if !self.modern {
            return (body, args);
        }
        let mut v: Value = serde_json::from_slice(&body).expect("our own JSON");
        v["params"]["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "sluice-bench-load", "version": env!("CARGO_PKG_VERSION")},
        });
        (v.to_string().into_bytes(), args)
    }

    /// Send a `tools/call` of `tool` and return its reply (a modern session adds the mirrored
    /// `Mcp-Method` / `Mcp-Name` headers).
    pub async fn call(&self, conn: &mut Conn, id: u64, tool: &str, body: &[u8]) -> Result<Value> {
        let resp = if self.modern {
            self.post_with(
                conn,
                body,
                &[("Mcp-Method", "tools/call"), ("Mcp-Name", tool)],
            )
            .await?
        } else {
            self.post(conn, body).await?
        };
        reply_of(&resp, id)
    }

    /// Send a request and return its reply (the JSON-RPC object carrying `id`).
    pub async fn request(&self, conn: &mut Conn, id: u64, body: &[u8]) -> Result<Value> {
        let resp = self.post(conn, body).await?;
        reply_of(&resp, id)
    }
}

/// Open a session: `initialize`, then `notifications/initialized`.
pub async fn initialize(conn: &mut Conn, client: &str) -> Result<Session> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": client, "version": env!("CARGO_PKG_VERSION")},
        }
    })
    .to_string();
    let resp = conn
        .request(
            "POST",
            &[
                ("Accept", "application/json, text/event-stream"),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
        .await?;
    let reply = reply_of(&resp, 0)?;
    let result = reply
        .get("result")
        .ok_or_else(|| anyhow!("initialize failed: {reply}"))?;
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or(PROTOCOL)
        .to_string();
    let session = Session {
        id: resp.session.clone(),
        version,
        modern: false,
    };
    let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let r = session.post(conn, note).await?;
    if !(200..300).contains(&r.status) {
        bail!(
            "notifications/initialized: HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    Ok(session)
}

/// The JSON-RPC reply to `id` in a response: the JSON body, or the matching SSE `message` event.
pub fn reply_of(resp: &Response, id: u64) -> Result<Value> {
    reply_in(resp, id, |v: Value| {
        let reply = v.get("id").and_then(Value::as_u64) == Some(id)
            && (v.get("result").is_some() || v.get("error").is_some());
        Ok(reply.then_some(v))
    })
}

/// One page of a list reply, skimmed: its tools counted (each checked to be JSON, none built
/// into a tree) and its `nextCursor`.
#[derive(serde::Deserialize)]
struct ListReply {
    id: Option<u64>,
    result: Option<ListPage>,
    error: Option<Value>,
}

#[derive(serde::Deserialize)]
struct ListPage {
    #[serde(default)]
    tools: Vec<serde::de::IgnoredAny>,
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
}

/// The reply to the `tools/list` request `id`, skimmed: how many tools the page holds and its
/// `nextCursor`. Every byte is read and checked as JSON, but the tools are counted, not built
/// (what a listing costs this client is then mostly reading, the same for every server).
pub fn list_page_of(resp: &Response, id: u64) -> Result<(usize, Option<String>)> {
    reply_in(resp, id, |r: ListReply| {
        if r.id != Some(id) {
            return Ok(None);
        }
        match (r.result, r.error) {
            (Some(page), _) => Ok(Some((page.tools.len(), page.next_cursor))),
            (None, Some(e)) => bail!("tools/list failed: {e}"),
            (None, None) => Ok(None),
        }
    })
}

/// The reply to `id` in a response: the JSON body, or the first SSE event, read as `R`, that
/// `pick` takes (`None`: not that reply; SSE events that are not an `R` are skipped).
fn reply_in<R: serde::de::DeserializeOwned, T>(
    resp: &Response,
    id: u64,
    pick: impl Fn(R) -> Result<Option<T>>,
) -> Result<T> {
    if resp.is_sse() {
        for data in sse_data(&resp.body) {
            if let Ok(r) = serde_json::from_slice::<R>(&data) {
                if let Some(reply) = pick(r)? {
                    return Ok(reply);
                }
            }
        }
        bail!(
            "HTTP {}: the SSE stream ended without the reply to {id}",
            resp.status
        );
    }
    if !(200..300).contains(&resp.status) {
        bail!("HTTP {}: {}", resp.status, head(&resp.body));
    }
    let r = serde_json::from_slice::<R>(&resp.body)
        .map_err(|e| anyhow!("reply is not JSON ({e}): {}", head(&resp.body)))?;
    pick(r)?.ok_or_else(|| {
        anyhow!(
            "reply carries the wrong id (wanted {id}): {}",
            head(&resp.body)
        )
    })
}

/// The first 300 bytes of a body, as text (for an error message).
fn head(body: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&body[..body.len().min(300)])
}

/// The `data` of every event in an SSE body (multi-line data joined with `\n`).
pub fn sse_data(body: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<u8>> = None;
    for line in body.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if let Some(d) = cur.take() {
                out.push(d);
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix(b"data:") {
            let rest = rest.strip_prefix(b" ").unwrap_or(rest);
            match &mut cur {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(rest);
                }
                None => cur = Some(rest.to_vec()),
            }
        }
    }
    if let Some(d) = cur {
        out.push(d);
    }
    out
}

/// The body of `tools/call echo` with arguments that make every call's reply checkable. They
/// carry a `reason` too, which Sluice's `explain` hook requires and strips (and which a
/// schema-validating upstream may drop): [`check_echo`] accepts the echo with or without it.
pub fn echo_call(id: u64, tool: &str, filler: &str) -> (Vec<u8>, Value) {
    let args = json!({"i": id, "text": filler, "reason": "benchmark"});
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args},
    });
    (body.to_string().into_bytes(), args)
}

/// Check an echo reply: a result whose `structuredContent` is the arguments sent (with or without
/// their `reason`) and whose first text content is their JSON.
pub fn check_echo(reply: &Value, args: &Value) -> Result<()> {
    let mut stripped = args.clone();
    if let Some(m) = stripped.as_object_mut() {
        m.remove("reason");
    }
    let same = |v: &Value| v == args || *v == stripped;
    let Some(result) = reply.get("result") else {
        bail!("error reply: {reply}");
    };
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        bail!("tool error: {result}");
    }
    if !result.get("structuredContent").is_some_and(same) {
        bail!("structuredContent is not the arguments sent: {result}");
    }
    let text = result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("no text content: {result}"))?;
    let parsed: Value =
        serde_json::from_str(text).map_err(|e| anyhow!("text content is not JSON ({e})"))?;
    if !same(&parsed) {
        bail!("text content is not the arguments sent: {text}");
    }
    Ok(())
}
