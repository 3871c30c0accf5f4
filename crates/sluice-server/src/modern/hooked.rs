//! `server/discover` and `subscriptions/listen` of 2026-07-28 clients through the hooks, as a
//! legacy session's requests of no dedicated method go (a Civic hook's `processOtherRequest`,
//! then `processOtherResult` / `processOtherError`): the request hooks may change, answer or
//! refuse the request; the reply (`server/discover`'s answer, a hook's answer or refusal) then
//! passes the response hooks the request reached. A `subscriptions/listen` the hooks let
//! through opens its stream (its acknowledgement and notifications do not pass the hooks).

use super::{decorate, strip_meta};
use crate::proxy::call::{Call, End};
use crate::proxy::hooks::Facts;
use crate::session::Session;
use crate::state::State;
use serde_json::Value;
use sluice_core::version::{self, meta};
use sluice_core::{Message, Principal};
use sluice_hooks::{Phase, RequestOutcome};
use std::sync::Arc;

/// `server/discover` through the hooks: `reply` (the gateway's answer), or what the hooks make
/// of the request and of it.
pub(crate) async fn discover(
    st: &Arc<State>,
    msg: Message,
    authorization: Option<&str>,
    principal: Option<Arc<Principal>>,
    endpoint: Option<&str>,
    reply: Message,
) -> Message {
    let (Ok(m) | Err(m)) =
        through_hooks(st, msg, authorization, principal, endpoint, Some(reply)).await;
    m
}

/// `subscriptions/listen` through the request hooks: `Ok` with the request to open the stream
/// for (a hook may have changed what it asks for), `Err` with the reply when a hook refused or
/// answered it.
pub(crate) async fn listen(
    st: &Arc<State>,
    msg: Message,
    authorization: Option<&str>,
    principal: Option<Arc<Principal>>,
    endpoint: Option<&str>,
) -> Result<Message, Message> {
    through_hooks(st, msg, authorization, principal, endpoint, None).await
}

/// Run `msg` through the hooks on an ephemeral session. `answer` is what the gateway answers
/// (`server/discover`'s); `None` when the caller serves the request itself. `Ok`: serve this
/// request (only with no `answer`); `Err`: send this reply (the answer as the response hooks
/// left it, or a hook's answer or refusal).
async fn through_hooks(
    st: &Arc<State>,
    msg: Message,
    authorization: Option<&str>,
    principal: Option<Arc<Principal>>,
    endpoint: Option<&str>,
    answer: Option<Message>,
) -> Result<Message, Message> {
    let requested = super::meta_str(&msg, meta::PROTOCOL_VERSION)
        .unwrap_or(version::MODERN_VERSIONS[0])
        .to_string();
    let session =
        super::ephemeral_session_on(st, authorization, &msg, &requested, principal, endpoint);
    let snap = st.snapshot_for(&session);
    if snap.chain.is_empty() {
        return answer.map_or(Ok(msg), Err);
    }
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    let mut call = Call::plain(st, &snap, &session, Facts::plain(method.as_str(), None));
    let (outcome, depth, request) = call.request_hooks_keeping(strip_meta(msg)).await;
    let mut refused = None;
    let reply = match outcome {
        RequestOutcome::Refuse(r) => {
            let error = r.to_error(Phase::Request, id.clone());
            refused = Some(r.reason);
            error
        }
        RequestOutcome::Answer(mut m) => {
            m.set_id(id.clone());
            m
        }
        // No call to allow here (an `ask` about these methods lets them through).
        RequestOutcome::Forward(m) | RequestOutcome::Ask(m, _) => match answer {
            Some(answer) => answer,
            None => {
                call.finish(End::Passed);
                end(&snap, &session);
                return Ok(m);
            }
        },
    };
    // The response hooks the request reached, as for any request (a refusal's error too).
    let reply = match call.response_hooks(reply, request.as_ref(), depth).await {
        Ok(reply) => reply,
        Err(r) => {
            let error = r.to_error(Phase::Response, id);
            refused = Some(r.reason);
            error
        }
    };
    call.finish(End::Reply {
        reply: &reply,
        refused,
    });
    end(&snap, &session);
    Err(decorate(st, &session, &method, reply))
}

/// The ephemeral session's end for the hooks: its transcript goes. (No session-start hook ran
/// for it, so no session-end hook runs either.)
fn end(snap: &crate::state::Snapshot, session: &Session) {
    snap.chain.drop_transcript(&session.id);
}
