//! The `civic` hook kind: a hook server built on Civic's `@civic/hook-common` (0.9.0), called
//! over its HTTP protocol as Civic's passthrough calls the servers named in its `HOOKS` URLs.
//!
//! The protocol is tRPC over HTTP with the superjson transformer: each call is a POST to
//! `<url>/<procedure>` with the body `{"json": <input>}`; a result comes back as
//! `{"result": {"data": {"json": <output>}}}`, a thrown error as a non-2xx answer with
//! `{"error": {"json": {"message", "code", "data": {"code": "INTERNAL_SERVER_ERROR", …}}}}`.
//! A server only has the procedures its hook implements; a missing one (tRPC's `NOT_FOUND`) or
//! an error saying "not implemented" means "continue", as Civic's client reads them.
//!
//! Which procedure an event calls, and how its answer maps onto Sluice's decisions:
//!
//! | event | procedure (`input`) | answer → decision |
//! |---|---|---|
//! | client request | `processCallToolRequest`, `processListToolsRequest`, `processListPromptsRequest`, `processInitializeRequest`, `processListResourcesRequest`, `processListResourceTemplatesRequest`, `processReadResourceRequest`, else `processOtherRequest` (`{request, requestExtra}`) | `continue` with `request` → pass / modify; `respond` with `response` → answer |
//! | reply (a result) | `processCallToolResult` (`{response, originalCallToolRequest, originalRequestExtra}`), `process<…>Result` (`{response, originalRequest, originalRequestExtra}`), else `processOtherResult` | `continue` with `response` → pass / modify |
//! | reply (an error) | `processCallToolError` (`{error, originalToolCall, originalRequestExtra}`), `process<…>Error` (`{error, originalRequest, originalRequestExtra}`), else `processOtherError` | `continue` → pass; `respond` with `response` → the error is replaced by that result |
//! | client notification | `processNotification` (the notification) | `continue` with `notification` → pass / modify |
//! | upstream request to the client (sampling, elicitation, roots) | `processTargetRequest` (`{request, requestExtra}`) | `continue` → pass / modify; `respond` with `response` → the upstream gets that answer and the client is not asked (the hooks nearer the client do not see it) |
//! | upstream notification | `processTargetNotification` (the notification) | `continue` → pass / modify |
//! | client reply to an upstream request (a result) | `processTargetResult` (`{response, originalRequest, originalRequestExtra}`) | `continue` with `response` → pass / modify |
//! | client reply to an upstream request (an error) | `processTargetError` (`{error, originalRequest, originalRequestExtra}`) | `continue` → pass; `respond` with `response` → the error is replaced by that result |
//!
//! `requestExtra` is `{"requestId": <the JSON-RPC id>, "sessionId": <the session>}`.
//!
//! A refusal. In 0.9.0 a hook refuses by throwing. A thrown `McpError(code, message)` reaches
//! the wire as a tRPC error whose message is `MCP error <code>: <message>` (tRPC keeps neither
//! the code nor `data` apart): Sluice answers with exactly that error, `{"code": <code>,
//! "message": <message>}`, so the client's SDK rebuilds the `McpError` the hook threw. (Civic's
//! passthrough means to keep the code and message too, but gives a remote hook's refusal as
//! -32603 `MCP error -32603: MCP error <code>: <message>` with tRPC's stack in `data`.) In the
//! request phase the request goes no further; in the response phase the client gets the error
//! instead of the result; an upstream's request to the client, or the client's reply to it,
//! refused so is answered to the upstream with that error. Any other thrown `Error` (its
//! message the reason), and before 0.9.0 `{"resultType": "abort", "reason": …}`, refuses as
//! Sluice's hooks do: -32030 in the request phase, -32031 in the response phase, with the
//! reason for the agent. An input the server's schemas reject (`BAD_REQUEST`), an unreadable
//! answer, a timeout or a refused connection is a failure (the hook's `on_error`).

use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::{HookEvent, Phase};
use crate::http::{client_for, post};
use crate::wire::{replace, truncate_chars};
use parking_lot::Mutex;
use reqwest::header::HeaderMap;
use serde_json::{json, Map, Value};
use sluice_core::{Kind, Message, RpcError};
use sluice_http::Client;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A Civic hook server.
#[derive(Clone)]
pub struct CivicHook {
    url: String,
    timeout: Duration,
    /// Each procedure's URL and the client that reaches it, made on its first call.
    procedures: Arc<Mutex<HashMap<String, (reqwest::Url, Client)>>>,
}

