//! Http hooks: a real hook service on 127.0.0.1 doing the Zato-style hook services' example, and every answer shape.

use super::{call, method_event, reply};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use sluice_hooks::http::HttpHook;
use sluice_hooks::{Decision, Refusal};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
struct Seen {
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    bodies: Arc<Mutex<Vec<Value>>>,
}

/// The Zato-style `crm.mcp-request-hook`, as a hook service: cancellations are refused, status
/// lookups run against the current region. It wants a token header.
async fn request_hook(
    State(seen): State<Seen>,
    headers: HeaderMap,
    Json(payload): Json<Value>,
) -> Response {
    seen.bodies.lock().unwrap().push(payload.clone());
    if headers.get("x-hook-token").and_then(|v| v.to_str().ok()) != Some("s3cret") {
        return (StatusCode::UNAUTHORIZED, "missing token").into_response();
    }
    let mut message = payload["request"].clone();
    if payload["method"] != "tools/call" {
        return StatusCode::OK.into_response();
    }
    let tool = message["params"]["name"].as_str().unwrap_or("").to_string();
    if tool == "crm.order.cancel" {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"reason": "Order cancellations are not permitted through this gateway"})),
        )
            .into_response();
    }
    if tool == "crm.order.status" {
        message["params"]["arguments"]["region"] = json!("eu-central");
        return Json(json!({"request": message})).into_response();
    }
    StatusCode::OK.into_response()
}

/// A response hook that masks tool results.
async fn response_hook(Json(payload): Json<Value>) -> Response {
    let mut reply = payload["response"].clone();
    if reply.get("result").is_some() {
        reply["result"]["content"] = json!([{"type": "text", "text": "[masked]"}]);
        return Json(json!({"response": reply})).into_response();
    }
    Json(json!({"ok": true})).into_response()
}

async fn peer(State(seen): State<Seen>, ConnectInfo(addr): ConnectInfo<SocketAddr>) -> Response {
    seen.peers.lock().unwrap().push(addr);
    StatusCode::NO_CONTENT.into_response()
}

async fn serve() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/request-hook", post(request_hook))
        .route("/response-hook", post(response_hook))
        .route("/peer", post(peer))
        .route(
            "/answer",
            post(|Json(p): Json<Value>| async move {
                Json(
                    json!({"response": {"jsonrpc": "2.0", "id": p["request"]["id"],
                    "result": {"content": [{"type": "text", "text": "from the hook"}]}}}),
                )
            }),
        )
        .route(
            "/non-object",
            post(|| async { Json(json!({"response": "nope"})) }),
        )
        .route(
            "/text-error",
            post(|| async { (StatusCode::SERVICE_UNAVAILABLE, "e".repeat(1000)) }),
        )
        .route("/empty-error", post(|| async { StatusCode::FORBIDDEN }))
        .route("/not-json", post(|| async { "hello" }))
        .route(
            "/bad-message",
            post(|| async { Json(json!({"request": {"foo": 1}})) }),
        )
        .route(
            "/other-json",
            post(|| async { Json(json!({"status": "fine"})) }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                StatusCode::OK
            }),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    (format!("http://{addr}"), seen)
}

fn hook(base: &str, path: &str) -> HttpHook {
    HttpHook::new(
        format!("{base}{path}"),
        vec![("x-hook-token".into(), "s3cret".into())],
        Duration::from_secs(5),
    )
    .unwrap()
}

#[tokio::test]
async fn the_zato_style_example_request_hook() {
    let (base, seen) = serve().await;
    let h = hook(&base, "/request-hook");

    // Status lookups get the region.
    let ev = call("crm.order.status", json!({"order_id": "A-1"}));
    let Decision::Modify(m) = h.decide(&ev).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        m.to_value(),
        json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
            "params": {"name": "crm.order.status", "arguments": {"order_id": "A-1", "region": "eu-central"}}})
    );
    // The service saw the event payload.
    let body = seen.bodies.lock().unwrap()[0].clone();
    assert_eq!(body["method"], "tools/call");
    assert_eq!(body["tool_name"], "crm.order.status");
    assert_eq!(body["hook_event_name"], "PreToolUse");
    assert_eq!(body["request"], ev.message.to_value());

    // Cancellations are refused; the reason is for the log, not the agent.
    assert_eq!(
        h.decide(&call("crm.order.cancel", json!({"order_id": "A-1"})))
            .await
            .unwrap(),
        Decision::Refuse(Refusal {
            reason: "Order cancellations are not permitted through this gateway".into(),
            for_agent: false,
            error: None,
        })
    );
    // Anything else: no body, unchanged.
    assert_eq!(
        h.decide(&call("crm.order.list", json!({}))).await.unwrap(),
        Decision::Pass
    );
    assert_eq!(
        h.decide(&method_event("tools/list")).await.unwrap(),
        Decision::Pass
    );
}

