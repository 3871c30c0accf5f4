//! The driver's unit tests (in-memory state, no listener).
use super::*;
use crate::testing;
use serde_json::json;

fn deny(tools: &[&str]) -> (&'static str, Value) {
    (
        "hooks/hooks.manifest.json",
        json!({"version": 1, "hooks": [
            {"id": "deny", "type": "builtin", "builtin": "deny", "enabled": true, "options": {"tools": tools}}
        ]}),
    )
}

fn state(files: &[(&str, Value)]) -> Arc<State> {
    testing::state(
        files,
        &[("fx", testing::tools(&["echo", "add"]), json!({"tools": {}}))],
    )
}

async fn call(st: &Arc<State>, name: &str, args: Value) -> Message {
    let (session, _out) = testing::session();
    let (sink, _rx) = tokio::sync::mpsc::unbounded_channel();
    let msg = Message::request(
        json!(7),
        "tools/call",
        Some(json!({"name": name, "arguments": args})),
    );
    client_request(st, &st.snapshot(), &session, msg, &sink)
        .await
        .into_reply()
}

fn error(m: &Message) -> (i64, String) {
    let e = m.error_obj().expect("an error reply");
    (
        e["code"].as_i64().unwrap(),
        e["message"].as_str().unwrap().to_string(),
    )
}

/// The fixture's slot is up with no connection: a call that reaches dispatch answers this.
const DISPATCHED: (i64, &str) = (-32000, "Upstream 'fx' is unavailable: it is not connected");

#[tokio::test]
async fn request_hooks_run_before_dispatch_and_a_refusal_never_reaches_the_upstream() {
    let st = state(&[testing::expose(&["fx"]), deny(&["fx_add"])]);
    let refused = call(&st, "fx_add", json!({})).await;
    assert_eq!(refused.id(), Some(&json!(7)));
    assert_eq!(error(&refused).0, -32030);
    let passed = call(&st, "fx_echo", json!({})).await;
    assert_eq!(error(&passed), (DISPATCHED.0, DISPATCHED.1.to_string()));
}

#[tokio::test]
async fn every_exchange_is_recorded_once_with_its_tool_upstream_and_outcome() {
    let st = state(&[testing::expose(&["fx"]), deny(&["fx_add"])]);
    let mut traffic = st.rt.traffic().subscribe();
    call(&st, "fx_add", json!({})).await;
    call(&st, "fx_echo", json!({})).await;
    let a = traffic.recv().await.unwrap();
    let b = traffic.recv().await.unwrap();
    assert_eq!(
        (a.tool.as_deref(), a.upstream.as_deref(), a.outcome.as_str()),
        (Some("fx_add"), Some("fx"), "refused")
    );
    assert_eq!(a.hooks[0].decision, "refuse");
    assert_eq!(
        (b.tool.as_deref(), b.outcome.as_str(), b.error.as_deref()),
        (Some("fx_echo"), "error", Some(DISPATCHED.1))
    );
    assert!(traffic.try_recv().is_err(), "recorded once each");
}

#[tokio::test]
async fn a_target_the_access_rules_forbid_is_answered_like_an_unknown_one() {
    let rules = json!({"enabled": false, "rules": [{"effect": "deny", "tools": ["fx_add"]}]});
    let st = state(&[testing::expose(&["fx"]), ("auth/auth.config.json", rules)]);
    let mut traffic = st.rt.traffic().subscribe();
    let reply = call(&st, "fx_add", json!({})).await;
    assert_eq!(error(&reply), (-32602, "Unknown tool: fx_add".to_string()));
    let ev = traffic.recv().await.unwrap();
    assert_eq!(ev.outcome, "refused");
    assert_eq!(
        ev.error.as_deref(),
        Some("access rules: an unauthenticated caller may not use the tool fx_add")
    );
}

#[tokio::test]
async fn the_funnel_run_tool_is_a_rewrite_that_runs_every_phase_under_the_real_name() {
    let st = state(&[
        testing::expose(&["fx"]),
        deny(&["fx_add"]),
        ("sluice.json", json!({"funnel": true})),
    ]);
    // The real call is refused by the hook that matches the real name...
    let refused = call(
        &st,
        "sluice_run_tool",
        json!({"name": "fx_add", "args": {}}),
    )
    .await;
    assert_eq!(refused.id(), Some(&json!(7)));
    assert_eq!(error(&refused).0, -32030);
    // ...and another reaches its upstream, resolved once more.
    let passed = call(
        &st,
        "sluice_run_tool",
        json!({"name": "fx_echo", "args": {"x": 1}}),
    )
    .await;
    assert_eq!(error(&passed), (DISPATCHED.0, DISPATCHED.1.to_string()));
    let unknown = call(&st, "sluice_run_tool", json!({"name": "nope"})).await;
    assert_eq!(error(&unknown), (-32602, "Unknown tool: nope".to_string()));
}

