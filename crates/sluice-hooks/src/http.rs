//! The `http` hook kind: POST each event to a hook service over a shared keep-alive pool and read
//! its answer with the Zato-style hook service contract (`{"request": …}` / `{"response": …}`, non-2xx refuses)
//! or, with `"protocol": "claude-code"`, Claude Code's http hook contract.
//!
//! **Claude Code's contract**: the body is the same event; a 2xx answer with an empty body
//! passes, a 2xx JSON object is read exactly like a command hook's stdout after exit 0 (see
//! [`crate::command`]: `permissionDecision`, `decision: "block"`, `updatedInput`, …), and a
//! non-2xx answer or a 2xx body that is not a JSON object is a non-blocking error (logged,
//! pass), as Claude Code treats them; with `on_failure: "block"` (Claude Code's `onFailure`) they
//! are failures, and the chain refuses the message naming the hook. Timeouts and refused
//! connections are failures (`on_error`, or a refusal with `on_failure: "block"`).
//!
//! The contract, for an event POSTed as `application/json` (the body is
//! [`HookEvent::to_json`]):
//!
//! | the service answers                              | request phase        | response phase |
//! |--------------------------------------------------|----------------------|----------------|
//! | 2xx, empty body, or JSON with neither key        | pass                 | pass           |
//! | 2xx, `{"request": {…}}`                          | modify (replace)     | pass (ignored) |
//! | 2xx, `{"response": {…}}`                         | answer               | modify (replace the reply) |
//! | 2xx, `{"response": <not an object>}`             | unreadable (failure) | refuse ("the response hook returned a non-object response") |
//! | 2xx, a body that is not JSON                     | unreadable (failure) | unreadable (failure) |
//! | non-2xx                                          | refuse               | refuse         |
//!
//! A refusal's reason is the body's JSON `reason` field, else the body text (at most 500
//! characters), else the status. As Zato-style hook services do ("the reason stays in the server's log") it
//! is not meant for the agent. `{"response": …}` wins over `{"request": …}` when a request-phase
//! answer has both. A `null` under either key counts as absent in the request phase.
//!
//! A replacement must be a JSON-RPC message; `"jsonrpc": "2.0"` and the original message's `id`
//! are filled in when the object leaves them out. A replacement equal to the message it replaces
//! is reported as pass. Timeouts, refused connections, and unreadable answers are a
//! [`HookFailure`]: the chain applies the hook's `on_error`. Redirects are not followed (a 3xx
//! is a non-2xx answer).

use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::HookEvent;
use crate::wire::{fmt_duration, native_decision, truncate_chars};
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use serde_json::Value;
use sluice_config::HttpProtocol;
use sluice_http::Client;
use std::sync::OnceLock;
use std::time::Duration;

/// The longest answer body read from a hook service.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// How much of a non-JSON error body becomes the refusal reason.
const MAX_REASON_CHARS: usize = 500;

/// The reqwest client of every http and Civic hook reached over TLS or through a proxy:
/// connection pooling and keep-alive, kept across reloads (a rebuilt hook reuses warm
/// connections), redirects not followed. A plain `http://` service is reached through
/// [`sluice_http::Client`]'s pool of its serving thread instead, which never follows one
/// either.
pub(crate) fn shared_client() -> Result<reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            sluice_http::reqwest_builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        })
        .clone()
}

/// The client a hook reaches `url` with.
pub(crate) fn client_for(url: &reqwest::Url) -> Result<Client, String> {
    let fallback = shared_client()?;
    Ok(Client::for_url_or(url, || fallback))
}

/// A hook service: every event is POSTed to `url`.
#[derive(Clone)]
pub struct HttpHook {
    url: reqwest::Url,
    headers: HeaderMap,
    timeout: Duration,
    client: Client,
    protocol: HttpProtocol,
    fail_closed: bool,
}

impl std::fmt::Debug for HttpHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpHook")
            .field("url", &self.url.as_str())
            .field("timeout", &self.timeout)
            .field("protocol", &self.protocol)
            .finish()
    }
}

/// Why an http hook cannot be made: a malformed URL or header (the message names it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadHttpHook(String);

impl HttpHook {
    /// A hook that POSTs to `url` (http or https) with the extra `headers`, waiting at most
    /// `timeout` for the whole answer. Fails on a malformed URL or header.
    pub fn new(
        url: String,
        headers: Vec<(String, String)>,
        timeout: Duration,
    ) -> Result<HttpHook, BadHttpHook> {
        HttpHook::build(url, headers, timeout).map_err(BadHttpHook)
    }