impl std::fmt::Debug for CivicHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CivicHook")
            .field("url", &self.url)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The methods with procedures of their own: (method, the name inside `process…Request` /
/// `…Result` / `…Error`).
const DEDICATED: &[(&str, &str)] = &[
    ("tools/call", "CallTool"),
    ("tools/list", "ListTools"),
    ("prompts/list", "ListPrompts"),
    ("initialize", "Initialize"),
    ("resources/list", "ListResources"),
    ("resources/templates/list", "ListResourceTemplates"),
    ("resources/read", "ReadResource"),
];

impl CivicHook {
    /// A hook calling the server at `url` (http or https), waiting at most `timeout`.
    pub(crate) fn new(url: String, timeout: Duration) -> Result<CivicHook, String> {
        let parsed = reqwest::Url::parse(&url).map_err(|e| format!("bad hook URL {url:?}: {e}"))?;
        if parsed.scheme() != "http" && parsed.scheme() != "https" {
            return Err(format!(
                "bad hook URL {url:?}: the scheme must be http or https"
            ));
        }
        Ok(CivicHook {
            url: url.trim_end_matches('/').to_string(),
            timeout,
            procedures: Arc::default(),
        })
    }

    /// Call the procedure for the event and read its answer.
    pub async fn decide(&self, ev: &HookEvent) -> Result<Decision, HookFailure> {
        let Some((procedure, input)) = call_for(ev) else {
            return Ok(Decision::Pass);
        };
        let output = match self.call(&procedure, input).await? {
            Called::Output(o) => o,
            Called::NotImplemented => return Ok(Decision::Pass),
            Called::Aborted(reason) => {
                return Ok(Decision::Refuse(Refusal::for_agent(reason)));
            }
            Called::Threw(code, message) => {
                let error = RpcError::new(code, message.clone());
                return Ok(Decision::Refuse(Refusal {
                    reason: message,
                    for_agent: true,
                    error: Some(Box::new(error)),
                }));
            }
        };
        read_output(ev, &procedure, &output)
    }

    async fn call(&self, procedure: &str, input: Value) -> Result<Called, HookFailure> {
        let known = self.procedures.lock().get(procedure).cloned();
        let (url, client) = match known {
            Some(k) => k,
            None => {
                let url = reqwest::Url::parse(&format!("{}/{procedure}", self.url))
                    .map_err(|e| HookFailure(format!("bad procedure URL: {e}")))?;
                let client = client_for(&url).map_err(HookFailure)?;
                self.procedures
                    .lock()
                    .insert(procedure.to_string(), (url.clone(), client.clone()));
                (url, client)
            }
        };
        let body = serde_json::to_vec(&sluice_core::exact::Exact(&json!({ "json": input })))
            .map_err(|e| HookFailure(format!("cannot serialise the event: {e}")))?;
        let (status, buf) = post(&client, &url, HeaderMap::new(), body, self.timeout).await?;
        read_answer(procedure, status, &buf)
    }
}

/// What a procedure call came to.
#[derive(Debug, PartialEq)]
enum Called {
    /// Its output (`result.data.json`).
    Output(Value),
    /// The server has no such procedure, or says it is not implemented: continue.
    NotImplemented,
    /// The hook threw an `Error` (or answered `abort`): the reason.
    Aborted(String),
    /// The hook threw an `McpError`: its code and message.
    Threw(i64, String),
}

/// Read a tRPC answer.
fn read_answer(
    procedure: &str,
    status: reqwest::StatusCode,
    buf: &[u8],
) -> Result<Called, HookFailure> {
    let unreadable = || {
        HookFailure(format!(
            "unreadable answer from the Civic hook server to {procedure} (HTTP {}): {}",
            status.as_u16(),
            truncate_chars(String::from_utf8_lossy(buf).trim(), 200)
        ))
    };
    let v: Value = serde_json::from_slice(buf).map_err(|_| unreadable())?;
    if let Some(e) = v.get("error") {
        let e = e.get("json").unwrap_or(e);
        let message = e.get("message").and_then(Value::as_str).unwrap_or("");
        let code = e
            .pointer("/data/code")
            .and_then(Value::as_str)
            .unwrap_or("");
        if code == "NOT_FOUND" || message.contains("not implemented") {
            return Ok(Called::NotImplemented);
        }
        if code == "BAD_REQUEST" || code == "PARSE_ERROR" {
            return Err(HookFailure(format!(
                "the Civic hook server refused the input of {procedure}: {}",
                truncate_chars(message, 300)
            )));
        }
        return Ok(match mcp_error(message) {
            Some((code, message)) => Called::Threw(code, message.to_string()),
            None => Called::Aborted(abort_reason(message)),
        });
    }
    if !status.is_success() {
        return Err(unreadable());
    }
    match v.pointer("/result/data") {
        Some(d) => Ok(Called::Output(d.get("json").unwrap_or(d).clone())),
        None => Err(unreadable()),
    }
}

/// An `McpError`'s code and message, from the message it reaches the wire with
/// (`MCP error <code>: <message>`, how the MCP SDK words it).
fn mcp_error(message: &str) -> Option<(i64, &str)> {
    let (code, rest) = message
        .trim()
        .strip_prefix("MCP error ")?
        .split_once(": ")?;
    Some((code.parse().ok()?, rest))
}

/// A reason as the agent is shown it: `MCP error -32001: ` (how an older `abort` reached the
/// wire) taken off.
fn abort_reason(message: &str) -> String {
    let m = message.trim();
    let reason = mcp_error(m).map_or(m, |(_, rest)| rest).trim();
    if reason.is_empty() {
        "refused by the Civic hook server".into()
    } else {
        reason.to_string()
    }
}

/// `{method, params}` of a message (the MCP SDK's request and notification shapes).
fn body_of(m: &Message) -> Value {
    let mut o = Map::new();
    o.insert("method".into(), json!(m.method().unwrap_or("")));
    if let Some(p) = m.params() {
        o.insert("params".into(), p.clone());
    }
    Value::Object(o)
}

fn dedicated(method: &str) -> Option<&'static str> {
    DEDICATED
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, n)| *n)
}

