//! The connections tool (`<prefix>_connections`, listed when some upstream connects each user
//! as themselves): a user lists their own connections to the per-user upstreams (connected or
//! not, until when, with which scopes), connects one (the driver asks with the same consent as
//! a call to one of its tools would: [`Answer::Connect`]) or disconnects one (their grant is
//! forgotten and revoked at the authorization server, RFC 7009, and their upstream connection
//! closed). It acts on the caller's own principal only: it takes no principal, and never shows
//! or ends another's connection. No answer holds a token.

use crate::state::Snapshot;
use serde_json::{json, Value};
use sluice_core::{codes, Message, RpcError};
use sluice_oauth::Revoked;
use sluice_upstream::{PerUser, Slot};
use std::sync::Arc;

/// What a call of the connections tool comes to.
pub(crate) enum Answer {
    /// The result (or error).
    Reply(Result<Value, RpcError>),
    /// `connect`: ask the caller to connect to this upstream (the driver's consent), then
    /// answer with [`connected`].
    Connect(Arc<PerUser>),
}

/// A tool result: the value as text, and as `structuredContent`.
fn result(v: Value) -> Value {
    json!({"content": [{"type": "text", "text": v.to_string()}], "structuredContent": v})
}

/// A tool result that says what went wrong (`isError`).
fn failed(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The enabled per-user upstreams of `snap`, in configuration order.
fn per_user(snap: &Snapshot) -> impl Iterator<Item = (&Arc<Slot>, &Arc<PerUser>)> {
    snap.slots
        .iter()
        .filter(|s| s.spec.enabled)
        .filter_map(|s| Some((s, s.per_user()?)))
}

/// Answer a call of the connections tool from the caller `principal` (`kind:id`; None: not
/// authenticated).
pub(crate) async fn answer(snap: &Snapshot, principal: Option<&str>, msg: &Message) -> Answer {
    let args = msg
        .params()
        .and_then(|p| p.get("arguments"))
        .cloned()
        .unwrap_or(json!({}));
    let Some(principal) = principal else {
        return Answer::Reply(Err(RpcError::new(
            codes::UPSTREAM_UNAVAILABLE,
            "Connections belong to authenticated callers, and this caller is not authenticated",
        )));
    };
    if args.get("principal").is_some() {
        return Answer::Reply(Err(RpcError::invalid_params(
            "the connections tool acts on your own connections only: it takes no principal",
        )));
    }
    let action = args.get("action").and_then(Value::as_str).unwrap_or("list");
    if action == "list" {
        let mut rows = Vec::new();
        for (_, users) in per_user(snap) {
            rows.push(status_of(users, principal).await);
        }
        return Answer::Reply(Ok(result(json!({"connections": rows}))));
    }
    if !matches!(action, "connect" | "disconnect") {
        return Answer::Reply(Err(RpcError::invalid_params(format!(
            "unknown action {action:?}: list, connect or disconnect"
        ))));
    }
    let Some(upstream) = args.get("upstream").and_then(Value::as_str) else {
        return Answer::Reply(Err(RpcError::invalid_params(format!(
            "{action} needs upstream (an upstream's id, as list shows it)"
        ))));
    };
    let Some((slot, users)) = per_user(snap).find(|(s, _)| s.spec.id == upstream) else {
        return Answer::Reply(Err(RpcError::invalid_params(format!(
            "no upstream {upstream:?} connects each user's own account"
        ))));
    };
    if action == "connect" {
        return Answer::Connect(users.clone());
    }
    Answer::Reply(Ok(disconnect(slot, users, principal).await))
}

/// The caller connected (or already was): its connection's state, for the answer of `connect`.
pub(crate) async fn connected(users: &PerUser, principal: &str) -> Result<Value, RpcError> {
    Ok(result(status_of(users, principal).await))
}

/// `principal`'s connection to the upstream of `users`: connected or not, and when connected,
/// when its access token expires, its scopes and whether it refreshes (never a token).
async fn status_of(users: &PerUser, principal: &str) -> Value {
    let upstream = users.upstream();
    if !users.connected(principal).await {
        return json!({"upstream": upstream, "connected": false});
    }
    match users.identity(principal).status() {
        sluice_oauth::Status::Connected {
            expires_at,
            scopes,
            refreshable,
        } => json!({
            "upstream": upstream, "connected": true, "expires_at": expires_at,
            "scopes": scopes, "refreshable": refreshable,
        }),
        _ => json!({"upstream": upstream, "connected": true}),
    }
}

/// End the caller's own connection: the grant forgotten and revoked, its upstream connection
/// closed (the audit line comes from the revoke's event).
async fn disconnect(slot: &Slot, users: &PerUser, principal: &str) -> Value {
    let upstream = users.upstream();
    let outcome = users.revoke(principal).await;
    slot.close_user(principal).await;
    match outcome {
        Ok(Some(how)) => result(json!({
            "upstream": upstream, "disconnected": true,
            "revoked_at_server": how == Revoked::AtServer,
        })),
        Ok(None) => result(json!({
            "upstream": upstream, "disconnected": false,
            "note": format!("you had no connection to {upstream}"),
        })),
        Err(e) => failed(format!(
            "your connection to {upstream} was ended, but revoking it at the authorization server failed: {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use sluice_oauth::{flow, ClientCredentials, Grant};
    use sluice_upstream::identity::user_grant_key;

    const KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

    fn files(per_user: bool) -> Vec<(&'static str, Value)> {
        let mode = if per_user { "per_user" } else { "shared" };
        vec![
            (
                "mcp/expose.json",
                json!({"version": 1, "upstreams": [
                    {"id": "crm", "transport": "http", "url": "http://127.0.0.1:9/mcp",
                     "expose_all": true, "oauth": {"mode": mode}},
                    {"id": "fx", "command": "/nonexistent/never-started", "expose_all": true}
                ]}),
            ),
            ("sluice.json", json!({"vault": {"key": KEY}})),
            (
                "auth/auth.config.json",
                json!({"enabled": true, "tokens": [
                    {"name": "alice", "sha256": "0".repeat(64)},
                    {"name": "bob", "sha256": "1".repeat(64)}
                ]}),
            ),
        ]
    }

    fn grant(token: &str) -> Grant {
        Grant {
            access_token: token.into(),
            refresh_token: Some(format!("{token}-refresh")),
            expires_at: Some(4_000_000_000),
            scopes: vec!["crm.read".into()],
            token_endpoint: "http://127.0.0.1:9/token".into(),
            resource: None,
            client: ClientCredentials {
                issuer: "http://127.0.0.1:9".into(),
                client_id: "c".into(),
                client_secret: None,
                auth_method: "none".into(),
            },
            obtained_at: 0,
            revocation_endpoint: None,
        }
    }

    fn call(args: Value) -> Message {
        Message::request(
            json!(1),
            "tools/call",
            Some(json!({"name": "sluice_connections", "arguments": args})),
        )
    }

    async fn reply(snap: &Snapshot, principal: Option<&str>, args: Value) -> Value {
        match answer(snap, principal, &call(args)).await {
            Answer::Reply(Ok(v)) => v,
            Answer::Reply(Err(e)) => json!({"error": e.message, "code": e.code}),
            Answer::Connect(users) => json!({"connect": users.upstream()}),
        }
    }

    #[test]
    fn listed_only_when_some_upstream_is_per_user() {
        let named = |per_user: bool| {
            let st = testing::state(&files(per_user), &[]);
            let snap = st.snapshot();
            snap.catalog
                .tools()
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect::<Vec<_>>()
        };
        assert!(named(true).contains(&"sluice_connections".to_string()));
        assert!(!named(false).contains(&"sluice_connections".to_string()));
    }

    #[tokio::test]
    async fn a_caller_sees_and_ends_only_their_own() {
        let st = testing::state(&files(true), &[]);
        let snap = st.snapshot();
        let users = snap.slot("crm").unwrap().per_user().unwrap().clone();
        let vault = &users.context().vault;
        for who in ["alice", "bob"] {
            let key = user_grant_key("crm", &format!("token:{who}"));
            flow::store(vault, &key, &grant(&format!("{who}-secret")))
                .await
                .unwrap();
        }
        let carol = reply(&snap, Some("token:carol"), json!({})).await;
        assert_eq!(
            carol["structuredContent"],
            json!({"connections": [{"upstream": "crm", "connected": false}]})
        );
        let alice = reply(&snap, Some("token:alice"), json!({"action": "list"})).await;
        assert_eq!(
            alice["structuredContent"]["connections"],
            json!([{"upstream": "crm", "connected": true, "expires_at": 4_000_000_000u64,
                    "scopes": ["crm.read"], "refreshable": true}])
        );
        assert!(!alice.to_string().contains("secret"), "{alice}");

        // Bob can name no one but himself, and ends his own connection only.
        let e = reply(
            &snap,
            Some("token:bob"),
            json!({"action": "disconnect", "upstream": "crm", "principal": "token:alice"}),
        )
        .await;
        assert_eq!(e["code"], -32602, "{e}");
        let bob = reply(
            &snap,
            Some("token:bob"),
            json!({"action": "disconnect", "upstream": "crm"}),
        )
        .await;
        assert_eq!(bob["structuredContent"]["disconnected"], true, "{bob}");
        assert!(!users.connected("token:bob").await);
        assert!(users.connected("token:alice").await);
        let again = reply(
            &snap,
            Some("token:bob"),
            json!({"action": "disconnect", "upstream": "crm"}),
        )
        .await;
        assert_eq!(again["structuredContent"]["disconnected"], false);

        // connect goes to the driver's consent; unknown upstreams and actions are refused.
        let c = reply(
            &snap,
            Some("token:bob"),
            json!({"action": "connect", "upstream": "crm"}),
        )
        .await;
        assert_eq!(c, json!({"connect": "crm"}));
        for args in [
            json!({"action": "connect", "upstream": "fx"}),
            json!({"action": "connect"}),
            json!({"action": "steal"}),
        ] {
            let e = reply(&snap, Some("token:bob"), args).await;
            assert_eq!(e["code"], -32602, "{e}");
        }
        let e = reply(&snap, None, json!({})).await;
        assert_eq!(e["code"], -32000, "{e}");
    }
}
