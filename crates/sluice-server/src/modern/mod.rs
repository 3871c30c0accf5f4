//! The 2026-07-28 era toward clients, without a transport: requests that carry their protocol
//! version and capabilities in `_meta` and need no session. This module detects the era,
//! admits a request ([`admit`]: its envelope, its mirrored headers (-32020), its version
//! (-32022) and its method), answers `server/discover`, and marks results for modern clients
//! (`resultType`, `ttlMs` / `cacheScope`). Its parts: [`headers`] (the `Mcp-*` rules), [`state`]
//! (the signed `requestState`), [`rounds`] (a call's rounds: run, park for the client's input,
//! resume), [`listen`] (`subscriptions/listen`), [`hooked`] (`server/discover` and
//! `subscriptions/listen` through the hooks). The faces that carry it are
//! `transport::http_modern` and `transport::stdio_modern`.

pub(crate) mod headers;
pub(crate) mod hooked;
pub(crate) mod listen;
pub(crate) mod rounds;
pub(crate) mod state;

pub(crate) use headers::HeaderSource;

use crate::session::{HttpStreams, Init, Outbound, Session};
use crate::state::State;
use crate::stream::StreamBuf;
use serde_json::{json, Map, Value};
use sluice_core::version::{self, meta};
use sluice_core::{codes, Kind, Message, Principal, RpcError};
use std::sync::Arc;

/// The methods a modern client may call (anything else: -32601, HTTP 404).
const METHODS: &[&str] = &[
    "server/discover",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/directory/read",
    "skills/list",
    "skills/get",
    "completion/complete",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// Results clients may cache (`ttlMs`, `cacheScope`).
const CACHEABLE: &[&str] = &[
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "skills/list",
    "skills/get",
];

/// Does this HTTP request speak the modern era? It carries no session, is not `initialize`, and
/// its `_meta` (or `MCP-Protocol-Version` header) names a modern version, or it is
/// `server/discover`.
pub(crate) fn detect(headers: &dyn HeaderSource, msg: &Message) -> bool {
    if headers.header(sluice_core::headers::SESSION_ID).is_some() {
        return false;
    }
    let modern_header = headers
        .header_str(sluice_core::headers::PROTOCOL_VERSION)
        .is_some_and(version::is_modern);
    if msg.method() == Some("initialize") {
        // A legacy handshake, unless it comes dressed as a modern request (then: 404).
        return modern_header
            || meta_str(msg, meta::PROTOCOL_VERSION).is_some_and(version::is_modern);
    }
    meta_str(msg, meta::PROTOCOL_VERSION).is_some()
        || msg.method() == Some("server/discover")
        || modern_header
}

/// Is this stdio message for the modern side: a request naming a version in `_meta` (or
/// `server/discover`), or the cancellation of one?
pub(crate) fn detect_line(msg: &Message) -> bool {
    match msg.kind() {
        Kind::Request => {
            meta_str(msg, meta::PROTOCOL_VERSION).is_some()
                || msg.method() == Some("server/discover")
        }
        Kind::Notification => msg.method() == Some("notifications/cancelled"),
        _ => false,
    }
}

/// What an admitted request is.
pub(crate) enum Admitted {
    /// `server/discover`, answered: send this.
    Discover(Message),
    /// `subscriptions/listen`: open the stream ([`listen::subscribe`]).
    Listen,
    /// Any other method: run it ([`rounds::start`]) on a session of this version
    /// ([`ephemeral_session_on`]).
    Call {
        /// The version the request's `_meta` names.
        requested: String,
    },
}

/// Why a request was turned away before it ran.
pub(crate) struct Refusal {
    /// The error to answer with.
    pub error: RpcError,
    /// The method is not one a modern client may call (HTTP answers 404, else 400).
    pub unknown_method: bool,
}

/// Admit a modern request (the caller checked it is a request): its envelope (-32602), then,
/// when the transport has headers, the header rules (-32020), its version (-32022) and its
/// method (-32601). One check for both faces.
pub(crate) fn admit(
    st: &State,
    msg: &Message,
    headers: Option<&dyn HeaderSource>,
) -> Result<Admitted, Refusal> {
    let refuse = |error: RpcError| Refusal {
        error,
        unknown_method: false,
    };
    let requested = envelope(msg).map_err(refuse)?;
    let method = msg.method().unwrap_or("");
    if let Some(headers) = headers {
        let catalog = st.snapshot().catalog.clone();
        let schema = (method == "tools/call")
            .then(|| catalog.tool_definition(msg.param_str("name").unwrap_or("")))
            .flatten()
            .and_then(|t| t.get("inputSchema"));
        headers::check(headers, msg, &requested, schema).map_err(refuse)?;
    }
    if !version::is_modern(&requested) {
        return Err(refuse(
            RpcError::new(
                codes::UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
            )
            .with_data(json!({"supported": version::ALL_VERSIONS, "requested": requested})),
        ));
    }
    let tasks_method = matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel");
    if !METHODS.contains(&method)
        || (tasks_method && !crate::proxy::tasks::runs_tasks(&st.snapshot()))
    {
        return Err(Refusal {
            error: RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            ),
            unknown_method: true,
        });
    }
    Ok(match method {
        "server/discover" => {
            let id = msg.id().cloned().unwrap_or(Value::Null);
            let snap = st.snapshot();
            Admitted::Discover(decorate_with(&snap, method, discover(&snap, id)))
        }
        "subscriptions/listen" => Admitted::Listen,
        _ => Admitted::Call { requested },
    })
}

