//! A per-user upstream's consent, in the dispatch: a principal that has not connected its own
//! account to the upstream is asked to, with a URL-mode elicitation whose link starts the
//! sign-in at Sluice (single use, bound to that principal, ten minutes). A handshake-era client
//! that declared `elicitation.url` is asked on the call's stream, and the call waits for the
//! callback, then goes on (`notifications/elicitation/complete` tells the client); a 2026-07-28
//! client gets the same question as an `input_required` round and its retry goes on once
//! connected; a client without URL elicitation gets -32042 with the link.

use super::call::Call;
use super::client_out::ask_client;
use crate::channel::send_msg;
use serde_json::{json, Value};
use sluice_core::{codes, Message, RpcError};
use sluice_oauth::connect;
use sluice_upstream::PerUser;

/// -32042: the request needs a URL elicitation the client must complete first.
pub(crate) const URL_ELICITATION_REQUIRED: i64 = -32042;

/// Does the session's client answer URL-mode elicitations (`elicitation.url` declared)?
fn answers_urls(caps: &Value) -> bool {
    caps.get("elicitation")
        .and_then(|e| e.get("url"))
        .is_some_and(|u| !u.is_null())
}

/// Go on when the caller's principal holds a grant for the upstream of `users`; else ask it to
/// connect (see the module's doc). `Err`: the error the call is answered with.
pub(super) async fn ensure(call: &Call<'_>, users: &PerUser, what: &str) -> Result<(), RpcError> {
    let session = call.session;
    let upstream = users.upstream();
    let Some(principal) = session.principal_key() else {
        return Err(RpcError::new(
            codes::UPSTREAM_UNAVAILABLE,
            format!(
                "Upstream '{upstream}' acts as each user, and this caller is not authenticated"
            ),
        ));
    };
    if users.connected(principal).await {
        return Ok(());
    }
    let ctx = users.context();
    let elicitation_id = uuid::Uuid::new_v4().to_string();
    let ticket = connect::issue(&ctx.vault, principal, upstream, &elicitation_id)
        .await
        .map_err(|e| {
            RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!("Upstream '{upstream}' needs you to connect your account, and the link could not be made: {e}"),
            )
        })?;
    let url = ticket.url(&ctx.public_url);
    let message = format!(
        "{what} acts as you on {upstream}: open this link to connect your {upstream} account (it is yours alone and expires in 10 minutes)."
    );
    let elicitation = json!({
        "mode": "url",
        "elicitationId": elicitation_id,
        "url": url,
        "message": message,
    });
    tracing::info!(session = %session.id, %upstream, "a user is asked to connect their account");
    if !answers_urls(&session.init.capabilities) {
        return Err(RpcError::new(
            URL_ELICITATION_REQUIRED,
            format!("This request requires connecting your account to {upstream}"),
        )
        .with_data(json!({"elicitations": [elicitation]})));
    }
    let answer = ask_client(
        call.st,
        session,
        call.sink(),
        "elicitation/create",
        Some(elicitation),
        upstream,
    )
    .await?;
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => {}
        Some("decline") => {
            return Err(refused(upstream, "you declined to connect your account"));
        }
        other => {
            let how = other.unwrap_or("no action");
            return Err(refused(
                upstream,
                &format!("the question was not accepted ({how})"),
            ));
        }
    }
    // A 2026-07-28 client retries once it is done: connected by then, or not at all.
    if session.is_modern() {
        return match users.connected(principal).await {
            true => Ok(()),
            false => Err(refused(
                upstream,
                "the connection was not completed; call again for a new link",
            )),
        };
    }
    match connect::wait_connected(&ctx.vault, &elicitation_id, connect::TICKET_TTL).await {
        Ok(done) if done.principal == principal => {
            let complete = Message::notification(
                "notifications/elicitation/complete",
                Some(json!({"elicitationId": elicitation_id})),
            );
            let _ = send_msg(call.sink(), complete);
            tracing::info!(session = %session.id, %upstream, "a user connected their account; the call goes on");
            Ok(())
        }
        Ok(_) => Err(refused(
            upstream,
            "the link was completed for another principal",
        )),
        Err(e) => Err(refused(upstream, &e.to_string())),
    }
}

/// The call is answered with this when the person did not connect.
fn refused(upstream: &str, why: &str) -> RpcError {
    RpcError::new(
        codes::UPSTREAM_UNAVAILABLE,
        format!(
            "Upstream '{upstream}' acts as each user, and your account is not connected: {why}"
        ),
    )
    .with_data(json!({"upstream": upstream}))
}