    fn build(
        url: String,
        headers: Vec<(String, String)>,
        timeout: Duration,
    ) -> Result<HttpHook, String> {
        let url = reqwest::Url::parse(&url).map_err(|e| format!("bad hook URL {url:?}: {e}"))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(format!(
                "bad hook URL {:?}: the scheme must be http or https",
                url.as_str()
            ));
        }
        let mut map = HeaderMap::new();
        for (k, v) in &headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| format!("bad header name {k:?}: {e}"))?;
            let value =
                HeaderValue::from_str(v).map_err(|e| format!("bad value for header {k:?}: {e}"))?;
            map.append(name, value);
        }
        Ok(HttpHook {
            client: client_for(&url)?,
            url,
            headers: map,
            timeout,
            protocol: HttpProtocol::Zato,
            fail_closed: false,
        })
    }

    /// `on_failure: "block"`: a non-2xx answer or a body that is not a JSON object (Claude
    /// Code's contract) is a failure, not a pass.
    pub fn failing_closed(mut self, yes: bool) -> HttpHook {
        self.fail_closed = yes;
        self
    }

    /// Read answers with `protocol`.
    pub fn with_protocol(mut self, protocol: HttpProtocol) -> HttpHook {
        self.protocol = protocol;
        self
    }

    /// The URL events are POSTed to.
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    /// POST the event and read the service's decision.
    pub async fn decide(&self, ev: &HookEvent) -> Result<Decision, HookFailure> {
        let body = ev.payload().into_bytes();
        let (status, buf) = post(
            &self.client,
            &self.url,
            self.headers.clone(),
            body,
            self.timeout,
        )
        .await?;
        if self.protocol == HttpProtocol::ClaudeCode {
            if self.fail_closed {
                claude_code_failure(status, &buf)?;
            }
            return read_claude_code_reply(self.url.as_str(), ev, status, &buf);
        }
        read_reply(ev, status, &buf)
    }
}

/// POST `body` (JSON) to `url` with `client` and read the whole answer, within `timeout`.
pub(crate) async fn post(
    client: &Client,
    url: &reqwest::Url,
    mut headers: HeaderMap,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<(reqwest::StatusCode, Vec<u8>), HookFailure> {
    let exchange = async {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let reply = client
            .send(reqwest::Method::POST, url, headers, Some(body.into()))
            .await
            .map_err(|e| HookFailure(format!("hook service request failed: {e}")))?;
        let status = reply.status;
        let mut buf = Vec::new();
        let mut chunks = reply.stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| {
                HookFailure(format!("reading the hook service's answer failed: {e}"))
            })?;
            if buf.len() + chunk.len() > MAX_BODY {
                return Err(HookFailure(format!(
                    "the hook service's answer is larger than {MAX_BODY} bytes"
                )));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok((status, buf))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| HookFailure(format!("timed out after {}", fmt_duration(timeout))))?
}

/// What Claude Code's contract calls a non-blocking error, as a failure (`on_failure:
/// "block"`): a non-2xx answer, or a 2xx body that is neither empty nor a JSON object.
fn claude_code_failure(status: reqwest::StatusCode, buf: &[u8]) -> Result<(), HookFailure> {
    let text = String::from_utf8_lossy(buf);
    let text = truncate_chars(text.trim(), MAX_REASON_CHARS);
    if !status.is_success() {
        return Err(HookFailure(if text.is_empty() {
            format!("the hook service answered HTTP {status}")
        } else {
            format!("the hook service answered HTTP {status}: {text}")
        }));
    }
    if !text.is_empty() && !matches!(serde_json::from_slice(buf), Ok(Value::Object(_))) {
        return Err(HookFailure(format!(
            "the hook service answered a body that is not a JSON object: {text}"
        )));
    }
    Ok(())
}

/// Claude Code's http hook contract (see the module docs).
pub(crate) fn read_claude_code_reply(
    url: &str,
    ev: &HookEvent,
    status: reqwest::StatusCode,
    buf: &[u8],
) -> Result<Decision, HookFailure> {
    let text = String::from_utf8_lossy(buf);
    if !status.is_success() {
        tracing::warn!(url, status = status.as_u16(), body = %truncate_chars(text.trim(), 200), "http hook answered non-2xx (a non-blocking error: the message passes)");
        return Ok(Decision::Pass);
    }
    if text.trim().is_empty() {
        return Ok(Decision::Pass);
    }
    match serde_json::from_slice::<Value>(buf) {
        Ok(Value::Object(_)) => crate::claude::read_json_protocol(url, ev, buf),
        _ => {
            tracing::warn!(url, body = %truncate_chars(text.trim(), 200), "http hook answered 2xx with a body that is not a JSON object (a non-blocking error: the message passes)");
            Ok(Decision::Pass)
        }
    }
}

/// The decision in the hook service's answer: a refusal for a non-2xx status, a pass for an
/// empty body or a JSON value that is not an object, else the Zato-style hook services' answer shape.
pub(crate) fn read_reply(
    ev: &HookEvent,
    status: reqwest::StatusCode,
    buf: &[u8],
) -> Result<Decision, HookFailure> {
    if !status.is_success() {
        return Ok(Decision::Refuse(Refusal {
            reason: refusal_reason(status, buf),
            for_agent: false,
            error: None,
        }));
    }
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Ok(Decision::Pass);
    }
    let answer: Value = serde_json::from_slice(buf).map_err(|e| {
        HookFailure(format!(
            "unreadable answer from the hook service (HTTP {}, not JSON: {e}): {}",
            status.as_u16(),
            truncate_chars(&String::from_utf8_lossy(buf), 200)
        ))
    })?;
    match answer {
        Value::Object(o) => Ok(native_decision(ev, &o)?.unwrap_or(Decision::Pass)),
        _ => Ok(Decision::Pass),
    }
}