/// The request envelope every modern request must carry: `params._meta` with the protocol
/// version and the client's capabilities (-32602 otherwise). Returns the version.
fn envelope(msg: &Message) -> Result<String, RpcError> {
    let Some(m) = meta_of(msg) else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: params._meta is required ({} and {})",
            meta::PROTOCOL_VERSION,
            meta::CLIENT_CAPABILITIES
        )));
    };
    let Some(v) = m.get(meta::PROTOCOL_VERSION).and_then(Value::as_str) else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: _meta is missing {}",
            meta::PROTOCOL_VERSION
        )));
    };
    if !m
        .get(meta::CLIENT_CAPABILITIES)
        .is_some_and(Value::is_object)
    {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: _meta is missing {}",
            meta::CLIENT_CAPABILITIES
        )));
    }
    Ok(v.to_string())
}

/// The log level a request opts in to (`_meta` `logLevel`), as a rank: no level, no log
/// messages (the 2026-07-28 rule).
fn log_rank(level: &str) -> Option<u8> {
    [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    .iter()
    .position(|l| *l == level)
    .map(|p| p as u8)
}

fn wanted_log_rank(msg: &Message) -> Option<u8> {
    meta_str(msg, meta::LOG_LEVEL).and_then(log_rank)
}

fn meta_of(msg: &Message) -> Option<&Map<String, Value>> {
    msg.param("_meta")?.as_object()
}

fn meta_str<'a>(msg: &'a Message, key: &str) -> Option<&'a str> {
    meta_of(msg)?.get(key)?.as_str()
}

/// The session of one modern request: its version, capabilities and client info from `_meta`,
/// its principal and credentials from the transport, on the endpoint of `mcp/endpoints.json`
/// of the URL it came to (`None`: `/mcp`), which judges it.
pub(crate) fn ephemeral_session_on(
    st: &State,
    authorization: Option<&str>,
    msg: &Message,
    requested: &str,
    principal: Option<Arc<Principal>>,
    endpoint: Option<&str>,
) -> Arc<Session> {
    let m = meta_of(msg);
    let init = Init::new(
        requested,
        m.and_then(|m| m.get(meta::CLIENT_CAPABILITIES))
            .cloned()
            .unwrap_or(json!({})),
        m.and_then(|m| m.get(meta::CLIENT_INFO))
            .cloned()
            .unwrap_or(Value::Null),
    )
    .on_endpoint(endpoint);
    let snap = st.snapshot();
    let buf = StreamBuf::new(
        0,
        snap.settings().replay_events.min(16) as usize,
        snap.settings().replay_bytes as usize,
    );
    let session = Arc::new(Session::new(
        format!("modern-{}", uuid::Uuid::new_v4().simple()),
        init,
        Outbound::Http(HttpStreams::new(buf)),
    ));
    session.set_principal(principal);
    session.set_authorization(authorization);
    session
}

/// The request as hooks and upstreams see it: without the modern `_meta` keys (they are the
/// transport's; the era is a field of the hook event), so one hook serves both eras.
fn strip_meta(mut msg: Message) -> Message {
    // Changed where it is: a request kept as text stays text (only `_meta` written anew).
    let emptied = match msg.param_mut("_meta").and_then(Value::as_object_mut) {
        Some(m) => {
            for k in [
                meta::PROTOCOL_VERSION,
                meta::CLIENT_INFO,
                meta::CLIENT_CAPABILITIES,
            ] {
                m.remove(k);
            }
            m.is_empty()
        }
        None => false,
    };
    if emptied {
        msg.remove_param("_meta");
    }
    msg
}

/// `server/discover`: the versions and capabilities of the gateway.
fn discover(snap: &crate::state::Snapshot, id: Value) -> Message {
    let init = crate::proxy::initialize_result(snap, version::LATEST_LEGACY);
    let mut capabilities = init.get("capabilities").cloned().unwrap_or(json!({}));
    if let Some(c) = capabilities.as_object_mut() {
        // Modern clients subscribe through subscriptions/listen; there is no logging/setLevel.
        if let Some(r) = c.get_mut("resources").and_then(Value::as_object_mut) {
            r.remove("subscribe");
        }
        c.remove("logging");
    }
    crate::proxy::tasks::fit_capabilities(&mut capabilities, true);
    let mut result = json!({
        "supportedVersions": version::ALL_VERSIONS,
        "capabilities": capabilities,
    });
    if let Some(i) = init.get("instructions") {
        result["instructions"] = i.clone();
    }
    Message::response(id, result)
}