/// The procedure and input for an event; `None` when nothing is called.
fn call_for(ev: &HookEvent) -> Option<(String, Value)> {
    let extra = json!({
        "requestId": ev.message.id().or(ev.request.as_ref().and_then(|r| r.id())).cloned().unwrap_or(Value::Null),
        "sessionId": ev.session_id,
    });
    let m = &ev.message;
    match (ev.phase, m.kind()) {
        (Phase::Request, Kind::Request) => {
            let name = dedicated(&ev.method).unwrap_or("Other");
            Some((
                format!("process{name}Request"),
                json!({"request": body_of(m), "requestExtra": extra}),
            ))
        }
        (Phase::Request, Kind::Notification) => Some(("processNotification".into(), body_of(m))),
        (Phase::Response, Kind::Request) => Some((
            "processTargetRequest".into(),
            json!({"request": body_of(m), "requestExtra": extra}),
        )),
        (Phase::Response, Kind::Notification) => {
            Some(("processTargetNotification".into(), body_of(m)))
        }
        (Phase::Response, Kind::Response | Kind::Error) => {
            let original = ev
                .request
                .as_ref()
                .map(body_of)
                .unwrap_or_else(|| json!({"method": ev.method}));
            let name = dedicated(&ev.method);
            let original_key = if name == Some("CallTool") {
                "originalCallToolRequest"
            } else {
                "originalRequest"
            };
            let name = name.unwrap_or("Other");
            match (m.result(), m.error_obj()) {
                (Some(result), _) => Some((
                    format!("process{name}Result"),
                    json!({"response": result, original_key: original, "originalRequestExtra": extra}),
                )),
                (None, Some(error)) => {
                    let key = if name == "CallTool" {
                        "originalToolCall"
                    } else {
                        "originalRequest"
                    };
                    Some((
                        format!("process{name}Error"),
                        json!({"error": error, key: original, "originalRequestExtra": extra}),
                    ))
                }
                _ => None,
            }
        }
        // A client's reply to an upstream's request (with the request it answers).
        (Phase::Request, Kind::Response | Kind::Error) => {
            let original = body_of(ev.request.as_ref()?);
            match (m.result(), m.error_obj()) {
                (Some(result), _) => Some((
                    "processTargetResult".into(),
                    json!({"response": result, "originalRequest": original, "originalRequestExtra": extra}),
                )),
                (None, Some(error)) => Some((
                    "processTargetError".into(),
                    json!({"error": error, "originalRequest": original, "originalRequestExtra": extra}),
                )),
                _ => None,
            }
        }
    }
}

/// A `{method, params}` from the hook as a message with the original's id.
fn rebuilt(ev: &HookEvent, body: &Value) -> Result<Message, HookFailure> {
    let Some(method) = body.get("method").and_then(Value::as_str) else {
        return Err(HookFailure(
            "unreadable answer from the Civic hook server: no method in the message it returned"
                .into(),
        ));
    };
    let params = body.get("params").cloned();
    Ok(match ev.message.id() {
        Some(id) => Message::request(id.clone(), method, params),
        None => Message::notification(method, params),
    })
}