/// The refusal reason of a non-2xx answer: the body's JSON `reason`, else the body text
/// (truncated), else the status.
fn refusal_reason(status: reqwest::StatusCode, body: &[u8]) -> String {
    if let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body) {
        if let Some(r) = o.get("reason").and_then(Value::as_str) {
            if !r.trim().is_empty() {
                return r.to_string();
            }
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        format!("the hook service answered HTTP {status}")
    } else {
        truncate_chars(text, MAX_REASON_CHARS).to_string()
    }
}

/// A header value with Claude Code's environment interpolation: `$NAME` and `${NAME}` are the
/// variable's value when `allowed` lists NAME (empty when it is not set), else the empty
/// string, as Claude Code fills a reference its `allowedEnvVars` does not list.
pub fn expand_env(value: &str, allowed: &[String], env: impl Fn(&str) -> Option<String>) -> String {
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, used) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end)
                    if end > 0
                        && braced[..end].starts_with(is_start)
                        && braced[..end].chars().all(is_name) =>
                {
                    (&braced[..end], end + 2)
                }
                _ => ("", 0),
            }
        } else if after.starts_with(is_start) {
            let end = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
            (&after[..end], end)
        } else {
            ("", 0)
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
            continue;
        }
        if allowed.iter().any(|a| a == name) {
            out.push_str(&env(name).unwrap_or_default());
        }
        rest = &after[used..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_expand_listed_environment_variables_only() {
        let env = |n: &str| match n {
            "TOKEN" => Some("t0k".to_string()),
            "TEAM" => Some("red".to_string()),
            _ => None,
        };
        let allowed = vec!["TOKEN".to_string(), "UNSET".to_string()];
        let x = |v: &str| expand_env(v, &allowed, env);
        assert_eq!(x("Bearer $TOKEN"), "Bearer t0k");
        assert_eq!(x("Bearer ${TOKEN}!"), "Bearer t0k!");
        assert_eq!(x("$TOKEN-$TEAM"), "t0k-");
        assert_eq!(x("${UNSET}x"), "x");
        assert_eq!(x("cost $5, ${} and $"), "cost $5, ${} and $");
        assert_eq!(x("plain"), "plain");
        assert_eq!(expand_env("$TOKEN", &[], env), "");
    }

    #[test]
    fn on_failure_block_reads_claude_code_non_blocking_errors_as_failures() {
        let ok = reqwest::StatusCode::OK;
        assert_eq!(claude_code_failure(ok, b""), Ok(()));
        assert_eq!(
            claude_code_failure(ok, b" {\"decision\":\"block\"} "),
            Ok(())
        );
        assert_eq!(
            claude_code_failure(reqwest::StatusCode::BAD_GATEWAY, b"upstream down\n"),
            Err(HookFailure(
                "the hook service answered HTTP 502 Bad Gateway: upstream down".into()
            ))
        );
        assert_eq!(
            claude_code_failure(reqwest::StatusCode::NOT_FOUND, b""),
            Err(HookFailure(
                "the hook service answered HTTP 404 Not Found".into()
            ))
        );
        assert_eq!(
            claude_code_failure(ok, b"[1]"),
            Err(HookFailure(
                "the hook service answered a body that is not a JSON object: [1]".into()
            ))
        );
    }

    #[test]
    fn reasons() {
        let s = reqwest::StatusCode::INTERNAL_SERVER_ERROR;
        assert_eq!(refusal_reason(s, br#"{"reason":"no"}"#), "no");
        assert_eq!(refusal_reason(s, b"  plain text \n"), "plain text");
        assert_eq!(
            refusal_reason(s, b""),
            "the hook service answered HTTP 500 Internal Server Error"
        );
        let long = "é".repeat(800);
        assert_eq!(refusal_reason(s, long.as_bytes()).chars().count(), 500);
    }

    #[test]
    fn bad_configuration() {
        let t = Duration::from_secs(1);
        assert!(HttpHook::new("not a url".into(), vec![], t).is_err());
        assert!(HttpHook::new("ftp://x/".into(), vec![], t).is_err());
        assert!(HttpHook::new(
            "http://127.0.0.1:1/".into(),
            vec![("bad name".into(), "v".into())],
            t
        )
        .is_err());
        assert!(HttpHook::new(
            "http://127.0.0.1:1/".into(),
            vec![("x-a".into(), "v\n".into())],
            t
        )
        .is_err());
        assert!(HttpHook::new(
            "http://127.0.0.1:1/".into(),
            vec![("x-a".into(), "v".into())],
            t
        )
        .is_ok());
    }
}