/// The `serverInfo` modern results carry in `_meta`: the gateway's, or under `--passthrough`
/// the upstream's own (so the gateway stays invisible).
fn server_info(snap: &crate::state::Snapshot) -> Value {
    crate::proxy::route::passthrough(&snap.catalog)
        .and_then(|slot| {
            let state = slot.state.lock();
            state.init.as_ref()?.get("serverInfo").cloned()
        })
        .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
        .unwrap_or_else(|| json!({"name": crate::proxy::server_name(snap), "version": env!("CARGO_PKG_VERSION")}))
}

/// Mark a reply for a modern client: `resultType`, `ttlMs` / `cacheScope` on cacheable results,
/// and the gateway's `serverInfo` in `_meta` (an endpoint's, for a session of one).
fn decorate(st: &State, session: &Session, method: &str, reply: Message) -> Message {
    if reply.kind() != Kind::Response {
        return reply;
    }
    decorate_with(&st.snapshot_for(session), method, reply)
}

/// `server/discover` as the endpoint of this name answers it (its own instructions and
/// serverInfo name), when there is one.
pub(crate) fn discover_on(st: &State, endpoint: &str, id: Value) -> Option<Message> {
    let snap = st.snapshot().endpoint(endpoint)?.clone();
    Some(decorate_with(&snap, "server/discover", discover(&snap, id)))
}