#[tokio::test]
async fn the_configured_headers_are_sent() {
    let (base, _) = serve().await;
    let h = HttpHook::new(
        format!("{base}/request-hook"),
        vec![],
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(
        h.decide(&method_event("ping")).await.unwrap(),
        Decision::Refuse(Refusal {
            reason: "missing token".into(),
            for_agent: false,
            error: None,
        })
    );
}

#[tokio::test]
async fn a_response_hook_replaces_the_reply_or_refuses_a_non_object() {
    let (base, _) = serve().await;
    let ev = reply(
        "crm.customer.get",
        json!({"id": 3}),
        json!({"content": [{"type": "text", "text": "Jane Doe, 4111 1111 1111 1111"}]}),
    );
    let Decision::Modify(m) = hook(&base, "/response-hook").decide(&ev).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        m.to_value(),
        json!({"jsonrpc": "2.0", "id": 41, "result": {"content": [{"type": "text", "text": "[masked]"}]}})
    );
    // Without a `response` key: unchanged.
    let mut err = ev.clone();
    err.message = sluice_core::Message::from_value(
        json!({"jsonrpc": "2.0", "id": 41, "error": {"code": -32000, "message": "down"}}),
    )
    .unwrap();
    assert_eq!(
        hook(&base, "/response-hook").decide(&err).await.unwrap(),
        Decision::Pass
    );
    assert_eq!(
        hook(&base, "/non-object").decide(&ev).await.unwrap(),
        Decision::Refuse(Refusal {
            reason: "the response hook returned a non-object response".into(),
            for_agent: false,
            error: None,
        })
    );
}

#[tokio::test]
async fn a_response_key_in_the_request_phase_answers() {
    let (base, _) = serve().await;
    let d = hook(&base, "/answer")
        .decide(&call("t", json!({})))
        .await
        .unwrap();
    assert_eq!(
        d,
        Decision::Answer(
            sluice_core::Message::from_value(json!({"jsonrpc": "2.0", "id": 41,
            "result": {"content": [{"type": "text", "text": "from the hook"}]}}))
            .unwrap()
        )
    );
}

#[tokio::test]
async fn error_statuses_refuse_with_the_body() {
    let (base, _) = serve().await;
    let Decision::Refuse(r) = hook(&base, "/text-error")
        .decide(&call("t", json!({})))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(r.reason, "e".repeat(500));
    assert!(!r.for_agent);
    let Decision::Refuse(r) = hook(&base, "/empty-error")
        .decide(&call("t", json!({})))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(r.reason, "the hook service answered HTTP 403 Forbidden");
    // An unknown path is a 404: refused too.
    assert!(matches!(
        hook(&base, "/nowhere").decide(&call("t", json!({}))).await,
        Ok(Decision::Refuse(_))
    ));
}

#[tokio::test]
async fn json_without_the_keys_passes_and_unreadable_answers_fail() {
    let (base, _) = serve().await;
    assert_eq!(
        hook(&base, "/other-json")
            .decide(&call("t", json!({})))
            .await
            .unwrap(),
        Decision::Pass
    );
    let e = hook(&base, "/not-json")
        .decide(&call("t", json!({})))
        .await
        .unwrap_err();
    assert!(e.0.contains("not JSON"), "{e}");
    assert!(e.0.contains("hello"), "{e}");
    let e = hook(&base, "/bad-message")
        .decide(&call("t", json!({})))
        .await
        .unwrap_err();
    assert!(e.0.contains("unreadable request"), "{e}");
}

#[tokio::test]
async fn timeouts_and_refused_connections_fail() {
    let (base, _) = serve().await;
    let h = HttpHook::new(format!("{base}/slow"), vec![], Duration::from_millis(300)).unwrap();
    let started = std::time::Instant::now();
    let e = h.decide(&call("t", json!({}))).await.unwrap_err();
    assert_eq!(e.0, "timed out after 300ms");
    assert!(started.elapsed() < Duration::from_secs(3));

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let h = HttpHook::new(
        format!("http://127.0.0.1:{port}/hook"),
        vec![],
        Duration::from_secs(5),
    )
    .unwrap();
    let e = h.decide(&call("t", json!({}))).await.unwrap_err();
    assert!(e.0.contains("hook service request failed"), "{e}");
    assert!(e.0.contains("Connection refused"), "{e}");

    // An https service goes through reqwest: its failure names the cause too.
    let h = HttpHook::new(
        format!("https://127.0.0.1:{port}/hook"),
        vec![],
        Duration::from_secs(5),
    )
    .unwrap();
    let e = h.decide(&call("t", json!({}))).await.unwrap_err();
    assert!(e.0.starts_with("hook service request failed: "), "{e}");
    assert!(e.0.contains("Connection refused"), "{e}");
}

#[tokio::test]
async fn connections_are_kept_alive() {
    let (base, seen) = serve().await;
    let h = hook(&base, "/peer");
    for _ in 0..5 {
        assert_eq!(
            h.decide(&method_event("ping")).await.unwrap(),
            Decision::Pass
        );
    }
    // A second hook to the same service shares the pool.
    let h2 = hook(&base, "/peer");
    assert_eq!(
        h2.decide(&method_event("ping")).await.unwrap(),
        Decision::Pass
    );
    let peers = seen.peers.lock().unwrap().clone();
    assert_eq!(peers.len(), 6);
    assert!(
        peers.iter().all(|p| *p == peers[0]),
        "new connections: {peers:?}"
    );
}