#[tokio::test]
async fn the_funnel_lists_briefs_answered_by_the_gateway() {
    let st = state(&[
        testing::expose(&["fx"]),
        ("sluice.json", json!({"funnel": true})),
    ]);
    let reply = call(&st, "sluice_list_tools", json!({})).await;
    let briefs = &reply.result().expect("a result")["structuredContent"]["tools"];
    assert_eq!(
        briefs,
        &json!([
            {"name": "fx_echo", "summary": "echo does it", "category": "fx", "source": "fx"},
            {"name": "fx_add", "summary": "add does it", "category": "fx", "source": "fx"},
        ])
    );
}

#[tokio::test]
async fn a_request_runs_on_the_snapshot_it_loaded_even_when_a_reload_swaps_it() {
    let st = state(&[testing::expose(&["fx"])]);
    let before = st.snapshot();
    control::rebuild_catalog(&st, None);
    let after = st.snapshot();
    assert!(
        !Arc::ptr_eq(&before, &after),
        "a rebuild swaps the snapshot whole"
    );
    assert!(Arc::ptr_eq(&before.chain, &after.chain));
    assert_ne!(before.catalog.version, after.catalog.version);
    // The old snapshot stays whole for whoever holds it.
    assert!(before.catalog.tool("fx_echo").is_some());
}

/// A command hook on `event` that refuses every method (exit 2, the reason on stderr).
fn refuse_all(event: &str) -> (&'static str, Value) {
    (
        "hooks/hooks.manifest.json",
        json!({"version": 1, "hooks": [
            {"id": "no", "event": event, "type": "command", "methods": ["*"],
             "command": "echo not this >&2; exit 2", "enabled": true}
        ]}),
    )
}

/// Every exchange recorded so far (the channel drained).
fn recorded(rx: &mut crate::state::Watcher) -> Vec<(String, Option<String>, String)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push((e.method.clone(), e.tool.clone(), e.outcome.clone()));
    }
    out
}

#[tokio::test]
async fn an_initialize_a_hook_refuses_is_recorded_once() {
    let st = state(&[testing::expose(&["fx"]), refuse_all("Request")]);
    let mut traffic = st.rt.traffic().subscribe();
    let (session, _out) = testing::session();
    let init = Message::request(json!(1), "initialize", Some(json!({})));
    let refused = initialize(&st, &session, init, "2025-11-25").await;
    assert_eq!(error(&refused.expect_err("refused")).0, -32030);
    assert_eq!(
        recorded(&mut traffic),
        vec![("initialize".into(), None, "refused".into())]
    );
}

#[tokio::test]
async fn a_client_notification_a_hook_refuses_is_recorded_once() {
    let st = state(&[testing::expose(&["fx"]), refuse_all("Request")]);
    let mut traffic = st.rt.traffic().subscribe();
    let (session, _out) = testing::session();
    let note = Message::notification("notifications/roots/list_changed", None);
    client_message(&st, &session, note).await;
    assert_eq!(
        recorded(&mut traffic),
        vec![(
            "notifications/roots/list_changed".into(),
            None,
            "refused".into()
        )]
    );
}

#[tokio::test]
async fn a_message_toward_the_client_a_hook_refuses_is_recorded_once() {
    let st = state(&[testing::expose(&["fx"]), refuse_all("Response")]);
    let mut traffic = st.rt.traffic().subscribe();
    let (session, _out) = testing::session();
    let log = Message::notification("notifications/message", Some(json!({"level": "info"})));
    let r = client_out::to_client(&st, &session, log, Some("fx")).await;
    assert!(r.is_err(), "refused");
    assert_eq!(
        recorded(&mut traffic),
        vec![("notifications/message".into(), None, "refused".into())]
    );
}

#[tokio::test]
async fn the_funnel_run_records_the_real_call_and_the_meta_call_once_each() {
    let st = state(&[
        testing::expose(&["fx"]),
        deny(&["fx_add"]),
        ("sluice.json", json!({"funnel": true})),
    ]);
    let mut traffic = st.rt.traffic().subscribe();
    call(
        &st,
        "sluice_run_tool",
        json!({"name": "fx_add", "args": {}}),
    )
    .await;
    assert_eq!(
        recorded(&mut traffic),
        vec![
            ("tools/call".into(), Some("fx_add".into()), "refused".into()),
            (
                "tools/call".into(),
                Some("sluice_run_tool".into()),
                "error".into()
            ),
        ]
    );
}

#[tokio::test]
async fn a_list_records_nothing_and_a_call_the_access_rules_refuse_records_once() {
    let rules = json!({"enabled": false, "rules": [{"effect": "deny", "tools": ["fx_add"]}]});
    let st = state(&[testing::expose(&["fx"]), ("auth/auth.config.json", rules)]);
    let mut traffic = st.rt.traffic().subscribe();
    let (session, _out) = testing::session();
    let (sink, _rx) = tokio::sync::mpsc::unbounded_channel();
    let list = Message::request(json!(1), "tools/list", Some(json!({})));
    client_request(&st, &st.snapshot(), &session, list, &sink).await;
    call(&st, "fx_add", json!({})).await;
    assert_eq!(
        recorded(&mut traffic),
        vec![("tools/call".into(), Some("fx_add".into()), "refused".into())]
    );
}