/// The decision in a procedure's output.
fn read_output(ev: &HookEvent, procedure: &str, out: &Value) -> Result<Decision, HookFailure> {
    let kind = out.get("resultType").and_then(Value::as_str).unwrap_or("");
    let id = || ev.message.id().cloned().unwrap_or(Value::Null);
    let response = || out.get("response").cloned().unwrap_or_else(|| json!({}));
    match kind {
        "continue" => {
            if let Some(req) = out.get("request") {
                return Ok(replace(ev, rebuilt(ev, req)?));
            }
            if let Some(n) = out.get("notification") {
                return Ok(replace(ev, rebuilt(ev, n)?));
            }
            if out.get("response").is_some() && ev.message.result().is_some() {
                return Ok(replace(ev, Message::response(id(), response())));
            }
            Ok(Decision::Pass)
        }
        "respond" => match (ev.phase, ev.message.kind()) {
            (Phase::Request, Kind::Request) => {
                Ok(Decision::Answer(Message::response(id(), response())))
            }
            // An upstream's request to the client, answered for it: back to the upstream.
            (Phase::Response, Kind::Request) => {
                Ok(Decision::Answer(Message::response(id(), response())))
            }
            // An error (an upstream's, or the client's reply to an upstream) replaced by a
            // result.
            (Phase::Response, Kind::Error) | (Phase::Request, Kind::Error) => {
                Ok(Decision::Modify(Message::response(id(), response())))
            }
            _ => {
                tracing::warn!(
                    procedure,
                    "the Civic hook server answered `respond` where Sluice cannot answer for the client; it passes"
                );
                Ok(Decision::Pass)
            }
        },
        "abort" => Ok(Decision::Refuse(Refusal::for_agent(abort_reason(
            out.get("reason").and_then(Value::as_str).unwrap_or(""),
        )))),
        other => Err(HookFailure(format!(
            "unreadable answer from the Civic hook server to {procedure}: resultType {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn ev(phase: Phase, method: &str, message: Value, request: Option<Value>) -> HookEvent {
        HookEvent {
            phase,
            event_name: "Request",
            method: method.into(),
            session_id: "s1".into(),
            tool_name: None,
            upstream: None,
            message: Message::from_value(message).unwrap(),
            request: request.map(|r| Message::from_value(r).unwrap()),
            era: "legacy",
            cwd: PathBuf::from("/"),
            principal: None,
            upstream_sub: None,
            claude: Default::default(),
        }
    }

    #[test]
    fn procedures_and_inputs_follow_civics_router() {
        let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{}}});
        let (p, input) = call_for(&ev(Phase::Request, "tools/call", call.clone(), None)).unwrap();
        assert_eq!(p, "processCallToolRequest");
        assert_eq!(
            input,
            json!({"request": {"method": "tools/call", "params": {"name": "t", "arguments": {}}},
                   "requestExtra": {"requestId": 3, "sessionId": "s1"}})
        );
        let ok = json!({"jsonrpc":"2.0","id":3,"result":{"content":[]}});
        let (p, input) =
            call_for(&ev(Phase::Response, "tools/call", ok, Some(call.clone()))).unwrap();
        assert_eq!(p, "processCallToolResult");
        assert_eq!(input["originalCallToolRequest"]["params"]["name"], "t");
        let err = json!({"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"x"}});
        let (p, input) = call_for(&ev(Phase::Response, "tools/call", err, Some(call))).unwrap();
        assert_eq!(p, "processCallToolError");
        assert_eq!(input["error"], json!({"code": -32000, "message": "x"}));
        assert_eq!(input["originalToolCall"]["method"], "tools/call");
        let ping = json!({"jsonrpc":"2.0","id":4,"method":"ping"});
        assert_eq!(
            call_for(&ev(Phase::Request, "ping", ping, None)).unwrap().0,
            "processOtherRequest"
        );
        let note = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}});
        let (p, input) =
            call_for(&ev(Phase::Response, "notifications/message", note, None)).unwrap();
        assert_eq!(p, "processTargetNotification");
        assert_eq!(input["method"], "notifications/message");
        // A client's reply to an upstream's request: with the request, processTargetResult /
        // processTargetError; without it (unknown), nothing.
        let reply = json!({"jsonrpc":"2.0","id":"g1","result":{"action":"accept"}});
        assert!(call_for(&ev(Phase::Request, "(reply)", reply.clone(), None)).is_none());
        let asked = json!({"jsonrpc":"2.0","id":"g1","method":"elicitation/create","params":{"message":"?"}});
        let (p, input) =
            call_for(&ev(Phase::Request, "(reply)", reply, Some(asked.clone()))).unwrap();
        assert_eq!(p, "processTargetResult");
        assert_eq!(
            input,
            json!({"response": {"action": "accept"},
                   "originalRequest": {"method": "elicitation/create", "params": {"message": "?"}},
                   "originalRequestExtra": {"requestId": "g1", "sessionId": "s1"}})
        );
        let refused = json!({"jsonrpc":"2.0","id":"g1","error":{"code":-1,"message":"no"}});
        let (p, input) = call_for(&ev(Phase::Request, "(reply)", refused, Some(asked))).unwrap();
        assert_eq!(p, "processTargetError");
        assert_eq!(input["error"], json!({"code": -1, "message": "no"}));
    }

    #[test]
    fn answers_and_errors() {
        let ok = reqwest::StatusCode::OK;
        let bad = reqwest::StatusCode::INTERNAL_SERVER_ERROR;
        assert_eq!(
            read_answer(
                "p",
                ok,
                br#"{"result":{"data":{"json":{"resultType":"continue"}}}}"#
            )
            .unwrap(),
            Called::Output(json!({"resultType": "continue"}))
        );
        assert_eq!(
            read_answer("p", reqwest::StatusCode::NOT_FOUND, br#"{"error":{"json":{"message":"No procedure found on path","code":-32004,"data":{"code":"NOT_FOUND"}}}}"#).unwrap(),
            Called::NotImplemented
        );
        assert_eq!(
            read_answer("p", bad, br#"{"error":{"json":{"message":"MCP error -32001: no deletes","code":-32603,"data":{"code":"INTERNAL_SERVER_ERROR"}}}}"#).unwrap(),
            Called::Threw(-32001, "no deletes".into())
        );
        // An McpError's code and message (however long); a plain Error's message.
        assert_eq!(
            read_answer("p", bad, br#"{"error":{"json":{"message":"MCP error -32042: no: not now","code":-32603,"data":{"code":"INTERNAL_SERVER_ERROR","stack":"McpError: ..."}}}}"#).unwrap(),
            Called::Threw(-32042, "no: not now".into())
        );
        assert_eq!(
            read_answer("p", bad, br#"{"error":{"json":{"message":"the result holds a secret","code":-32603,"data":{"code":"INTERNAL_SERVER_ERROR"}}}}"#).unwrap(),
            Called::Aborted("the result holds a secret".into())
        );
        assert_eq!(mcp_error("MCP error 7: x"), Some((7, "x")));
        assert_eq!(mcp_error("MCP error x: y"), None);
        assert!(read_answer(
            "p",
            reqwest::StatusCode::BAD_REQUEST,
            br#"{"error":{"json":{"message":"invalid","data":{"code":"BAD_REQUEST"}}}}"#
        )
        .is_err());
        assert!(read_answer("p", ok, b"nope").is_err());
        assert_eq!(abort_reason("MCP error x: y"), "MCP error x: y");
        assert_eq!(abort_reason("  "), "refused by the Civic hook server");
    }

    #[test]
    fn outputs_become_decisions() {
        let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}});
        let e = ev(Phase::Request, "tools/call", call.clone(), None);
        let same = json!({"resultType":"continue","request":{"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}});
        assert_eq!(read_output(&e, "p", &same).unwrap(), Decision::Pass);
        let changed = json!({"resultType":"continue","request":{"method":"tools/call","params":{"name":"t","arguments":{"a":2}}}});
        let Decision::Modify(m) = read_output(&e, "p", &changed).unwrap() else {
            panic!()
        };
        assert_eq!(
            m.to_value(),
            json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{"a":2}}})
        );
        let respond = json!({"resultType":"respond","response":{"content":[{"type":"text","text":"cached"}]}});
        let Decision::Answer(m) = read_output(&e, "p", &respond).unwrap() else {
            panic!()
        };
        assert_eq!(m.result().unwrap()["content"][0]["text"], "cached");
        assert_eq!(
            read_output(&e, "p", &json!({"resultType":"abort","reason":"old style"})).unwrap(),
            Decision::Refuse(Refusal::for_agent("old style"))
        );
        assert!(read_output(&e, "p", &json!({"resultType":"maybe"})).is_err());
    }
}