/// [`decorate`], from `snap`.
fn decorate_with(snap: &crate::state::Snapshot, method: &str, mut reply: Message) -> Message {
    if reply.kind() != Kind::Response {
        return reply;
    }
    let private = snap.auth.is_some() && !snap.policy.is_open();
    let complete = ("resultType", json!("complete"));
    let absent = if CACHEABLE.contains(&method) {
        let scope = if private || method == "resources/read" || method == "skills/get" {
            "private"
        } else {
            "public"
        };
        vec![complete, ("ttlMs", json!(0)), ("cacheScope", json!(scope))]
    } else {
        vec![complete]
    };
    reply.extend_result(&absent, (meta::SERVER_INFO, server_info(snap)));
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn request(method: &str, params: Value) -> Message {
        Message::request(json!(1), method, Some(params))
    }

    /// Headers as (lowercase name, value) pairs.
    struct Headers(Vec<(&'static str, &'static str)>);

    impl HeaderSource for Headers {
        fn header(&self, name: &str) -> Option<Option<&str>> {
            self.0
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| Some(*v))
        }
    }

    /// A modern request with its envelope naming `version`.
    fn modern(method: &str, version: &str, mut params: Value) -> Message {
        params["_meta"] = json!({
            meta::PROTOCOL_VERSION: version,
            meta::CLIENT_CAPABILITIES: {},
        });
        request(method, params)
    }

    fn gateway() -> Arc<State> {
        let mut lists = testing::tools(&["echo"]);
        lists.tools[0]["inputSchema"] = json!({
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}
        });
        testing::state(
            &[testing::expose(&["fx"])],
            &[("fx", lists, json!({"tools": {}}))],
        )
    }

    fn refused(r: Result<Admitted, Refusal>) -> (i64, bool) {
        match r {
            Err(refusal) => (refusal.error.code, refusal.unknown_method),
            Ok(_) => panic!("admitted"),
        }
    }

    #[test]
    fn admit_checks_envelope_version_and_method_in_that_order() {
        let st = gateway();
        let v = "2026-07-28";
        let no_envelope = request("tools/list", json!({}));
        assert_eq!(
            refused(admit(&st, &no_envelope, None)),
            (codes::INVALID_PARAMS, false)
        );
        let old = modern("nope/nope", "2025-11-25", json!({}));
        assert_eq!(
            refused(admit(&st, &old, None)),
            (codes::UNSUPPORTED_PROTOCOL_VERSION, false)
        );
        let unknown = modern("ping", v, json!({}));
        assert_eq!(
            refused(admit(&st, &unknown, None)),
            (codes::METHOD_NOT_FOUND, true)
        );
        assert!(matches!(
            admit(&st, &modern("subscriptions/listen", v, json!({})), None),
            Ok(Admitted::Listen)
        ));
        match admit(
            &st,
            &modern("tools/call", v, json!({"name": "fx_echo"})),
            None,
        ) {
            Ok(Admitted::Call { requested }) => assert_eq!(requested, v),
            _ => panic!("a call"),
        }
        let Ok(Admitted::Discover(reply)) =
            admit(&st, &modern("server/discover", v, json!({})), None)
        else {
            panic!("discover is answered");
        };
        let result = reply.result().expect("a result");
        assert_eq!(result["resultType"], json!("complete"));
        assert_eq!(result["cacheScope"], json!("public"));
        assert_eq!(result["supportedVersions"], json!(version::ALL_VERSIONS));
        assert_eq!(result["_meta"][meta::SERVER_INFO]["name"], json!("sluice"));
        assert!(result["capabilities"].get("logging").is_none());
    }

    #[test]
    fn on_http_the_header_rules_come_before_the_version_and_use_the_catalogs_schema() {
        let st = gateway();
        // No headers at all: the mismatch is found before the unsupported version.
        let old = modern("tools/list", "2025-11-25", json!({}));
        let none = Headers(vec![]);
        assert_eq!(
            refused(admit(&st, &old, Some(&none))),
            (codes::HEADER_MISMATCH, false)
        );
        let v = "2026-07-28";
        let call = modern(
            "tools/call",
            v,
            json!({"name": "fx_echo", "arguments": {"region": "eu"}}),
        );
        let mut h = vec![
            ("mcp-protocol-version", v),
            ("mcp-method", "tools/call"),
            ("mcp-name", "fx_echo"),
        ];
        assert_eq!(
            refused(admit(&st, &call, Some(&Headers(h.clone())))),
            (codes::HEADER_MISMATCH, false)
        );
        h.push(("mcp-param-region", "eu"));
        assert!(matches!(
            admit(&st, &call, Some(&Headers(h))),
            Ok(Admitted::Call { .. })
        ));
    }

    #[test]
    fn the_envelope_needs_the_version_and_object_capabilities() {
        let v = meta::PROTOCOL_VERSION;
        let c = meta::CLIENT_CAPABILITIES;
        let ok = request("tools/list", json!({"_meta": {v: "2026-07-28", c: {}}}));
        assert_eq!(envelope(&ok).unwrap(), "2026-07-28");
        for params in [
            json!({}),
            json!({"_meta": {c: {}}}),
            json!({"_meta": {v: "2026-07-28"}}),
            json!({"_meta": {v: "2026-07-28", c: true}}),
        ] {
            let e = envelope(&request("tools/list", params)).unwrap_err();
            assert_eq!(e.code, codes::INVALID_PARAMS);
        }
    }

    #[test]
    fn http_requests_for_the_modern_side() {
        let v = meta::PROTOCOL_VERSION;
        let list = request("tools/list", json!({"_meta": {v: "2026-07-28"}}));
        assert!(detect(&Headers(vec![]), &list));
        // A session makes it legacy, whatever the body says.
        assert!(!detect(&Headers(vec![("mcp-session-id", "s1")]), &list));
        let bare = request("tools/list", json!({}));
        assert!(!detect(&Headers(vec![]), &bare));
        let modern_header = Headers(vec![("mcp-protocol-version", "2026-07-28")]);
        assert!(detect(&modern_header, &bare));
        assert!(detect(
            &Headers(vec![]),
            &request("server/discover", json!({}))
        ));
        // initialize is legacy unless dressed as a modern request.
        let init = request("initialize", json!({"protocolVersion": "2025-11-25"}));
        assert!(!detect(&Headers(vec![]), &init));
        assert!(detect(&modern_header, &init));
        let init = request("initialize", json!({"_meta": {v: "2026-07-28"}}));
        assert!(detect(&Headers(vec![]), &init));
    }

    #[test]
    fn stdio_lines_for_the_modern_side() {
        let v = meta::PROTOCOL_VERSION;
        assert!(detect_line(&request(
            "tools/list",
            json!({"_meta": {v: "x"}})
        )));
        assert!(detect_line(&request("server/discover", json!({}))));
        assert!(!detect_line(&request("tools/list", json!({}))));
        assert!(detect_line(&Message::notification(
            "notifications/cancelled",
            None
        )));
        assert!(!detect_line(&Message::notification(
            "notifications/initialized",
            None
        )));
    }

    #[test]
    fn log_levels_rank_in_syslog_order_and_meta_keys_of_the_era_are_stripped() {
        assert_eq!(log_rank("debug"), Some(0));
        assert!(log_rank("error") > log_rank("warning"));
        assert_eq!(log_rank("loud"), None);
        let v = meta::PROTOCOL_VERSION;
        let m = strip_meta(request(
            "tools/list",
            json!({"_meta": {v: "2026-07-28", "progressToken": 3}}),
        ));
        assert_eq!(m.params().unwrap()["_meta"], json!({"progressToken": 3}));
        let m = strip_meta(request("tools/list", json!({"_meta": {v: "2026-07-28"}})));
        assert!(m.params().unwrap().get("_meta").is_none());
    }
}
